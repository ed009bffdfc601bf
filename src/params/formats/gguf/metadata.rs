//! GGUF metadata values: the thirteen value types, arrays of any of them (arrays of arrays too,
//! which the spec allows and llama.cpp refuses), read from a [`RangeCursor`] either kept or
//! skipped (validated and stepped over without being stored or, when large, even read).
//!
//! Counts and lengths are untrusted: before a loop or an allocation, `count x smallest element`
//! is checked against the bytes that remain, so a lying count fails at once with
//! `OUT_OF_RANGE` (or `INVALID_ARGUMENT` past the header limit). An array of strings or of arrays
//! holds at most [`MAX_ARRAY_ELEMENTS`] (its elements take more memory than their bytes in the
//! file: an empty string is 8 bytes there and a vector header here), checked before anything is
//! read. Nesting deeper than [`MAX_ARRAY_DEPTH`] is `INVALID_ARGUMENT`; an unknown value type is
//! `INVALID_ARGUMENT`, as IREE.

use crate::error::Status;
use crate::params::formats::cursor::RangeCursor;
use crate::params::{RangeRead, StatusResult};
use crate::send_sync::LocalBoxFuture;

/// How deeply arrays may nest (an array of arrays is depth 2).
pub const MAX_ARRAY_DEPTH: u32 = 8;

/// The most elements of an array of strings or of arrays: 2^21 = 2,097,152, eight times the
/// largest vocabulary in use (Gemma's 262,144 tokens) and four times the most merges seen
/// (about 500,000). A 12-million-token hostile header is refused on reading its count, before
/// any element is allocated.
pub const MAX_ARRAY_ELEMENTS: u64 = 1 << 21;

/// One metadata value. Strings are kept as bytes: the spec says UTF-8, but real vocabularies
/// are not always, and a reader should not reject a model for it ([`GgufValue::as_str`] checks).
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7 (any non-zero byte is true, as llama.cpp reads it).
    Bool(bool),
    /// Type 8: u64 length, then bytes.
    String(Vec<u8>),
    /// Type 9: element type, u64 count, elements.
    Array(GgufArray),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl GgufValue {
    /// The value as text, when it is a UTF-8 string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }

    /// The value, when it is a `u32`.
    pub fn as_u32(&self) -> Option<u32> {
        match self {
            Self::U32(value) => Some(*value),
            _ => None,
        }
    }
}

/// An array value: elements of one type.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufArray {
    /// Of type 0.
    U8(Vec<u8>),
    /// Of type 1.
    I8(Vec<i8>),
    /// Of type 2.
    U16(Vec<u16>),
    /// Of type 3.
    I16(Vec<i16>),
    /// Of type 4.
    U32(Vec<u32>),
    /// Of type 5.
    I32(Vec<i32>),
    /// Of type 6.
    F32(Vec<f32>),
    /// Of type 7.
    Bool(Vec<bool>),
    /// Of type 8.
    String(Vec<Vec<u8>>),
    /// Of type 9: each element is an array with its own element type.
    Array(Vec<GgufArray>),
    /// Of type 10.
    U64(Vec<u64>),
    /// Of type 11.
    I64(Vec<i64>),
    /// Of type 12.
    F64(Vec<f64>),
}

