//! GGUF indexes (llama.cpp's format, versions 2 and 3, little-endian): magic `"GGUF"`, version,
//! tensor and key-value counts, the key-value metadata, the tensor infos (name, dimensions,
//! ggml type, offset), then the data section at the next multiple of the alignment (32, or the
//! `general.alignment` value).
//!
//! The header is variable-length throughout, so it is read with a streaming cursor: one
//! [`INITIAL_READ_BYTES`](crate::params::formats::INITIAL_READ_BYTES) read for most files, doubling reads for big vocabularies, and skipped
//! metadata values are not even read when they are large. [`parse_index`] keeps no metadata;
//! [`GgufIndex::parse`] keeps it all.
//!
//! Checks (llama.cpp's reader rules, with IREE's codes where IREE has them):
//! - truncated header: `OUT_OF_RANGE`; header past [`MAX_HEADER_BYTES`]: `INVALID_ARGUMENT`;
//! - bad magic: `INVALID_ARGUMENT`; version other than 2 or 3: `UNIMPLEMENTED`;
//! - counts that the remaining bytes cannot hold, an empty, duplicate or non-UTF-8 key or tensor
//!   name, an unknown value type, `general.alignment` not a power-of-two `u32`, more than
//!   [`MAX_DIMS`] dimensions, a dimension or element count past `i64::MAX`, a row length that is
//!   not a multiple of the type's block size: `INVALID_ARGUMENT`;
//! - an unknown ggml type: `UNIMPLEMENTED` (as IREE: its size cannot be computed);
//! - tensors must be laid out as llama.cpp requires: each at the previous one's offset plus its
//!   size rounded up to the alignment (so offsets are aligned, in order, never overlapping), and
//!   within the file: else `INVALID_ARGUMENT`.

mod metadata;
mod types;

pub use metadata::{GgufArray, GgufValue, MAX_ARRAY_DEPTH, MAX_ARRAY_ELEMENTS};
pub use types::{GGML_TYPES, GgmlType, ggml_type, ggml_type_by_name};

use crate::error::Status;
use crate::params::formats::cursor::RangeCursor;
use crate::params::formats::{Format, MAX_HEADER_BYTES, align_up, known_size};
use crate::params::{
    EntryStorage, IndexEntry, ParameterIndex, RangeRead, ShapeOrder, StatusResult,
};
use std::collections::HashSet;

/// `"GGUF"` read as a little-endian `u32`.
pub const MAGIC: u32 = 0x4655_4747;
/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u32 = 32;
/// The most dimensions a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// The metadata key that overrides the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Bytes of the fixed header: magic, version, tensor count, key-value count.
const FIXED_HEADER_BYTES: u64 = 24;
/// The fewest bytes a key-value pair takes (length, a 1-byte key, type, a 1-byte value).
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// The fewest bytes a tensor info takes (name length, dimension count, type, offset).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;
/// The most entries reserved ahead of reading them.
const PREALLOCATE_LIMIT: u64 = 4096;

/// The index of a GGUF file, with its metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufIndex {
    version: u32,
    alignment: u32,
    data_start: u64,
    metadata: Vec<(String, GgufValue)>,
    index: ParameterIndex,
}

