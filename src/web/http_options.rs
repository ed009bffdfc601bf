//! Reading the HTTP provider's option objects from JavaScript: every number must be a
//! non-negative integer within `Number.MAX_SAFE_INTEGER`, every string a string; anything else
//! is `INVALID_ARGUMENT` naming the option.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::HttpProviderOptions;
use crate::params::http::fetch::FetchOptions;
use js_sys::Reflect;
use std::time::Duration;
use wasm_bindgen::prelude::*;

/// Largest integer a JS number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

fn invalid(message: String) -> Status {
    Status::new(StatusCode::InvalidArgument, message)
}

/// `object[key]`, or `None` when absent, `undefined` or `null` (or `object` is not an object).
pub fn optional(object: &JsValue, key: &str) -> Option<JsValue> {
    if !object.is_object() {
        return None;
    }
    Reflect::get(object, &JsValue::from_str(key))
        .ok()
        .filter(|value| !value.is_undefined() && !value.is_null())
}

/// `object[key]` as a string.
///
/// # Errors
/// `INVALID_ARGUMENT` when present and not a string.
pub fn string(object: &JsValue, key: &str) -> StatusResult<Option<String>> {
    optional(object, key)
        .map(|v| {
            v.as_string()
                .ok_or_else(|| invalid(format!("{key} must be a string")))
        })
        .transpose()
}

/// `object[key]` as a non-negative integer.
///
/// # Errors
/// `INVALID_ARGUMENT` when present and not a non-negative safe integer.
pub fn integer(object: &JsValue, key: &str) -> StatusResult<Option<u64>> {
    optional(object, key)
        .map(|v| {
            v.as_f64()
                .filter(|n| n.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER).contains(n))
                .map(|n| n as u64)
                .ok_or_else(|| invalid(format!("{key} must be a non-negative integer, got {v:?}")))
        })
        .transpose()
}

fn cache_mode(name: &str) -> StatusResult<web_sys::RequestCache> {
    use web_sys::RequestCache as C;
    Ok(match name {
        "default" => C::Default,
        "no-store" => C::NoStore,
        "reload" => C::Reload,
        "no-cache" => C::NoCache,
        "force-cache" => C::ForceCache,
        other => return Err(invalid(format!("unknown cache mode {other:?}"))),
    })
}

/// The provider and transport settings in `options` (defaults for what is absent).
///
/// # Errors
/// `INVALID_ARGUMENT` naming the first bad option.
pub fn provider_options(options: &JsValue) -> StatusResult<(HttpProviderOptions, FetchOptions)> {
    let mut settings = HttpProviderOptions::default();
    let mut fetch = FetchOptions::default();
    if let Some(n) = integer(options, "concurrency")? {
        if n == 0 || n > 8 {
            return Err(invalid(format!("concurrency must be 1 to 8, got {n}")));
        }
        settings.concurrency = n as usize;
    }
    if let Some(n) = integer(options, "chunkSize")? {
        settings.chunk_size = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(n) = integer(options, "maxRequestSize")? {
        settings.max_request_size = n;
    }
    if let Some(n) = integer(options, "gapThreshold")? {
        settings.gap_threshold = n;
    }
    if let Some(n) = integer(options, "retries")? {
        settings.retry.retries = u32::try_from(n).unwrap_or(u32::MAX);
    }
    if let Some(n) = integer(options, "backoffMs")? {
        settings.retry.backoff_base = Duration::from_millis(n);
        settings.retry.backoff_max = settings.retry.backoff_max.max(Duration::from_millis(n));
    }
    if let Some(n) = integer(options, "idleTimeoutMs")? {
        if n == 0 {
            return Err(invalid("idleTimeoutMs must be positive".to_owned()));
        }
        fetch.idle_timeout = Duration::from_millis(n);
    }
    if let Some(name) = string(options, "cache")? {
        fetch.cache = cache_mode(&name)?;
    }
    Ok((settings.normalized(), fetch))
}