impl GgufArray {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Self::U8(values) => values.len(),
            Self::I8(values) => values.len(),
            Self::U16(values) => values.len(),
            Self::I16(values) => values.len(),
            Self::U32(values) => values.len(),
            Self::I32(values) => values.len(),
            Self::F32(values) => values.len(),
            Self::Bool(values) => values.len(),
            Self::String(values) => values.len(),
            Self::Array(values) => values.len(),
            Self::U64(values) => values.len(),
            Self::I64(values) => values.len(),
            Self::F64(values) => values.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The most elements reserved ahead of reading them.
const PREALLOCATE_LIMIT: u64 = 4096;

/// Value type ids.
const STRING: u32 = 8;
const ARRAY: u32 = 9;

/// Bytes per element of a fixed-size value type; `None` for strings, arrays and unknown types.
fn fixed_size(kind: u32) -> Option<u64> {
    match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// The fewest bytes one element of `kind` can take (a string's length field, an array's type and
/// count), or `INVALID_ARGUMENT` for an unknown type.
fn min_size(kind: u32, field: &str) -> StatusResult<u64> {
    match kind {
        STRING => Ok(8),
        ARRAY => Ok(12),
        _ => fixed_size(kind).ok_or_else(|| {
            Status::invalid_argument(format!("{field} has unknown GGUF value type {kind}"))
        }),
    }
}

/// Reads a string (u64 length + bytes), kept or skipped.
pub(crate) async fn read_string<R: RangeRead + ?Sized>(
    cursor: &mut RangeCursor<'_, R>,
    keep: bool,
    field: &str,
) -> StatusResult<Option<Vec<u8>>> {
    let length = cursor.u64(field).await?;
    if keep {
        Ok(Some(cursor.take(length, field).await?.to_vec()))
    } else {
        cursor.skip(length, field)?;
        Ok(None)
    }
}

/// Reads one value of type `kind`: `Some` when `keep`, `None` (validated and skipped) otherwise.
pub(crate) async fn read_value<R: RangeRead + ?Sized>(
    cursor: &mut RangeCursor<'_, R>,
    kind: u32,
    keep: bool,
    field: &str,
) -> StatusResult<Option<GgufValue>> {
    if kind == ARRAY {
        return Ok(read_array(cursor, keep, 1, field)
            .await?
            .map(GgufValue::Array));
    }
    if kind == STRING {
        return Ok(read_string(cursor, keep, field)
            .await?
            .map(GgufValue::String));
    }
    let size = min_size(kind, field)?;
    if !keep {
        cursor.skip(size, field)?;
        return Ok(None);
    }
    let bytes = cursor.take(size, field).await?;
    let array = decode_fixed(kind, bytes);
    Ok(first_of(array))
}

/// Reads an array (element type, count, elements) at nesting `depth` (1 for a top-level array).
fn read_array<'c, 'a, R: RangeRead + ?Sized>(
    cursor: &'c mut RangeCursor<'a, R>,
    keep: bool,
    depth: u32,
    field: &'c str,
) -> LocalBoxFuture<'c, StatusResult<Option<GgufArray>>> {
    Box::pin(async move {
        if depth > MAX_ARRAY_DEPTH {
            return Err(Status::invalid_argument(format!(
                "{field}: arrays nest deeper than {MAX_ARRAY_DEPTH} levels"
            )));
        }
        let kind = cursor.u32(field).await?;
        let count = cursor.u64(field).await?;
        if fixed_size(kind).is_none() && count > MAX_ARRAY_ELEMENTS {
            return Err(Status::invalid_argument(format!(
                "{field}: an array of {count} {} elements; at most {MAX_ARRAY_ELEMENTS} are \
                 accepted",
                if kind == STRING { "string" } else { "array" }
            )));
        }
        let least = count.checked_mul(min_size(kind, field)?).ok_or_else(|| {
            Status::invalid_argument(format!("{field}: array of {count} elements overflows"))
        })?;
        cursor.check_available(least, field)?;
        if fixed_size(kind).is_some() {
            // `least` is exactly the array's size here.
            if !keep {
                cursor.skip(least, field)?;
                return Ok(None);
            }
            let bytes = cursor.take(least, field).await?;
            return Ok(decode_fixed(kind, bytes));
        }
        // Strings and arrays: one at a time; `count` is bounded by the bytes that remain, and the
        // first allocation by a small constant (the vector grows with what is really read).
        let capacity = if keep {
            count.min(PREALLOCATE_LIMIT) as usize
        } else {
            0
        };
        if kind == STRING {
            let mut strings = Vec::with_capacity(capacity);
            for _ in 0..count {
                if let Some(string) = read_string(cursor, keep, field).await? {
                    strings.push(string);
                }
            }
            return Ok(keep.then_some(GgufArray::String(strings)));
        }
        let mut arrays = Vec::with_capacity(capacity);
        for _ in 0..count {
            if let Some(array) = read_array(cursor, keep, depth + 1, field).await? {
                arrays.push(array);
            }
        }
        Ok(keep.then_some(GgufArray::Array(arrays)))
    })
}

/// Decodes little-endian elements of fixed-size type `kind` (`None` for other types).
fn decode_fixed(kind: u32, bytes: &[u8]) -> Option<GgufArray> {
    fn each<const N: usize, T>(bytes: &[u8], decode: fn([u8; N]) -> T) -> Vec<T> {
        bytes
            .chunks_exact(N)
            .filter_map(|chunk| chunk.try_into().ok().map(decode))
            .collect()
    }
    Some(match kind {
        0 => GgufArray::U8(bytes.to_vec()),
        1 => GgufArray::I8(each(bytes, i8::from_le_bytes)),
        2 => GgufArray::U16(each(bytes, u16::from_le_bytes)),
        3 => GgufArray::I16(each(bytes, i16::from_le_bytes)),
        4 => GgufArray::U32(each(bytes, u32::from_le_bytes)),
        5 => GgufArray::I32(each(bytes, i32::from_le_bytes)),
        6 => GgufArray::F32(each(bytes, f32::from_le_bytes)),
        7 => GgufArray::Bool(bytes.iter().map(|&byte| byte != 0).collect()),
        10 => GgufArray::U64(each(bytes, u64::from_le_bytes)),
        11 => GgufArray::I64(each(bytes, i64::from_le_bytes)),
        12 => GgufArray::F64(each(bytes, f64::from_le_bytes)),
        _ => return None,
    })
}

/// The single element of a one-element fixed-size array, as a scalar value.
fn first_of(array: Option<GgufArray>) -> Option<GgufValue> {
    Some(match array? {
        GgufArray::U8(values) => GgufValue::U8(*values.first()?),
        GgufArray::I8(values) => GgufValue::I8(*values.first()?),
        GgufArray::U16(values) => GgufValue::U16(*values.first()?),
        GgufArray::I16(values) => GgufValue::I16(*values.first()?),
        GgufArray::U32(values) => GgufValue::U32(*values.first()?),
        GgufArray::I32(values) => GgufValue::I32(*values.first()?),
        GgufArray::F32(values) => GgufValue::F32(*values.first()?),
        GgufArray::Bool(values) => GgufValue::Bool(*values.first()?),
        GgufArray::U64(values) => GgufValue::U64(*values.first()?),
        GgufArray::I64(values) => GgufValue::I64(*values.first()?),
        GgufArray::F64(values) => GgufValue::F64(*values.first()?),
        GgufArray::String(_) | GgufArray::Array(_) => return None,
    })
}
