//! `Embedder`: sentence embeddings from a BERT-family model directory on an HTTP server, in one
//! call — the high-level API on top of the registry and the parameter provider.
//!
//! `Embedder.load(baseUrl, options)` fetches `config.json` and `tokenizer.json` (and
//! `sentence_bert_config.json` when present, for the maximum sequence length), reads the weights
//! file's index with small Range requests, builds the program whose parameters are exactly the
//! checkpoint's tensors, and initialises it on `"webgpu"` when that backend has a device, else
//! `"cpu"` (or the backend `options.backend` names). The weights stream straight into the
//! backend's buffers. `embedder.embed(texts)` tokenises (truncating to the model's length),
//! batches by length, runs, and resolves to one `Float32Array` per text, in order.

use crate::backends::defaults::{CPU, WEBGPU};
use crate::error::{Error, ErrorCode, Result};
use crate::evalue::{EValue, Tensor, TensorData};
use crate::models::bert::{BertConfig, sentence_embedding_program};
use crate::params::http::{HttpProvider, ScopeOptions};
use crate::params::{ParameterProvider, Signal};
use crate::program;
use crate::registry::{self, BackendInitContext, BackendOption, FreeableBuffer, LoadedDelegate};
use crate::text::TextTokenizer;
use crate::web::errors::to_js_error;
use crate::web::http_options::{integer, optional, string};
use crate::web::http_provider::provider_from_options;
use crate::web::introspect;
use js_sys::{Array, Float32Array, Object, Promise, Reflect};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

type JsResult<T> = std::result::Result<T, JsValue>;

/// The provider scope the model's weights are served under.
const SCOPE: &str = "model";
/// Texts per execution unless `options.batchSize` says otherwise.
const DEFAULT_BATCH: usize = 16;
/// Truncation length when the model directory does not say (sentence-transformers' default for
/// all-MiniLM-L6-v2).
const DEFAULT_MAX_TOKENS: usize = 256;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(url: &str) -> Promise;
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

fn resolve_url(base: &str, name: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

/// GETs `url`; `Ok(None)` for a 404 when `optional`.
async fn fetch_bytes(url: &str, optional: bool) -> Result<Option<Vec<u8>>> {
    let unreachable = |e: JsValue| Error::new(ErrorCode::AccessFailed, format!("GET {url}: {e:?}"));
    let response: web_sys::Response = JsFuture::from(global_fetch(url))
        .await
        .map_err(unreachable)?
        .unchecked_into();
    if optional && response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(Error::new(
            ErrorCode::AccessFailed,
            format!("GET {url}: HTTP {}", response.status()),
        ));
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(unreachable)?)
        .await
        .map_err(unreachable)?;
    Ok(Some(js_sys::Uint8Array::new(&buffer).to_vec()))
}

fn status_error(status: crate::error::Status) -> Error {
    let code = match status.code() {
        crate::error::StatusCode::NotFound => ErrorCode::NotFound,
        crate::error::StatusCode::Cancelled | crate::error::StatusCode::Aborted => {
            ErrorCode::InvalidState
        }
        crate::error::StatusCode::InvalidArgument | crate::error::StatusCode::DataLoss => {
            ErrorCode::InvalidExternalData
        }
        _ => ErrorCode::AccessFailed,
    };
    Error::new(code, status.to_string())
}

/// The maximum sequence length from `sentence_bert_config.json`, when the directory has one.
fn max_tokens_from(json: Option<Vec<u8>>) -> Result<Option<usize>> {
    let Some(bytes) = json else { return Ok(None) };
    let value: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::invalid_argument(format!("bad sentence_bert_config.json: {e}")))?;
    Ok(value
        .get("max_seq_length")
        .and_then(serde_json::Value::as_u64)
        .map(|n| n as usize))
}

/// Backends to try, in order, for `requested` (`"auto"`, `"webgpu"`, `"cpu"` or any registered
/// name).
fn candidates(requested: &str) -> Vec<String> {
    if requested == "auto" {
        [WEBGPU, CPU]
            .into_iter()
            .filter(|name| registry::get_backend_class(name).is_some_and(|b| b.is_available()))
            .map(str::to_owned)
            .collect()
    } else {
        vec![requested.to_owned()]
    }
}

struct Loaded {
    delegate: Option<LoadedDelegate>,
    busy: bool,
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
    state: Rc<RefCell<Loaded>>,
    last_batch_ms: Rc<Cell<f64>>,
}

