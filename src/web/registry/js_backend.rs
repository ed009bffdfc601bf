//! A backend written in JavaScript, adapted to [`BackendInterface`] so the registry and the
//! delegate loader treat it exactly like a Rust one.
//!
//! `init`'s context carries `namedDataMap`: ExecuTorch's named data map of the delegate's
//! named-data scope (a `NamedDataMap`, see `named_data`); absent when the caller named none;
//! a named scope the provider does not serve fails `init` with `NotFound` before the backend
//! is called.
//!
//! The object must have `isAvailable()`, `init(processed, compileSpecs, context)` and
//! `execute(handle, args, context)`; `destroy(handle)`, `setOption(options)`,
//! `getOption(options)` and `notify(signal)` (`'suspend'`, `'resume'`, `'lowMemory'`; may
//! return `{gpuBytes?, hostBytes?}` released) are optional (upstream's defaults apply when they
//! are missing). `init`
//! and `execute` may return promises. `execute` either fills `args` in place or returns a new
//! array of the same length; either way every value is validated before any reaches the caller,
//! so a faulty backend cannot leave half-written outputs.

use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::lifecycle::{Released, Signal};
use crate::registry::{
    BackendExecutionContext, BackendInitContext, BackendInterface, BackendOption,
    BackendOptionContext, CompileSpec, DelegateHandle, FreeableBuffer, LocalBoxFuture,
};
use crate::web::edge::convert::{
    compile_specs_to_js, evalues_from_js, evalues_to_js, options_from_js, options_to_js,
};
use crate::web::edge::errors::from_js_error;
use crate::web::registry::named_data::JsNamedDataMap;
use js_sys::{Array, Function, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = console, js_name = warn)]
    fn console_warn(message: &str);
}

/// The handle a JavaScript backend's `init` returned.
struct JsHandle(JsValue);

/// A JavaScript object acting as a backend.
pub struct JsBackend {
    object: JsValue,
}

impl JsBackend {
    /// Wraps `object` after checking it has the required methods.
    ///
    /// # Errors
    /// `InvalidArgument` when `object` is not an object or lacks `isAvailable`, `init` or
    /// `execute`, or has a non-function `destroy`, `setOption` or `getOption`.
    pub fn new(object: JsValue) -> Result<Self> {
        if !object.is_object() {
            return Err(Error::invalid_argument("a backend must be an object"));
        }
        let backend = Self { object };
        for required in ["isAvailable", "init", "execute"] {
            if backend.method(required)?.is_none() {
                return Err(Error::invalid_argument(format!(
                    "a JavaScript backend needs a {required}() method"
                )));
            }
        }
        for optional in ["destroy", "setOption", "getOption", "notify", "resetState"] {
            backend.method(optional)?;
        }
        Ok(backend)
    }

    /// The method `name`: `None` when absent, `InvalidArgument` when present but not a function.
    fn method(&self, name: &str) -> Result<Option<Function>> {
        let value = Reflect::get(&self.object, &JsValue::from_str(name))
            .map_err(|e| from_js_error(&e, name))?;
        if value.is_undefined() || value.is_null() {
            return Ok(None);
        }
        value.dyn_into::<Function>().map(Some).map_err(|_| {
            Error::invalid_argument(format!("backend property {name} is not a function"))
        })
    }

    /// Calls `name` with `args` and returns its result (not awaited).
    fn call(&self, name: &str, args: &[JsValue]) -> Result<Option<JsValue>> {
        let Some(function) = self.method(name)? else {
            return Ok(None);
        };
        let args: Array = args.iter().collect();
        function
            .apply(&self.object, &args)
            .map(Some)
            .map_err(|thrown| from_js_error(&thrown, name))
    }

    /// Calls `name`, a method that must answer synchronously (`isAvailable`, `setOption`,
    /// `getOption`): a promise (any thenable) is `InvalidArgument`, because the registry's
    /// answer cannot wait for it, and ignoring it would lose a rejection.
    fn call_sync(&self, name: &str, args: &[JsValue]) -> Result<Option<JsValue>> {
        let result = self.call(name, args)?;
        if let Some(value) = &result
            && is_thenable(value)
        {
            return Err(Error::invalid_argument(format!(
                "backend {name}() returned a promise; it must answer synchronously"
            )));
        }
        Ok(result)
    }

    /// Calls `name` and awaits the result if it is a promise.
    async fn call_async(&self, name: &str, args: &[JsValue]) -> Result<JsValue> {
        let result = self
            .call(name, args)?
            .ok_or_else(|| Error::not_implemented(format!("backend has no {name}()")))?;
        JsFuture::from(Promise::resolve(&result))
            .await
            .map_err(|thrown| from_js_error(&thrown, name))
    }
}

/// Whether `value` is an object with a callable `then` (a promise or promise-like).
fn is_thenable(value: &JsValue) -> bool {
    value.is_object()
        && Reflect::get(value, &JsValue::from_str("then")).is_ok_and(|then| then.is_function())
}

fn context_object(method_name: Option<&str>) -> Result<Object> {
    let object = Object::new();
    let name = method_name.map_or(JsValue::NULL, JsValue::from_str);
    Reflect::set(&object, &JsValue::from_str("methodName"), &name)
        .map_err(|e| Error::internal(format!("cannot build context: {e:?}")))?;
    Ok(object)
}

