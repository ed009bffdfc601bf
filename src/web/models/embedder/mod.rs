//! `Embedder`: sentence embeddings from a BERT-family model directory on an HTTP server, in one
//! call — the high-level API on top of the registry and the parameter provider.
//!
//! `Embedder.load(baseUrl, options)` fetches `config.json` and `tokenizer.json` (and
//! `sentence_bert_config.json` when present, for the maximum sequence length), reads the weights
//! file's index with small Range requests, builds the program whose parameters are exactly the
//! checkpoint's tensors, and initialises it on `"webgpu"` when that backend has a device, else
//! `"cpu"` (or the backend `options.backend` names); see [`load`] for aborts and fallbacks. The
//! weights stream straight into the backend's buffers. `embedder.embed(texts)` tokenises
//! (truncating to the model's length), batches by length, runs, and resolves to one
//! `Float32Array` per text, in order, letting the page's event loop run between batches. Calls
//! made while one runs wait their turn, first come first served ([`FifoSlot`]); `destroy()`
//! rejects the waiting ones at once.

mod load;
mod options;

use crate::error::{Error, Result};
use crate::evalue::{EValue, Tensor, TensorData};
use crate::fifo_slot::{FifoSlot, SlotClosed};
use crate::params::http::HttpProvider;
use crate::params::{ParameterProvider, Signal};
use crate::registry::{self, BackendOption, LoadedDelegate};
use crate::text::TextTokenizer;
use crate::web::edge::errors::to_js_error;
use crate::web::loading::status_error;
use crate::web::providers::http::provider_from_options;
use crate::web::registry::introspect;
use js_sys::{Array, BigInt64Array, Float32Array, Object, Promise, Reflect};
use options::LoadOptions;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, millis: i32) -> JsValue;
}

/// Lets the page's event loop run (input, timers, rendering) before continuing: a macrotask, as
/// the CPU backend computes a batch without yielding.
async fn yield_to_event_loop() {
    let tick = Promise::new(&mut |resolve, _reject| {
        set_timeout(&resolve, 0);
    });
    let _ = wasm_bindgen_futures::JsFuture::from(tick).await;
}

/// A loaded sentence-embedding model.
#[wasm_bindgen]
pub struct Embedder {
    backend: String,
    fallback: Option<String>,
    dim: usize,
    max_tokens: usize,
    batch_size: usize,
    tokenizer: Rc<TextTokenizer>,
    provider: Arc<HttpProvider>,
    delegate: FifoSlot<LoadedDelegate>,
    last_batch_ms: Rc<Cell<f64>>,
}

