//! The JavaScript face of a list of providers: `ParameterProviderList`. Each scope goes to the
//! first provider in the list that supports it (IREE's `io_parameters` rule); a scope none
//! supports is `NOT_FOUND`. Members are any provider class, lists included; later `push`es are
//! seen by programs already initialised with the list.

use crate::error::{Status, StatusCode};
use crate::params::{
    BufferAllocator, LoadedSpan, ParameterBuffer, ParameterInfo, ParameterProvider, ProviderList,
    SharedProvider, Signal, SpanRequest, StatusResult,
};
use crate::send_sync::LocalBoxFuture;
use crate::web::errors::status_to_js;
use crate::web::provider_handle::{ProviderHandle, handle_of};
use crate::web::provider_ops;
use js_sys::{Array, Promise, Uint8Array};
use std::sync::{Arc, Mutex};
use wasm_bindgen::prelude::*;

type JsResult<T> = std::result::Result<T, JsValue>;

/// A [`ProviderList`] that can grow while programs use it: every call works on the members of
/// the moment (the lock is never held across an await).
#[derive(Default)]
pub(crate) struct GrowingList {
    list: Mutex<ProviderList>,
    /// Members that are lists themselves (to refuse a list that would contain itself).
    sublists: Mutex<Vec<Arc<GrowingList>>>,
}

impl GrowingList {
    /// Whether `other` is this list or (transitively) one of its members. Terminates: the
    /// lists form a DAG, as `push` refuses cycles.
    fn contains(self: &Arc<Self>, other: &Arc<GrowingList>) -> bool {
        Arc::ptr_eq(self, other)
            || self
                .sublists
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone()
                .iter()
                .any(|sublist| sublist.contains(other))
    }

    fn snapshot(&self) -> ProviderList {
        self.list
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn push(&self, provider: SharedProvider) {
        self.list
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(provider);
    }
}

impl ParameterProvider for GrowingList {
    fn notify(&self, signal: Signal) -> StatusResult<()> {
        self.snapshot().notify(signal)
    }

    fn query_support(&self, scope: &str) -> bool {
        self.snapshot().query_support(scope)
    }

    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
        self.snapshot().describe(scope, key)
    }

    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
        Box::pin(async move {
            let provider = self.snapshot().provider_for(scope)?.clone();
            provider.load(allocator, scope, requests).await
        })
    }

    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let provider = self.snapshot().provider_for(scope)?.clone();
            provider.gather(scope, target, requests).await
        })
    }

    fn scatter<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let provider = self.snapshot().provider_for(scope)?.clone();
            provider.scatter(source, scope, requests).await
        })
    }
}

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
        if let Some(member) = handle.list() {
            if member.contains(&self.list) {
                return Err(status_to_js(Status::new(
                    StatusCode::InvalidArgument,
                    "a ParameterProviderList cannot contain itself",
                )));
            }
            self.list
                .sublists
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(member.clone());
        }
        self.list.push(handle.provider().clone());
        Ok(())
    }

    /// How many providers the list holds.
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.list.snapshot().len()
    }

    /// Whether a provider in the list supports `scope`.
    #[wasm_bindgen(js_name = querySupport)]
    pub fn query_support(&self, scope: &str) -> bool {
        self.list.query_support(scope)
    }

    /// `{length, dtype, shape}` of `key` from the provider serving `scope`, or `null`.
    #[wasm_bindgen(unchecked_return_type = "ParameterDescription | null")]
    pub fn describe(&self, scope: &str, key: &str) -> JsValue {
        provider_ops::description_to_js(self.list.describe(scope, key))
    }

    /// Sends the signal to every member; throws the first member's error after all were told
    /// (`INVALID_ARGUMENT` for an unknown signal name).
    pub fn notify(&self, signal: &str) -> JsResult<()> {
        let signal = provider_ops::parse_signal(signal).map_err(status_to_js)?;
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
        provider_ops::read(self.shared_provider(), scope, key, offset, length)
    }

    /// As `MemoryParameterProvider.gather`, from the provider serving `scope`.
    #[wasm_bindgen(unchecked_return_type = "Promise<Uint8Array>")]
    pub fn gather(
        &self,
        scope: String,
        #[wasm_bindgen(unchecked_param_type = "(string | BufferSpanSpec)[]")] spans: JsValue,
        target: Option<Uint8Array>,
    ) -> Promise {
        provider_ops::gather(self.shared_provider(), scope, spans, target)
    }

    /// As `MemoryParameterProvider.write`, into the provider serving `scope`.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn write(&self, scope: String, key: String, offset: f64, bytes: Uint8Array) -> Promise {
        provider_ops::write(self.shared_provider(), scope, key, offset, bytes)
    }

    /// As `MemoryParameterProvider.scatter`, into the provider serving `scope`.
    #[wasm_bindgen(unchecked_return_type = "Promise<void>")]
    pub fn scatter(
        &self,
        scope: String,
        source: Uint8Array,
        #[wasm_bindgen(unchecked_param_type = "(string | BufferSpanSpec)[]")] spans: JsValue,
    ) -> Promise {
        provider_ops::scatter(self.shared_provider(), scope, source, spans)
    }

    /// The provider for `Delegate.initWithParameters` and other lists (internal).
    #[wasm_bindgen(js_name = __webdelegateProvider, skip_typescript)]
    pub fn handle(&self) -> ProviderHandle {
        ProviderHandle::of_list(self.list.clone())
    }
}
