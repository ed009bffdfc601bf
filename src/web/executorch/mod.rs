//! `Module`: an ExecuTorch program in the browser, as ExecuTorch's own `extension/wasm` bindings
//! shape it (`Module.load`, `methodNames`, `methodMeta`, `forward`, `execute`), with its
//! weights streamed from the `.ptd` by HTTP Range into the backend's buffers.
//!
//! `Module.load(pteUrl, { data, backend, signal, onProgress, ... })` fetches the `.pte` whole
//! (a program without its weights is small), parses and checks it ([`crate::pte::PteFile`]),
//! registers the `.ptd` (when given) with an HTTP parameter provider under the named-data scope,
//! and loads every method: each delegate whose id is the webdelegate partitioner's
//! (`WebDelegateBackend`) runs on the chosen backend (`'auto'`: WebGPU, else the CPU; see
//! [`crate::web::loading`]), any other id on the backend registered under it (a JavaScript
//! backend included). Only the header and index of the `.ptd` are read before `init`; each
//! delegate's `init` then streams the tensors it names. The load races `signal`.
//!
//! Calls run one at a time in call order (a `FifoSlot`), and `destroy()` frees everything (at
//! once when idle, else after the running call).

mod types;

use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::fifo_slot::{FifoSlot, SlotClosed};
use crate::params::http::{HttpProvider, ScopeOptions};
use crate::params::{ParameterProvider, SharedProvider};
use crate::pte::{
    Method, MethodLoadOptions, MethodPlan, NAMED_DATA_SCOPE, PteFile, ValueSpec,
    WEBDELEGATE_BACKEND_ID, scalar_type_code,
};
use crate::web::edge::convert::{evalue_from_js, evalues_to_js};
use crate::web::edge::errors::to_js_error;
use crate::web::edge::fields;
use crate::web::loading::{candidates, fetch_bytes, race_abort, status_error};
use crate::web::providers::http::provider_from_options;
use crate::web::providers::ops::parse_signal;
use js_sys::{Array, Object, Promise, Reflect};
use std::sync::Arc;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

type JsResult<T> = std::result::Result<T, JsValue>;

/// The largest `.pte` `Module.load` fetches (a program without its weights is small; a file
/// with its weights inside belongs split into a `.pte` and a `.ptd`).
const MAX_PTE_BYTES: usize = 256 << 20;

/// `Module.load`'s options besides the HTTP provider's.
struct LoadOptions {
    data: Option<String>,
    backend: String,
    signal: Option<web_sys::AbortSignal>,
}

impl LoadOptions {
    fn from_js(options: &JsValue) -> Result<Self> {
        let invalid =
            |status: crate::error::Status| Error::invalid_argument(status.message().to_owned());
        let backend = fields::string(options, "backend")
            .map_err(invalid)?
            .unwrap_or_else(|| "auto".to_owned());
        if backend.is_empty() {
            return Err(Error::invalid_argument(
                "backend must be 'auto' or the name of a registered backend",
            ));
        }
        let signal = match Reflect::get(options, &JsValue::from_str("signal")) {
            Ok(value) if value.is_undefined() || value.is_null() => None,
            Ok(value) => Some(
                value
                    .dyn_into::<web_sys::AbortSignal>()
                    .map_err(|_| Error::invalid_argument("signal must be an AbortSignal"))?,
            ),
            Err(_) => None,
        };
        Ok(Self {
            data: fields::string(options, "data").map_err(invalid)?,
            backend,
            signal,
        })
    }
}

/// The loaded methods, in file order.
struct Methods {
    methods: Vec<Method>,
}

/// An ExecuTorch program loaded from a `.pte` (and its `.ptd`).
#[wasm_bindgen]
pub struct Module {
    backend: String,
    fallback: Option<String>,
    names: Vec<String>,
    plans: Vec<MethodPlan>,
    delegate_backends: Vec<Vec<String>>,
    provider: Option<Arc<HttpProvider>>,
    methods: FifoSlot<Methods>,
}

