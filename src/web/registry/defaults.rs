//! The browser build's default backends. When the module starts, `"webgpu"` and `"cpu"` are
//! registered at once; the WebGPU device is acquired in the background (until then
//! `isBackendAvailable('webgpu')` is false). `ready()` resolves once acquisition has finished,
//! to whether WebGPU has a device. Start-up also wires the page's lifecycle events to every
//! provider and backend (`web::lifecycle`).

use crate::backends::{CPU, CpuBackend, WEBGPU, WebGpuBackend, register_if_absent};
use crate::registry::BackendInterface;
use js_sys::Promise;
use std::cell::RefCell;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

thread_local! {
    /// Settles when the default WebGPU backend's device acquisition has finished.
    static READY: RefCell<Option<Promise>> = const { RefCell::new(None) };
    /// The default `"webgpu"` backend.
    static WEBGPU_BACKEND: RefCell<Option<Arc<WebGpuBackend>>> = const { RefCell::new(None) };
}

/// Registers the default backends; runs once, when the module is instantiated.
#[wasm_bindgen(start)]
pub fn start() {
    // The registry shares backends through `Arc`; on wasm there is one thread.
    let webgpu = Arc::new(WebGpuBackend::pending());
    // A fresh registry always has room for two; nothing else can have taken these names yet.
    let webgpu_registered = register_if_absent(WEBGPU, webgpu.clone()).unwrap_or(false);
    let _ = register_if_absent(CPU, Arc::new(CpuBackend::new()));
    if webgpu_registered {
        WEBGPU_BACKEND.with(|slot| *slot.borrow_mut() = Some(webgpu.clone()));
    }
    let ready = wasm_bindgen_futures::future_to_promise(async move {
        if webgpu_registered {
            // A failure leaves the backend unavailable with its reason; ready() still resolves.
            let _ = webgpu.reacquire().await;
        }
        Ok(JsValue::from_bool(webgpu.is_available()))
    });
    READY.with(|slot| *slot.borrow_mut() = Some(ready));
    crate::web::lifecycle::install_automatic();
}

/// Resolves once the default backends are ready, to whether the `"webgpu"` backend has a device.
#[wasm_bindgen(unchecked_return_type = "Promise<boolean>")]
pub fn ready() -> Promise {
    READY
        .with(|slot| slot.borrow().clone())
        .unwrap_or_else(|| Promise::resolve(&JsValue::FALSE))
}

/// Destroys the default `"webgpu"` backend's device (`GPUDevice.destroy()`), as a driver reset
/// would lose it; its programs move to a new device on their next `execute`. For testing
/// recovery. Returns whether there was a device.
#[wasm_bindgen(js_name = destroyWebGpuDevice)]
pub fn destroy_webgpu_device() -> bool {
    WEBGPU_BACKEND
        .with(|slot| slot.borrow().clone())
        .is_some_and(|backend| backend.destroy_device())
}
