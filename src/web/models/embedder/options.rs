//! `Embedder.load`'s own options, read from the JS object and checked before anything is
//! fetched: `backend` and `weights` must be strings, `maxTokens` and `batchSize` integers in
//! their ranges (converted without truncation: `2 ** 32 + 16` is out of range on wasm32, not
//! 16), `signal` an `AbortSignal`. Anything else is `InvalidArgument` naming the option. The
//! HTTP provider's keys in the same object are read by `provider_from_options`.

use crate::error::{Error, Result};
use crate::web::edge::fields::{integer, optional, string};
use crate::web::loading::{gpu_precision_option, threads_option};
use std::ops::RangeInclusive;
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;

/// Texts per execution unless `options.batchSize` says otherwise.
const DEFAULT_BATCH: usize = 16;
/// Allowed `batchSize` values.
pub(super) const BATCH_RANGE: RangeInclusive<usize> = 1..=1024;
/// Allowed `maxTokens` values before the model's own limit (`max_position_embeddings`) is
/// known: room for `[CLS]` and `[SEP]`, and at most 64 Ki tokens.
pub(super) const MAX_TOKENS_RANGE: RangeInclusive<usize> = 2..=65_536;

/// What `Embedder.load` was asked to do.
pub(super) struct LoadOptions {
    /// `"auto"`, `"webgpu"`, `"cpu"` or a registered backend's name.
    pub backend: String,
    /// The weights file in the model directory.
    pub weights: String,
    /// Truncation length asked for (`None`: the model directory's).
    pub max_tokens: Option<usize>,
    /// Texts per execution.
    pub batch_size: usize,
    /// The most CPU threads the program runs on (`threads`), if given.
    pub threads: Option<usize>,
    /// The WebGPU backend's precision (`gpuPrecision`), if given.
    pub gpu_precision: Option<String>,
    /// Aborts the load.
    pub signal: Option<web_sys::AbortSignal>,
}

/// `options[key]` as a `usize` within `range`.
///
/// # Errors
/// `InvalidArgument` naming `key` for a value that is not a non-negative integer or lies
/// outside `range` (including one a `usize` cannot hold).
fn usize_in(options: &JsValue, key: &str, range: &RangeInclusive<usize>) -> Result<Option<usize>> {
    let Some(n) = integer(options, key)
        .map_err(|status| Error::invalid_argument(status.message().to_owned()))?
    else {
        return Ok(None);
    };
    match usize::try_from(n) {
        Ok(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(Error::invalid_argument(format!(
            "{key} must be an integer in {}..={}, got {n}",
            range.start(),
            range.end()
        ))),
    }
}

impl LoadOptions {
    /// Reads and checks `options` (`undefined` or `null`: every default).
    ///
    /// # Errors
    /// `InvalidArgument` naming the first bad option.
    pub fn from_js(options: &JsValue) -> Result<Self> {
        let backend = string(options, "backend")
            .map_err(|status| Error::invalid_argument(status.message().to_owned()))?
            .unwrap_or_else(|| "auto".into());
        if backend.is_empty() {
            return Err(Error::invalid_argument("backend must not be empty"));
        }
        let weights = string(options, "weights")
            .map_err(|status| Error::invalid_argument(status.message().to_owned()))?
            .unwrap_or_else(|| "model.safetensors".into());
        if weights.is_empty() {
            return Err(Error::invalid_argument("weights must not be empty"));
        }
        let batch_size = usize_in(options, "batchSize", &BATCH_RANGE)?.unwrap_or(DEFAULT_BATCH);
        let max_tokens = usize_in(options, "maxTokens", &MAX_TOKENS_RANGE)?;
        let signal = optional(options, "signal")
            .map(|value| {
                value.dyn_into::<web_sys::AbortSignal>().map_err(|value| {
                    Error::invalid_argument(format!(
                        "signal must be an AbortSignal, got {}",
                        crate::web::edge::fields::js_text(&value)
                    ))
                })
            })
            .transpose()?;
        Ok(Self {
            backend,
            weights,
            max_tokens,
            batch_size,
            threads: threads_option(options)?,
            gpu_precision: gpu_precision_option(options)?,
            signal,
        })
    }
}