impl BackendInterface for JsBackend {
    fn is_available(&self) -> bool {
        match self.call_sync("isAvailable", &[]) {
            Ok(Some(answer)) => answer.is_truthy(),
            Ok(None) => false,
            Err(error) => {
                console_warn(&format!(
                    "backend isAvailable() failed, treated as false: {error}"
                ));
                false
            }
        }
    }

    fn init<'a>(
        &'a self,
        context: &'a BackendInitContext,
        processed: FreeableBuffer,
        compile_specs: &'a [CompileSpec],
    ) -> LocalBoxFuture<'a, Result<DelegateHandle>> {
        Box::pin(async move {
            let blob = Uint8Array::from(processed.data());
            drop(processed);
            let specs = compile_specs_to_js(compile_specs)?;
            let js_context = context_object(context.method_name())?;
            Reflect::set(
                &js_context,
                &JsValue::from_str("runtimeSpecs"),
                &options_to_js(context.runtime_specs())?,
            )
            .map_err(|e| Error::internal(format!("cannot build context: {e:?}")))?;
            if let Some(map) = context.get_named_data_map()? {
                let map: JsValue = JsNamedDataMap::new(map).into();
                Reflect::set(&js_context, &JsValue::from_str("namedDataMap"), &map)
                    .map_err(|e| Error::internal(format!("cannot build context: {e:?}")))?;
            }
            let handle = self
                .call_async("init", &[blob.into(), specs.into(), js_context.into()])
                .await?;
            Ok(DelegateHandle::new(JsHandle(handle)))
        })
    }

    fn execute<'a>(
        &'a self,
        context: &'a BackendExecutionContext,
        handle: &'a mut DelegateHandle,
        args: &'a mut [EValue],
    ) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let handle = handle
                .downcast_ref::<JsHandle>()
                .ok_or_else(|| Error::delegate_invalid_handle("not a JavaScript backend handle"))?
                .0
                .clone();
            let js_args = evalues_to_js(args)?;
            let js_context = context_object(context.method_name())?;
            let returned = self
                .call_async(
                    "execute",
                    &[handle, js_args.clone().into(), js_context.into()],
                )
                .await?;
            let results = if Array::is_array(&returned) {
                returned
            } else {
                js_args.into()
            };
            let converted = evalues_from_js(&results).map_err(|e| {
                Error::invalid_argument(format!(
                    "backend execute() produced bad args: {}",
                    e.message()
                ))
            })?;
            if converted.len() != args.len() {
                return Err(Error::invalid_argument(format!(
                    "backend execute() produced {} args for {}",
                    converted.len(),
                    args.len()
                )));
            }
            for (slot, value) in args.iter_mut().zip(converted) {
                *slot = value;
            }
            Ok(())
        })
    }

    fn set_option(&self, _: &mut BackendOptionContext, options: &[BackendOption]) -> Result<()> {
        self.call_sync("setOption", &[options_to_js(options)?])
            .map(|_| ())
    }

    fn get_option(
        &self,
        _: &mut BackendOptionContext,
        options: &mut [BackendOption],
    ) -> Result<()> {
        let request = options_to_js(options)?;
        let Some(returned) = self.call_sync("getOption", std::slice::from_ref(&request))? else {
            return Ok(());
        };
        let filled = if Array::is_array(&returned) {
            returned
        } else {
            request
        };
        let filled = options_from_js(&filled)?;
        if filled.len() != options.len() {
            return Err(Error::invalid_argument(format!(
                "backend getOption() returned {} options for {}",
                filled.len(),
                options.len()
            )));
        }
        for (option, answer) in options.iter().zip(&filled) {
            if option.key() != answer.key() {
                return Err(Error::invalid_argument(format!(
                    "backend getOption() answered {:?} where {:?} was asked",
                    answer.key(),
                    option.key()
                )));
            }
        }
        for (option, answer) in options.iter_mut().zip(filled) {
            option.set_value(answer.value().clone())?;
        }
        Ok(())
    }

    fn destroy(&self, handle: DelegateHandle) {
        let Some(JsHandle(handle)) = handle.downcast_ref::<JsHandle>() else {
            return;
        };
        if let Err(error) = self.call("destroy", std::slice::from_ref(handle)) {
            console_warn(&format!("backend destroy() failed: {error}"));
        }
    }

    fn reset_state(&self, handle: &mut DelegateHandle) -> Result<()> {
        let Some(JsHandle(handle)) = handle.downcast_ref::<JsHandle>() else {
            return Err(Error::delegate_invalid_handle(
                "the handle was not made by this JavaScript backend",
            ));
        };
        match self.call_sync("resetState", std::slice::from_ref(handle))? {
            Some(_) => Ok(()),
            None => Err(Error::not_supported(
                "this JavaScript backend has no resetState(handle) method",
            )),
        }
    }

    fn notify(&self, signal: Signal) -> Released {
        let name = match signal {
            Signal::Suspend => "suspend",
            Signal::Resume => "resume",
            Signal::LowMemory => "lowMemory",
        };
        let returned = match self.call("notify", &[JsValue::from_str(name)]) {
            Ok(returned) => returned,
            Err(error) => {
                console_warn(&format!("backend notify('{name}') failed: {error}"));
                None
            }
        };
        let bytes = |key: &str| {
            returned
                .as_ref()
                .and_then(|r| js_sys::Reflect::get(r, &JsValue::from_str(key)).ok())
                .and_then(|v| v.as_f64())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .map_or(0, |v| v as u64)
        };
        Released {
            gpu_bytes: bytes("gpuBytes"),
            host_bytes: bytes("hostBytes"),
            ..Released::default()
        }
    }
}
