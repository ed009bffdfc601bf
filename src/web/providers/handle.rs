//! How a JavaScript provider object reaches Rust as a [`SharedProvider`] without giving itself
//! up: each provider class has a hidden method that hands out a fresh [`ProviderHandle`] (a
//! wasm-bindgen class JavaScript never sees in the typings), which Rust then takes by value.
//! Only a genuine handle passes wasm-bindgen's `instanceof` check, so an arbitrary object with a
//! look-alike method cannot smuggle anything in.

use crate::error::Status;
use crate::params::{SharedProvider, StatusResult};
use crate::web::providers::growing_list::GrowingList;
use js_sys::{Function, Reflect};
use std::sync::Arc;
use wasm_bindgen::JsCast;
use wasm_bindgen::convert::TryFromJsValue;
use wasm_bindgen::prelude::*;

/// The hidden method's name.
const HANDLE_METHOD: &str = "__webdelegateProvider";

/// A provider in transit from a JavaScript provider object to Rust.
#[wasm_bindgen(skip_typescript)]
pub struct ProviderHandle {
    provider: SharedProvider,
    /// The list itself, when the provider is a `ParameterProviderList` (to refuse cycles).
    list: Option<Arc<GrowingList>>,
}

impl ProviderHandle {
    /// A handle to `provider`.
    pub fn new(provider: SharedProvider) -> Self {
        Self {
            provider,
            list: None,
        }
    }

    /// A handle to a list.
    pub fn of_list(list: Arc<GrowingList>) -> Self {
        Self {
            provider: list.clone(),
            list: Some(list),
        }
    }

    /// The provider.
    pub fn provider(&self) -> &SharedProvider {
        &self.provider
    }

    /// The list, when the provider is one.
    pub fn list(&self) -> Option<&Arc<GrowingList>> {
        self.list.as_ref()
    }
}

/// The provider behind `value`: an `HttpParameterProvider`, a `MemoryParameterProvider` or a
/// `ParameterProviderList`.
///
/// # Errors
/// `INVALID_ARGUMENT` for anything else (including a provider already freed).
pub fn shared_provider_of(value: &JsValue, what: &str) -> StatusResult<SharedProvider> {
    handle_of(value, what).map(|handle| handle.provider)
}

/// The handle of the provider behind `value` (see [`shared_provider_of`]).
///
/// # Errors
/// As [`shared_provider_of`].
pub fn handle_of(value: &JsValue, what: &str) -> StatusResult<ProviderHandle> {
    let wrong = || {
        Status::invalid_argument(format!(
            "{what} must be an HttpParameterProvider, a MemoryParameterProvider or a \
                 ParameterProviderList (not freed)"
        ))
    };
    if !value.is_object() {
        return Err(wrong());
    }
    let method = Reflect::get(value, &JsValue::from_str(HANDLE_METHOD))
        .ok()
        .and_then(|m| m.dyn_into::<Function>().ok())
        .ok_or_else(wrong)?;
    let handle = method.call0(value).map_err(|_| wrong())?;
    ProviderHandle::try_from_js_value(handle).map_err(|_| wrong())
}
