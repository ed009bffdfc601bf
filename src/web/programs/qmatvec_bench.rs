//! The quantized GEMV fixtures the benchmark page times (`bench/suites/qmatvec.mjs`).
//!
//! `QmatvecBench` builds a program of one `linear` (`x [1, K]` times a `[N, K]` weight in a
//! ggml block format), its weight random bytes with ordinary f16 scales served by an in-memory
//! provider, initialises it on any registered backend and executes it on demand; the page
//! divides the weight's bytes by the time of one execution. `BandwidthBench` is the CPU
//! baseline of the same page: a wasm SIMD (simd128) sum over a large buffer, the page's own
//! memory bandwidth.

use crate::error::Error;
use crate::evalue::{EValue, Tensor};
use crate::params::MemoryProvider;
use crate::program::ops::Linear;
use crate::program::{BlockFormat, DType, Dim, ProgramBuilder};
use crate::quant::{random_blocks, random_bytes};
use crate::registry::{BackendInitContext, CompileSpec, FreeableBuffer, LoadedDelegate};
use crate::web::edge::errors::to_js_error;
use js_sys::Promise;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// Most weight bytes a bench program may have (1 GiB).
const MAX_WEIGHT_BYTES: u64 = 1 << 30;
/// Most bytes of the bandwidth baseline's buffer (1 GiB).
const MAX_BASELINE_BYTES: usize = 1 << 30;

struct BenchState {
    delegate: LoadedDelegate,
    args: Vec<EValue>,
}

/// A one-`linear` GEMV program initialised on one backend (see the module docs).
#[wasm_bindgen]
pub struct QmatvecBench {
    state: Rc<RefCell<Option<BenchState>>>,
    weight_bytes: f64,
}

#[wasm_bindgen]
impl QmatvecBench {
    /// Builds `x [1, k] @ W^T` with `W [n, k]` in `format` (ggml's name, e.g. `"Q8_0"`) and
    /// initialises it on the registered backend `backendName`, with the compile spec
    /// `activations` set to `activations` when given (the CPU backend's `"f32"` or `"int8"`).
    pub async fn create(
        #[wasm_bindgen(js_name = backendName)] backend_name: String,
        format: String,
        k: u32,
        n: u32,
        activations: Option<String>,
    ) -> JsResult<QmatvecBench> {
        let format = BlockFormat::from_name(&format).ok_or_else(|| {
            to_js_error(Error::invalid_argument(format!(
                "qmatvec bench: unknown format {format:?}"
            )))
        })?;
        let bytes = format
            .tensor_bytes(u64::from(n), u64::from(k))
            .filter(|&b| b > 0 && b <= MAX_WEIGHT_BYTES)
            .ok_or_else(|| {
                to_js_error(Error::invalid_argument(format!(
                    "qmatvec bench: a [{n}, {k}] {} weight must be whole blocks of at most \
                     {MAX_WEIGHT_BYTES} bytes",
                    format.name()
                )))
            })?;
        let (k, n) = (k as usize, n as usize);
        let fixed = |dims: &[usize]| dims.iter().map(|&d| Dim::Fixed(d as u64)).collect();
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, fixed(&[1, k]));
        let weight = b.param("w", DType::Block(format), fixed(&[n, k]), "bench", "w");
        let out = b
            .push(|out| Linear {
                x,
                weight,
                bias: None,
                out,
            })
            .map_err(to_js_error)?;
        b.output(out);
        let blob = b.encode().map_err(to_js_error)?;
        let provider = MemoryProvider::new();
        provider.insert_described(
            "bench",
            "w",
            random_blocks(format, bytes as usize, u64::from(format.ggml_id())),
            Some(format.name().into()),
            Some(vec![n as u64, k as u64]),
        );
        let context = BackendInitContext::new().with_parameters(Arc::new(provider));
        let specs: Vec<CompileSpec> = activations
            .map(|value| CompileSpec::new("activations", value))
            .into_iter()
            .collect();
        let delegate =
            LoadedDelegate::init(&backend_name, FreeableBuffer::new(blob), &specs, &context)
                .await
                .map_err(to_js_error)?;
        let values: Vec<f32> = random_bytes(k, 7)
            .iter()
            .map(|&b| f32::from(b) / 128.0 - 1.0)
            .collect();
        let input = Tensor::from_f32(vec![1, k], values).map_err(to_js_error)?;
        Ok(QmatvecBench {
            state: Rc::new(RefCell::new(Some(BenchState {
                delegate,
                args: vec![EValue::Tensor(input), EValue::None],
            }))),
            weight_bytes: bytes as f64,
        })
    }

    /// Bytes of the weight (what one execution reads).
    #[wasm_bindgen(getter, js_name = weightBytes)]
    pub fn weight_bytes(&self) -> f64 {
        self.weight_bytes
    }

    /// Executes once (reading the `[1, N]` output back); resolves to its first value. Rejects
    /// with `InvalidState` while another `run` is going or after `destroy`.
    pub fn run(&self) -> Promise {
        let Some(mut state) = self.state.borrow_mut().take() else {
            return Promise::reject(&to_js_error(Error::invalid_state(
                "the bench is running or destroyed",
            )));
        };
        let slot = Rc::clone(&self.state);
        wasm_bindgen_futures::future_to_promise(async move {
            let outcome = state.delegate.execute(&mut state.args).await;
            let first = state
                .args
                .get(1)
                .and_then(EValue::as_tensor)
                .and_then(|t| t.as_f32())
                .and_then(|v| v.first().copied())
                .unwrap_or(f32::NAN);
            state.args[1] = EValue::None;
            *slot.borrow_mut() = Some(state);
            outcome
                .map(|()| JsValue::from_f64(f64::from(first)))
                .map_err(to_js_error)
        })
    }

    /// Destroys the program (its backend's `destroy`); later `run`s reject.
    pub fn destroy(&self) {
        self.state.borrow_mut().take();
    }
}

/// The CPU baseline: a buffer in wasm memory summed with simd128 (see the module docs).
#[wasm_bindgen]
pub struct BandwidthBench {
    words: Vec<u32>,
}

#[wasm_bindgen]
impl BandwidthBench {
    /// A buffer of `bytes` bytes (rounded down to 64) of pseudo-random words.
    #[wasm_bindgen(constructor)]
    pub fn new(bytes: u32) -> JsResult<BandwidthBench> {
        let len = (bytes as usize).min(MAX_BASELINE_BYTES) / 64 * 16;
        let mut words = Vec::new();
        words.try_reserve_exact(len).map_err(|_| {
            to_js_error(Error::invalid_argument(format!(
                "cannot allocate {bytes} bytes"
            )))
        })?;
        words.extend((0..len as u32).map(|i| i.wrapping_mul(2_654_435_761)));
        Ok(BandwidthBench { words })
    }

    /// Bytes the buffer holds (what one `sum` reads).
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        (self.words.len() * 4) as f64
    }

    /// The wrapping sum of every word, in 16 lanes (four simd128 vectors: one load and add
    /// per 16 bytes, so the loop runs at the memory's pace).
    pub fn sum(&self) -> u32 {
        let mut lanes = [0u32; 16];
        for chunk in self.words.chunks_exact(16) {
            for (lane, &word) in lanes.iter_mut().zip(chunk) {
                *lane = lane.wrapping_add(word);
            }
        }
        lanes.iter().fold(0u32, |a, &b| a.wrapping_add(b))
    }
}
