//! Loading a model directory for `Embedder.load`: `config.json` first (a missing directory fails
//! there, with a message naming the file), then `tokenizer.json`, `sentence_bert_config.json`
//! (optional) and the weights file's index at once; the program built from the config and the
//! index; the first backend that initialises it.
//!
//! The whole load races the caller's `AbortSignal`: once it aborts, the load rejects with
//! `InvalidState` ("load aborted") at once, the file fetches are aborted (they carry the
//! signal), the provider's Range requests are aborted (a suspend stops them all), and whatever
//! was half-built is dropped.
//!
//! With backend `"auto"` the candidates are `"webgpu"` then `"cpu"`, except that a WebGPU with
//! only a fallback adapter (WebGPU emulated on the CPU) goes after `"cpu"`; every one skipped or
//! failed is explained (an unavailable WebGPU with the backend's own `unavailable_reason`), and
//! the explanations become the embedder's `fallbackReason`.

use super::options::LoadOptions;
use crate::backends::defaults::{CPU, WEBGPU};
use crate::error::{Error, ErrorCode, Result, Status, StatusCode};
use crate::models::bert::{BertConfig, sentence_embedding_program};
use crate::models::sbert::{max_seq_length, truncation_length};
use crate::params::Signal;
use crate::params::http::{HttpProvider, ScopeOptions};
use crate::program;
use crate::registry::{
    self, BackendInitContext, BackendOption, FreeableBuffer, LoadedDelegate, OptionValue,
};
use crate::text::TextTokenizer;
use js_sys::{Function, Promise};
use std::sync::Arc;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

/// The provider scope the model's weights are served under.
pub(super) const SCOPE: &str = "model";
/// The message of every abort rejection.
const ABORTED: &str = "load aborted";

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(url: &str, init: &web_sys::RequestInit) -> Promise;
}

/// A model ready to embed with.
pub(super) struct LoadedModel {
    pub backend: String,
    pub fallback: Option<String>,
    pub delegate: LoadedDelegate,
    pub dim: usize,
    pub max_tokens: usize,
    pub tokenizer: TextTokenizer,
}

fn resolve_url(base: &str, name: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

fn aborted_error() -> Error {
    Error::invalid_state(ABORTED)
}

/// GETs `url` with `signal`; `Ok(None)` for a 404 when `optional`.
async fn fetch_bytes(
    url: &str,
    optional: bool,
    signal: Option<&web_sys::AbortSignal>,
) -> Result<Option<Vec<u8>>> {
    let failed = |e: JsValue| {
        if signal.is_some_and(web_sys::AbortSignal::aborted) {
            aborted_error()
        } else {
            Error::access_failed(format!("GET {url}: {e:?}"))
        }
    };
    let init = web_sys::RequestInit::new();
    init.set_signal(signal);
    let response: web_sys::Response = JsFuture::from(global_fetch(url, &init))
        .await
        .map_err(failed)?
        .dyn_into()
        .map_err(|_| Error::internal(format!("GET {url}: fetch gave no Response")))?;
    if optional && response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(Error::access_failed(format!(
            "GET {url}: HTTP {}",
            response.status()
        )));
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(failed)?)
        .await
        .map_err(failed)?;
    Ok(Some(js_sys::Uint8Array::new(&buffer).to_vec()))
}

/// The provider's status as an ExecuTorch error for `Embedder.load`'s callers.
pub(super) fn status_error(status: Status) -> Error {
    let code = match status.code() {
        StatusCode::NotFound => ErrorCode::NotFound,
        StatusCode::Cancelled | StatusCode::Aborted => ErrorCode::InvalidState,
        StatusCode::InvalidArgument | StatusCode::DataLoss => ErrorCode::InvalidExternalData,
        _ => ErrorCode::AccessFailed,
    };
    Error::new(code, status.to_string())
}

/// Why the backend `name` cannot run now, from its `unavailable_reason` option when it has one.
fn unavailable_reason(name: &str) -> String {
    let mut options = match BackendOption::new("unavailable_reason", "") {
        Ok(option) => vec![option],
        Err(_) => return "the backend gives no reason".into(),
    };
    match registry::get_option(name, &mut options) {
        Ok(()) => match options.first().map(BackendOption::value) {
            Some(OptionValue::String(reason)) if !reason.is_empty() => reason.clone(),
            _ => "the backend gives no reason".into(),
        },
        Err(_) => "the backend gives no reason".into(),
    }
}

/// Backends to try, in order, for `requested`, and why each preferred one was skipped.
fn candidates(requested: &str) -> (Vec<String>, Vec<String>) {
    if requested != "auto" {
        return (vec![requested.to_owned()], Vec::new());
    }
    let mut names = Vec::new();
    let mut skipped = Vec::new();
    for name in [WEBGPU, CPU] {
        match registry::get_backend_class(name) {
            None => skipped.push(format!("{name} is not registered")),
            Some(backend) if !backend.is_available() => {
                skipped.push(format!("{name} unavailable: {}", unavailable_reason(name)));
            }
            Some(_) => names.push(name.to_owned()),
        }
    }
    // A fallback adapter is the browser's software rasteriser (SwiftShader-class): WebGPU on the
    // CPU, far slower than the CPU backend's SIMD kernels. It stays second choice.
    if names.first().map(String::as_str) == Some(WEBGPU)
        && names.iter().any(|n| n == CPU)
        && is_fallback_adapter(WEBGPU)
    {
        names.retain(|n| n != WEBGPU);
        names.push(WEBGPU.to_owned());
        skipped.push(format!(
            "{WEBGPU} has only a fallback adapter (WebGPU emulated on the CPU), slower than the \
             {CPU} backend; ask for backend '{WEBGPU}' to use it anyway"
        ));
    }
    (names, skipped)
}

