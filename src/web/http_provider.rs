//! The JavaScript face of the HTTP parameter provider: `HttpParameterProvider` (scopes, describe,
//! querySupport, notify) and `loadToGpu`, which loads parameters into WebGPU buffers and hands
//! back `GpuParameter`s that can be read back (for tests and checks; a program's backend uses
//! the provider from Rust). Errors reject with a `StatusError` carrying the IREE code.

use crate::error::{Status, StatusCode};
use crate::params::http::fetch::FetchTransport;
use crate::params::http::{
    AbortHandle, HttpProvider, LoadControl, LoadObserver, LoadProgress, LoadStats, ScopeOptions,
    parse_sha256,
};
use crate::params::interim_wgpu::{WgpuAllocator, WgpuContext};
use crate::params::{
    EntryStorage, IndexEntry, LoadedSpan, ParameterIndex, ParameterProvider, Signal, SpanRequest,
    StatusResult,
};
use crate::web::errors::status_to_js;
use crate::web::http_options::{integer, optional, provider_options, string};
use js_sys::{Array, Function, Object, Promise, Reflect, Uint8Array};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

fn invalid(message: impl Into<String>) -> Status {
    Status::new(StatusCode::InvalidArgument, message.into())
}

/// Calls the page's `onProgress` / `onWarning` callbacks (warnings go to `console.warn` when no
/// callback is given). A callback that throws is ignored: it must not fail a load.
struct JsObserver {
    on_progress: Option<Function>,
    on_warning: Option<Function>,
}

impl LoadObserver for JsObserver {
    fn progress(&self, progress: &LoadProgress) {
        let Some(callback) = &self.on_progress else {
            return;
        };
        let event = Object::new();
        let fields: [(&str, JsValue); 5] = [
            ("scope", JsValue::from_str(&progress.scope)),
            ("bytesDone", JsValue::from_f64(progress.bytes_done as f64)),
            ("bytesTotal", JsValue::from_f64(progress.bytes_total as f64)),
            (
                "requestsDone",
                JsValue::from_f64(progress.requests_done as f64),
            ),
            (
                "requestsTotal",
                JsValue::from_f64(progress.requests_total as f64),
            ),
        ];
        for (key, value) in fields {
            let _ = Reflect::set(&event, &JsValue::from_str(key), &value);
        }
        let _ = callback.call1(&JsValue::NULL, &event);
    }

    fn warning(&self, message: &str) {
        match &self.on_warning {
            Some(callback) => {
                let _ = callback.call1(&JsValue::NULL, &JsValue::from_str(message));
            }
            None => web_sys::console::warn_1(&JsValue::from_str(message)),
        }
    }
}

/// Parameters of weights files on HTTP servers (IREE's parameter provider), streamed with Range
/// requests straight into GPU buffers.
#[wasm_bindgen]
pub struct HttpParameterProvider {
    provider: Rc<HttpProvider>,
    gpu: Rc<RefCell<Option<WgpuContext>>>,
}

