//! Reading JavaScript arguments as checked Rust values: fields of option objects ([`optional`],
//! [`string`], [`boolean`], [`integer`]) and positional numbers ([`count_arg`]). A field that is
//! absent, `undefined` or `null` is `None`; one of the wrong type is `INVALID_ARGUMENT` naming
//! it. Numbers must be non-negative integers no larger than `Number.MAX_SAFE_INTEGER` (a larger
//! double may not be the integer it looks like).

use crate::error::Status;
use crate::params::StatusResult;
use js_sys::Reflect;
use wasm_bindgen::prelude::*;

/// Largest integer a JS number holds exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `value` as JavaScript would write it in a message: strings quoted, numbers, booleans,
/// `null`/`undefined` as such, arrays and plain objects as JSON, anything else as `String(value)`.
pub fn js_text(value: &JsValue) -> String {
    if let Some(text) = value.as_string() {
        return format!("{text:?}");
    }
    if value.is_undefined() {
        return "undefined".into();
    }
    if value.is_null() {
        return "null".into();
    }
    if let Some(flag) = value.as_bool() {
        return flag.to_string();
    }
    if let Some(number) = value.as_f64() {
        return if number.is_nan() {
            "NaN".into()
        } else if number.is_infinite() {
            if number > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            }
            .into()
        } else {
            // JavaScript prints integral numbers without a fraction, as Rust's f64 Display does.
            number.to_string()
        };
    }
    if value.is_object()
        && !value.is_function()
        && let Some(json) = js_sys::JSON::stringify(value)
            .ok()
            .and_then(|json| json.as_string())
    {
        return json;
    }
    // A function, symbol or bigint: its type is what a message can say without running it.
    format!("a {}", value.js_typeof().as_string().unwrap_or_default())
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
                .ok_or_else(|| Status::invalid_argument(format!("{key} must be a string")))
        })
        .transpose()
}

/// `object[key]` as a boolean.
///
/// # Errors
/// `INVALID_ARGUMENT` when present and not a boolean.
pub fn boolean(object: &JsValue, key: &str) -> StatusResult<Option<bool>> {
    optional(object, key)
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| Status::invalid_argument(format!("{key} must be a boolean")))
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
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "{key} must be a non-negative integer, got {}",
                        js_text(&v)
                    ))
                })
        })
        .transpose()
}

/// A positional number argument (`what` names it) as a `u64`.
///
/// # Errors
/// `INVALID_ARGUMENT` unless a non-negative safe integer.
pub fn count_arg(value: f64, what: &str) -> StatusResult<u64> {
    if value.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER).contains(&value) {
        Ok(value as u64)
    } else {
        Err(Status::invalid_argument(format!(
            "{what} must be a non-negative integer no larger than Number.MAX_SAFE_INTEGER, got \
             {value}"
        )))
    }
}
