//! Registering more instances of the built-in backends from JavaScript. The module already
//! registers `"webgpu"` and `"cpu"` when it starts (see [`super::defaults`]), so these calls
//! are for extra instances under other names (e.g. a second WebGPU device with another power
//! preference); the default names are taken and give `InvalidArgument`, as any duplicate.
//!
//! `registerWebGpuBackend(name?)` acquires a device (asynchronously: `requestAdapter` and
//! `requestDevice` are promises) and registers the WebGPU backend under `name` (`"webgpu"` by
//! default); `registerCpuBackend(name?)` registers the CPU backend (`"cpu"` by default).

use crate::backends::cpu::CpuBackend;
use crate::backends::webgpu::WebGpuBackend;
use crate::registry::{self, Backend, BackendInterface};
use crate::web::edge::errors::to_js_error;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// Creates a WebGPU backend and registers it under `name` (default `"webgpu"`). Resolves to
/// whether it has a device (`isBackendAvailable` says the same later). Rejects with
/// `InvalidArgument` for a taken name and `Internal` when the registry is full.
#[wasm_bindgen(js_name = registerWebGpuBackend)]
pub async fn register_webgpu_backend(name: Option<String>) -> JsResult<bool> {
    let backend = WebGpuBackend::new().await;
    let available = backend.is_available();
    // The registry shares backends through `Arc`; in single-threaded wasm nothing crosses threads.
    let shared = Arc::new(backend);
    registry::register_backend(Backend::new(
        name.as_deref().unwrap_or(WebGpuBackend::NAME),
        shared,
    ))
    .map_err(to_js_error)?;
    Ok(available)
}

/// Registers the CPU backend under `name` (default `"cpu"`). Throws `InvalidArgument` for a
/// taken name and `Internal` when the registry is full.
#[wasm_bindgen(js_name = registerCpuBackend)]
pub fn register_cpu_backend(name: Option<String>) -> JsResult<()> {
    registry::register_backend(Backend::new(
        name.as_deref().unwrap_or(CpuBackend::NAME),
        Arc::new(CpuBackend::new()),
    ))
    .map_err(to_js_error)
}
