//! The built-in backends, registered under their well-known names: `"webgpu"` (wgpu) and
//! `"cpu"`. Both are always registered; `is_available` says whether WebGPU has a device.

use crate::backends::cpu::CpuBackend;
use crate::backends::webgpu::WebGpuBackend;
use crate::error::Result;
use crate::registry::{self, Backend};
use std::sync::Arc;

/// Name of the WebGPU backend in the registry.
pub const WEBGPU: &str = "webgpu";
/// Name of the CPU backend in the registry.
pub const CPU: &str = CpuBackend::NAME;

/// Registers `backend` under `name` unless a backend of that name exists; whether it did.
///
/// # Errors
/// `Internal` when the registry is full.
pub fn register_if_absent(name: &str, backend: registry::SharedBackend) -> Result<bool> {
    registry::register_backend_if_absent(Backend::new(name, backend))
}

/// Registers the CPU backend (if absent) and a WebGPU backend whose device is acquired now (if
/// absent). Idempotent.
///
/// # Errors
/// `Internal` when the registry is full.
pub async fn register_default_backends() -> Result<()> {
    if registry::get_backend_class(WEBGPU).is_none() {
        // The registry shares backends through `Arc`; on wasm there is one thread.
        let webgpu = Arc::new(WebGpuBackend::new().await);
        register_if_absent(WEBGPU, webgpu)?;
    }
    register_if_absent(CPU, Arc::new(CpuBackend::new()))?;
    Ok(())
}
