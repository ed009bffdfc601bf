//! The op suite on the WebGPU backend, natively (Mesa lavapipe through Vulkan on machines
//! without a GPU; `scripts/setup.sh` installs mesa-vulkan-drivers). Every case gets its own
//! backend and device. No adapter is a loud failure, never a skip.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::harness::{SuiteConfig, Tol};
use std::sync::Arc;
use webdelegate::backends::webgpu::WebGpuBackend;
use webdelegate::registry::{BackendInterface, SharedBackend};

/// What the WebGPU backend is held to. Element-wise ops as the CPU backend (GELU's erf is
/// within 1.5e-7 absolute, tanh within ~2e-7); reductions and matmuls sum in a different order
/// (workgroup trees, 4-wide fused multiply-adds) than the CPU's loops: the CPU's bounds hold.
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
    small: false,
};

async fn webgpu() -> SharedBackend {
    let backend = WebGpuBackend::new().await;
    assert!(
        backend.is_available(),
        "no WebGPU adapter natively: {:?} (install mesa-vulkan-drivers)",
        backend.unavailable_reason()
    );
    Arc::new(backend)
}

op_suite!(webgpu().await, WEBGPU);
