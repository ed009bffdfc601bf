//! The JavaScript API of the backend registry: free functions over the process-wide registry,
//! and [`Delegate`], one initialised program on one backend.

use crate::error::Error;
use crate::params::SharedProvider;
use crate::registry::{
    self, Backend, BackendInitContext, FreeableBuffer, LoadedDelegate, MAX_REGISTERED_BACKENDS,
};
use crate::web::edge::convert::{
    compile_specs_from_js, evalues_from_js, evalues_to_js, options_from_js, options_to_js,
};
use crate::web::edge::errors::to_js_error;
use crate::web::providers::handle::shared_provider_of;
use crate::web::registry::introspect;
use crate::web::registry::js_backend::JsBackend;
use js_sys::{Promise, Reflect, Uint8Array};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// The crate version, e.g. `"0.1.0"`.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// Most backends the registry holds (16, as upstream).
#[wasm_bindgen(js_name = maxRegisteredBackends)]
pub fn max_registered_backends() -> usize {
    MAX_REGISTERED_BACKENDS
}

/// Names of the registered backends, in registration order.
#[wasm_bindgen(js_name = listBackends)]
pub fn list_backends() -> Vec<String> {
    registry::registered_backend_names()
}

/// How many backends are registered.
#[wasm_bindgen(js_name = numRegisteredBackends)]
pub fn num_registered_backends() -> usize {
    registry::get_num_registered_backends()
}

/// The name of the `index`-th registered backend; throws `InvalidArgument` past the end.
#[wasm_bindgen(js_name = backendName)]
pub fn backend_name(index: f64) -> JsResult<String> {
    let index = if index.fract() == 0.0 && index >= 0.0 && index <= usize::MAX as f64 {
        index as usize
    } else {
        return Err(to_js_error(Error::invalid_argument(format!(
            "backend index must be a non-negative integer, got {index}"
        ))));
    };
    registry::get_backend_name(index).map_err(to_js_error)
}

/// Whether a backend named `name` is registered.
#[wasm_bindgen(js_name = hasBackend)]
pub fn has_backend(name: &str) -> bool {
    registry::get_backend_class(name).is_some()
}

/// Whether the backend named `name` can run now; throws `NotFound` for an unknown name.
#[wasm_bindgen(js_name = isBackendAvailable)]
pub fn is_backend_available(name: &str) -> JsResult<bool> {
    registry::get_backend_class(name)
        .map(|backend| backend.is_available())
        .ok_or_else(|| {
            to_js_error(Error::not_found(format!(
                "no backend named {name:?} is registered"
            )))
        })
}

/// Registers a backend written in JavaScript under `name`.
///
/// Throws `InvalidArgument` for an object without `isAvailable`/`init`/`execute` or a taken name,
/// and `Internal` when the registry is full.
#[wasm_bindgen(js_name = registerBackend)]
pub fn register_backend(
    name: &str,
    #[wasm_bindgen(unchecked_param_type = "JsBackend")] backend: JsValue,
) -> JsResult<()> {
    let backend = JsBackend::new(backend).map_err(to_js_error)?;
    // The registry shares backends through `Arc`; in single-threaded wasm nothing crosses threads.
    let shared = Arc::new(backend);
    registry::register_backend(Backend::new(name, shared)).map_err(to_js_error)
}

/// Passes `options` (`[{key, value}]`) to the backend named `backendName`.
#[wasm_bindgen(js_name = setOption)]
pub fn set_option(
    #[wasm_bindgen(js_name = backendName)] backend_name: &str,
    #[wasm_bindgen(unchecked_param_type = "BackendOptionEntry[]")] options: JsValue,
) -> JsResult<()> {
    let options = options_from_js(&options).map_err(to_js_error)?;
    registry::set_option(backend_name, &options).map_err(to_js_error)
}

/// Asks the backend named `backendName` to fill in `options` and returns them filled.
#[wasm_bindgen(js_name = getOption, unchecked_return_type = "BackendOptionEntry[]")]
pub fn get_option(
    #[wasm_bindgen(js_name = backendName)] backend_name: &str,
    #[wasm_bindgen(unchecked_param_type = "BackendOptionEntry[]")] options: JsValue,
) -> JsResult<JsValue> {
    let mut options = options_from_js(&options).map_err(to_js_error)?;
    registry::get_option(backend_name, &mut options).map_err(to_js_error)?;
    options_to_js(&options).map_err(to_js_error)
}

/// Where a [`Delegate`]'s handle is.
enum Slot {
    /// Initialised and idle.
    Ready(LoadedDelegate),
    /// An `execute` holds the delegate; `destroy_after` is set if `destroy()` came meanwhile.
    Running { destroy_after: bool },
    /// `destroy()` ran.
    Destroyed,
}

/// One program initialised on one backend: `execute` it any number of times, then `destroy` it.
#[wasm_bindgen]
pub struct Delegate {
    backend_name: String,
    slot: Rc<RefCell<Slot>>,
}

