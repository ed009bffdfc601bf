//! What `loadToGpu` hands back: [`GpuParameter`], a span of a parameter in one GPU buffer or,
//! when it is larger than one buffer can be, in several cut at row boundaries (its `pieces`),
//! readable by byte range for checks.

use crate::error::Status;
use crate::params::LoadedPiece;
use crate::web::edge::errors::status_to_js;
use crate::web::edge::fields::count_arg;
use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

/// One loaded span of a parameter, in GPU buffers (one, or several pieces of whole rows).
#[wasm_bindgen]
pub struct GpuParameter {
    key: String,
    pieces: Vec<LoadedPiece>,
}

impl GpuParameter {
    /// The span of parameter `key` loaded as `pieces` (consecutive, at least one).
    pub fn new(key: String, pieces: Vec<LoadedPiece>) -> Self {
        Self { key, pieces }
    }

    /// The span's first byte within the parameter.
    fn start(&self) -> u64 {
        self.pieces.first().map_or(0, |p| p.parameter_offset)
    }
}

fn set(object: &Object, key: &str, value: &JsValue) {
    let _ = Reflect::set(object, &JsValue::from_str(key), value);
}

#[wasm_bindgen]
impl GpuParameter {
    /// The parameter's key.
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.key.clone()
    }

    /// Bytes loaded (over every piece).
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> f64 {
        self.pieces.iter().map(|p| p.span.length).sum::<u64>() as f64
    }

    /// Bytes of GPU buffers holding it (each piece's length rounded up to 4 bytes).
    #[wasm_bindgen(getter, js_name = bufferSize)]
    pub fn buffer_size(&self) -> f64 {
        self.pieces
            .iter()
            .map(|p| p.span.buffer.size())
            .sum::<u64>() as f64
    }

    /// The buffers it lives in, in order: `{offset, parameterOffset, length, bufferSize,
    /// rowStart, rowEnd}` each (`offset`: the piece's first byte within this span;
    /// `rowStart`/`rowEnd`: the rows of the parameter it holds, `[rowStart, rowEnd)`, or null
    /// when the parameter has no shape). One entry unless the span was split.
    #[wasm_bindgen(getter, unchecked_return_type = "GpuParameterPiece[]")]
    pub fn pieces(&self) -> Array {
        let start = self.start();
        self.pieces
            .iter()
            .map(|piece| {
                let object = Object::new();
                let number = |n: u64| JsValue::from(n as f64);
                set(&object, "offset", &number(piece.parameter_offset - start));
                set(&object, "parameterOffset", &number(piece.parameter_offset));
                set(&object, "length", &number(piece.span.length));
                set(&object, "bufferSize", &number(piece.span.buffer.size()));
                let (row_start, row_end) = match piece.rows {
                    Some((first, end)) => (number(first), number(end)),
                    None => (JsValue::NULL, JsValue::NULL),
                };
                set(&object, "rowStart", &row_start);
                set(&object, "rowEnd", &row_end);
                JsValue::from(object)
            })
            .collect()
    }

    /// Reads `length` bytes (default: to the end) from byte `offset` (default 0) of the span
    /// back from the GPU, across pieces (through wasm memory: for checks, not for speed; read a
    /// large parameter in parts). Rejects with `OUT_OF_RANGE` past the span's end.
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn read(&self, offset: Option<f64>, length: Option<f64>) -> Promise {
        let total = self.length() as u64;
        let start = self.start();
        let range = (|| {
            let offset = count_arg(offset.unwrap_or(0.0), "offset")?;
            let length = match length {
                Some(length) => count_arg(length, "length")?,
                None => total.saturating_sub(offset),
            };
            crate::params::check_span("a GPU parameter read", offset, length, total)?;
            Ok::<_, Status>((offset, length))
        })();
        let parts: Vec<_> = match range {
            Ok((offset, length)) => self
                .pieces
                .iter()
                .filter_map(|piece| {
                    let lo = (piece.parameter_offset - start).max(offset);
                    let hi =
                        (piece.parameter_offset - start + piece.span.length).min(offset + length);
                    (lo < hi).then(|| {
                        let within = lo - (piece.parameter_offset - start);
                        (piece.span.clone(), piece.span.offset + within, hi - lo)
                    })
                })
                .collect(),
            Err(error) => return Promise::reject(&status_to_js(error)),
        };
        wasm_bindgen_futures::future_to_promise(async move {
            let mut bytes = Vec::new();
            for (span, at, length) in parts {
                let part = span.buffer.read(at, length).await.map_err(status_to_js)?;
                bytes.extend_from_slice(&part);
            }
            Ok(Uint8Array::from(bytes.as_slice()).into())
        })
    }
}
