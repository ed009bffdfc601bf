//! The JavaScript face of the in-memory parameter provider: `MemoryParameterProvider`. Scopes
//! are read-only or writable; parameters are inserted as bytes (copied into wasm memory) and
//! read, gathered, written and scattered with IREE's semantics. A program initialised with it
//! (`Delegate.initWithParameters`) takes its parameters from here, on any backend.

use crate::error::Status;
use crate::params::{MemoryProvider, ParameterProvider, SharedProvider, StatusResult};
use crate::web::edge::errors::status_to_js;
use crate::web::edge::fields::{count_arg, optional, string};
use crate::web::providers::handle::ProviderHandle;
use crate::web::providers::ops;
use js_sys::{Array, Promise, Uint8Array};
use std::sync::Arc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// `insert`'s options: `dtype` (a string) and `shape` (non-negative integers).
fn described(options: &JsValue) -> StatusResult<(Option<String>, Option<Vec<u64>>)> {
    let dtype = string(options, "dtype")?;
    let shape = match optional(options, "shape") {
        None => None,
        Some(shape) if Array::is_array(&shape) => Some(
            Array::from(&shape)
                .iter()
                .map(|d| {
                    d.as_f64()
                        .ok_or_else(|| Status::invalid_argument("shape must hold numbers"))
                        .and_then(|d| count_arg(d, "a shape dimension"))
                })
                .collect::<StatusResult<Vec<u64>>>()?,
        ),
        Some(_) => return Err(Status::invalid_argument("shape must be an array")),
    };
    Ok((dtype, shape))
}

/// Parameters held in memory, in read-only or writable scopes (IREE's parameter provider).
#[wasm_bindgen]
pub struct MemoryParameterProvider {
    provider: Arc<MemoryProvider>,
}

impl MemoryParameterProvider {
    /// The provider itself, for a program's init context.
    pub fn shared_provider(&self) -> SharedProvider {
        self.provider.clone()
    }
}

impl Default for MemoryParameterProvider {
    fn default() -> Self {
        Self::new()
    }
}

#[wasm_bindgen]
impl MemoryParameterProvider {
    /// An empty provider.
    #[wasm_bindgen(constructor)]
    pub fn new() -> MemoryParameterProvider {
        Self {
            provider: Arc::new(MemoryProvider::new()),
        }
    }

    /// Adds (or replaces, emptied) the scope `name`; `options.writable` (default false) allows
    /// `write` and `scatter`. Throws `INVALID_ARGUMENT` for a bad option.
    #[wasm_bindgen(js_name = addScope)]
    pub fn add_scope(
        &self,
        name: &str,
        #[wasm_bindgen(unchecked_param_type = "MemoryScopeOptions")] options: Option<JsValue>,
    ) -> JsResult<()> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        let writable = match optional(&options, "writable") {
            None => false,
            Some(value) => value.as_bool().ok_or_else(|| {
                status_to_js(Status::invalid_argument("writable must be a boolean"))
            })?,
        };
        self.provider.add_scope(name, writable);
        Ok(())
    }

    /// Adds parameter `key` to `scope` (a read-only scope is created if needed) holding a copy
    /// of `bytes`; `options`: `dtype`, `shape` (what `describe` reports). A key added twice
    /// keeps the first, as upstream's lookup finds the first match.
    pub fn insert(
        &self,
        scope: &str,
        key: &str,
        bytes: &Uint8Array,
        #[wasm_bindgen(unchecked_param_type = "ParameterInsertOptions")] options: Option<JsValue>,
    ) -> JsResult<()> {
        let (dtype, shape) =
            described(&options.unwrap_or(JsValue::UNDEFINED)).map_err(status_to_js)?;
        self.provider
            .insert_described(scope, key, bytes.to_vec(), dtype, shape);
        Ok(())
    }

    /// Whether `scope` exists.
    #[wasm_bindgen(js_name = querySupport)]
    pub fn query_support(&self, scope: &str) -> bool {
        self.provider.query_support(scope)
    }

    /// Whether `scope` exists and is writable.
    #[wasm_bindgen(js_name = isWritable)]
    pub fn is_writable(&self, scope: &str) -> bool {
        self.provider.is_writable(scope)
    }

    /// `{length, dtype, shape}` of `key` in `scope`, or `null`.
    #[wasm_bindgen(unchecked_return_type = "ParameterDescription | null")]
    pub fn describe(&self, scope: &str, key: &str) -> JsValue {
        ops::description_to_js(self.provider.describe(scope, key))
    }

    /// The keys of `scope`, in insertion order (empty for an unknown scope).
    pub fn keys(&self, scope: &str) -> Vec<String> {
        self.provider.keys(scope)
    }

    /// `'resume'`, `'suspend'` or `'lowMemory'`: accepted and ignored (the bytes are the
    /// source; nothing can be dropped and re-created). Throws `INVALID_ARGUMENT` for another
    /// name.
    pub fn notify(&self, signal: &str) -> JsResult<()> {
        let signal = ops::parse_signal(signal).map_err(status_to_js)?;
        self.provider.notify(signal).map_err(status_to_js)
    }

    /// `length` bytes of `key` from `offset` (default: 0 and the rest of the parameter).
    /// Rejects with `NOT_FOUND` (scope or key), `OUT_OF_RANGE` (past the parameter's end,
    /// overflow-safe) or `INVALID_ARGUMENT` (not a safe non-negative integer).
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

    /// Copies `spans` of `scope` into `target` at their buffer offsets, or into a new
    /// `Uint8Array` just long enough; resolves to it. No span: resolves at once.
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn gather(
        &self,
        scope: String,
        #[wasm_bindgen(unchecked_param_type = "(string | BufferSpanSpec)[]")] spans: JsValue,
        target: Option<Uint8Array>,
    ) -> Promise {
        ops::gather(self.shared_provider(), scope, spans, target)
    }

    /// Writes `bytes` into `key` of `scope` from `offset`. Rejects with `PERMISSION_DENIED` for
    /// a read-only scope (after `NOT_FOUND` for an unknown key, as upstream).
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn write(&self, scope: String, key: String, offset: f64, bytes: Uint8Array) -> Promise {
        ops::write(self.shared_provider(), scope, key, offset, bytes)
    }

    /// Writes each span's bytes, taken from `source` at its buffer offset, into its parameter.
    /// All spans are checked before a byte moves.
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
}
