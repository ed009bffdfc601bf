//! `wasmMemoryBytes()`: the size of this module's wasm linear memory, for the memory checks of
//! tests and benchmarks (weights that stream to the GPU must not grow it).

use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

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