/// The processed program, which must be a `Uint8Array` (`InvalidArgument` otherwise, not a
/// `TypeError`).
fn program_bytes(processed: JsValue) -> JsResult<Uint8Array> {
    processed.dyn_into::<Uint8Array>().map_err(|_| {
        to_js_error(Error::invalid_argument(
            "the processed program must be a Uint8Array",
        ))
    })
}

fn optional_property(options: &JsValue, key: &str) -> Option<JsValue> {
    if !options.is_object() {
        return None;
    }
    Reflect::get(options, &JsValue::from_str(key))
        .ok()
        .filter(|value| !value.is_undefined() && !value.is_null())
}

#[wasm_bindgen]
impl Delegate {
    /// Initialises `processed` on the registered backend `backendName`.
    ///
    /// `options` may hold `compileSpecs` (`[{key, value: Uint8Array | string}]`), `methodName`
    /// `runtimeSpecs` (`[{key, value}]`) and `namedDataScope` (the provider scope a backend's
    /// `init` reads as its named data map; with `initWithParameters`). Rejects with `NotFound`
    /// for an unknown or unavailable backend (or a named-data scope without a provider serving
    /// it), or with the backend's own `init` error.
    pub async fn init(
        #[wasm_bindgen(js_name = backendName)] backend_name: String,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] processed: JsValue,
        #[wasm_bindgen(unchecked_param_type = "DelegateInitOptions")] options: Option<JsValue>,
    ) -> JsResult<Delegate> {
        let processed = program_bytes(processed)?;
        Self::init_with(backend_name, processed, options, None).await
    }

    /// As [`init`](Delegate::init), with the program's parameters served by `parameters`: an
    /// `HttpParameterProvider` (the WebGPU backend streams them straight into its GPU buffers,
    /// and fetches them again after a `lowMemory` signal or a device loss), a
    /// `MemoryParameterProvider` or a `ParameterProviderList` (each scope from the first member
    /// serving it). Rejects with `InvalidArgument` for anything else.
    #[wasm_bindgen(js_name = initWithParameters, unchecked_return_type = "Promise<Delegate>")]
    pub fn init_with_parameters(
        #[wasm_bindgen(js_name = backendName)] backend_name: String,
        #[wasm_bindgen(unchecked_param_type = "Uint8Array")] processed: JsValue,
        #[wasm_bindgen(unchecked_param_type = "ParameterProvider")] parameters: JsValue,
        #[wasm_bindgen(unchecked_param_type = "DelegateInitOptions")] options: Option<JsValue>,
    ) -> Promise {
        let processed = match program_bytes(processed) {
            Ok(processed) => processed,
            Err(error) => return Promise::reject(&error),
        };
        let provider = match shared_provider_of(&parameters, "parameters") {
            Ok(provider) => provider,
            Err(status) => {
                return Promise::reject(&to_js_error(Error::invalid_argument(
                    status.message().to_owned(),
                )));
            }
        };
        wasm_bindgen_futures::future_to_promise(async move {
            Self::init_with(backend_name, processed, options, Some(provider))
                .await
                .map(JsValue::from)
        })
    }
}

impl Delegate {
    async fn init_with(
        backend_name: String,
        processed: Uint8Array,
        options: Option<JsValue>,
        parameters: Option<SharedProvider>,
    ) -> JsResult<Delegate> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        let compile_specs = match optional_property(&options, "compileSpecs") {
            Some(specs) => compile_specs_from_js(&specs).map_err(to_js_error)?,
            None => Vec::new(),
        };
        let mut context = BackendInitContext::new();
        if let Some(name) = optional_property(&options, "methodName") {
            let name = name.as_string().ok_or_else(|| {
                to_js_error(Error::invalid_argument("methodName must be a string"))
            })?;
            context = context.with_method_name(name);
        }
        if let Some(specs) = optional_property(&options, "runtimeSpecs") {
            context = context.with_runtime_specs(options_from_js(&specs).map_err(to_js_error)?);
        }
        if let Some(scope) = optional_property(&options, "namedDataScope") {
            let scope = scope.as_string().ok_or_else(|| {
                to_js_error(Error::invalid_argument("namedDataScope must be a string"))
            })?;
            context = context.with_named_data_scope(scope);
        }
        if let Some(parameters) = parameters {
            context = context.with_parameters(parameters);
        }
        let delegate = LoadedDelegate::init(
            &backend_name,
            FreeableBuffer::new(processed.to_vec()),
            &compile_specs,
            &context,
        )
        .await
        .map_err(to_js_error)?;
        Ok(Delegate {
            backend_name,
            slot: Rc::new(RefCell::new(Slot::Ready(delegate))),
        })
    }
}

#[wasm_bindgen]
impl Delegate {
    /// The backend that runs this delegate.
    #[wasm_bindgen(getter, js_name = backendName)]
    pub fn backend_name(&self) -> String {
        self.backend_name.clone()
    }