#[wasm_bindgen]
impl Embedder {
    /// Loads the model in the directory at `baseUrl`. `options`: `backend` (`'auto'` default:
    /// WebGPU, unless its adapter is only a fallback adapter, WebGPU emulated on the CPU, where
    /// the CPU backend is faster; `'webgpu'`, `'cpu'`), `weights` (file name, default `model.safetensors`), `maxTokens`
    /// (2 up to the model's `max_position_embeddings`), `batchSize` (1-1024), `signal`
    /// (AbortSignal), and the HTTP provider's options (`onProgress`, `concurrency`,
    /// `persistentCache`, ...). Rejects with a `WebDelegateError`: `InvalidArgument` for a bad
    /// option, `AccessFailed` when a file cannot be fetched, `InvalidExternalData` for a
    /// checkpoint that does not match its config, `NotFound` when no backend can run it,
    /// `InvalidState` when aborted (at once, with every request of the load stopped).
    pub async fn load(
        #[wasm_bindgen(js_name = baseUrl)] base_url: String,
        #[wasm_bindgen(unchecked_param_type = "EmbedderOptions")] options: Option<JsValue>,
    ) -> JsResult<Embedder> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        Self::load_inner(&base_url, &options)
            .await
            .map_err(to_js_error)
    }

    async fn load_inner(base_url: &str, js_options: &JsValue) -> Result<Embedder> {
        let options = LoadOptions::from_js(js_options)?;
        let (provider, _cache) = provider_from_options(js_options)
            .map_err(|s| Error::invalid_argument(s.message().to_owned()))?;
        // The init context shares providers through `Arc`; on wasm there is one thread.
        let provider = Arc::new(provider);
        crate::web::lifecycle::attach(&provider);
        let model = load::load(base_url, &options, &provider).await?;
        Ok(Embedder {
            backend: model.backend,
            fallback: model.fallback,
            dim: model.dim,
            max_tokens: model.max_tokens,
            batch_size: options.batch_size,
            tokenizer: Rc::new(model.tokenizer),
            provider,
            delegate: FifoSlot::new(model.delegate),
            last_batch_ms: Rc::new(Cell::new(f64::NAN)),
        })
    }

    /// Embeds `texts`; resolves to one L2-normalised `Float32Array` of `dim` values per text.
    /// While another `embed` runs, this one waits for it (calls run in the order they were
    /// made). Rejects with `InvalidState` after `destroy()`, or when `destroy()` is called while
    /// this call waits.
    #[wasm_bindgen(unchecked_return_type = "Promise<Float32Array[]>")]
    pub fn embed(&self, texts: Vec<String>) -> Promise {
        // The place in line is taken now, not when the promise first runs.
        let turn = self.delegate.acquire();
        let tokenizer = Rc::clone(&self.tokenizer);
        let last = Rc::clone(&self.last_batch_ms);
        let (dim, batch_size) = (self.dim, self.batch_size);
        wasm_bindgen_futures::future_to_promise(async move {
            let mut delegate = turn.await.map_err(|closed| {
                to_js_error(Error::invalid_state(match closed {
                    SlotClosed::Before => "this embedder was destroyed",
                    SlotClosed::WhileWaiting => {
                        "this embedder was destroyed while the embed() waited for the one before it"
                    }
                }))
            })?;
            let rows = embed_all(&mut delegate, &tokenizer, &texts, dim, batch_size, &last)
                .await
                .map_err(to_js_error)?;
            drop(delegate);
            Ok(rows
                .into_iter()
                .map(|row| JsValue::from(Float32Array::from(row.as_slice())))
                .collect::<Array>()
                .into())
        })
    }

    /// The model's inputs for `texts` as one padded batch, exactly as `embed` would run them
    /// together: `{batch, seq, inputIds, attentionMask}` (`BigInt64Array`s of `batch * seq`,
    /// row-major), for running the program yourself (see `bertProgram`). Throws
    /// `InvalidArgument` for an empty list.
    #[wasm_bindgen(unchecked_return_type = "TokenBatch")]
    pub fn tokenize(&self, texts: Vec<String>) -> JsResult<JsValue> {
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let tokens = self.tokenizer.encode_batch(&texts).map_err(to_js_error)?;
        let object = Object::new();
        for (key, value) in [
            ("batch", JsValue::from_f64(tokens.batch as f64)),
            ("seq", JsValue::from_f64(tokens.seq as f64)),
            (
                "inputIds",
                BigInt64Array::from(tokens.ids.as_slice()).into(),
            ),
            (
                "attentionMask",
                BigInt64Array::from(tokens.mask.as_slice()).into(),
            ),
        ] {
            let _ = Reflect::set(&object, &JsValue::from_str(key), &value);
        }
        Ok(object.into())
    }

    /// The backend that runs the model (`"webgpu"` or `"cpu"`).
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.clone()
    }

    /// Why the preferred backend was not used (`undefined` when it was): with `'auto'`, e.g.
    /// `"webgpu unavailable: navigator.gpu is missing: this browser has no WebGPU"`, or that
    /// WebGPU has only a fallback adapter.
    #[wasm_bindgen(getter, js_name = fallbackReason)]
    pub fn fallback_reason(&self) -> Option<String> {
        self.fallback.clone()
    }

    /// Embedding size.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Tokens per text after truncation.
    #[wasm_bindgen(getter, js_name = maxTokens)]
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Texts per execution.
    #[wasm_bindgen(getter, js_name = batchSize)]
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Milliseconds the last executed batch took (`NaN` before the first).
    #[wasm_bindgen(getter, js_name = lastBatchMillis)]
    pub fn last_batch_millis(&self) -> f64 {
        self.last_batch_ms.get()
    }

    /// `embed` calls waiting for the running one.
    #[wasm_bindgen(getter, js_name = pendingEmbeds)]
    pub fn pending_embeds(&self) -> usize {
        self.delegate.waiting()
    }

    /// Where the model's bytes are, by purpose (wasm, the CPU pool's shared memory, the GPU);
    /// `null` while embedding or after `destroy()`.
    #[wasm_bindgen(js_name = memoryStats, unchecked_return_type = "MemoryStats | null")]
    pub fn memory_stats(&self) -> JsValue {
        self.delegate.peek(introspect::memory_stats)
    }

    /// The WebGPU program's stats (activation arena, parameters, reloads); `null` on the CPU
    /// backend, while embedding, or after `destroy()`.
    #[wasm_bindgen(js_name = programStats, unchecked_return_type = "WebGpuProgramStats | null")]
    pub fn program_stats(&self) -> JsValue {
        self.delegate.peek(introspect::program_stats)
    }

    /// Per-op GPU timings of the last batch run with the WebGPU backend's `profiling` option on;
    /// `null` when none ran, on the CPU backend, while embedding, or after `destroy()`.
    #[wasm_bindgen(js_name = lastProfile, unchecked_return_type = "WebGpuProfile | null")]
    pub fn last_profile(&self) -> JsValue {
        self.delegate.peek(introspect::last_profile)
    }

    /// What the backend reports about itself (`[{key, value}]`: adapter, limits, ...).
    #[wasm_bindgen(js_name = backendInfo, unchecked_return_type = "BackendOptionEntry[]")]
    pub fn backend_info(&self) -> JsValue {
        let keys: &[&str] = if self.backend == crate::backends::WEBGPU {
            &[
                "adapter.vendor",
                "adapter.architecture",
                "adapter.device",
                "adapter.description",
                "adapter.fallback",
                "adapter.backend",
            ]
        } else {
            &[]
        };
        let mut options: Vec<BackendOption> = keys
            .iter()
            .filter_map(|k| BackendOption::new(*k, "").ok())
            .collect();
        if registry::get_option(&self.backend, &mut options).is_err() {
            return Array::new().into();
        }
        crate::web::edge::convert::options_to_js(&options).unwrap_or_else(|_| Array::new().into())
    }

    /// Bytes and requests of the weights load (`{bytesNeeded, bytesReceived, requests}`).
    #[wasm_bindgen(js_name = loadStats)]
    pub fn load_stats(&self) -> JsValue {
        let object = Object::new();
        let stats = self.provider.total_stats();
        for (key, value) in [
            ("bytesNeeded", stats.bytes_needed as f64),
            ("bytesReceived", stats.bytes_received as f64),
            ("requests", stats.requests_sent as f64),
        ] {
            let _ = Reflect::set(&object, &JsValue::from_str(key), &JsValue::from_f64(value));
        }
        object.into()
    }

    /// Sends a signal (`'suspend'`, `'resume'`, `'lowMemory'`) to this model's weights provider
    /// only. The page's lifecycle already reaches every provider and backend by itself; use
    /// `lifecycleNotify` to signal all of them (the backend's GPU memory included).
    pub fn notify(&self, signal: &str) -> JsResult<()> {
        let signal = match signal {
            "resume" => Signal::Resume,
            "suspend" => Signal::Suspend,
            "lowMemory" => Signal::LowMemory,
            other => {
                return Err(to_js_error(Error::invalid_argument(format!(
                    "unknown signal {other:?}"
                ))));
            }
        };
        self.provider
            .notify(signal)
            .map_err(|s| to_js_error(status_error(s)))
    }

    /// Frees the model (its GPU buffers included): at once when idle, else when the running
    /// `embed` finishes (it still resolves). Waiting and later `embed` calls reject with
    /// `InvalidState`.
    pub fn destroy(&self) {
        self.delegate.close();
    }
}