#[wasm_bindgen]
impl HttpParameterProvider {
    /// A provider. `options`: `concurrency` (1-8, default 4), `chunkSize`, `maxRequestSize`,
    /// `gapThreshold`, `retries`, `backoffMs`, `idleTimeoutMs`, `cache` (a `RequestCache` mode),
    /// `onProgress(event)`, `onWarning(message)`. Throws `INVALID_ARGUMENT` for a bad option.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "HttpProviderOptions")] options: Option<JsValue>,
    ) -> JsResult<HttpParameterProvider> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        let (settings, fetch) = provider_options(&options).map_err(status_to_js)?;
        let callback = |key: &str| -> StatusResult<Option<Function>> {
            optional(&options, key)
                .map(|f| {
                    f.dyn_into::<Function>()
                        .map_err(|_| invalid(format!("{key} must be a function")))
                })
                .transpose()
        };
        let observer = JsObserver {
            on_progress: callback("onProgress").map_err(status_to_js)?,
            on_warning: callback("onWarning").map_err(status_to_js)?,
        };
        #[allow(clippy::arc_with_non_send_sync)]
        let transport = Arc::new(FetchTransport::new(fetch));
        #[allow(clippy::arc_with_non_send_sync)]
        let observer = Arc::new(observer);
        Ok(Self {
            provider: Rc::new(HttpProvider::new(transport, settings).with_observer(observer)),
            gpu: Rc::new(RefCell::new(None)),
        })
    }

    /// Serves the file at `url` as `scope`, reading its index with small Range requests.
    /// `options`: `format` (`'safetensors'`, `'gguf'`, `'irpa'`), `sha256` (hex, of the whole
    /// file), `parameterSha256` (`{key: hex}`), `index` (`[{key, offset, length, dtype?, shape?}]`,
    /// an index the page already has). Rejects with the HTTP or parser error's status.
    #[wasm_bindgen(js_name = addScope, unchecked_return_type = "Promise<void>")]
    pub fn add_scope(
        &self,
        scope: String,
        url: String,
        #[wasm_bindgen(unchecked_param_type = "ScopeOptions")] options: Option<JsValue>,
    ) -> Promise {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        let parsed = scope_options(&options).and_then(|o| Ok((o, index_option(&options)?)));
        let provider = self.provider.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let (scope_options, index) = parsed.map_err(status_to_js)?;
            let added = match index {
                Some(index) => {
                    provider
                        .add_scope_with_index(&scope, &url, index, scope_options)
                        .await
                }
                None => provider.add_scope(&scope, &url, scope_options).await,
            };
            added.map(|()| JsValue::UNDEFINED).map_err(status_to_js)
        })
    }

    /// Whether `scope` is served.
    #[wasm_bindgen(js_name = querySupport)]
    pub fn query_support(&self, scope: &str) -> bool {
        self.provider.query_support(scope)
    }

    /// `{length, dtype, shape}` of `key` in `scope`, or `null`.
    #[wasm_bindgen(unchecked_return_type = "ParameterDescription | null")]
    pub fn describe(&self, scope: &str, key: &str) -> JsValue {
        let Some(info) = self.provider.describe(scope, key) else {
            return JsValue::NULL;
        };
        let object = Object::new();
        let dtype = info.dtype.map_or(JsValue::NULL, |d| JsValue::from_str(&d));
        let shape = info.shape.map_or(JsValue::NULL, |shape| {
            shape
                .iter()
                .map(|&d| JsValue::from_f64(d as f64))
                .collect::<Array>()
                .into()
        });
        for (k, v) in [
            ("length", JsValue::from_f64(info.length as f64)),
            ("dtype", dtype),
            ("shape", shape),
        ] {
            let _ = Reflect::set(&object, &JsValue::from_str(k), &v);
        }
        object.into()
    }

    /// The keys of `scope`, in file order (empty for an unknown scope).
    pub fn keys(&self, scope: &str) -> Vec<String> {
        self.provider.index(scope).map_or_else(Vec::new, |index| {
            index.entries().iter().map(|e| e.key.clone()).collect()
        })
    }

    /// Tells the provider about the page's life: `'resume'`, `'suspend'` (stop issuing requests,
    /// release staging memory) or `'lowMemory'`.
    pub fn notify(&self, signal: &str) -> JsResult<()> {
        let signal = match signal {
            "resume" => Signal::Resume,
            "suspend" => Signal::Suspend,
            "lowMemory" => Signal::LowMemory,
            other => {
                return Err(status_to_js(invalid(format!(
                    "unknown signal {other:?} (resume | suspend | lowMemory)"
                ))));
            }
        };
        self.provider.notify(signal).map_err(status_to_js)
    }

    /// Loads parameters of `scope` into new GPU buffers: `spans` are keys (whole parameters) or
    /// `{key, offset?, length?}`. `options.signal`: an `AbortSignal` that cancels the load
    /// (rejecting with `CANCELLED`, no buffer kept). Resolves once the GPU queue has taken every
    /// write (`onSubmittedWorkDone`).
    #[wasm_bindgen(js_name = loadToGpu, unchecked_return_type = "Promise<GpuParameter[]>")]
    pub fn load_to_gpu(
        &self,
        scope: String,
        #[wasm_bindgen(unchecked_param_type = "(string | SpanSpec)[]")] spans: JsValue,
        #[wasm_bindgen(unchecked_param_type = "LoadOptions")] options: Option<JsValue>,
    ) -> Promise {
        let provider = self.provider.clone();
        let gpu = self.gpu.clone();
        let options = options.unwrap_or(JsValue::UNDEFINED);
        wasm_bindgen_futures::future_to_promise(async move {
            let requests = span_requests(&provider, &scope, &spans).map_err(status_to_js)?;
            let abort = AbortHandle::new();
            let _listener = match optional(&options, "signal") {
                Some(signal) => Some(AbortListener::attach(signal, &abort).map_err(status_to_js)?),
                None => None,
            };
            let context = gpu_context(&gpu).await.map_err(status_to_js)?;
            let allocator = WgpuAllocator::new(context.clone());
            let control = LoadControl { abort: Some(abort) };
            let loaded = provider
                .load_with(&allocator, &scope, &requests, &control)
                .await
                .map_err(status_to_js)?;
            context.submitted_work_done().await;
            Ok(requests
                .into_iter()
                .zip(loaded)
                .map(|(request, span)| {
                    JsValue::from(GpuParameter {
                        key: request.key,
                        span,
                    })
                })
                .collect::<Array>()
                .into())
        })
    }

    /// Counts of the last load that finished: `{requestsPlanned, requestsSent, retries,
    /// bytesNeeded, bytesPlanned, bytesReceived}`, or `null`.
    #[wasm_bindgen(js_name = lastStats, unchecked_return_type = "LoadStats | null")]
    pub fn last_stats(&self) -> JsValue {
        self.provider
            .last_stats()
            .map_or(JsValue::NULL, stats_to_js)
    }

    /// Host bytes the provider's staging pool holds now and at most so far: `{inUse, peak}`.
    #[wasm_bindgen(js_name = stagingBytes, unchecked_return_type = "{inUse: number, peak: number}")]
    pub fn staging_bytes(&self) -> JsValue {
        let pool = self.provider.staging_pool();
        let object = Object::new();
        let _ = Reflect::set(
            &object,
            &"inUse".into(),
            &(pool.in_use_bytes() as f64).into(),
        );
        let _ = Reflect::set(&object, &"peak".into(), &(pool.peak_bytes() as f64).into());
        object.into()
    }
}

