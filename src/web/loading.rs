//! What every high-level model load shares: the backend to run on (`"auto"`'s order and the
//! reasons each skipped backend gives), the load options that become a built-in backend's
//! compile specs (`threads` and `cpuActivations`: the CPU backend's `threads` and `activations`;
//! `gpuPrecision`: the WebGPU backend's `precision`), the provider's IREE status as the ExecuTorch error a caller sees, and racing
//! a load against the caller's `AbortSignal`, and fetching a small file whole (a config, a
//! tokenizer, a `.pte`).
//!
//! With backend `"auto"` the candidates are `"webgpu"` then `"cpu"`, except that a WebGPU with
//! only a fallback adapter (WebGPU emulated on the CPU) goes after `"cpu"`; every one skipped or
//! failed is explained (an unavailable WebGPU with the backend's own `unavailable_reason`).

use crate::backends::{CPU, WEBGPU};
use crate::error::{Error, ErrorCode, Result, Status, StatusCode};
use crate::params::Signal;
use crate::params::http::HttpProvider;
use crate::registry::{
    self, BackendInitContext, BackendOption, CompileSpec, FreeableBuffer, LoadedDelegate,
    OptionValue,
};
use js_sys::{Function, Promise};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(url: &str, init: &web_sys::RequestInit) -> Promise;
}

/// The message of every abort rejection.
const ABORTED: &str = "load aborted";

/// The error an aborted load rejects with.
pub(crate) fn aborted_error() -> Error {
    Error::invalid_state(ABORTED)
}

