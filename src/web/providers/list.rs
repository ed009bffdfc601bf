//! The JavaScript face of a list of providers: `ParameterProviderList`. Each scope goes to the
//! first provider in the list that supports it (IREE's `io_parameters` rule); a scope none
//! supports is `NOT_FOUND`. Members are any provider class, lists included; later `push`es are
//! seen by programs already initialised with the list (see [`GrowingList`]).

use crate::params::{ParameterProvider, SharedProvider};
use crate::web::edge::errors::status_to_js;
use crate::web::providers::growing_list::GrowingList;
use crate::web::providers::handle::{ProviderHandle, handle_of};
use crate::web::providers::ops;
use js_sys::{Array, Promise, Uint8Array};
use std::sync::Arc;
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// Providers in priority order; itself a provider (IREE's list of providers).
#[wasm_bindgen]
pub struct ParameterProviderList {
    list: Arc<GrowingList>,
}

impl ParameterProviderList {
    /// The list itself, for a program's init context.
    pub fn shared_provider(&self) -> SharedProvider {
        self.list.clone()
    }
}

#[wasm_bindgen]
impl ParameterProviderList {
    /// A list of `providers` (first = highest priority). Throws `INVALID_ARGUMENT` for a member
    /// that is not a provider.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "ParameterProvider[]")] providers: Option<Array>,
    ) -> JsResult<ParameterProviderList> {
        // Shared through `Arc` as providers are; on wasm there is one thread.
        let list = Self {
            list: Arc::new(GrowingList::default()),
        };
        for provider in providers.iter().flat_map(|array| array.iter()) {
            list.push(&provider)?;
        }
        Ok(list)
    }

    /// Appends `provider`, with a lower priority than those already in the list. The list holds
    /// the provider itself: freeing the JavaScript object later does not remove it. Throws
    /// `INVALID_ARGUMENT` for anything but a provider.
    pub fn push(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ParameterProvider")] provider: &JsValue,
    ) -> JsResult<()> {
        let handle = handle_of(provider, "a list member").map_err(status_to_js)?;
        self.list
            .push(handle.provider().clone(), handle.list())
            .map_err(status_to_js)
    }

    /// How many providers the list holds.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.list.len()
    }

    /// Whether a provider in the list supports `scope`.
    #[wasm_bindgen(js_name = querySupport)]
    pub fn query_support(&self, scope: &str) -> bool {
        self.list.query_support(scope)
    }

    /// `{length, dtype, shape}` of `key` from the provider serving `scope`, or `null`.
    #[wasm_bindgen(unchecked_return_type = "ParameterDescription | null")]
    pub fn describe(&self, scope: &str, key: &str) -> JsValue {
        ops::description_to_js(self.list.describe(scope, key))
    }

    /// Sends the signal to every member; throws the first member's error after all were told
    /// (`INVALID_ARGUMENT` for an unknown signal name).
    pub fn notify(&self, signal: &str) -> JsResult<()> {
        let signal = ops::parse_signal(signal).map_err(status_to_js)?;
        self.list.notify(signal).map_err(status_to_js)
    }

    /// As `MemoryParameterProvider.read`, from the provider serving `scope` (`NOT_FOUND` when
    /// none does).
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

    /// As `MemoryParameterProvider.gather`, from the provider serving `scope`.
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn gather(
        &self,
        scope: String,
        #[wasm_bindgen(unchecked_param_type = "(string | BufferSpanSpec)[]")] spans: JsValue,
        target: Option<Uint8Array>,
    ) -> Promise {
        ops::gather(self.shared_provider(), scope, spans, target)
    }

    /// As `MemoryParameterProvider.write`, into the provider serving `scope`.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn write(&self, scope: String, key: String, offset: f64, bytes: Uint8Array) -> Promise {
        ops::write(self.shared_provider(), scope, key, offset, bytes)
    }

    /// As `MemoryParameterProvider.scatter`, into the provider serving `scope`.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn scatter(
        &self,
        scope: String,
        source: Uint8Array,
        #[wasm_bindgen(unchecked_param_type = "(string | BufferSpanSpec)[]")] spans: JsValue,
    ) -> Promise {
        ops::scatter(self.shared_provider(), scope, source, spans)
    }

    /// The provider for `Delegate.initWithParameters` and other lists (internal).
    #[wasm_bindgen(js_name = __webdelegateProvider, skip_typescript)]
    pub fn handle(&self) -> ProviderHandle {
        ProviderHandle::of_list(self.list.clone())
    }
}
