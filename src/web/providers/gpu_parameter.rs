//! What `loadToGpu` hands back ([`GpuParameter`]: a parameter in a GPU buffer, readable for
//! checks), the `AbortSignal` bridge, and `wasmMemoryBytes` (for memory checks in tests and
//! benchmarks).

use crate::error::Status;
use crate::params::LoadedSpan;
use crate::params::StatusResult;
use crate::params::http::AbortHandle;
use crate::web::edge::errors::status_to_js;
use js_sys::{Promise, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

/// Calls `abort` when a JS `AbortSignal` fires; detaches on drop.
pub struct AbortListener {
    signal: web_sys::AbortSignal,
    callback: Closure<dyn FnMut()>,
}

impl AbortListener {
    /// Listens to `signal` (which must be an `AbortSignal`), aborting `abort` when it fires
    /// (at once if it already has).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when `signal` is not an `AbortSignal`.
    pub fn attach(signal: JsValue, abort: &AbortHandle) -> StatusResult<Self> {
        let signal = signal
            .dyn_into::<web_sys::AbortSignal>()
            .map_err(|_| Status::invalid_argument("options.signal must be an AbortSignal"))?;
        if signal.aborted() {
            abort.abort();
        }
        let handle = abort.clone();
        let callback = Closure::<dyn FnMut()>::new(move || handle.abort());
        signal
            .add_event_listener_with_callback("abort", callback.as_ref().unchecked_ref())
            .map_err(|e| {
                Status::invalid_argument(format!("cannot listen to the AbortSignal: {e:?}"))
            })?;
        Ok(Self { signal, callback })
    }
}

impl Drop for AbortListener {
    fn drop(&mut self) {
        let _ = self
            .signal
            .remove_event_listener_with_callback("abort", self.callback.as_ref().unchecked_ref());
    }
}

/// One loaded parameter in a GPU buffer.
#[wasm_bindgen]
pub struct GpuParameter {
    key: String,
    span: LoadedSpan,
}

impl GpuParameter {
    /// The parameter `key` loaded as `span`.
    pub fn new(key: String, span: LoadedSpan) -> Self {
        Self { key, span }
    }
}

#[wasm_bindgen]
impl GpuParameter {
    /// The parameter's key.
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.key.clone()
    }

    /// Bytes loaded.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> f64 {
        self.span.length as f64
    }

    /// Size of the GPU buffer (the length rounded up to 4 bytes).
    #[wasm_bindgen(getter, js_name = bufferSize)]
    pub fn buffer_size(&self) -> f64 {
        self.span.buffer.size() as f64
    }

    /// Reads the bytes back from the GPU (through wasm memory: for checks, not for speed).
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn read(&self) -> Promise {
        let span = self.span.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let bytes = span
                .buffer
                .read(span.offset, span.length)
                .await
                .map_err(status_to_js)?;
            Ok(Uint8Array::from(bytes.as_slice()).into())
        })
    }
}

/// Bytes of this module's wasm linear memory (it only grows).
#[wasm_bindgen(js_name = wasmMemoryBytes)]
pub fn wasm_memory_bytes() -> f64 {
    wasm_bindgen::memory()
        .dyn_into::<js_sys::WebAssembly::Memory>()
        .map(|memory| {
            memory
                .buffer()
                .dyn_into::<js_sys::ArrayBuffer>()
                .map_or(0.0, |b| b.byte_length() as f64)
        })
        .unwrap_or(0.0)
}
