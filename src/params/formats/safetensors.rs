//! `safetensors` indexes: an 8-byte little-endian header length, a JSON header, then the data.
//!
//! The header is read with one ranged read of [`INITIAL_READ_BYTES`] (the whole header of most
//! files) and a second read only when the header is longer. The JSON is parsed with
//! `serde_json` into our own types with u64 offsets: the `safetensors` crate's `Metadata` uses
//! `usize`, which is 32 bits on wasm32 and would reject files over 4 GiB.
//!
//! Checks, with IREE's codes where IREE's parser has them:
//! - file shorter than 8 bytes, or header longer than the file: `OUT_OF_RANGE`;
//! - header longer than [`MAX_HEADER_BYTES`] (the crate's limit), not UTF-8, not a JSON object,
//!   an entry without `dtype`/`shape`/`data_offsets`, a duplicate key, `__metadata__` that is
//!   not a string-to-string map: `INVALID_ARGUMENT`;
//! - `begin > end` or `end` past the data: `INVALID_ARGUMENT` (as IREE);
//! - as the `safetensors` crate validates: entries sorted by offset must tile the data from 0
//!   with no gap and no overlap, and each entry's byte length must equal
//!   `elements x bits / 8` (overflow-checked, whole bytes): `INVALID_ARGUMENT`;
//! - an unknown dtype: `UNIMPLEMENTED` (its size cannot be checked).
//!
//! Bytes after the last tensor are allowed (IREE allows them; the crate does not).

use crate::error::Status;
use crate::params::formats::{
    Format, INITIAL_READ_BYTES, MAX_HEADER_BYTES, known_size, read_exact,
};
use crate::params::{EntryStorage, IndexEntry, ParameterIndex, RangeRead, StatusResult};
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use std::collections::{BTreeMap, HashSet};
use std::fmt;

/// Size of the header-length field that starts every file.
pub const LENGTH_FIELD_BYTES: u64 = 8;

/// The index of a `safetensors` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafetensorsIndex {
    header_length: u64,
    metadata: BTreeMap<String, String>,
    index: ParameterIndex,
}

impl SafetensorsIndex {
    /// Reads and checks the header of the file behind `reader` (one read when the header fits in
    /// [`INITIAL_READ_BYTES`], two otherwise).
    ///
    /// # Errors
    /// See the module documentation; `FAILED_PRECONDITION` when the reader's size is unknown;
    /// reader errors pass through.
    pub async fn parse<R: RangeRead + ?Sized>(reader: &R) -> StatusResult<Self> {
        let size = known_size(reader, Format::Safetensors)?;
        if size < LENGTH_FIELD_BYTES {
            return Err(Status::out_of_range(format!(
                "safetensors file of {size} bytes is too short for the 8-byte header length"
            )));
        }
        let mut bytes = read_exact(reader, 0, size.min(INITIAL_READ_BYTES)).await?;
        let header_length = header_length(&bytes)?;
        // `header_length` is at most MAX_HEADER_BYTES, so this cannot overflow.
        let data_start = LENGTH_FIELD_BYTES + header_length;
        if data_start > size {
            return Err(Status::out_of_range(format!(
                "safetensors header of {header_length} bytes runs past the end of the \
                 {size}-byte file"
            )));
        }
        let have = bytes.len() as u64;
        if data_start > have {
            bytes.extend(read_exact(reader, have, data_start - have).await?);
        }
        let header = bytes
            .get(LENGTH_FIELD_BYTES as usize..data_start as usize)
            .ok_or_else(|| Status::out_of_range("safetensors header: short read"))?;
        Self::from_header(header, size)
    }

    /// Checks a header (the bytes after the length field) of a file of `file_size` bytes.
    ///
    /// # Errors
    /// See the module documentation.
    pub fn from_header(header: &[u8], file_size: u64) -> StatusResult<Self> {
        let header_length = header.len() as u64;
        if header_length > MAX_HEADER_BYTES {
            return Err(header_too_large(header_length));
        }
        let data_start = LENGTH_FIELD_BYTES + header_length;
        let data_size = file_size.checked_sub(data_start).ok_or_else(|| {
            Status::out_of_range(format!(
                "safetensors header of {header_length} bytes runs past the end of the \
                 {file_size}-byte file"
            ))
        })?;
        let text = std::str::from_utf8(header).map_err(|error| {
            Status::invalid_argument(format!("safetensors header is not UTF-8: {error}"))
        })?;
        let parsed: Header = serde_json::from_str(text).map_err(|error| {
            Status::invalid_argument(format!("safetensors header JSON: {error}"))
        })?;
        let entries = check_entries(parsed.tensors, data_start, data_size)?;
        Ok(Self {
            header_length,
            metadata: parsed.metadata.unwrap_or_default(),
            index: ParameterIndex::new(entries, Some(file_size)),
        })
    }

    /// Length of the JSON header in bytes (the value of the length field).
    pub fn header_length(&self) -> u64 {
        self.header_length
    }

    /// Absolute file offset of the first data byte (`8 + header_length`).
    pub fn data_start(&self) -> u64 {
        LENGTH_FIELD_BYTES + self.header_length
    }

    /// The header's free-form `__metadata__` map (empty when absent).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// The tensors, in file order, with absolute offsets.
    pub fn index(&self) -> &ParameterIndex {
        &self.index
    }

