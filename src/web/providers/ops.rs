//! The operations every JavaScript parameter provider class shares (`HttpParameterProvider`,
//! `MemoryParameterProvider`, `ParameterProviderList`), written once over
//! [`ParameterProvider`]: `describe`, `notify`, and the host-memory `read`, `gather`, `write`
//! and `scatter`, with IREE's semantics (an unknown key `NOT_FOUND`, a span past the parameter or
//! the buffer `OUT_OF_RANGE`, writing a read-only scope `PERMISSION_DENIED`, no span a no-op).
//!
//! Numbers from JavaScript must be non-negative integers no larger than
//! `Number.MAX_SAFE_INTEGER` (a larger double may not be the integer it looks like):
//! anything else is `INVALID_ARGUMENT`. Every host buffer is allocated fallibly
//! (`RESOURCE_EXHAUSTED`). Errors reject with a `StatusError`.

use crate::error::Status;
use crate::params::{
    HostBuffer, ParameterInfo, ParameterProvider, SharedProvider, Signal, Span, SpanRequest,
    StatusResult, check_span,
};
use crate::web::edge::errors::status_to_js;
use crate::web::edge::fields::{count_arg, integer, string};
use js_sys::{Array, Object, Promise, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;

/// `'resume' | 'suspend' | 'lowMemory'` as a [`Signal`].
///
/// # Errors
/// `INVALID_ARGUMENT` for any other name.
pub fn parse_signal(signal: &str) -> StatusResult<Signal> {
    match signal {
        "resume" => Ok(Signal::Resume),
        "suspend" => Ok(Signal::Suspend),
        "lowMemory" => Ok(Signal::LowMemory),
        other => Err(Status::invalid_argument(format!(
            "unknown signal {other:?} (resume | suspend | lowMemory)"
        ))),
    }
}

/// `{length, dtype, shape, rowMajorShape}`, or `null`.
pub fn description_to_js(info: Option<ParameterInfo>) -> JsValue {
    let Some(info) = info else {
        return JsValue::NULL;
    };
    let object = Object::new();
    let dtype = info
        .dtype
        .as_ref()
        .map_or(JsValue::NULL, |d| JsValue::from_str(d));
    let dims = |shape: Option<Vec<u64>>| {
        shape.map_or(JsValue::NULL, |shape| {
            shape
                .iter()
                .map(|&d| JsValue::from_f64(d as f64))
                .collect::<Array>()
                .into()
        })
    };
    let row_major = dims(info.row_major_shape());
    for (k, v) in [
        ("length", JsValue::from_f64(info.length as f64)),
        ("dtype", dtype),
        ("shape", dims(info.shape)),
        ("rowMajorShape", row_major),
    ] {
        let _ = Reflect::set(&object, &JsValue::from_str(k), &v);
    }
    object.into()
}

/// The spans of a `gather` or `scatter`: keys (whole parameters) or `{key, offset?, length?,
/// bufferOffset?}`. `length` defaults to the rest of the parameter (0 for a key the provider
/// does not know: the operation then fails with `NOT_FOUND`); `bufferOffset` defaults to the end
/// of the previous span (spans packed one after another). Returns the spans and the end of the
/// furthest one in the buffer.
///
/// # Errors
/// `INVALID_ARGUMENT` for a malformed span; `OUT_OF_RANGE` when a buffer end overflows.
pub fn buffer_spans(
    provider: &dyn ParameterProvider,
    scope: &str,
    spans: &JsValue,
) -> StatusResult<(Vec<SpanRequest>, u64)> {
    if !Array::is_array(spans) {
        return Err(Status::invalid_argument(
            "spans must be an array of keys or {key, offset?, length?, bufferOffset?}",
        ));
    }
    let mut requests = Vec::new();
    let mut packed_end = 0u64;
    let mut extent = 0u64;
    for item in Array::from(spans).iter() {
        let (key, offset, length, buffer_offset) = match item.as_string() {
            Some(key) => (key, None, None, None),
            None => (
                string(&item, "key")?
                    .ok_or_else(|| Status::invalid_argument("a span needs a key"))?,
                integer(&item, "offset")?,
                integer(&item, "length")?,
                integer(&item, "bufferOffset")?,
            ),
        };
        let parameter_offset = offset.unwrap_or(0);
        let length = match length {
            Some(length) => length,
            None => provider
                .describe(scope, &key)
                .map_or(0, |info| info.length.saturating_sub(parameter_offset)),
        };
        let buffer_offset = buffer_offset.unwrap_or(packed_end);
        let end = buffer_offset.checked_add(length).ok_or_else(|| {
            Status::out_of_range(format!(
                "span of {key:?}: {length} bytes at buffer offset {buffer_offset} overflow"
            ))
        })?;
        packed_end = end;
        extent = extent.max(end);
        requests.push(SpanRequest {
            key,
            span: Span {
                parameter_offset,
                buffer_offset,
                length,
            },
        });
    }
    Ok((requests, extent))
}

/// Checks each span against what the provider describes of its parameter (when it knows it), so
/// a span past its parameter is `OUT_OF_RANGE` before a buffer for it is allocated. A key the
/// provider does not describe is left for the operation itself to report (`NOT_FOUND`).
///
/// # Errors
/// `OUT_OF_RANGE` for a span past its parameter's end.
fn check_parameter_spans(
    provider: &dyn ParameterProvider,
    scope: &str,
    requests: &[SpanRequest],
) -> StatusResult<()> {
    for request in requests {
        if let Some(info) = provider.describe(scope, &request.key) {
            check_span(
                &format!("parameter {:?} of scope {scope:?}", request.key),
                request.span.parameter_offset,
                request.span.length,
                info.length,
            )?;
        }
    }
    Ok(())
}

fn reject(status: Status) -> Promise {
    Promise::reject(&status_to_js(status))
}

/// `read(scope, key, offset?, length?)`: `length` bytes of `key` from `offset` (default: 0 and
/// the rest of the parameter) in a new `Uint8Array`.
pub fn read(
    provider: SharedProvider,
    scope: String,
    key: String,
    offset: Option<f64>,
    length: Option<f64>,
) -> Promise {
    let parsed = (|| -> StatusResult<(u64, u64, u64)> {
        let offset = offset.map_or(Ok(0), |o| count_arg(o, "offset"))?;
        let info = provider.describe(&scope, &key);
        let length = match length {
            Some(length) => count_arg(length, "length")?,
            None => info
                .as_ref()
                .map_or(0, |info| info.length.saturating_sub(offset)),
        };
        // Bounds before allocation; an unknown key gets an empty buffer and NOT_FOUND below.
        let size = match info {
            Some(info) => {
                check_span(
                    &format!("parameter {key:?} of scope {scope:?}"),
                    offset,
                    length,
                    info.length,
                )?;
                length
            }
            None => 0,
        };
        Ok((offset, length, size))
    })();
    let (offset, length, size) = match parsed {
        Ok(parsed) => parsed,
        Err(status) => return reject(status),
    };
    wasm_bindgen_futures::future_to_promise(async move {
        let target = HostBuffer::zeroed(size).map_err(status_to_js)?;
        provider
            .read(&scope, &key, offset, &target, 0, length)
            .await
            .map_err(status_to_js)?;
        Ok(Uint8Array::from(target.into_bytes().as_slice()).into())
    })
}

/// `gather(scope, spans, target?)`: the spans copied into `target` at their buffer offsets
/// (checked against its length), or into a new `Uint8Array` just long enough for them.
pub fn gather(
    provider: SharedProvider,
    scope: String,
    spans: JsValue,
    target: Option<Uint8Array>,
) -> Promise {
    let parsed = buffer_spans(&*provider, &scope, &spans).and_then(|(requests, extent)| {
        check_parameter_spans(&*provider, &scope, &requests)?;
        Ok((requests, extent))
    });
    let (requests, extent) = match parsed {
        Ok(parsed) => parsed,
        Err(status) => return reject(status),
    };
    wasm_bindgen_futures::future_to_promise(async move {
        let buffer = match &target {
            Some(target) => HostBuffer::from_bytes(target.to_vec()),
            None => HostBuffer::zeroed(extent).map_err(status_to_js)?,
        };
        provider
            .gather(&scope, &buffer, &requests)
            .await
            .map_err(status_to_js)?;
        let bytes = buffer.into_bytes();
        Ok(match target {
            Some(target) => {
                target.copy_from(&bytes);
                target.into()
            }
            None => Uint8Array::from(bytes.as_slice()).into(),
        })
    })
}

/// `write(scope, key, offset, bytes)`: `bytes` written into `key` from `offset`.
pub fn write(
    provider: SharedProvider,
    scope: String,
    key: String,
    offset: f64,
    bytes: Uint8Array,
) -> Promise {
    let offset = match count_arg(offset, "offset") {
        Ok(offset) => offset,
        Err(status) => return reject(status),
    };
    let length = u64::from(bytes.length());
    let source = HostBuffer::from_bytes(bytes.to_vec());
    wasm_bindgen_futures::future_to_promise(async move {
        provider
            .write(&source, 0, &scope, &key, offset, length)
            .await
            .map_err(status_to_js)?;
        Ok(JsValue::UNDEFINED)
    })
}

/// `scatter(scope, source, spans)`: each span's bytes, taken from `source` at its buffer offset,
/// written into its parameter.
pub fn scatter(
    provider: SharedProvider,
    scope: String,
    source: Uint8Array,
    spans: JsValue,
) -> Promise {
    let (requests, _) = match buffer_spans(&*provider, &scope, &spans) {
        Ok(parsed) => parsed,
        Err(status) => return reject(status),
    };
    let source = HostBuffer::from_bytes(source.to_vec());
    wasm_bindgen_futures::future_to_promise(async move {
        provider
            .scatter(&source, &scope, &requests)
            .await
            .map_err(status_to_js)?;
        Ok(JsValue::UNDEFINED)
    })
}
