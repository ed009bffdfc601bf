//! The op suite on the WebGPU backend inside headless Chromium (SwiftShader's WebGPU), with
//! the suite's small shapes. Run with `bash scripts/test-wasm.sh --test web_ops_webgpu`.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod common;

use common::harness::{SuiteConfig, Tol};
use std::sync::Arc;
use webdelegate::backends::webgpu::WebGpuBackend;
use webdelegate::registry::{BackendInterface, SharedBackend};

wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

/// The native WebGPU bounds (see tests/ops_webgpu.rs), with small shapes.
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
    small: true,
};

async fn webgpu() -> SharedBackend {
    let backend = WebGpuBackend::new().await;
    assert!(
        backend.is_available(),
        "no WebGPU device in Chromium: {:?}",
        backend.unavailable_reason()
    );
    // The registry shares backends through `Arc`; in single-threaded wasm nothing crosses threads.
    #[allow(clippy::arc_with_non_send_sync)]
    let shared = Arc::new(backend);
    shared
}

op_suite!(webgpu().await, WEBGPU);