#[wasm_bindgen]
impl Module {
    /// Loads the program at `pteUrl`. `options`: `data` (the `.ptd` URL, when the weights are
    /// external), `backend` (where the webdelegate partitioner's delegates run: `'auto'`, the
    /// default, for WebGPU else the CPU, or the name of any registered backend, a JavaScript
    /// one included), `signal` (AbortSignal), and the HTTP provider's options
    /// (`onProgress`, `concurrency`, `persistentCache`, `retries`, ...). Rejects with a
    /// `WebDelegateError`: `AccessFailed` when a file cannot be fetched, `InvalidProgram` for a
    /// malformed `.pte`, `NotSupported` / `OperatorMissing` for a program this runtime cannot
    /// run (naming what), `NotFound` for a delegate whose backend nobody registered or a
    /// weight the `.ptd` lacks, `InvalidExternalData` for a `.ptd` that does not match,
    /// `InvalidState` when aborted.
    pub async fn load(
        #[wasm_bindgen(js_name = pteUrl)] pte_url: String,
        #[wasm_bindgen(unchecked_param_type = "ModuleLoadOptions")] options: Option<JsValue>,
    ) -> JsResult<Module> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        Self::load_inner(&pte_url, &options)
            .await
            .map_err(to_js_error)
    }

    async fn load_inner(pte_url: &str, js_options: &JsValue) -> Result<Module> {
        let options = LoadOptions::from_js(js_options)?;
        let (provider, _cache) = provider_from_options(js_options)
            .map_err(|s| Error::invalid_argument(s.message().to_owned()))?;
        let provider = Arc::new(provider);
        crate::web::lifecycle::attach(&provider);
        let loaded = race_abort(
            load_program(pte_url, &options, &provider),
            options.signal.as_ref(),
            &provider,
        )
        .await?;
        let (file, methods, backend, fallback) = loaded;
        let plans: Vec<MethodPlan> = file.methods().to_vec();
        let delegate_backends = methods
            .iter()
            .map(|m| {
                m.delegates()
                    .iter()
                    .map(|d| d.backend_id().to_owned())
                    .collect()
            })
            .collect();
        Ok(Module {
            backend,
            fallback,
            names: plans.iter().map(|p| p.name().to_owned()).collect(),
            plans,
            delegate_backends,
            provider: options.data.is_some().then_some(provider),
            methods: FifoSlot::new(Methods { methods }),
        })
    }

    /// The names of the program's methods (e.g. `['forward']`).
    #[wasm_bindgen(getter, js_name = methodNames)]
    pub fn method_names(&self) -> Vec<String> {
        self.names.clone()
    }

    /// The registered backend that runs the webdelegate partitioner's delegates (e.g.
    /// `'webgpu'`).
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.clone()
    }

    /// Why the preferred backends were skipped, when `'auto'` fell back.
    #[wasm_bindgen(getter, js_name = fallbackReason)]
    pub fn fallback_reason(&self) -> Option<String> {
        self.fallback.clone()
    }

    /// What method `name` takes and returns: `{ name, inputs, outputs, delegates,
    /// instructions }`, each input or output `{ tag, dtype?, shape?, dynamism? }` (the shape's
    /// extents are upper bounds when `dynamism` is `'dynamic_bound'`), each delegate
    /// `{ id, backend }`.
    #[wasm_bindgen(js_name = methodMeta, unchecked_return_type = "MethodMeta")]
    pub fn method_meta(&self, name: &str) -> JsResult<JsValue> {
        let at = self.method_index(name).map_err(to_js_error)?;
        method_meta(&self.plans[at], &self.delegate_backends[at]).map_err(to_js_error)
    }

    /// Runs `forward` (see [`Module::execute`]).
    #[wasm_bindgen(unchecked_return_type = "Promise<EValue[]>")]
    pub fn forward(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ModuleInput[]")] inputs: JsValue,
    ) -> Promise {
        self.execute("forward", inputs)
    }

    /// Runs method `name` on `inputs` (tensors as `{ dtype, shape, data }` — `dtype` may be left
    /// out and is then read from the typed array — or tagged EValues) and resolves to its
    /// outputs as EValues (`{ tag: 'Tensor', dtype, shape, data }`). Calls run one at a time, in
    /// call order. Rejects with `InvalidArgument` for inputs that do not match
    /// `methodMeta(name)`, `InvalidState` after `destroy()`, or the delegate's error.
    #[wasm_bindgen(unchecked_return_type = "Promise<EValue[]>")]
    pub fn execute(
        &self,
        name: &str,
        #[wasm_bindgen(unchecked_param_type = "ModuleInput[]")] inputs: JsValue,
    ) -> Promise {
        let turn = self.methods.acquire();
        let prepared = self
            .method_index(name)
            .and_then(|at| Ok((at, inputs_from_js(&inputs)?)));
        wasm_bindgen_futures::future_to_promise(async move {
            let (at, inputs) = prepared.map_err(to_js_error)?;
            let mut methods = turn.await.map_err(|closed| {
                to_js_error(Error::invalid_state(match closed {
                    SlotClosed::Before => "this module was destroyed",
                    SlotClosed::WhileWaiting => {
                        "this module was destroyed while the call waited for the one before it"
                    }
                }))
            })?;
            let outputs = methods.methods[at]
                .execute(inputs)
                .await
                .map_err(to_js_error)?;
            drop(methods);
            Ok(evalues_to_js(&outputs).map_err(to_js_error)?.into())
        })
    }

    /// Sets every method's delegate state (a KV cache) back to zero. Rejects with
    /// `InvalidState` after `destroy()`.
    #[wasm_bindgen(js_name = resetState)]
    pub fn reset_state(&self) -> Promise {
        let turn = self.methods.acquire();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut methods = turn
                .await
                .map_err(|_| to_js_error(Error::invalid_state("this module was destroyed")))?;
            for method in &mut methods.methods {
                method.reset_state().map_err(to_js_error)?;
            }
            Ok(JsValue::UNDEFINED)
        })
    }

    /// The `.ptd` provider's statistics over all its loads (`LoadStats`), or `null`
    /// when the program has no external data.
    #[wasm_bindgen(js_name = loadStats)]
    pub fn load_stats(&self) -> JsValue {
        let Some(provider) = &self.provider else {
            return JsValue::NULL;
        };
        crate::web::providers::http::stats_to_js(provider.total_stats())
    }

    /// Sends a signal (`'suspend'`, `'resume'`, `'lowMemory'`) to this module's `.ptd`
    /// provider only (the page's lifecycle already reaches every provider and backend).
    pub fn notify(&self, signal: &str) -> JsResult<()> {
        let signal = parse_signal(signal)
            .map_err(|s| to_js_error(Error::invalid_argument(s.message().to_owned())))?;
        match &self.provider {
            Some(provider) => provider
                .notify(signal)
                .map_err(|s| to_js_error(status_error(s))),
            None => Ok(()),
        }
    }

    /// Frees the program (its delegates' GPU buffers included): at once when idle, else when
    /// the running call finishes. Waiting and later calls reject with `InvalidState`.
    pub fn destroy(&self) {
        self.methods.close();
    }
}

