//! Errors across the JavaScript edge, both ways.
//!
//! Rust -> JS: every error becomes a `WebDelegateError` (an `Error` subclass) with `code` (the
//! ExecuTorch name) and `codeValue` (its number, as in the exported `ErrorCode`); the parameter
//! providers' IREE statuses become its subclass `StatusError`, with the IREE name
//! (`"NOT_FOUND"`) and number (5). JS -> Rust: whatever a JavaScript backend throws
//! becomes an [`Error`]: its `code` (a name or a number) is kept when it is an ExecuTorch code,
//! anything else is `Internal`, and the message is kept either way.

use crate::error::{Error, ErrorCode, Status};
use crate::web::edge::error_code::JsErrorCode;
use js_sys::Reflect;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(module = "/src/web/edge/errors.js")]
extern "C" {
    #[wasm_bindgen(js_name = makeWebDelegateError)]
    fn make_web_delegate_error(code: &str, code_value: u32, message: &str) -> JsValue;

    #[wasm_bindgen(js_name = makeStatusError)]
    fn make_status_error(code: &str, code_value: u32, message: &str) -> JsValue;
}

/// The `StatusError` for an IREE `status`.
pub fn status_to_js(status: Status) -> JsValue {
    make_status_error(
        status.code().name(),
        status.code() as u32,
        &status.to_string(),
    )
}

/// The `WebDelegateError` for `error`.
pub fn to_js_error(error: Error) -> JsValue {
    let code = error.code();
    make_web_delegate_error(
        code.name(),
        JsErrorCode::from(code) as u32,
        &error.to_string(),
    )
}

/// The [`Error`] for a value a JavaScript backend threw from `method`.
pub fn from_js_error(thrown: &JsValue, method: &str) -> Error {
    let property = |name: &str| {
        if thrown.is_object() {
            Reflect::get(thrown, &JsValue::from_str(name)).ok()
        } else {
            None
        }
    };
    let code = property("code").and_then(|code| {
        code.as_string()
            .and_then(|name| ErrorCode::from_name(&name))
            .or_else(|| code.as_f64().and_then(code_from_number))
    });
    let message = property("message")
        .and_then(|message| message.as_string())
        .or_else(|| thrown.as_string())
        .unwrap_or_else(|| format!("{thrown:?}"));
    match code {
        Some(code) if code != ErrorCode::Ok => Error::new(code, message),
        _ => Error::internal(format!("JavaScript backend's {method} threw: {message}")),
    }
}

fn code_from_number(value: f64) -> Option<ErrorCode> {
    if value.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&value) {
        return None;
    }
    ErrorCode::from_u32(value as u32)
}