#[wasm_bindgen]
impl Embedder {
    /// Loads the model in the directory at `baseUrl`. `options`: `backend` (`'auto'` default,
    /// `'webgpu'`, `'cpu'`), `weights` (file name, default `model.safetensors`), `maxTokens`,
    /// `batchSize`, `signal` (AbortSignal), and the HTTP provider's options (`onProgress`,
    /// `concurrency`, `persistentCache`, ...). Rejects with a `WebDelegateError`: `AccessFailed`
    /// when a file cannot be fetched, `InvalidExternalData` for a checkpoint that does not match
    /// its config, `NotFound` when no backend can run it, `InvalidState` when aborted.
    pub async fn load(
        #[wasm_bindgen(js_name = baseUrl)] base_url: String,
        #[wasm_bindgen(unchecked_param_type = "EmbedderOptions")] options: Option<JsValue>,
    ) -> JsResult<Embedder> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        Self::load_inner(&base_url, &options)
            .await
            .map_err(to_js_error)
    }

    async fn load_inner(base_url: &str, options: &JsValue) -> Result<Embedder> {
        let invalid = |s: crate::error::Status| Error::invalid_argument(s.message().to_owned());
        let requested = string(options, "backend")
            .map_err(invalid)?
            .unwrap_or_else(|| "auto".into());
        let weights = string(options, "weights")
            .map_err(invalid)?
            .unwrap_or_else(|| "model.safetensors".into());
        let batch_size = integer(options, "batchSize")
            .map_err(invalid)?
            .map_or(DEFAULT_BATCH, |n| n as usize);
        if batch_size == 0 || batch_size > 1024 {
            return Err(Error::invalid_argument("batchSize must be 1..=1024"));
        }
        let signal =
            optional(options, "signal").map(|s| s.unchecked_into::<web_sys::AbortSignal>());
        let aborted = || signal.as_ref().is_some_and(web_sys::AbortSignal::aborted);

        let _ = JsFuture::from(crate::web::defaults::ready()).await;
        let config_bytes = fetch_bytes(&resolve_url(base_url, "config.json"), false)
            .await?
            .unwrap_or_default();
        let config = BertConfig::from_json(&String::from_utf8_lossy(&config_bytes))?;
        let tokenizer_json = fetch_bytes(&resolve_url(base_url, "tokenizer.json"), false)
            .await?
            .unwrap_or_default();
        let sbert = fetch_bytes(&resolve_url(base_url, "sentence_bert_config.json"), true).await?;
        let max_tokens = match integer(options, "maxTokens").map_err(invalid)? {
            Some(n) => n as usize,
            None => max_tokens_from(sbert)?.unwrap_or(DEFAULT_MAX_TOKENS),
        };
        let max_tokens = max_tokens.min(config.max_position_embeddings as usize);
        let tokenizer = TextTokenizer::from_json(&tokenizer_json, max_tokens)?;

        let (provider, _cache) = provider_from_options(options).map_err(invalid)?;
        // The init context shares providers through `Arc`; on wasm there is one thread.
        #[allow(clippy::arc_with_non_send_sync)]
        let provider = Arc::new(provider);
        crate::web::lifecycle::attach(&provider);
        provider
            .add_scope(
                SCOPE,
                &resolve_url(base_url, &weights),
                ScopeOptions::default(),
            )
            .await
            .map_err(status_error)?;
        let index = provider
            .index(SCOPE)
            .ok_or_else(|| Error::internal("scope vanished"))?;
        let program = sentence_embedding_program(&config, &index, SCOPE)?;
        let blob = program::encode(&program)?;
        if aborted() {
            return Err(Error::invalid_state("load aborted"));
        }

        let context = BackendInitContext::new()
            .with_method_name("sentence_embedding")
            .with_parameters(Arc::clone(&provider) as crate::params::SharedProvider);
        let mut fallback = None;
        let mut last_error = Error::not_found(format!("no available backend for {requested:?}"));
        for name in candidates(&requested) {
            let init =
                LoadedDelegate::init(&name, FreeableBuffer::new(blob.clone()), &[], &context);
            let outcome = race_abort(init, signal.clone(), &provider).await;
            match outcome {
                Ok(delegate) => {
                    return Ok(Embedder {
                        backend: name,
                        fallback,
                        dim: config.hidden_size as usize,
                        max_tokens,
                        batch_size,
                        tokenizer: Rc::new(tokenizer),
                        provider,
                        state: Rc::new(RefCell::new(Loaded {
                            delegate: Some(delegate),
                            busy: false,
                        })),
                        last_batch_ms: Rc::new(Cell::new(f64::NAN)),
                    });
                }
                Err(error) if error.code() == ErrorCode::InvalidState => return Err(error),
                Err(error) => {
                    fallback = Some(format!("{name}: {error}"));
                    last_error = error;
                }
            }
        }
        Err(last_error)
    }

    /// Embeds `texts`; resolves to one L2-normalised `Float32Array` of `dim` values per text.
    #[wasm_bindgen(unchecked_return_type = "Promise<Float32Array[]>")]
    pub fn embed(&self, texts: Vec<String>) -> Promise {
        let state = Rc::clone(&self.state);
        let tokenizer = Rc::clone(&self.tokenizer);
        let last = Rc::clone(&self.last_batch_ms);
        let (dim, batch_size) = (self.dim, self.batch_size);
        let claimed = {
            let mut loaded = state.borrow_mut();
            match (&loaded.delegate, loaded.busy) {
                (None, _) => Err(Error::invalid_state("this embedder was destroyed")),
                (Some(_), true) => Err(Error::invalid_state(
                    "an embed() is already running; await it first",
                )),
                (Some(_), false) => {
                    loaded.busy = true;
                    Ok(loaded.delegate.take())
                }
            }
        };
        let mut delegate = match claimed {
            Ok(Some(delegate)) => delegate,
            Ok(None) => return Promise::reject(&to_js_error(Error::internal("delegate missing"))),
            Err(error) => return Promise::reject(&to_js_error(error)),
        };
        wasm_bindgen_futures::future_to_promise(async move {
            let outcome =
                embed_all(&mut delegate, &tokenizer, &texts, dim, batch_size, &last).await;
            let mut loaded = state.borrow_mut();
            loaded.busy = false;
            loaded.delegate = Some(delegate);
            drop(loaded);
            let rows = outcome.map_err(to_js_error)?;
            Ok(rows
                .into_iter()
                .map(|row| JsValue::from(Float32Array::from(row.as_slice())))
                .collect::<Array>()
                .into())
        })
    }

    /// The backend that runs the model (`"webgpu"` or `"cpu"`).
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.clone()
    }

    /// Why the preferred backend was not used (`null` when it was).
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

    /// Milliseconds the last executed batch took (`NaN` before the first).
    #[wasm_bindgen(getter, js_name = lastBatchMillis)]
    pub fn last_batch_millis(&self) -> f64 {
        self.last_batch_ms.get()
    }

    /// The WebGPU program's stats (activation arena, parameters, reloads); `null` on the CPU
    /// backend, while embedding, or after `destroy()`.
    #[wasm_bindgen(js_name = programStats, unchecked_return_type = "WebGpuProgramStats | null")]
    pub fn program_stats(&self) -> JsValue {
        let loaded = self.state.borrow();
        introspect::program_stats(loaded.delegate.as_ref())
    }

    /// Per-op GPU timings of the last batch run with the WebGPU backend's `profiling` option on;
    /// `null` when none ran, on the CPU backend, while embedding, or after `destroy()`.
    #[wasm_bindgen(js_name = lastProfile, unchecked_return_type = "WebGpuProfile | null")]
    pub fn last_profile(&self) -> JsValue {
        let loaded = self.state.borrow();
        introspect::last_profile(loaded.delegate.as_ref())
    }

    /// What the backend reports about itself (`[{key, value}]`: adapter, limits, ...).
    #[wasm_bindgen(js_name = backendInfo, unchecked_return_type = "BackendOptionEntry[]")]
    pub fn backend_info(&self) -> JsValue {
        let keys: &[&str] = if self.backend == WEBGPU {
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
        crate::web::convert::options_to_js(&options).unwrap_or_else(|_| Array::new().into())
    }

    /// Bytes and requests of the weights load (`{bytesNeeded, bytesReceived, requests}`).
    #[wasm_bindgen(js_name = loadStats)]
    pub fn load_stats(&self) -> JsValue {
        let object = Object::new();
        {
            let stats = self.provider.total_stats();
            for (key, value) in [
                ("bytesNeeded", stats.bytes_needed as f64),
                ("bytesReceived", stats.bytes_received as f64),
                ("requests", stats.requests_sent as f64),
            ] {
                let _ = Reflect::set(&object, &JsValue::from_str(key), &JsValue::from_f64(value));
            }
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

    /// Frees the model (its GPU buffers included). Further `embed` calls reject.
    pub fn destroy(&self) {
        self.state.borrow_mut().delegate = None;
    }
}

/// Runs `work` unless `signal` aborts first; on abort the provider's in-flight requests are
/// stopped (a suspend aborts them at once), `work` is dropped with everything it allocated, and
/// the result is `InvalidState`.
async fn race_abort<T>(
    work: impl std::future::Future<Output = Result<T>>,
    signal: Option<web_sys::AbortSignal>,
    provider: &HttpProvider,
) -> Result<T> {
    use futures_util::future::{Either, select};
    let Some(signal) = signal else {
        return work.await;
    };
    if signal.aborted() {
        return Err(Error::invalid_state("load aborted"));
    }
    let aborted = Promise::new(&mut |resolve, _reject| {
        let _ = signal.add_event_listener_with_callback("abort", &resolve);
    });
    let work = std::pin::pin!(work);
    match select(work, JsFuture::from(aborted)).await {
        Either::Left((outcome, _)) => outcome,
        Either::Right(_) => {
            // Suspending aborts every request at once; resume unless the page had suspended it.
            if !provider.is_suspended() {
                provider.signal(Signal::Suspend);
                provider.signal(Signal::Resume);
            }
            Err(Error::invalid_state("load aborted"))
        }
    }
}

/// Tokenises `texts` in batches of similar length (less padding), runs each, and returns the
/// rows in the order of `texts`.
async fn embed_all(
    delegate: &mut LoadedDelegate,
    tokenizer: &TextTokenizer,
    texts: &[String],
    dim: usize,
    batch_size: usize,
    last_batch_ms: &Cell<f64>,
) -> Result<Vec<Vec<f32>>> {
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
    let mut rows = vec![Vec::new(); texts.len()];
    for chunk in order.chunks(batch_size) {
        let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_str()).collect();
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
        let output = args[2]
            .as_tensor()
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
            rows[index] = row.to_vec();
        }
    }
    Ok(rows)
}
