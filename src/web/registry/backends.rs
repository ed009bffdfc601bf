//! Registering more instances of the built-in backends from JavaScript. The module already
//! registers `"webgpu"` and `"cpu"` when it starts (see [`super::defaults`]), so these calls
//! are for extra instances under other names (e.g. a second WebGPU device with another power
//! preference); the default names are taken and give `InvalidArgument`, as any duplicate.
//!
//! `registerWebGpuBackend(name?)` acquires a device (asynchronously: `requestAdapter` and
//! `requestDevice` are promises) and registers the WebGPU backend under `name` (`"webgpu"` by
//! default); `registerCpuBackend(name?)` registers the CPU backend (`"cpu"` by default).
//! `useCpuThreads(pool)` hands every CPU backend a worker pool started by the package's
//! `cpu-threads/pool.js` (`null` takes it away).

use crate::backends::{CpuBackend, WebGpuBackend};
use crate::browser::cpu_pool::CpuPool;
use crate::registry::{self, Backend, BackendInterface};
use crate::web::edge::errors::to_js_error;
use std::rc::Rc;
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

/// Hands the CPU backends a started worker pool (`CpuThreadPool.start()` from the package's
/// `cpu-threads/pool.js`, on a cross-origin isolated page): CPU programs initialised from now
/// on keep their matmul and block-format weights in its shared memory and run those products
/// on its threads. `null` or `undefined` takes the pool away (programs initialised with it
/// keep it). Throws `InvalidArgument` for anything that is not a pool.
#[wasm_bindgen(js_name = useCpuThreads)]
pub fn use_cpu_threads(pool: JsValue) -> JsResult<()> {
    if pool.is_null() || pool.is_undefined() {
        CpuPool::install(None);
        return Ok(());
    }
    let pool = CpuPool::from_js(pool).map_err(to_js_error)?;
    CpuPool::install(Some(Rc::new(pool)));
    Ok(())
}