impl Module {
    fn method_index(&self, name: &str) -> Result<usize> {
        self.names.iter().position(|n| n == name).ok_or_else(|| {
            Error::invalid_argument(format!(
                "the program has no method {name:?}; its methods are {:?}",
                self.names
            ))
        })
    }
}

type Loaded = (PteFile, Vec<Method>, String, Option<String>);

/// Fetches and parses the `.pte`, indexes the `.ptd`, and loads every method on the first
/// candidate backend that accepts them all.
async fn load_program(
    pte_url: &str,
    options: &LoadOptions,
    provider: &Arc<HttpProvider>,
) -> Result<Loaded> {
    let _ = JsFuture::from(crate::web::registry::defaults::ready()).await;
    let signal = options.signal.as_ref();
    let (bytes, ()) = futures_util::future::try_join(
        async {
            let bytes = fetch_bytes(pte_url, false, signal)
                .await?
                .unwrap_or_default();
            if bytes.len() > MAX_PTE_BYTES {
                return Err(Error::not_supported(format!(
                    "{pte_url}: a .pte of {} bytes; keep the weights in a .ptd (external tag) \
                     so they stream into the backend's buffers",
                    bytes.len()
                )));
            }
            Ok(bytes)
        },
        async {
            match &options.data {
                Some(url) => provider
                    .add_scope(NAMED_DATA_SCOPE, url, ScopeOptions::default())
                    .await
                    .map_err(status_error),
                None => Ok(()),
            }
        },
    )
    .await?;
    let file = PteFile::parse(bytes)
        .map_err(|e| Error::new(e.code(), format!("{pte_url}: {}", e.message())))?;
    let external: Option<SharedProvider> = options
        .data
        .as_ref()
        .map(|_| Arc::clone(provider) as SharedProvider);
    let (names, mut notes) = candidates(&options.backend);
    let mut last_error = None;
    for backend in names {
        let method_options = MethodLoadOptions {
            backends: vec![(WEBDELEGATE_BACKEND_ID.to_owned(), backend.clone())],
            external_data: external.clone(),
            ..MethodLoadOptions::default()
        };
        match load_methods(&file, &method_options).await {
            Ok(methods) => {
                let fallback = (!notes.is_empty()).then(|| notes.join("; "));
                return Ok((file, methods, backend, fallback));
            }
            Err(error) if !retry_on_next_backend(&error) => return Err(error),
            Err(error) => {
                notes.push(format!("{backend} failed: {error}"));
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

/// Whether a failed load may succeed on the next candidate backend: not for an abort, a
/// program this runtime cannot run, or external data that does not match (those fail the
/// same way everywhere).
fn retry_on_next_backend(error: &Error) -> bool {
    use crate::error::ErrorCode as C;
    !matches!(
        error.code(),
        C::InvalidState | C::InvalidProgram | C::OperatorMissing | C::InvalidExternalData
    )
}

async fn load_methods(file: &PteFile, options: &MethodLoadOptions) -> Result<Vec<Method>> {
    let mut methods = Vec::with_capacity(file.methods().len());
    for plan in file.methods() {
        methods.push(Method::load(file, plan.name(), options).await?);
    }
    Ok(methods)
}

/// Method inputs from JavaScript: tagged EValues, or tensors without a tag whose `dtype` may be
/// left to the typed array.
fn inputs_from_js(inputs: &JsValue) -> Result<Vec<EValue>> {
    let items = crate::web::edge::convert::array_items(inputs, "inputs")?;
    items
        .iter()
        .enumerate()
        .map(|(at, item)| {
            input_from_js(item)
                .map_err(|e| Error::new(e.code(), format!("inputs[{at}]: {}", e.message())))
        })
        .collect()
}

fn input_from_js(item: &JsValue) -> Result<EValue> {
    let get = |key: &str| Reflect::get(item, &JsValue::from_str(key)).unwrap_or(JsValue::UNDEFINED);
    if !item.is_object() {
        return Err(Error::invalid_argument(
            "expected a tensor { dtype, shape, data } or a tagged EValue",
        ));
    }
    if !get("tag").is_undefined() {
        return evalue_from_js(item);
    }
    let tagged = Object::new();
    let set = |key: &str, value: &JsValue| {
        Reflect::set(&tagged, &JsValue::from_str(key), value)
            .map_err(|_| Error::internal("could not build a tensor object"))
    };
    let data = get("data");
    let dtype = match get("dtype").as_string() {
        Some(dtype) => dtype,
        None => dtype_of_typed_array(&data)?.to_owned(),
    };
    set("tag", &JsValue::from_str("Tensor"))?;
    set("dtype", &JsValue::from_str(&dtype))?;
    set("shape", &get("shape"))?;
    set("data", &data)?;
    evalue_from_js(&tagged)
}

fn dtype_of_typed_array(data: &JsValue) -> Result<&'static str> {
    Ok(if data.is_instance_of::<js_sys::Float32Array>() {
        "float32"
    } else if data.is_instance_of::<js_sys::Float64Array>() {
        "float64"
    } else if data.is_instance_of::<js_sys::Int32Array>() {
        "int32"
    } else if data.is_instance_of::<js_sys::BigInt64Array>() {
        "int64"
    } else if data.is_instance_of::<js_sys::Uint8Array>() {
        "uint8"
    } else {
        return Err(Error::invalid_argument(
            "tensor data must be a Float32Array, Float64Array, Int32Array, BigInt64Array or \
             Uint8Array (or give dtype)",
        ));
    })
}

fn set(object: &Object, key: &str, value: &JsValue) -> Result<()> {
    Reflect::set(object, &JsValue::from_str(key), value)
        .map(|_| ())
        .map_err(|_| Error::internal(format!("could not set {key}")))
}

fn value_meta(plan: &MethodPlan, index: usize) -> Result<JsValue> {
    let object = Object::new();
    let value = &plan.values()[index];
    set(&object, "tag", &JsValue::from_str(value.tag()))?;
    if let ValueSpec::Tensor(spec) = value {
        set(&object, "dtype", &JsValue::from_str(spec.dtype.name()))?;
        let shape: Array = spec
            .sizes
            .iter()
            .map(|&d| JsValue::from_f64(d as f64))
            .collect();
        set(&object, "shape", &shape)?;
        set(
            &object,
            "dynamism",
            &JsValue::from_str(spec.dynamism.name()),
        )?;
        set(
            &object,
            "scalarType",
            &JsValue::from_f64(f64::from(scalar_type_code(spec.dtype))),
        )?;
    }
    Ok(object.into())
}

fn method_meta(plan: &MethodPlan, backends: &[String]) -> Result<JsValue> {
    let object = Object::new();
    set(&object, "name", &JsValue::from_str(plan.name()))?;
    let list = |indices: &[usize]| -> Result<Array> {
        indices.iter().map(|&i| value_meta(plan, i)).collect()
    };
    set(&object, "inputs", &list(plan.inputs())?.into())?;
    set(&object, "outputs", &list(plan.outputs())?.into())?;
    let delegates: Array = plan
        .delegates()
        .iter()
        .zip(backends)
        .map(|(delegate, backend)| {
            let entry = Object::new();
            set(&entry, "id", &JsValue::from_str(&delegate.id))?;
            set(&entry, "backend", &JsValue::from_str(backend))?;
            Ok(JsValue::from(entry))
        })
        .collect::<Result<_>>()?;
    set(&object, "delegates", &delegates.into())?;
    set(
        &object,
        "instructions",
        &JsValue::from_f64(plan.instruction_count() as f64),
    )?;
    Ok(object.into())
}
