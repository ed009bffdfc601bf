//! What `loadToGpu` hands back: [`GpuParameter`], a parameter in a GPU buffer, readable for
//! checks.

use crate::params::LoadedSpan;
use crate::web::edge::errors::status_to_js;
use js_sys::{Promise, Uint8Array};
use wasm_bindgen::prelude::*;

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