/// The provider's status as an ExecuTorch error for a load's callers: one code per cause.
/// A file whose bytes are wrong (malformed, truncated: `INVALID_ARGUMENT`, `DATA_LOSS`,
/// `OUT_OF_RANGE`) is `InvalidExternalData`; a format feature we lack (`UNIMPLEMENTED`: a
/// version or tensor type) `NotSupported`; a missing file `NotFound`; an abort `InvalidState`;
/// exhaustion `MemoryAllocationFailed`; only a fetch that failed (network, server, permission,
/// a file that changed) is `AccessFailed`.
pub(crate) fn status_error(status: Status) -> Error {
    let code = match status.code() {
        StatusCode::NotFound => ErrorCode::NotFound,
        StatusCode::Cancelled | StatusCode::Aborted => ErrorCode::InvalidState,
        StatusCode::InvalidArgument | StatusCode::DataLoss | StatusCode::OutOfRange => {
            ErrorCode::InvalidExternalData
        }
        StatusCode::Unimplemented => ErrorCode::NotSupported,
        StatusCode::ResourceExhausted => ErrorCode::MemoryAllocationFailed,
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
pub(crate) fn candidates(requested: &str) -> (Vec<String>, Vec<String>) {
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

/// GETs `url` with `signal`; `Ok(None)` for a 404 when `optional`.
pub(crate) async fn fetch_bytes(
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
pub(crate) async fn race_abort<T>(
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

/// A delegate initialised on the first candidate backend that accepts the program.
pub(crate) struct Placed {
    /// The backend that runs it.
    pub backend: String,
    /// Why the backends before it were skipped or failed, if any were.
    pub fallback: Option<String>,
    /// The initialised program.
    pub delegate: LoadedDelegate,
}

/// The most threads a `threads` load option may ask for.
const MAX_THREADS: u64 = 64;

/// The `threads` load option: the most CPU threads the model's program runs on (1 to 64; it
/// must not exceed the installed pool's size, which the CPU backend checks at init). Only the
/// CPU backend reads it; `None` when absent (the backend's current `threads`).
///
/// # Errors
/// `InvalidArgument` for anything but an integer in 1..=64.
pub(crate) fn threads_option(options: &wasm_bindgen::JsValue) -> Result<Option<usize>> {
    let Some(n) = crate::web::edge::fields::integer(options, "threads")
        .map_err(|status| Error::invalid_argument(status.message().to_owned()))?
    else {
        return Ok(None);
    };
    if !(1..=MAX_THREADS).contains(&n) {
        return Err(Error::invalid_argument(format!(
            "threads must be an integer in 1..={MAX_THREADS}, got {n}"
        )));
    }
    Ok(usize::try_from(n).ok())
}

/// The load options that are a built-in backend's compile specs: the CPU backend's `threads`
/// and `activations` (`cpuActivations`), the WebGPU backend's `precision` (`gpuPrecision`).
#[derive(Clone, Debug, Default)]
pub(crate) struct BackendLoadOptions {
    /// The most threads the program runs on, if given.
    pub threads: Option<usize>,
    /// `"f32"` or `"int8"`, if given.
    pub activations: Option<String>,
    /// `"auto"`, `"f32"` or `"f16"`, if given.
    pub gpu_precision: Option<String>,
}

impl BackendLoadOptions {
    /// The compile specs these options give backend `name` (none for a registered one).
    fn specs(&self, name: &str) -> Vec<CompileSpec> {
        let spec = |key: &str, value: Option<String>| value.map(|v| CompileSpec::new(key, v));
        match name {
            CPU => [
                spec("threads", self.threads.map(|t| t.to_string())),
                spec("activations", self.activations.clone()),
            ]
            .into_iter()
            .flatten()
            .collect(),
            WEBGPU => spec("precision", self.gpu_precision.clone())
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The `gpuPrecision` load option: the precision the WebGPU backend computes in (its compile
/// spec `precision`): `"auto"` (its default: f16 only on a real GPU with shader-f16), `"f32"`
/// or `"f16"` (refused with `NotSupported` by a device without shader-f16). Only the WebGPU
/// backend reads it; `None` when absent.
///
/// # Errors
/// `InvalidArgument` for anything but one of those strings.
pub(crate) fn gpu_precision_option(options: &wasm_bindgen::JsValue) -> Result<Option<String>> {
    let value = crate::web::edge::fields::string(options, "gpuPrecision")
        .map_err(|status| Error::invalid_argument(status.message().to_owned()))?;
    match value.as_deref() {
        None | Some("auto" | "f32" | "f16") => Ok(value),
        Some(other) => Err(Error::invalid_argument(format!(
            "gpuPrecision must be \"auto\", \"f32\" or \"f16\", got {other:?}"
        ))),
    }
}

/// The `cpuActivations` load option: how the CPU backend's block-format `linear`s read their
/// activation rows, `"f32"` (its default) or `"int8"` (quantized per 32 values, as llama.cpp's
/// CPU backend does). Only the CPU backend reads it; `None` when absent.
///
/// # Errors
/// `InvalidArgument` for anything but one of those strings.
pub(crate) fn cpu_activations_option(options: &wasm_bindgen::JsValue) -> Result<Option<String>> {
    let value = crate::web::edge::fields::string(options, "cpuActivations")
        .map_err(|status| Error::invalid_argument(status.message().to_owned()))?;
    match value.as_deref() {
        None | Some("f32" | "int8") => Ok(value),
        Some(other) => Err(Error::invalid_argument(format!(
            "cpuActivations must be \"f32\" or \"int8\", got {other:?}"
        ))),
    }
}

/// Initialises `blob` on the first of [`candidates`]`(requested)` that accepts it, a built-in
/// backend with the compile specs `options` give it.
///
/// # Errors
/// An `InvalidState` failure at once (an abort or a lost device is not a reason to try the
/// next backend); otherwise the last backend's error, or `NotFound` listing why none could run.
pub(crate) async fn init_on_first(
    requested: &str,
    blob: &[u8],
    context: &BackendInitContext,
    options: &BackendLoadOptions,
) -> Result<Placed> {
    let (names, mut notes) = candidates(requested);
    let mut last_error = None;
    for name in names {
        let specs = options.specs(&name);
        let blob = FreeableBuffer::new(blob.to_vec());
        match LoadedDelegate::init(&name, blob, &specs, context).await {
            Ok(delegate) => {
                return Ok(Placed {
                    backend: name,
                    fallback: (!notes.is_empty()).then(|| notes.join("; ")),
                    delegate,
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
            "no available backend for {requested:?}: {}",
            notes.join("; ")
        ))
    }))
}
