//! Typed reads of a GGUF file's metadata for the decoder builders: every value is checked
//! (type, sign, range) and every error names its key, so hostile metadata is refused before
//! any tensor is declared.

use crate::error::{Error, ErrorCode, Result};
use crate::params::formats::gguf::{GgufArray, GgufValue};

/// Largest accepted extent of any hyper-parameter, far above real models, so hostile metadata
/// cannot make the builder declare absurd tensors.
pub(super) const MAX_EXTENT: u64 = 1 << 24;
/// Most layers accepted.
pub(super) const MAX_LAYERS: u64 = 4096;

/// `InvalidExternalData` with `message` (the file disagrees with itself or is malformed).
pub(super) fn bad_metadata(message: String) -> Error {
    Error::new(ErrorCode::InvalidExternalData, message)
}

/// `NotSupported` for a well-formed value this runtime does not implement.
pub(super) fn unsupported(message: String) -> Error {
    Error::new(ErrorCode::NotSupported, message)
}

/// `value` when it lies in `1..=MAX_EXTENT`.
pub(super) fn check_extent(key: &str, value: u64) -> Result<u64> {
    if value == 0 || value > MAX_EXTENT {
        return Err(bad_metadata(format!(
            "{key} = {value} is outside 1..={MAX_EXTENT}"
        )));
    }
    Ok(value)
}

/// The metadata of one file, read through the architecture's key prefix
/// (`{general.architecture}.{suffix}`).
pub(crate) struct Metadata<'a> {
    entries: &'a [(String, GgufValue)],
    prefix: &'a str,
}

impl<'a> Metadata<'a> {
    /// The keys of `entries` under `prefix`.
    pub(super) fn new(entries: &'a [(String, GgufValue)], prefix: &'a str) -> Self {
        Self { entries, prefix }
    }

    fn get(&self, key: &str) -> Option<&GgufValue> {
        self.entries
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
    }

    /// The full key of `suffix`.
    pub(super) fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.prefix)
    }

    /// Whether the file has `suffix`.
    pub(super) fn has(&self, suffix: &str) -> bool {
        self.get(&self.key(suffix)).is_some()
    }

    /// An integer key (any integer type, non-negative), if present. A per-layer array is
    /// accepted when every layer agrees, as llama.cpp does.
    pub(super) fn opt_uint(&self, suffix: &str) -> Result<Option<u64>> {
        let key = self.key(suffix);
        let Some(value) = self.get(&key) else {
            return Ok(None);
        };
        let number = match *value {
            GgufValue::U8(v) => Some(u64::from(v)),
            GgufValue::U16(v) => Some(u64::from(v)),
            GgufValue::U32(v) => Some(u64::from(v)),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            GgufValue::Array(ref array) => uniform_array(array),
            _ => None,
        };
        number
            .map(Some)
            .ok_or_else(|| bad_metadata(format!("{key} is {value:?}, not a non-negative integer")))
    }

    /// A required integer key.
    pub(super) fn uint(&self, suffix: &str) -> Result<u64> {
        self.opt_uint(suffix)?
            .ok_or_else(|| bad_metadata(format!("the file has no {}", self.key(suffix))))
    }

    /// A required extent key, in `1..=MAX_EXTENT`.
    pub(super) fn extent(&self, suffix: &str) -> Result<u64> {
        let value = self.uint(suffix)?;
        check_extent(&self.key(suffix), value)
    }

    /// An optional extent key, in `1..=MAX_EXTENT` when present.
    pub(super) fn opt_extent(&self, suffix: &str) -> Result<Option<u64>> {
        self.opt_uint(suffix)?
            .map(|v| check_extent(&self.key(suffix), v))
            .transpose()
    }

    /// A finite float key (f32 or f64), if present.
    pub(super) fn opt_float(&self, suffix: &str) -> Result<Option<f32>> {
        let key = self.key(suffix);
        let Some(value) = self.get(&key) else {
            return Ok(None);
        };
        let number = match *value {
            GgufValue::F32(v) => Some(v),
            #[allow(clippy::cast_possible_truncation)]
            GgufValue::F64(v) => Some(v as f32),
            _ => None,
        };
        match number {
            Some(v) if v.is_finite() => Ok(Some(v)),
            _ => Err(bad_metadata(format!(
                "{key} is {value:?}, not a finite float"
            ))),
        }
    }

    /// A float key that, when present, is finite and > 0 (`None` when absent).
    pub(super) fn opt_positive(&self, suffix: &str) -> Result<Option<f32>> {
        match self.opt_float(suffix)? {
            Some(v) if v <= 0.0 => Err(bad_metadata(format!(
                "{} = {v} is not positive",
                self.key(suffix)
            ))),
            other => Ok(other),
        }
    }

    /// A string key, if present.
    pub(super) fn opt_str(&self, suffix: &str) -> Result<Option<&'a str>> {
        let key = self.key(suffix);
        match self.entries.iter().find(|(name, _)| *name == key) {
            None => Ok(None),
            Some((_, value)) => value
                .as_str()
                .map(Some)
                .ok_or_else(|| bad_metadata(format!("{key} is {value:?}, not a string"))),
        }
    }

    /// A per-layer boolean array key (`attention.sliding_window_pattern` as an array), if
    /// present as an array of `layers` booleans.
    pub(super) fn opt_layer_flags(&self, suffix: &str, layers: u32) -> Result<Option<Vec<bool>>> {
        let key = self.key(suffix);
        let Some(value) = self.get(&key) else {
            return Ok(None);
        };
        let GgufValue::Array(GgufArray::Bool(flags)) = value else {
            return Ok(None);
        };
        if flags.len() != layers as usize {
            return Err(bad_metadata(format!(
                "{key} has {} entries for {layers} layers",
                flags.len()
            )));
        }
        Ok(Some(flags.clone()))
    }
}

/// The one value of an integer array whose elements are all equal.
fn uniform_array(array: &GgufArray) -> Option<u64> {
    fn first_if_uniform<T: Copy + PartialEq>(values: &[T]) -> Option<T> {
        let first = *values.first()?;
        values.iter().all(|v| *v == first).then_some(first)
    }
    match array {
        GgufArray::U32(v) => first_if_uniform(v).map(u64::from),
        GgufArray::I32(v) => first_if_uniform(v).and_then(|x| u64::try_from(x).ok()),
        GgufArray::U64(v) => first_if_uniform(v),
        GgufArray::I64(v) => first_if_uniform(v).and_then(|x| u64::try_from(x).ok()),
        _ => None,
    }
}
