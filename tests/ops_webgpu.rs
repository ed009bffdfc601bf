//! The op suite on the WebGPU backend: natively (Mesa lavapipe through Vulkan on machines
//! without a GPU; `scripts/setup.sh` installs mesa-vulkan-drivers), and inside headless
//! Chromium (SwiftShader's WebGPU) with the suite's small shapes
//! (`bash scripts/test-wasm.sh --test ops_webgpu`). Every case gets its own backend and device.
//! No adapter is a loud failure, never a skip.

mod common;

use common::harness::{SuiteConfig, Tol};
use std::sync::Arc;
use webdelegate::backends::WebGpuBackend;
use webdelegate::registry::{BackendInterface, SharedBackend};

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

/// What the WebGPU backend is held to. Element-wise ops as the CPU backend (GELU's erf is
/// within 1.5e-7 absolute, tanh within ~2e-7); reductions and matmuls sum in a different order
/// (workgroup trees, 4-wide fused multiply-adds) than the CPU's loops: the CPU's bounds hold.
/// In Chromium the shapes are the suite's small ones. The GEMV cases run under every GEMV kernel
/// (`gemv_kernel=rows`, what CPU-emulated adapters such as lavapipe and SwiftShader get,
/// `subgroup`, what real GPUs with subgroups get (lavapipe's subgroups have 8 invocations,
/// SwiftShader's 4: the suite needs an adapter with subgroups), `workgroup`, what the others
/// get, and `staged`, chosen only by spec), and the attention cases
/// unsplit, in 3 and in 64 splits (`attention_splits`: real GPUs split a decode step's
/// attention in 32), whichever this adapter would pick; the matmul cases under every
/// `matmul_kernel` (the default `tiled`, each of its tiles, `tiled_v1` and `naive`).
const WEBGPU: SuiteConfig = SuiteConfig {
    elementwise: Tol {
        rel: 1e-5,
        abs: 1e-6,
    },
    reduction: Tol {
        rel: 1e-4,
        abs: 1e-5,
    },
    matmul: Tol {
        rel: 1e-4,
        abs: 1e-4,
    },
    model: Tol {
        rel: 1e-3,
        abs: 1e-4,
    },
    small: cfg!(target_arch = "wasm32"),
    gemv_specs: &[
        &[("gemv_kernel", "rows")],
        &[("gemv_kernel", "workgroup")],
        &[("gemv_kernel", "staged")],
        &[("gemv_kernel", "subgroup")],
    ],
    attention_specs: &[
        &[("attention_splits", "1")],
        &[("attention_splits", "3")],
        &[("attention_splits", "64")],
    ],
    matmul_specs: &[
        &[("matmul_kernel", "tiled")],
        &[("matmul_kernel", "tiled32")],
        &[("matmul_kernel", "tiled64")],
        &[("matmul_kernel", "tiled128")],
        &[("matmul_kernel", "tiled_v1")],
        &[("matmul_kernel", "naive")],
    ],
    int8_activations: false,
};

async fn webgpu() -> SharedBackend {
    let backend = WebGpuBackend::new().await;
    assert!(
        backend.is_available(),
        "no WebGPU device: {:?} (natively: install mesa-vulkan-drivers)",
        backend.unavailable_reason()
    );
    // The registry shares backends through `Arc`; in single-threaded wasm nothing crosses threads.
    #[allow(clippy::arc_with_non_send_sync)]
    let shared = Arc::new(backend);
    shared
}

op_suite!(webgpu().await, WEBGPU);
