//! The JavaScript face of the HTTP parameter provider: `HttpParameterProvider` (scopes, describe,
//! querySupport, notify) and `loadToGpu`, which loads parameters into the WebGPU backend's GPU
//! buffers (its `GpuAllocator`, on a device of the provider's own, acquired on first use) and
//! hands back `GpuParameter`s that can be read back (for tests and checks; a program's backend
//! uses the provider from Rust, see [`HttpParameterProvider::shared_provider`]). Errors reject
//! with a `StatusError` carrying the IREE code.

use crate::backends::webgpu::{GpuAllocator, WebGpuBackend};
use crate::browser::cache::PersistentCache;
use crate::error::Status;
use crate::params::http::{
    AbortHandle, FetchTransport, HttpProvider, LoadControl, LoadObserver, LoadProgress, LoadStats,
};
use crate::params::{
    BufferAllocator, BufferPlacement, ParameterProvider, SharedProvider, StatusResult,
};
use crate::web::edge::errors::status_to_js;
use crate::web::edge::fields::{boolean, integer, optional, string};
use crate::web::providers::abort_listener::AbortListener;
use crate::web::providers::gpu_parameter::GpuParameter;
use crate::web::providers::handle::ProviderHandle;
use crate::web::providers::http_options::{
    index_option, provider_options, scope_options, span_requests,
};
use crate::web::providers::ops;
use js_sys::{Array, Function, Object, Promise, Reflect, Uint8Array};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// Calls the page's `onProgress` / `onWarning` callbacks (warnings go to `console.warn` when no
/// callback is given). A callback that throws is ignored: it must not fail a load.
pub(crate) struct JsObserver {
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

/// An [`HttpProvider`] over `fetch` configured from a JS options object (see
/// [`HttpParameterProvider::new`] for the keys), and its persistent cache when one is asked for.
pub(crate) fn provider_from_options(
    options: &JsValue,
) -> StatusResult<(HttpProvider, Option<Rc<PersistentCache>>)> {
    let (settings, fetch) = provider_options(options)?;
    let callback = |key: &str| -> StatusResult<Option<Function>> {
        optional(options, key)
            .map(|f| {
                f.dyn_into::<Function>()
                    .map_err(|_| Status::invalid_argument(format!("{key} must be a function")))
            })
            .transpose()
    };
    let observer = JsObserver {
        on_progress: callback("onProgress")?,
        on_warning: callback("onWarning")?,
    };
    let mut transport = FetchTransport::new(fetch);
    let revalidate = boolean(options, "persistentCacheRevalidate")?.unwrap_or(true);
    match string(options, "persistentCache")? {
        Some(name) => {
            transport = transport.with_persistent_cache(&name);
            if !revalidate {
                transport = transport.without_revalidation();
            }
        }
        None if !revalidate => {
            return Err(Status::invalid_argument(
                "persistentCacheRevalidate needs persistentCache (a cache name)",
            ));
        }
        None => {}
    }
    let persistent = transport.persistent_cache().cloned();
    // Shared through `Arc` as the provider requires; on wasm there is one thread.
    let transport = Arc::new(transport);
    let observer = Arc::new(observer);
    Ok((
        HttpProvider::new(transport, settings).with_observer(observer),
        persistent,
    ))
}

/// Parameters of weights files on HTTP servers (IREE's parameter provider), streamed with Range
/// requests straight into GPU buffers.
#[wasm_bindgen]
pub struct HttpParameterProvider {
    provider: Arc<HttpProvider>,
    /// The WebGPU backend whose buffers `loadToGpu` fills (created on first use).
    gpu: Rc<RefCell<Option<Rc<WebGpuBackend>>>>,
    persistent: Option<Rc<PersistentCache>>,
}

impl HttpParameterProvider {
    /// The provider itself, for a program's init context
    /// (`BackendInitContext::with_parameters`): the WebGPU backend then streams the program's
    /// parameters straight into its own GPU buffers.
    pub fn shared_provider(&self) -> SharedProvider {
        self.provider.clone()
    }
}

#[wasm_bindgen]
impl HttpParameterProvider {
    /// A provider. `options`: `concurrency` (1-8, default 2), `chunkSize`, `maxRequestSize`,
    /// `gapThreshold`, `retries`, `backoffMs`, `idleTimeoutMs`, `cache` (a `RequestCache` mode),
    /// `persistentCache` (a Cache API cache name: data responses are kept there per file
    /// version and range, written as they stream with at most 4 MiB queued per request in
    /// flight), `persistentCacheRevalidate` (default true; false: the index read is served from
    /// the cache too, so a second page load sends no request at all, and a file changed on the
    /// server is not seen until `clearPersistentCache()`), `onProgress(event)`,
    /// `onWarning(message)`. Throws `INVALID_ARGUMENT` for a bad
    /// option (`idleTimeoutMs` and `backoffMs` at most 2147483647, setTimeout's limit).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "HttpProviderOptions")] options: Option<JsValue>,
    ) -> JsResult<HttpParameterProvider> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        let (provider, persistent) = provider_from_options(&options).map_err(status_to_js)?;
        // Shared through `Arc` (see `shared_provider`); on wasm there is one thread.
        let provider = Arc::new(provider);
        crate::web::lifecycle::attach(&provider);
        Ok(Self {
            provider,
            gpu: Rc::new(RefCell::new(None)),
            persistent,
        })
    }

    /// Serves the file at `url` as `scope`, reading its index with small Range requests.
    /// `options`: `format` (`'safetensors'`, `'gguf'`, `'irpa'`, `'ptd'`), `sha256` (hex, of the
    /// whole file), `parameterSha256` (`{key: hex}`), `index` (`[{key, offset, length, dtype?,
    /// shape?}]`, an index the page already has). Rejects with the HTTP or parser error's status.
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

    /// `{length, dtype, shape}` of `key` in `scope`, or `null` (`shape` in the file's own order:
    /// innermost first for GGUF, see `ParameterDescription`).
    #[wasm_bindgen(unchecked_return_type = "ParameterDescription | null")]
    pub fn describe(&self, scope: &str, key: &str) -> JsValue {
        ops::description_to_js(self.provider.describe(scope, key))
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
        let signal = ops::parse_signal(signal).map_err(status_to_js)?;
        self.provider.notify(signal).map_err(status_to_js)
    }

    /// `length` bytes of `key` from `offset` (default: 0 and the rest of the parameter) in a
    /// new `Uint8Array`, fetched with Range requests as a load is (retries, If-Range, digests).
    /// The bytes pass through wasm memory: for checks and small parameters; weights for a
    /// program go to the GPU with `loadToGpu` or `Delegate.initWithParameters`. Rejects as
    /// `loadToGpu` does (`NOT_FOUND`, `OUT_OF_RANGE`, HTTP errors as their IREE codes).
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn read(
        &self,
        scope: String,
        key: String,
        offset: Option<f64>,
        length: Option<f64>,
    ) -> Promise {
        ops::read(self.shared_provider(), scope, key, offset, length)
    }

    /// Copies `spans` of `scope` (keys, or `{key, offset?, length?, bufferOffset?}`; spans
    /// without `bufferOffset` are packed one after another) into `target`, or into a new
    /// `Uint8Array` just long enough, with coalesced Range requests; resolves to it. Through wasm
    /// memory, as `read`.
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn gather(
        &self,
        scope: String,
        #[wasm_bindgen(unchecked_param_type = "(string | BufferSpanSpec)[]")] spans: JsValue,
        target: Option<Uint8Array>,
    ) -> Promise {
        ops::gather(self.shared_provider(), scope, spans, target)
    }

    /// Rejects with `PERMISSION_DENIED` (after `NOT_FOUND` for an unknown scope or key):
    /// files served over HTTP are read-only.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn write(&self, scope: String, key: String, offset: f64, bytes: Uint8Array) -> Promise {
        ops::write(self.shared_provider(), scope, key, offset, bytes)
    }

    /// Rejects as `write` does (no span: resolves at once).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn scatter(
        &self,
        scope: String,
        source: Uint8Array,
        #[wasm_bindgen(unchecked_param_type = "(string | BufferSpanSpec)[]")] spans: JsValue,
    ) -> Promise {
        ops::scatter(self.shared_provider(), scope, source, spans)
    }

    /// The provider for `Delegate.initWithParameters` and `ParameterProviderList` (internal).
    #[wasm_bindgen(js_name = __webdelegateProvider, skip_typescript)]
    pub fn handle(&self) -> ProviderHandle {
        ProviderHandle::new(self.shared_provider())
    }

    /// Loads parameters of `scope` into new GPU buffers: `spans` are keys (whole parameters) or
    /// `{key, offset?, length?}`. A span larger than the largest buffer the device makes
    /// (its `maxBufferSize`, or `options.maxBufferBytes` when smaller) is split at row boundaries
    /// into several buffers (`GpuParameter.pieces`), unless `options.singleBuffer` asks for one
    /// buffer per span: then it rejects with `RESOURCE_EXHAUSTED` before any byte is fetched.
    /// `options.signal`: an `AbortSignal` that cancels the load (rejecting with `CANCELLED`, no
    /// buffer kept). A GPU out of memory rejects with `RESOURCE_EXHAUSTED`, keeping no buffer.
    /// Resolves once the GPU queue has taken every write (`onSubmittedWorkDone`).
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
            let placement = BufferPlacement {
                max_buffer_bytes: match integer(&options, "maxBufferBytes").map_err(status_to_js)? {
                    Some(0) => {
                        return Err(status_to_js(Status::invalid_argument(
                            "maxBufferBytes must be at least 1",
                        )));
                    }
                    cap => cap,
                },
                split_rows: !boolean(&options, "singleBuffer")
                    .map_err(status_to_js)?
                    .unwrap_or(false),
            };
            let abort = AbortHandle::new();
            let _listener = match optional(&options, "signal") {
                Some(signal) => Some(AbortListener::attach(signal, &abort).map_err(status_to_js)?),
                None => None,
            };
            let allocator = gpu_allocator(&gpu).await.map_err(status_to_js)?;
            let control = LoadControl { abort: Some(abort) };
            let loaded = provider
                .load_pieces_with(&allocator, &scope, &requests, placement, &control)
                .await
                .map_err(status_to_js)?;
            allocator
                .submitted_work_done()
                .await
                .map_err(status_to_js)?;
            Ok(requests
                .into_iter()
                .zip(loaded)
                .map(|(request, pieces)| JsValue::from(GpuParameter::new(request.key, pieces)))
                .collect::<Array>()
                .into())
        })
    }

    /// The limits of the device `loadToGpu` loads into (acquired now when needed):
    /// `{maxBufferSize, maxStorageBufferBindingSize}`, as the device was granted them (the
    /// adapter's own, not WebGPU's defaults).
    #[wasm_bindgen(
        js_name = gpuLimits,
        unchecked_return_type = "Promise<{maxBufferSize: number, maxStorageBufferBindingSize: number}>"
    )]
    pub fn gpu_limits(&self) -> Promise {
        let gpu = self.gpu.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let allocator = gpu_allocator(&gpu).await.map_err(status_to_js)?;
            let object = Object::new();
            let _ = Reflect::set(
                &object,
                &"maxBufferSize".into(),
                &(allocator.max_buffer_size() as f64).into(),
            );
            let _ = Reflect::set(
                &object,
                &"maxStorageBufferBindingSize".into(),
                &(allocator.max_storage_binding_size() as f64).into(),
            );
            Ok(object.into())
        })
    }

    /// Counts of the last load, gather or read that finished, successfully or not:
    /// `{requestsPlanned, requestsSent, retries, bytesNeeded, bytesPlanned, bytesReceived,
    /// bytesWrittenDirect, bytesWrittenViaHost, outcome, message}` (`outcome`: `'OK'` or the
    /// IREE code it failed with, `'CANCELLED'` when aborted; `message`: its error or `null`),
    /// or `null` before the first.
    #[wasm_bindgen(js_name = lastStats, unchecked_return_type = "LoadStats | null")]
    pub fn last_stats(&self) -> JsValue {
        let Some(record) = self.provider.last_load() else {
            return JsValue::NULL;
        };
        let object = stats_to_js(record.stats);
        let (outcome, message) = match &record.outcome {
            Ok(()) => ("OK", JsValue::NULL),
            Err(status) => (status.code().name(), JsValue::from_str(status.message())),
        };
        let _ = Reflect::set(&object, &"outcome".into(), &JsValue::from_str(outcome));
        let _ = Reflect::set(&object, &"message".into(), &message);
        object
    }

    /// Deletes the persistent cache (`persistentCache` option); resolves to whether it existed.
    #[wasm_bindgen(js_name = clearPersistentCache, unchecked_return_type = "Promise<boolean>")]
    pub fn clear_persistent_cache(&self) -> Promise {
        let persistent = self.persistent.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            Ok(JsValue::from_bool(match persistent {
                Some(cache) => cache.clear().await,
                None => false,
            }))
        })
    }

    /// GPU buffers alive on the device `loadToGpu` loads into, and their bytes: `{count,
    /// bytes}` (zeros before the first load). Freeing every `GpuParameter` brings both to 0.
    #[wasm_bindgen(js_name = liveGpuBuffers, unchecked_return_type = "{count: number, bytes: number}")]
    pub fn live_gpu_buffers(&self) -> JsValue {
        let (count, bytes) = self
            .gpu
            .borrow()
            .as_ref()
            .map_or((0, 0), |b| (b.live_buffers(), b.live_buffer_bytes()));
        let object = Object::new();
        let _ = Reflect::set(&object, &"count".into(), &(count as f64).into());
        let _ = Reflect::set(&object, &"bytes".into(), &(bytes as f64).into());
        object.into()
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

/// A provider's load statistics as the JS `LoadStats` object.
pub(crate) fn stats_to_js(stats: LoadStats) -> JsValue {
    let object = Object::new();
    for (key, value) in [
        ("requestsPlanned", stats.requests_planned),
        ("requestsSent", stats.requests_sent),
        ("retries", stats.retries),
        ("bytesNeeded", stats.bytes_needed),
        ("bytesPlanned", stats.bytes_planned),
        ("bytesReceived", stats.bytes_received),
        ("bytesWrittenDirect", stats.bytes_written_direct),
        ("bytesWrittenViaHost", stats.bytes_written_via_host),
    ] {
        let _ = Reflect::set(&object, &JsValue::from_str(key), &(value as f64).into());
    }
    object.into()
}

/// An allocator of the WebGPU backend's buffers on the provider's device, acquiring the device
/// on first use (and again after it was lost).
async fn gpu_allocator(slot: &RefCell<Option<Rc<WebGpuBackend>>>) -> StatusResult<GpuAllocator> {
    let current = slot.borrow().clone();
    let backend = match current {
        Some(backend) if backend.unavailable_reason().is_none() => backend,
        _ => {
            let backend = Rc::new(WebGpuBackend::new().await);
            *slot.borrow_mut() = Some(backend.clone());
            backend
        }
    };
    backend.allocator().ok_or_else(|| {
        Status::unavailable(format!(
            "no WebGPU device for loadToGpu: {}",
            backend
                .unavailable_reason()
                .unwrap_or_else(|| "none was acquired".to_owned())
        ))
    })
}
