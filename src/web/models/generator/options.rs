//! `Generator.load`'s and `generate`'s own options, read from the JS objects and checked before
//! anything runs: every field has its type and range, and anything else is `InvalidArgument`
//! naming the option. The HTTP provider's keys in the load options (`onProgress`, ...) are read
//! by `provider_from_options`.

use crate::error::{Error, Result};
use crate::models::generator::GenerateOptions;
use crate::web::edge::fields::{boolean, integer, js_text, optional, string};
use crate::web::loading::{
    BackendLoadOptions, cpu_activations_option, gpu_precision_option, threads_option,
};
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;

/// What `Generator.load` was asked to do.
pub(super) struct LoadOptions {
    /// `"auto"`, `"webgpu"`, `"cpu"` or a registered backend's name.
    pub backend: String,
    /// Positions asked for (`None`: [`DEFAULT_CONTEXT`](crate::models::decoder::DEFAULT_CONTEXT), capped by the model).
    pub context: Option<u64>,
    /// Whether the program also outputs logits (for `evaluate`).
    pub logits: bool,
    /// The built-in backends' options: `threads`, `cpuActivations` and `gpuPrecision`.
    pub specs: BackendLoadOptions,
    /// Aborts the load.
    pub signal: Option<web_sys::AbortSignal>,
    /// A chat template to use instead of the file's `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

fn invalid(status: crate::error::Status) -> Error {
    Error::invalid_argument(status.message().to_owned())
}

/// `options.signal` as an `AbortSignal`.
pub(super) fn signal(options: &JsValue) -> Result<Option<web_sys::AbortSignal>> {
    optional(options, "signal")
        .map(|value| {
            value.dyn_into::<web_sys::AbortSignal>().map_err(|value| {
                Error::invalid_argument(format!(
                    "signal must be an AbortSignal, got {}",
                    js_text(&value)
                ))
            })
        })
        .transpose()
}

impl LoadOptions {
    /// Reads and checks `options` (`undefined` or `null`: every default).
    ///
    /// # Errors
    /// `InvalidArgument` naming the first bad option.
    pub fn from_js(options: &JsValue) -> Result<Self> {
        let backend = string(options, "backend")
            .map_err(invalid)?
            .unwrap_or_else(|| "auto".into());
        if backend.is_empty() {
            return Err(Error::invalid_argument("backend must not be empty"));
        }
        let context = integer(options, "contextLength").map_err(invalid)?;
        if context == Some(0) {
            return Err(Error::invalid_argument("contextLength must be at least 1"));
        }
        Ok(Self {
            backend,
            context,
            logits: boolean(options, "logits")
                .map_err(invalid)?
                .unwrap_or(false),
            specs: BackendLoadOptions {
                threads: threads_option(options)?,
                activations: cpu_activations_option(options)?,
                gpu_precision: gpu_precision_option(options)?,
            },
            signal: signal(options)?,
            chat_template: string(options, "chatTemplate").map_err(invalid)?,
        })
    }
}

/// A finite number option within `range`.
pub(super) fn number(
    options: &JsValue,
    key: &str,
    range: std::ops::RangeInclusive<f64>,
) -> Result<Option<f64>> {
    optional(options, key)
        .map(|v| {
            v.as_f64()
                .filter(|n| n.is_finite() && range.contains(n))
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "{key} must be a number in {}..={}, got {}",
                        range.start(),
                        range.end(),
                        js_text(&v)
                    ))
                })
        })
        .transpose()
}

/// `options.stop`: a string or an array of strings.
///
/// # Errors
/// `InvalidArgument` for anything else.
pub(super) fn stop_strings(options: &JsValue) -> Result<Option<Vec<String>>> {
    let Some(stop) = optional(options, "stop") else {
        return Ok(None);
    };
    if let Some(one) = stop.as_string() {
        return Ok(Some(vec![one]));
    }
    if !js_sys::Array::is_array(&stop) {
        return Err(Error::invalid_argument(
            "stop must be a string or an array of strings",
        ));
    }
    js_sys::Array::from(&stop)
        .iter()
        .map(|s| {
            s.as_string()
                .ok_or_else(|| Error::invalid_argument("stop must hold only strings"))
        })
        .collect::<Result<_>>()
        .map(Some)
}

/// `generate`'s options and its `signal`.
///
/// # Errors
/// `InvalidArgument` naming the first bad option.
#[allow(clippy::cast_possible_truncation)]
pub(super) fn generate_options(
    options: &JsValue,
) -> Result<(GenerateOptions, Option<web_sys::AbortSignal>)> {
    let mut out = GenerateOptions::default();
    if let Some(n) = integer(options, "maxNewTokens").map_err(invalid)? {
        out.max_new_tokens = u32::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| {
            Error::invalid_argument(format!("maxNewTokens must be 1..=2^32-1, got {n}"))
        })?;
    }
    if let Some(t) = number(options, "temperature", 0.0..=100.0)? {
        out.temperature = t as f32;
    }
    if let Some(k) = integer(options, "topK").map_err(invalid)? {
        out.top_k = u32::try_from(k).unwrap_or(u32::MAX);
    }
    if let Some(p) = number(options, "topP", 0.0..=1.0)? {
        out.top_p = p as f32;
    }
    if let Some(seed) = integer(options, "seed").map_err(invalid)? {
        out.seed = seed;
    }
    if let Some(stop) = stop_strings(options)? {
        out.stop = stop;
    }
    if let Some(add) = boolean(options, "addSpecial").map_err(invalid)? {
        out.add_special = add;
    }
    if let Some(parse) = boolean(options, "parseSpecial").map_err(invalid)? {
        out.parse_special = parse;
    }
    Ok((out, signal(options)?))
}

/// `evaluate`'s `logitPositions` (default none); their order is checked by the evaluation.
///
/// # Errors
/// `InvalidArgument` for anything but an array of integers in `0..2^32`.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(super) fn evaluate_options(options: &JsValue) -> Result<Vec<u32>> {
    let Some(positions) = optional(options, "logitPositions") else {
        return Ok(Vec::new());
    };
    if !js_sys::Array::is_array(&positions) {
        return Err(Error::invalid_argument(
            "logitPositions must be an array of positions",
        ));
    }
    js_sys::Array::from(&positions)
        .iter()
        .map(|p| {
            p.as_f64()
                .filter(|n| n.fract() == 0.0 && (0.0..4_294_967_296.0).contains(n))
                .map(|n| n as u32)
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "logitPositions must hold integer positions, got {}",
                        js_text(&p)
                    ))
                })
        })
        .collect()
}