    /// The tensors, dropping the rest.
    pub fn into_index(self) -> ParameterIndex {
        self.index
    }
}

/// Size in bits of one element of the `safetensors` dtype `name`, if known (the `safetensors`
/// crate's `Dtype::bitsize`, 0.8).
pub fn dtype_bits(name: &str) -> Option<u64> {
    Some(match name {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ"
        | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// The header length field of a file whose first bytes are `first`, within the limit.
fn header_length(first: &[u8]) -> StatusResult<u64> {
    let field: [u8; 8] = first
        .get(..8)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| {
            Status::out_of_range("safetensors file is too short for the header length")
        })?;
    let length = u64::from_le_bytes(field);
    if length > MAX_HEADER_BYTES {
        return Err(header_too_large(length));
    }
    Ok(length)
}

fn header_too_large(length: u64) -> crate::error::Status {
    Status::invalid_argument(format!(
        "safetensors header of {length} bytes exceeds the limit of {MAX_HEADER_BYTES} bytes"
    ))
}

/// One tensor as the header describes it (extra fields ignored, as the `safetensors` crate).
#[derive(Deserialize)]
struct RawTensor {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: (u64, u64),
}

/// The header object, in file order.
struct Header {
    metadata: Option<BTreeMap<String, String>>,
    tensors: Vec<(String, RawTensor)>,
}

impl<'de> Deserialize<'de> for Header {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(HeaderVisitor)
    }
}

struct HeaderVisitor;

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = Header;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON object of tensor entries")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Header, A::Error> {
        let mut metadata = None;
        let mut tensors = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "__metadata__" {
                if metadata.is_some() {
                    return Err(serde::de::Error::custom("duplicate key \"__metadata__\""));
                }
                metadata = Some(map.next_value()?);
            } else {
                let tensor = map.next_value::<RawTensor>().map_err(|error| {
                    serde::de::Error::custom(format!("tensor {key:?}: {error}"))
                })?;
                tensors.push((key, tensor));
            }
        }
        Ok(Header { metadata, tensors })
    }
}

/// Checks every tensor and returns the index entries in file order with absolute offsets.
fn check_entries(
    mut tensors: Vec<(String, RawTensor)>,
    data_start: u64,
    data_size: u64,
) -> StatusResult<Vec<IndexEntry>> {
    let mut seen = HashSet::with_capacity(tensors.len());
    for (key, tensor) in &tensors {
        if !seen.insert(key.as_str()) {
            return Err(Status::invalid_argument(format!(
                "safetensors header repeats key {key:?}"
            )));
        }
        check_tensor(key, tensor, data_size)?;
    }
    // A stable sort: tensors at the same offsets (empty ones) keep their header order.
    tensors.sort_by_key(|(_, tensor)| tensor.data_offsets);
    let mut entries = Vec::with_capacity(tensors.len());
    let mut expected_begin = 0u64;
    for (key, tensor) in tensors {
        let (begin, end) = tensor.data_offsets;
        if begin != expected_begin {
            let problem = if begin < expected_begin {
                "overlaps"
            } else {
                "leaves a gap before"
            };
            return Err(Status::invalid_argument(format!(
                "safetensors tensor {key:?} at data offsets [{begin}, {end}) {problem} the \
                 previous tensor, which ends at {expected_begin}"
            )));
        }
        expected_begin = end;
        entries.push(IndexEntry {
            key,
            length: end - begin,
            // begin <= end <= data_size = file_size - data_start: no overflow.
            storage: EntryStorage::Data {
                offset: data_start + begin,
            },
            dtype: Some(tensor.dtype),
            shape: Some(tensor.shape),
        });
    }
    Ok(entries)
}

/// Checks one tensor's offsets against the data and its length against dtype and shape.
fn check_tensor(key: &str, tensor: &RawTensor, data_size: u64) -> StatusResult<()> {
    let (begin, end) = tensor.data_offsets;
    if begin > end || end > data_size {
        return Err(Status::invalid_argument(format!(
            "safetensors tensor {key:?} has data offsets outside of the available data \
             (begin={begin}, end={end}, available={data_size})"
        )));
    }
    let bits = dtype_bits(&tensor.dtype).ok_or_else(|| {
        Status::unimplemented(format!(
            "safetensors tensor {key:?} has unknown dtype {:?}",
            tensor.dtype
        ))
    })?;
    let overflow = || {
        Status::invalid_argument(format!(
            "safetensors tensor {key:?}: size of shape {:?} x {} overflows",
            tensor.shape, tensor.dtype
        ))
    };
    let elements = tensor
        .shape
        .iter()
        .try_fold(1u64, |product, &dim| product.checked_mul(dim))
        .ok_or_else(overflow)?;
    let total_bits = elements.checked_mul(bits).ok_or_else(overflow)?;
    if total_bits % 8 != 0 {
        return Err(Status::invalid_argument(format!(
            "safetensors tensor {key:?}: {elements} elements of {} ({bits} bits) do not fill \
             whole bytes",
            tensor.dtype
        )));
    }
    if end - begin != total_bits / 8 {
        return Err(Status::invalid_argument(format!(
            "safetensors tensor {key:?}: data offsets [{begin}, {end}) hold {} bytes but shape \
             {:?} of {} needs {}",
            end - begin,
            tensor.shape,
            tensor.dtype,
            total_bits / 8
        )));
    }
    Ok(())
}
