//! Reading the HTTP provider's option objects from JavaScript (the provider's settings,
//! `addScope`'s options and index, `loadToGpu`'s spans), field by field with the checked readers
//! of [`crate::web::edge::fields`]: anything malformed is `INVALID_ARGUMENT` naming the option.

use crate::browser::fetch::CacheMode;
use crate::browser::timer::MAX_TIMEOUT_MS;
use crate::error::Status;
use crate::params::http::{
    FetchOptions, HttpProvider, HttpProviderOptions, ScopeOptions, parse_sha256,
};
use crate::params::{
    EntryStorage, IndexEntry, ParameterIndex, ParameterProvider, SpanRequest, StatusResult,
};
use crate::web::edge::fields::{integer, optional, string};
use js_sys::{Array, Object};
use std::time::Duration;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;

/// Rejects a delay a browser timer cannot hold: `setTimeout` takes a signed 32-bit count of
/// milliseconds (about 24.8 days), and a longer one fires at once, so an `idleTimeoutMs` past it
/// would time every request out. Rejected rather than clamped: a value that large is a mistake,
/// and a clear error says so.
fn check_timeout(key: &str, milliseconds: u64) -> StatusResult<()> {
    if milliseconds as f64 > MAX_TIMEOUT_MS {
        return Err(Status::invalid_argument(format!(
            "{key} must be at most {MAX_TIMEOUT_MS} ms (setTimeout's limit, about 24.8 days), \
             got {milliseconds}"
        )));
    }
    Ok(())
}

fn cache_mode(name: &str) -> StatusResult<CacheMode> {
    use CacheMode as C;
    Ok(match name {
        "default" => C::Default,
        "no-store" => C::NoStore,
        "reload" => C::Reload,
        "no-cache" => C::NoCache,
        "force-cache" => C::ForceCache,
        other => {
            return Err(Status::invalid_argument(format!(
                "unknown cache mode {other:?}"
            )));
        }
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
            return Err(Status::invalid_argument(format!(
                "concurrency must be 1 to 8, got {n}"
            )));
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
        check_timeout("backoffMs", n)?;
        settings.retry.backoff_base = Duration::from_millis(n);
        settings.retry.backoff_max = settings.retry.backoff_max.max(Duration::from_millis(n));
    }
    if let Some(n) = integer(options, "idleTimeoutMs")? {
        if n == 0 {
            return Err(Status::invalid_argument("idleTimeoutMs must be positive"));
        }
        check_timeout("idleTimeoutMs", n)?;
        fetch.idle_timeout = Duration::from_millis(n);
    }
    if let Some(name) = string(options, "cache")? {
        fetch.cache = cache_mode(&name)?;
    }
    Ok((settings.normalized(), fetch))
}

/// `addScope`'s options: format and digests.
///
/// # Errors
/// `INVALID_ARGUMENT` for a malformed option.
pub fn scope_options(options: &JsValue) -> StatusResult<ScopeOptions> {
    let sha = |value: JsValue, what: &str| -> StatusResult<[u8; 32]> {
        value
            .as_string()
            .and_then(|hex| parse_sha256(&hex))
            .ok_or_else(|| Status::invalid_argument(format!("{what} must be 64 hex digits")))
    };
    let mut parsed = ScopeOptions {
        format: string(options, "format")?,
        sha256: optional(options, "sha256")
            .map(|v| sha(v, "sha256"))
            .transpose()?,
        parameter_sha256: Vec::new(),
    };
    if let Some(map) = optional(options, "parameterSha256") {
        let object = map.dyn_into::<Object>().map_err(|_| {
            Status::invalid_argument("parameterSha256 must be an object {key: hex}")
        })?;
        for pair in Object::entries(&object).iter() {
            let pair = Array::from(&pair);
            let key = pair
                .get(0)
                .as_string()
                .ok_or_else(|| Status::invalid_argument("parameterSha256 keys must be strings"))?;
            let digest = sha(pair.get(1), &format!("parameterSha256[{key:?}]"))?;
            parsed.parameter_sha256.push((key, digest));
        }
    }
    Ok(parsed)
}

/// `addScope`'s `index` option, when given.
///
/// # Errors
/// `INVALID_ARGUMENT` for a malformed entry.
pub fn index_option(options: &JsValue) -> StatusResult<Option<ParameterIndex>> {
    let Some(entries) = optional(options, "index") else {
        return Ok(None);
    };
    if !Array::is_array(&entries) {
        return Err(Status::invalid_argument(
            "index must be an array of {key, offset, length}",
        ));
    }
    let mut parsed = Vec::new();
    for entry in Array::from(&entries).iter() {
        let key = string(&entry, "key")?
            .ok_or_else(|| Status::invalid_argument("index entries need a key"))?;
        let offset = integer(&entry, "offset")?
            .ok_or_else(|| Status::invalid_argument("index entries need an offset"))?;
        let length = integer(&entry, "length")?
            .ok_or_else(|| Status::invalid_argument("index entries need a length"))?;
        let shape = match optional(&entry, "shape") {
            Some(shape) if Array::is_array(&shape) => Some(
                Array::from(&shape)
                    .iter()
                    .map(|d| {
                        d.as_f64()
                            .filter(|d| *d >= 0.0 && d.fract() == 0.0)
                            .map(|d| d as u64)
                    })
                    .collect::<Option<Vec<u64>>>()
                    .ok_or_else(|| {
                        Status::invalid_argument(format!(
                            "shape of {key:?} must hold non-negative integers"
                        ))
                    })?,
            ),
            Some(_) => {
                return Err(Status::invalid_argument(format!(
                    "shape of {key:?} must be an array"
                )));
            }
            None => None,
        };
        parsed.push(IndexEntry {
            dtype: string(&entry, "dtype")?,
            key,
            length,
            storage: EntryStorage::Data { offset },
            shape,
        });
    }
    Ok(Some(ParameterIndex::new(parsed, None)))
}

/// `loadToGpu`'s spans: keys (whole parameters) or `{key, offset?, length?}`.
///
/// # Errors
/// `INVALID_ARGUMENT` for a malformed span.
pub fn span_requests(
    provider: &HttpProvider,
    scope: &str,
    spans: &JsValue,
) -> StatusResult<Vec<SpanRequest>> {
    if !Array::is_array(spans) {
        return Err(Status::invalid_argument(
            "spans must be an array of keys or {key, offset?, length?}",
        ));
    }
    let mut requests = Vec::new();
    for item in Array::from(spans).iter() {
        let (key, offset, length) = match item.as_string() {
            Some(key) => (key, None, None),
            None => (
                string(&item, "key")?
                    .ok_or_else(|| Status::invalid_argument("a span needs a key"))?,
                integer(&item, "offset")?,
                integer(&item, "length")?,
            ),
        };
        let offset = offset.unwrap_or(0);
        let length = match length {
            Some(length) => length,
            // The rest of the parameter (an unknown key fails in the load with NOT_FOUND).
            None => provider
                .describe(scope, &key)
                .map_or(0, |info| info.length.saturating_sub(offset)),
        };
        requests.push(SpanRequest {
            key,
            span: crate::params::Span {
                parameter_offset: offset,
                buffer_offset: 0,
                length,
            },
        });
    }
    Ok(requests)
}