    /// Runs the program on `args` (inputs then outputs) and resolves to the args with outputs
    /// filled in. Rejects with `InvalidState` after `destroy()` or while another `execute` of
    /// this delegate is running.
    #[wasm_bindgen(unchecked_return_type = "Promise<EValue[]>")]
    pub fn execute(
        &self,
        #[wasm_bindgen(unchecked_param_type = "EValue[]")] args: JsValue,
    ) -> Promise {
        // Claim the delegate now, not when the promise first runs, so that `execute(); destroy();`
        // destroys after this execute rather than before it.
        let claimed = evalues_from_js(&args)
            .and_then(|values| take_for_execute(&self.slot).map(|delegate| (values, delegate)));
        let (mut values, mut delegate) = match claimed {
            Ok(claimed) => claimed,
            Err(error) => return Promise::reject(&to_js_error(error)),
        };
        let slot = Rc::clone(&self.slot);
        wasm_bindgen_futures::future_to_promise(async move {
            let outcome = delegate.execute(&mut values).await;
            let destroy_after = matches!(
                *slot.borrow(),
                Slot::Running {
                    destroy_after: true
                }
            );
            if destroy_after {
                *slot.borrow_mut() = Slot::Destroyed;
                drop(delegate);
            } else {
                *slot.borrow_mut() = Slot::Ready(delegate);
            }
            outcome.map_err(to_js_error)?;
            evalues_to_js(&values).map(Into::into).map_err(to_js_error)
        })
    }

    /// Releases the backend's resources (calls the backend's `destroy` once). Safe to call more
    /// than once; if an `execute` is running, the delegate is destroyed when it finishes.
    pub fn destroy(&self) {
        let previous = std::mem::replace(&mut *self.slot.borrow_mut(), Slot::Destroyed);
        match previous {
            Slot::Ready(delegate) => drop(delegate),
            Slot::Running { .. } => {
                *self.slot.borrow_mut() = Slot::Running {
                    destroy_after: true,
                };
            }
            Slot::Destroyed => {}
        }
    }

    /// Sets the program's state tensors (its KV cache) back to zero, and re-creates them when a
    /// device loss or a `lowMemory` allowed to drop state dropped them (the next `execute`
    /// fails with `InvalidState` until then).
    ///
    /// # Errors
    /// `InvalidState` while an `execute` runs or after `destroy()`; `NotSupported` from a
    /// backend that keeps no state.
    #[wasm_bindgen(js_name = resetState)]
    pub fn reset_state(&self) -> Result<(), JsValue> {
        let mut slot = self.slot.borrow_mut();
        match &mut *slot {
            Slot::Ready(delegate) => delegate.reset_state().map_err(to_js_error),
            Slot::Running { .. } => Err(to_js_error(Error::invalid_state(
                "resetState() while an execute is running",
            ))),
            Slot::Destroyed => Err(to_js_error(Error::invalid_state(
                "resetState() after destroy()",
            ))),
        }
    }

    /// Whether `destroy()` has taken effect.
    #[wasm_bindgen(getter)]
    pub fn destroyed(&self) -> bool {
        matches!(*self.slot.borrow(), Slot::Destroyed)
    }

    /// Where the program's bytes are, by purpose (wasm, the CPU pool's shared memory, the GPU),
    /// on either built-in backend; `null` for other backends, while executing, or after
    /// `destroy()`.
    #[wasm_bindgen(js_name = memoryStats, unchecked_return_type = "MemoryStats | null")]
    pub fn memory_stats(&self) -> JsValue {
        introspect::memory_stats(self.ready().as_deref())
    }

    /// Sizes and counts of the program (activation arena, parameters, kernels, reloads) when the
    /// WebGPU backend runs it; `null` for other backends, while executing, or after `destroy()`.
    #[wasm_bindgen(js_name = programStats, unchecked_return_type = "WebGpuProgramStats | null")]
    pub fn program_stats(&self) -> JsValue {
        introspect::program_stats(self.ready().as_deref())
    }

    /// Per-op GPU timings of the last execute that ran with the WebGPU backend's `profiling`
    /// option on (`setOption('webgpu', [{key: 'profiling', value: true}])`); `null` when none
    /// ran, for other backends, while executing, or after `destroy()`.
    #[wasm_bindgen(js_name = lastProfile, unchecked_return_type = "WebGpuProfile | null")]
    pub fn last_profile(&self) -> JsValue {
        introspect::last_profile(self.ready().as_deref())
    }
}

impl Delegate {
    /// The loaded delegate while it is neither executing nor destroyed.
    fn ready(&self) -> Option<std::cell::Ref<'_, LoadedDelegate>> {
        std::cell::Ref::filter_map(self.slot.borrow(), |slot| match slot {
            Slot::Ready(delegate) => Some(delegate),
            _ => None,
        })
        .ok()
    }
}

fn take_for_execute(slot: &RefCell<Slot>) -> crate::error::Result<LoadedDelegate> {
    let mut slot = slot.borrow_mut();
    match std::mem::replace(
        &mut *slot,
        Slot::Running {
            destroy_after: false,
        },
    ) {
        Slot::Ready(delegate) => Ok(delegate),
        running @ Slot::Running { .. } => {
            *slot = running;
            Err(Error::invalid_state(
                "this delegate is already executing; await the running execute first",
            ))
        }
        Slot::Destroyed => {
            *slot = Slot::Destroyed;
            Err(Error::invalid_state("this delegate was destroyed"))
        }
    }
}