impl GgufIndex {
    /// Reads the header of the file behind `reader`, keeping every metadata value.
    ///
    /// # Errors
    /// See the module documentation; `FAILED_PRECONDITION` when the reader's size is unknown;
    /// reader errors pass through.
    pub async fn parse<R: RangeRead + ?Sized>(reader: &R) -> StatusResult<Self> {
        parse_with(reader, true).await
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The alignment of the data section and of every tensor in it.
    pub fn alignment(&self) -> u32 {
        self.alignment
    }

    /// Absolute file offset of the data section.
    pub fn data_start(&self) -> u64 {
        self.data_start
    }

    /// Every metadata pair in file order (empty when parsed by [`parse_index`]).
    pub fn metadata(&self) -> &[(String, GgufValue)] {
        &self.metadata
    }

    /// The metadata value of `key`, if present.
    pub fn metadata_value(&self, key: &str) -> Option<&GgufValue> {
        self.metadata
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
    }

    /// The tensors in file order, with absolute offsets, ggml type names as dtypes and shapes in
    /// GGUF's order (innermost dimension first, the reverse of numpy's).
    pub fn index(&self) -> &ParameterIndex {
        &self.index
    }

    /// The tensors, dropping the rest.
    pub fn into_index(self) -> ParameterIndex {
        self.index
    }
}

/// The tensors of the GGUF file behind `reader`, validating but not keeping the metadata.
///
/// # Errors
/// As [`GgufIndex::parse`].
pub async fn parse_index<R: RangeRead + ?Sized>(reader: &R) -> StatusResult<ParameterIndex> {
    Ok(parse_with(reader, false).await?.into_index())
}

/// One tensor info as read, before its offset is checked.
struct TensorInfo {
    name: String,
    dims: Vec<u64>,
    kind: GgmlType,
    offset: u64,
    bytes: u64,
}

async fn parse_with<R: RangeRead + ?Sized>(
    reader: &R,
    keep_metadata: bool,
) -> StatusResult<GgufIndex> {
    let size = known_size(reader, Format::Gguf)?;
    let mut cursor = RangeCursor::new(reader, size, MAX_HEADER_BYTES, "GGUF header");
    let magic = cursor.u32("GGUF magic").await?;
    if magic != MAGIC {
        return Err(Status::invalid_argument(format!(
            "GGUF file magic missing or invalid {magic:08X}; expected {MAGIC:08X}"
        )));
    }
    let version = check_version(cursor.u32("GGUF version").await?)?;
    let tensor_count = cursor.u64("GGUF tensor count").await?;
    let kv_count = cursor.u64("GGUF metadata count").await?;
    debug_assert_eq!(cursor.position(), FIXED_HEADER_BYTES);
    check_count(&cursor, kv_count, MIN_KV_BYTES, "metadata key-value pairs")?;
    let (alignment, metadata) = read_metadata(&mut cursor, kv_count, keep_metadata).await?;
    check_count(&cursor, tensor_count, MIN_TENSOR_INFO_BYTES, "tensor infos")?;
    let infos = read_tensor_infos(&mut cursor, tensor_count).await?;
    let infos_end = cursor.position();
    let data_start = if tensor_count == 0 {
        infos_end
    } else {
        align_up(infos_end, u64::from(alignment))
            .ok_or_else(|| Status::invalid_argument("GGUF data section offset overflows"))?
    };
    let entries = place_tensors(infos, data_start, u64::from(alignment), cursor.size())?;
    Ok(GgufIndex {
        version,
        alignment,
        data_start,
        metadata,
        index: ParameterIndex::new(entries, Some(size))
            .with_shape_order(ShapeOrder::InnermostFirst),
    })
}

fn check_version(version: u32) -> StatusResult<u32> {
    if version & 0xFFFF == 0 && version != 0 {
        return Err(Status::unimplemented(format!(
            "GGUF version field {version:#010X} looks byte-swapped: big-endian GGUF files are \
             not supported"
        )));
    }
    if !(2..=3).contains(&version) {
        return Err(Status::unimplemented(format!(
            "GGUF format version {version} is unsupported; expected version 2-3"
        )));
    }
    Ok(version)
}

/// Checks that `count` records of at least `least` bytes each can fit in what remains.
fn check_count<R: RangeRead + ?Sized>(
    cursor: &RangeCursor<'_, R>,
    count: u64,
    least: u64,
    what: &str,
) -> StatusResult<()> {
    let needed = count.checked_mul(least).ok_or_else(|| {
        Status::invalid_argument(format!("GGUF declares {count} {what}, which overflows"))
    })?;
    cursor.check_available(needed, &format!("GGUF's {count} {what}"))
}

/// Reads the key-value section; returns the alignment and (when `keep`) every pair.
async fn read_metadata<R: RangeRead + ?Sized>(
    cursor: &mut RangeCursor<'_, R>,
    count: u64,
    keep: bool,
) -> StatusResult<(u32, Vec<(String, GgufValue)>)> {
    let mut alignment = DEFAULT_ALIGNMENT;
    let mut keys = HashSet::new();
    let mut pairs = Vec::with_capacity(if keep {
        count.min(PREALLOCATE_LIMIT) as usize
    } else {
        0
    });
    for index in 0..count {
        let key = read_name(cursor, "metadata key", index).await?;
        if !keys.insert(key.clone()) {
            return Err(Status::invalid_argument(format!(
                "GGUF metadata repeats key {key:?}"
            )));
        }
        let field = format!("GGUF metadata {key:?}");
        let kind = cursor.u32(&field).await?;
        if key == ALIGNMENT_KEY {
            let value = metadata::read_value(cursor, kind, true, &field).await?;
            alignment = check_alignment(value.as_ref())?;
            if keep && let Some(value) = value {
                pairs.push((key, value));
            }
            continue;
        }
        let value = metadata::read_value(cursor, kind, keep, &field).await?;
        if let Some(value) = value {
            pairs.push((key, value));
        }
    }
    Ok((alignment, pairs))
}

fn check_alignment(value: Option<&GgufValue>) -> StatusResult<u32> {
    match value {
        Some(GgufValue::U32(alignment)) if alignment.is_power_of_two() => Ok(*alignment),
        Some(GgufValue::U32(alignment)) => Err(Status::invalid_argument(format!(
            "GGUF {ALIGNMENT_KEY} {alignment} is not a power of two"
        ))),
        _ => Err(Status::invalid_argument(format!(
            "GGUF {ALIGNMENT_KEY} metadata value must be uint32"
        ))),
    }
}

/// Reads a non-empty UTF-8 key or tensor name.
async fn read_name<R: RangeRead + ?Sized>(
    cursor: &mut RangeCursor<'_, R>,
    what: &str,
    index: u64,
) -> StatusResult<String> {
    let field = format!("GGUF {what} {index}");
    let bytes = metadata::read_string(cursor, true, &field)
        .await?
        .unwrap_or_default();
    let name = String::from_utf8(bytes)
        .map_err(|error| Status::invalid_argument(format!("{field} is not UTF-8: {error}")))?;
    if name.is_empty() {
        return Err(Status::invalid_argument(format!("{field} is empty")));
    }
    Ok(name)
}

async fn read_tensor_infos<R: RangeRead + ?Sized>(
    cursor: &mut RangeCursor<'_, R>,
    count: u64,
) -> StatusResult<Vec<TensorInfo>> {
    let mut names = HashSet::new();
    let mut infos = Vec::with_capacity(count.min(PREALLOCATE_LIMIT) as usize);
    for index in 0..count {
        let name = read_name(cursor, "tensor name", index).await?;
        if !names.insert(name.clone()) {
            return Err(Status::invalid_argument(format!(
                "GGUF repeats tensor name {name:?}"
            )));
        }
        let field = format!("GGUF tensor {name:?}");
        let n_dims = cursor.u32(&field).await?;
        if n_dims > MAX_DIMS {
            return Err(Status::invalid_argument(format!(
                "{field} has {n_dims} dimensions; at most {MAX_DIMS} are allowed"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            dims.push(cursor.u64(&field).await?);
        }
        let type_id = cursor.u32(&field).await?;
        let kind = ggml_type(type_id).ok_or_else(|| {
            Status::unimplemented(format!(
                "{field} has ggml type {type_id}, which is not supported"
            ))
        })?;
        let offset = cursor.u64(&field).await?;
        let bytes = tensor_bytes(&field, &dims, kind)?;
        infos.push(TensorInfo {
            name,
            dims,
            kind,
            offset,
            bytes,
        });
    }
    Ok(infos)
}

/// The byte size of a tensor of `dims` (innermost first) elements of `kind`.
fn tensor_bytes(field: &str, dims: &[u64], kind: GgmlType) -> StatusResult<u64> {
    let limit = i64::MAX as u64;
    let too_many = || {
        Status::invalid_argument(format!(
            "{field}: the element count of shape {dims:?} exceeds {limit}"
        ))
    };
    let mut elements = 1u64;
    for &dim in dims {
        if dim > limit {
            return Err(too_many());
        }
        elements = elements
            .checked_mul(dim)
            .filter(|&n| n <= limit)
            .ok_or_else(too_many)?;
    }
    let row = dims.first().copied().unwrap_or(1);
    if row % kind.block_size != 0 {
        return Err(Status::invalid_argument(format!(
            "{field} of type {} has {row} elements per row, not a multiple of the block size {}",
            kind.name, kind.block_size
        )));
    }
    (elements / kind.block_size)
        .checked_mul(kind.type_size)
        .ok_or_else(|| {
            Status::invalid_argument(format!("{field}: byte size of shape {dims:?} overflows"))
        })
}

/// Checks each tensor's offset (llama.cpp's layout rule) and turns them into index entries.
fn place_tensors(
    infos: Vec<TensorInfo>,
    data_start: u64,
    alignment: u64,
    file_size: u64,
) -> StatusResult<Vec<IndexEntry>> {
    let mut expected = 0u64;
    let mut entries = Vec::with_capacity(infos.len());
    for info in infos {
        if info.offset != expected {
            return Err(Status::invalid_argument(format!(
                "GGUF tensor {:?} has offset {}, expected {expected}",
                info.name, info.offset
            )));
        }
        let begin = data_start.checked_add(info.offset);
        let end = begin.and_then(|begin| begin.checked_add(info.bytes));
        let (Some(begin), Some(end)) = (begin, end) else {
            return Err(Status::invalid_argument(format!(
                "GGUF tensor {:?}: offset {} + {} bytes overflows",
                info.name, info.offset, info.bytes
            )));
        };
        if end > file_size {
            return Err(Status::invalid_argument(format!(
                "GGUF tensor {:?} has data offsets outside of the available data (begin={begin}, \
                 end={end}, file size={file_size})",
                info.name
            )));
        }
        expected = align_up(info.bytes, alignment)
            .and_then(|padded| expected.checked_add(padded))
            .ok_or_else(|| {
                Status::invalid_argument(format!("GGUF tensor {:?}: size overflows", info.name))
            })?;
        entries.push(IndexEntry {
            key: info.name,
            length: info.bytes,
            storage: EntryStorage::Data { offset: begin },
            dtype: Some(info.kind.name.to_owned()),
            shape: Some(info.dims),
        });
    }
    Ok(entries)
}