/// Whether backend `name` reports its adapter as a fallback adapter (`adapter.fallback`).
fn is_fallback_adapter(name: &str) -> bool {
    let Ok(option) = BackendOption::new("adapter.fallback", false) else {
        return false;
    };
    let mut options = vec![option];
    registry::get_option(name, &mut options).is_ok()
        && matches!(
            options.first().map(BackendOption::value),
            Some(OptionValue::Bool(true))
        )
}

/// Loads the model in `base_url` with `provider` serving its weights, unless `options.signal`
/// aborts first.
///
/// # Errors
/// `InvalidState` when aborted; see `Embedder.load` for the rest.
pub(super) async fn load(
    base_url: &str,
    options: &LoadOptions,
    provider: &Arc<HttpProvider>,
) -> Result<LoadedModel> {
    race_abort(
        load_model(base_url, options, provider),
        options.signal.as_ref(),
        provider,
    )
    .await
}

async fn load_model(
    base_url: &str,
    options: &LoadOptions,
    provider: &Arc<HttpProvider>,
) -> Result<LoadedModel> {
    let signal = options.signal.as_ref();
    let _ = JsFuture::from(crate::web::registry::defaults::ready()).await;
    let config_bytes = fetch_bytes(&resolve_url(base_url, "config.json"), false, signal)
        .await?
        .unwrap_or_default();
    let config = BertConfig::from_json(&String::from_utf8_lossy(&config_bytes))?;
    let weights_url = resolve_url(base_url, &options.weights);
    let (tokenizer_json, sbert, ()) = futures_util::future::try_join3(
        fetch_bytes(&resolve_url(base_url, "tokenizer.json"), false, signal),
        fetch_bytes(
            &resolve_url(base_url, "sentence_bert_config.json"),
            true,
            signal,
        ),
        async {
            provider
                .add_scope(SCOPE, &weights_url, ScopeOptions::default())
                .await
                .map_err(status_error)
        },
    )
    .await?;
    let directory_max = sbert.as_deref().map(max_seq_length).transpose()?.flatten();
    let max_tokens = truncation_length(options.max_tokens, directory_max, &config)?;
    let tokenizer = TextTokenizer::from_json(&tokenizer_json.unwrap_or_default(), max_tokens)?;
    let index = provider
        .index(SCOPE)
        .ok_or_else(|| Error::internal("scope vanished"))?;
    let blob = program::encode(&sentence_embedding_program(&config, &index, SCOPE)?)?;
    let dim = usize::try_from(config.hidden_size)
        .map_err(|_| Error::invalid_argument("hidden_size does not fit in memory"))?;

    let context = BackendInitContext::new()
        .with_method_name("sentence_embedding")
        .with_parameters(Arc::clone(provider) as crate::params::SharedProvider);
    let (names, mut notes) = candidates(&options.backend);
    let mut last_error = None;
    for name in names {
        match LoadedDelegate::init(&name, FreeableBuffer::new(blob.clone()), &[], &context).await {
            Ok(delegate) => {
                return Ok(LoadedModel {
                    backend: name,
                    fallback: (!notes.is_empty()).then(|| notes.join("; ")),
                    delegate,
                    dim,
                    max_tokens,
                    tokenizer,
                });
            }
            Err(error) if error.code() == ErrorCode::InvalidState => return Err(error),
            Err(error) => {
                notes.push(format!("{name} failed: {error}"));
                last_error = Some(error);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| {
        Error::not_found(format!(
            "no available backend for {:?}: {}",
            options.backend,
            notes.join("; ")
        ))
    }))
}

/// Removes an `abort` listener when dropped.
struct AbortListener {
    signal: web_sys::AbortSignal,
    callback: Function,
}

impl Drop for AbortListener {
    fn drop(&mut self) {
        let _ = self
            .signal
            .remove_event_listener_with_callback("abort", &self.callback);
    }
}

/// Runs `work` unless `signal` aborts first; on abort the provider's in-flight requests are
/// stopped (a suspend aborts them at once), `work` is dropped with everything it allocated, and
/// the result is `InvalidState`.
async fn race_abort<T>(
    work: impl std::future::Future<Output = Result<T>>,
    signal: Option<&web_sys::AbortSignal>,
    provider: &HttpProvider,
) -> Result<T> {
    use futures_util::future::{Either, select};
    let Some(signal) = signal else {
        return work.await;
    };
    if signal.aborted() {
        return Err(aborted_error());
    }
    let mut listener = None;
    let aborted = Promise::new(&mut |resolve, _reject| {
        let _ = signal.add_event_listener_with_callback("abort", &resolve);
        listener = Some(AbortListener {
            signal: signal.clone(),
            callback: resolve,
        });
    });
    let work = std::pin::pin!(work);
    let outcome = match select(work, JsFuture::from(aborted)).await {
        // A fetch that failed because of the abort can finish first: still an abort.
        Either::Left((Err(_), _)) if signal.aborted() => Err(aborted_error()),
        Either::Left((outcome, _)) => outcome,
        Either::Right(_) => Err(aborted_error()),
    };
    drop(listener);
    if outcome.is_err() && signal.aborted() && !provider.is_suspended() {
        // Suspending aborts every request at once; resume unless the page had suspended it.
        provider.signal(Signal::Suspend);
        provider.signal(Signal::Resume);
    }
    outcome
}