/// Tokenises `texts` in batches of similar length (less padding), runs each, and returns the
/// rows in the order of `texts`. Yields to the event loop between batches, so a long call does
/// not freeze the page (and other `embed` calls can queue meanwhile).
async fn embed_all(
    delegate: &mut LoadedDelegate,
    tokenizer: &TextTokenizer,
    texts: &[String],
    dim: usize,
    batch_size: usize,
    last_batch_ms: &Cell<f64>,
) -> Result<Vec<Vec<f32>>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(texts.get(i).map_or(0, String::len)));
    let mut rows = vec![Vec::new(); texts.len()];
    for (n, chunk) in order.chunks(batch_size).enumerate() {
        if n > 0 {
            yield_to_event_loop().await;
        }
        let batch: Vec<&str> = chunk
            .iter()
            .filter_map(|&i| texts.get(i).map(String::as_str))
            .collect();
        let tokens = tokenizer.encode_batch(&batch)?;
        let shape = vec![tokens.batch, tokens.seq];
        let mut args = vec![
            EValue::Tensor(Tensor::new(shape.clone(), TensorData::Int64(tokens.ids))?),
            EValue::Tensor(Tensor::new(shape, TensorData::Int64(tokens.mask))?),
            EValue::None,
        ];
        let started = performance_now();
        delegate.execute(&mut args).await?;
        last_batch_ms.set(performance_now() - started);
        let output = args
            .get(2)
            .and_then(EValue::as_tensor)
            .and_then(Tensor::as_f32)
            .ok_or_else(|| Error::internal("the program returned no float32 embeddings"))?;
        if output.len() != chunk.len() * dim {
            return Err(Error::internal(format!(
                "expected {} x {dim} embeddings, got {} values",
                chunk.len(),
                output.len()
            )));
        }
        for (row, &index) in output.chunks_exact(dim).zip(chunk) {
            if let Some(slot) = rows.get_mut(index) {
                *slot = row.to_vec();
            }
        }
    }
    Ok(rows)
}