fn stats_to_js(stats: LoadStats) -> JsValue {
    let object = Object::new();
    for (key, value) in [
        ("requestsPlanned", stats.requests_planned),
        ("requestsSent", stats.requests_sent),
        ("retries", stats.retries),
        ("bytesNeeded", stats.bytes_needed),
        ("bytesPlanned", stats.bytes_planned),
        ("bytesReceived", stats.bytes_received),
    ] {
        let _ = Reflect::set(&object, &JsValue::from_str(key), &(value as f64).into());
    }
    object.into()
}

/// The provider's GPU device, created on first use.
async fn gpu_context(slot: &RefCell<Option<WgpuContext>>) -> StatusResult<WgpuContext> {
    if let Some(context) = slot.borrow().clone() {
        return Ok(context);
    }
    let context = WgpuContext::new().await?;
    *slot.borrow_mut() = Some(context.clone());
    Ok(context)
}

/// Calls `abort` when a JS `AbortSignal` fires; detaches on drop.
struct AbortListener {
    signal: web_sys::AbortSignal,
    callback: Closure<dyn FnMut()>,
}

impl AbortListener {
    fn attach(signal: JsValue, abort: &AbortHandle) -> StatusResult<Self> {
        let signal = signal
            .dyn_into::<web_sys::AbortSignal>()
            .map_err(|_| invalid("options.signal must be an AbortSignal"))?;
        if signal.aborted() {
            abort.abort();
        }
        let handle = abort.clone();
        let callback = Closure::<dyn FnMut()>::new(move || handle.abort());
        signal
            .add_event_listener_with_callback("abort", callback.as_ref().unchecked_ref())
            .map_err(|e| invalid(format!("cannot listen to the AbortSignal: {e:?}")))?;
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

fn scope_options(options: &JsValue) -> StatusResult<ScopeOptions> {
    let sha = |value: JsValue, what: &str| -> StatusResult<[u8; 32]> {
        value
            .as_string()
            .and_then(|hex| parse_sha256(&hex))
            .ok_or_else(|| invalid(format!("{what} must be 64 hex digits")))
    };
    let mut parsed = ScopeOptions {
        format: string(options, "format")?,
        sha256: optional(options, "sha256")
            .map(|v| sha(v, "sha256"))
            .transpose()?,
        parameter_sha256: Vec::new(),
    };
    if let Some(map) = optional(options, "parameterSha256") {
        let object = map
            .dyn_into::<Object>()
            .map_err(|_| invalid("parameterSha256 must be an object {key: hex}"))?;
        for pair in Object::entries(&object).iter() {
            let pair = Array::from(&pair);
            let key = pair
                .get(0)
                .as_string()
                .ok_or_else(|| invalid("parameterSha256 keys must be strings"))?;
            let digest = sha(pair.get(1), &format!("parameterSha256[{key:?}]"))?;
            parsed.parameter_sha256.push((key, digest));
        }
    }
    Ok(parsed)
}

fn index_option(options: &JsValue) -> StatusResult<Option<ParameterIndex>> {
    let Some(entries) = optional(options, "index") else {
        return Ok(None);
    };
    if !Array::is_array(&entries) {
        return Err(invalid("index must be an array of {key, offset, length}"));
    }
    let mut parsed = Vec::new();
    for entry in Array::from(&entries).iter() {
        let key = string(&entry, "key")?.ok_or_else(|| invalid("index entries need a key"))?;
        let offset =
            integer(&entry, "offset")?.ok_or_else(|| invalid("index entries need an offset"))?;
        let length =
            integer(&entry, "length")?.ok_or_else(|| invalid("index entries need a length"))?;
        let shape = match optional(&entry, "shape") {
            Some(shape) if Array::is_array(&shape) => Some(
                Array::from(&shape)
                    .iter()
                    .map(|d| {
                        d.as_f64()
                            .filter(|d| *d >= 0.0 && d.fract() == 0.0)
                            .map(|d| d as u64)
                    })
                    .collect::<Option<Vec<u64>>>()
                    .ok_or_else(|| {
                        invalid(format!("shape of {key:?} must hold non-negative integers"))
                    })?,
            ),
            Some(_) => return Err(invalid(format!("shape of {key:?} must be an array"))),
            None => None,
        };
        parsed.push(IndexEntry {
            dtype: string(&entry, "dtype")?,
            key,
            length,
            storage: EntryStorage::Data { offset },
            shape,
        });
    }
    Ok(Some(ParameterIndex::new(parsed, None)))
}

fn span_requests(
    provider: &HttpProvider,
    scope: &str,
    spans: &JsValue,
) -> StatusResult<Vec<SpanRequest>> {
    if !Array::is_array(spans) {
        return Err(invalid(
            "spans must be an array of keys or {key, offset?, length?}",
        ));
    }
    let mut requests = Vec::new();
    for item in Array::from(spans).iter() {
        let (key, offset, length) = match item.as_string() {
            Some(key) => (key, None, None),
            None => (
                string(&item, "key")?.ok_or_else(|| invalid("a span needs a key"))?,
                integer(&item, "offset")?,
                integer(&item, "length")?,
            ),
        };
        let offset = offset.unwrap_or(0);
        let length = match length {
            Some(length) => length,
            // The rest of the parameter (an unknown key fails in the load with NOT_FOUND).
            None => provider
                .describe(scope, &key)
                .map_or(0, |info| info.length.saturating_sub(offset)),
        };
        requests.push(SpanRequest {
            key,
            span: crate::params::Span {
                parameter_offset: offset,
                buffer_offset: 0,
                length,
            },
        });
    }
    Ok(requests)
}
