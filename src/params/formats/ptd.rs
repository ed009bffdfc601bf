//! ExecuTorch `.ptd` indexes: the flat-tensor named-data file that `to_executorch` writes for
//! weights given an external tag (`extension/flat_tensor/serialize/serialize.py`, read by the
//! runtime's `FlatTensorDataMap`), schema `flat_tensor.fbs` ([`crate::executorch_schema`]).
//!
//! Layout (all little-endian): a flatbuffer whose file identifier `"FT01"` is at bytes 4..8;
//! ExecuTorch inserts its extended header at byte 8 (magic `"FH01"`, u32 header length of at
//! least 40, u64 flatbuffer offset, u64 flatbuffer size, u64 segment base offset, u64 segment
//! data size) and fixes the root offset, so the flatbuffer, header included, is the file's bytes
//! `[0, flatbuffer_offset + flatbuffer_size)`. The `FlatTensor` table lists data segments
//! (offset and size relative to the segment base) and named data: key -> segment index and an
//! optional `TensorLayout` (scalar type, int32 sizes, uint8 dim order). Two keys may name the
//! same segment: ExecuTorch's `NamedDataStore` stores equal bytes once.
//!
//! Reads: one [`INITIAL_READ_BYTES`] read holds the whole flatbuffer of most files; a longer one
//! costs one more read of exactly the missing flatbuffer bytes. Segment data is never read.
//!
//! The index: one [`IndexEntry`] per key, in the file's order, with the absolute offset and size
//! of its segment (keys sharing a segment share those bytes, and the HTTP provider's planner
//! fetches such bytes once). The dtype is the name the other formats use (`F32`, `F16`, `BF16`,
//! `I64`, `U8`, `BOOL`, `F8_E4M3`, ...; see [`dtype_name`]) and the shape the layout's sizes,
//! row-major, when the layout's dim order is the identity. Keys without a layout (opaque bytes)
//! and keys whose dim order is not the identity (channels-last) report neither: the provider
//! only promises shapes it can state row-major; [`PtdIndex::named_data`] keeps every layout.
//!
//! Checks (ExecuTorch's runtime checks the header magic and length, the identifier, that the
//! two tables exist, and per key lookup the segment index and that the segment starts before the
//! end of the segment data; we check all of that once for every key, and more):
//! - file or read prefix too short for the identifier and extended header, flatbuffer or segment
//!   data past the end of the file: `OUT_OF_RANGE`;
//! - identifier other than `FT01`, header magic other than `FH01`, header length under 40, a
//!   flatbuffer overlapping the extended header, any sum overflowing u64, segment data starting
//!   inside the flatbuffer, a flatbuffer the verifier refuses (every offset, length and string
//!   checked; its table count bounded by the bytes), no `segments` or `named_data`, a segment
//!   past the segment data, a segment index out of range, a key missing or repeated (ExecuTorch's
//!   store refuses duplicates), sizes that are negative, a dim order that is not a permutation of
//!   the sizes' dims, a layout whose byte size (overflow-checked) is not its segment's size:
//!   `INVALID_ARGUMENT`;
//! - a flatbuffer longer than [`MAX_HEADER_BYTES`]: `INVALID_ARGUMENT`;
//! - a schema version above [`MAX_SUPPORTED_VERSION`] (as ExecuTorch's readers), a scalar type
//!   the schema does not define: `UNIMPLEMENTED`.
//!
//! Allocations: the flatbuffer's bytes (at most [`MAX_HEADER_BYTES`]) and vectors no longer than
//! the verified flatbuffer's own vectors.

use crate::error::Status;
use crate::executorch_schema::{FLAT_TENSOR_IDENTIFIER, verified_flat_tensor};
use crate::params::formats::{
    Format, INITIAL_READ_BYTES, MAX_HEADER_BYTES, block_on_ready, known_size, read_exact,
};
use crate::params::{EntryStorage, IndexEntry, ParameterIndex, RangeRead, StatusResult};
use std::collections::HashSet;

/// The flatbuffer file identifier at bytes 4..8.
pub const IDENTIFIER: &[u8; 4] = FLAT_TENSOR_IDENTIFIER;
/// Where the extended header starts (after the root offset and the identifier).
pub const HEADER_OFFSET: u64 = 8;
/// The extended header's magic.
pub const HEADER_MAGIC: &[u8; 4] = b"FH01";
/// The shortest extended header: magic, length and four u64 fields.
pub const MIN_HEADER_LENGTH: u32 = 40;
/// The bytes a file needs before anything else is checked: root offset, identifier and the
/// shortest extended header.
pub const MIN_FILE_BYTES: u64 = HEADER_OFFSET + MIN_HEADER_LENGTH as u64;
/// The newest `FlatTensor` schema version read (ExecuTorch 1.5.1 writes and reads 0).
pub const MAX_SUPPORTED_VERSION: u32 = 0;

/// The extended header (`FlatTensorHeader`), as the file records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtdHeader {
    /// The header's length field (40 for the files ExecuTorch 1.5.1 writes).
    pub length: u32,
    /// Offset of the flatbuffer data, past the header and its padding.
    pub flatbuffer_offset: u64,
    /// Size of the flatbuffer data from `flatbuffer_offset`.
    pub flatbuffer_size: u64,
    /// Absolute offset that segment offsets are relative to.
    pub segment_base_offset: u64,
    /// Bytes of segment data from `segment_base_offset`.
    pub segment_data_size: u64,
}

impl PtdHeader {
    /// One past the flatbuffer's last byte (`flatbuffer_offset + flatbuffer_size`; checked
    /// when the header was parsed).
    pub fn flatbuffer_end(&self) -> u64 {
        self.flatbuffer_offset + self.flatbuffer_size
    }

    /// One past the segment data's last byte (checked when the header was parsed).
    pub fn segment_data_end(&self) -> u64 {
        self.segment_base_offset + self.segment_data_size
    }
}

/// One data segment, relative to [`PtdHeader::segment_base_offset`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtdSegment {
    /// Offset from the segment base.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A key's `TensorLayout` as the file records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtdLayout {
    /// ExecuTorch's `ScalarType` code (`scalar_type.fbs`).
    pub scalar_type: i8,
    /// Sizes, outermost first (never negative: checked).
    pub sizes: Vec<i32>,
    /// Dim order, outermost first (a permutation of `0..sizes.len()`: checked).
    pub dim_order: Vec<u8>,
}

impl PtdLayout {
    /// Whether the dim order is the identity, so the bytes are row-major in `sizes`.
    pub fn is_contiguous(&self) -> bool {
        self.dim_order
            .iter()
            .enumerate()
            .all(|(position, &dim)| usize::from(dim) == position)
    }

    /// The dtype name the index reports ([`dtype_name`] of the scalar type).
    pub fn dtype_name(&self) -> Option<&'static str> {
        dtype_name(self.scalar_type)
    }
}

/// One key of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtdNamedData {
    /// The key.
    pub key: String,
    /// Index into [`PtdIndex::segments`] (in range: checked).
    pub segment_index: u32,
    /// The tensor layout, when the writer recorded one.
    pub layout: Option<PtdLayout>,
}

/// The index of a `.ptd` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtdIndex {
    header: PtdHeader,
    version: u32,
    segments: Vec<PtdSegment>,
    named_data: Vec<PtdNamedData>,
    index: ParameterIndex,
}

impl PtdIndex {
    /// Reads and checks the header and flatbuffer of the file behind `reader` (one read when
    /// the flatbuffer ends within [`INITIAL_READ_BYTES`], two otherwise).
    ///
    /// # Errors
    /// See the module documentation; `FAILED_PRECONDITION` when the reader's size is unknown;
    /// reader errors pass through.
    pub async fn parse<R: RangeRead + ?Sized>(reader: &R) -> StatusResult<Self> {
        let size = known_size(reader, Format::Ptd)?;
        if size < HEADER_OFFSET {
            return Err(too_short(size));
        }
        let mut bytes = read_exact(reader, 0, size.min(INITIAL_READ_BYTES)).await?;
        let header = parse_header(&bytes, size)?;
        let end = header.flatbuffer_end();
        let have = bytes.len() as u64;
        if end > have {
            bytes.extend(read_exact(reader, have, end - have).await?);
        }
        // `end <= bytes.len()` now; the bytes past the flatbuffer (segment data) are dropped.
        bytes.truncate(end as usize);
        Self::from_prefix(&bytes, size)
    }

    /// The index of a whole `.ptd` file held in memory.
    ///
    /// # Errors
    /// As [`PtdIndex::parse`].
    pub fn from_bytes(bytes: &[u8]) -> StatusResult<Self> {
        block_on_ready(Self::parse(bytes))
    }

    /// The index of a file of `file_size` bytes from its first bytes (at least up to the end
    /// of its flatbuffer; more are ignored).
    ///
    /// # Errors
    /// See the module documentation; `OUT_OF_RANGE` when `prefix` ends before the flatbuffer.
    pub fn from_prefix(prefix: &[u8], file_size: u64) -> StatusResult<Self> {
        let header = parse_header(prefix, file_size)?;
        let end = header.flatbuffer_end();
        let flatbuffer = usize::try_from(end)
            .ok()
            .and_then(|end| prefix.get(..end))
            .ok_or_else(|| {
                Status::out_of_range(format!(
                    "ptd flatbuffer ends at {end} but only {} bytes were given",
                    prefix.len()
                ))
            })?;
        let root = verified_flat_tensor(flatbuffer).map_err(|message| {
            Status::invalid_argument(format!("ptd flatbuffer is malformed: {message}"))
        })?;
        let version = root.version();
        if version > MAX_SUPPORTED_VERSION {
            return Err(Status::unimplemented(format!(
                "ptd schema version {version} is newer than this reader supports (max \
                 {MAX_SUPPORTED_VERSION})"
            )));
        }
        let raw_segments = root.segments().ok_or_else(|| {
            Status::invalid_argument("ptd FlatTensor has no segments table; malformed file")
        })?;
        let raw_named = root.named_data().ok_or_else(|| {
            Status::invalid_argument("ptd FlatTensor has no named_data table; malformed file")
        })?;
        let mut segments = Vec::with_capacity(raw_segments.len());
        for (i, segment) in raw_segments.iter().enumerate() {
            let (offset, size) = (segment.offset(), segment.size_());
            let end = offset.checked_add(size).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "ptd segment {i} at offset {offset} of {size} bytes overflows"
                ))
            })?;
            if end > header.segment_data_size {
                return Err(Status::invalid_argument(format!(
                    "ptd segment {i} [{offset}, {end}) runs past the {} bytes of segment data",
                    header.segment_data_size
                )));
            }
            segments.push(PtdSegment { offset, size });
        }
        let mut named_data = Vec::with_capacity(raw_named.len());
        let mut entries = Vec::with_capacity(raw_named.len());
        let mut seen = HashSet::with_capacity(raw_named.len());
        for (i, named) in raw_named.iter().enumerate() {
            let key = named.key().ok_or_else(|| {
                Status::invalid_argument(format!("ptd named data {i} has no key"))
            })?;
            if !seen.insert(key) {
                return Err(Status::invalid_argument(format!(
                    "ptd named data repeats key {key:?}"
                )));
            }
            let segment_index = named.segment_index();
            let segment = usize::try_from(segment_index)
                .ok()
                .and_then(|index| segments.get(index))
                .copied()
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "ptd key {key:?} names segment {segment_index} but the file has {}",
                        segments.len()
                    ))
                })?;
            let layout = named
                .tensor_layout()
                .map(|layout| check_layout(key, layout, segment.size))
                .transpose()?;
            let (dtype, shape) = match &layout {
                Some(layout) if layout.is_contiguous() => (
                    layout.dtype_name().map(str::to_owned),
                    // Sizes were checked non-negative.
                    Some(layout.sizes.iter().map(|&dim| dim as u64).collect()),
                ),
                _ => (None, None),
            };
            entries.push(IndexEntry {
                key: key.to_owned(),
                length: segment.size,
                // offset + size <= segment_data_size, and base + data size was checked.
                storage: EntryStorage::Data {
                    offset: header.segment_base_offset + segment.offset,
                },
                dtype,
                shape,
            });
            named_data.push(PtdNamedData {
                key: key.to_owned(),
                segment_index,
                layout,
            });
        }
        Ok(Self {
            header,
            version,
            segments,
            named_data,
            index: ParameterIndex::new(entries, Some(file_size)),
        })
    }

    /// The extended header.
    pub fn header(&self) -> &PtdHeader {
        &self.header
    }

    /// The `FlatTensor` schema version (0).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data segments, in table order.
    pub fn segments(&self) -> &[PtdSegment] {
        &self.segments
    }

    /// Every key with its segment and layout, in table order.
    pub fn named_data(&self) -> &[PtdNamedData] {
        &self.named_data
    }

    /// The key `key`, if the file has it.
    pub fn get(&self, key: &str) -> Option<&PtdNamedData> {
        self.named_data.iter().find(|named| named.key == key)
    }

    /// The keys as parameters, in table order, with absolute offsets.
    pub fn index(&self) -> &ParameterIndex {
        &self.index
    }

    /// The parameters, dropping the rest.
    pub fn into_index(self) -> ParameterIndex {
        self.index
    }
}

/// The dtype name the index reports for ExecuTorch's `ScalarType` code `scalar_type`: the
/// names `safetensors` uses (`U8`, `I8`, `I16`, `I32`, `I64`, `F16`, `F32`, `F64`, `BOOL`,
/// `BF16`, `F8_E5M2`, `F8_E4M3` for `Float8_e4m3fn`, `U16`, `U32`, `U64`, `F8_E5M2FNUZ`,
/// `F8_E4M3FNUZ`), which the named-data map binds to layouts, or c10's names for the
/// quantized and bit types (`QInt8`, `QUInt8`, `QInt32`, `QUInt4x2`, `QUInt2x4`, `Bits16`),
/// which it refuses. `None` for a code the schema does not define.
pub fn dtype_name(scalar_type: i8) -> Option<&'static str> {
    Some(match scalar_type {
        0 => "U8",
        1 => "I8",
        2 => "I16",
        3 => "I32",
        4 => "I64",
        5 => "F16",
        6 => "F32",
        7 => "F64",
        11 => "BOOL",
        12 => "QInt8",
        13 => "QUInt8",
        14 => "QInt32",
        15 => "BF16",
        16 => "QUInt4x2",
        17 => "QUInt2x4",
        22 => "Bits16",
        23 => "F8_E5M2",
        24 => "F8_E4M3",
        25 => "F8_E5M2FNUZ",
        26 => "F8_E4M3FNUZ",
        27 => "U16",
        28 => "U32",
        29 => "U64",
        _ => return None,
    })
}

/// Bytes per element of `scalar_type` (c10's `elementSize`), or `None` for the packed
/// sub-byte types (`QUInt4x2`, `QUInt2x4`), whose byte size is not checked.
fn element_bytes(scalar_type: i8) -> Option<u64> {
    Some(match scalar_type {
        0 | 1 | 11 | 12 | 13 | 23..=26 => 1,
        2 | 5 | 15 | 22 | 27 => 2,
        3 | 6 | 14 | 28 => 4,
        4 | 7 | 29 => 8,
        _ => return None,
    })
}

fn too_short(size: u64) -> Status {
    Status::out_of_range(format!(
        "ptd file of {size} bytes is too short for the flatbuffer identifier and the \
         {MIN_HEADER_LENGTH}-byte extended header ({MIN_FILE_BYTES} bytes)"
    ))
}

fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut field = [0; 4];
    field.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(field)
}

fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut field = [0; 8];
    field.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(field)
}

/// Checks the identifier and the extended header in a file's first bytes against its size.
fn parse_header(first: &[u8], file_size: u64) -> StatusResult<PtdHeader> {
    if let Some(identifier) = first.get(4..8)
        && identifier != IDENTIFIER
    {
        return Err(Status::invalid_argument(format!(
            "not an ExecuTorch .ptd file: flatbuffer identifier {:?} at bytes 4..8, expected \
             \"FT01\"",
            String::from_utf8_lossy(identifier)
        )));
    }
    let Some(fields) = first.get(..MIN_FILE_BYTES as usize) else {
        if file_size < MIN_FILE_BYTES {
            return Err(too_short(file_size));
        }
        return Err(Status::out_of_range(format!(
            "ptd extended header: only the first {} bytes were given",
            first.len()
        )));
    };
    let magic = &fields[8..12];
    if magic != HEADER_MAGIC {
        return Err(Status::invalid_argument(format!(
            "ptd extended header magic {:?} at byte 8, expected \"FH01\"; the file is not a \
             .ptd or is corrupt",
            String::from_utf8_lossy(magic)
        )));
    }
    let header = PtdHeader {
        length: le_u32(fields, 12),
        flatbuffer_offset: le_u64(fields, 16),
        flatbuffer_size: le_u64(fields, 24),
        segment_base_offset: le_u64(fields, 32),
        segment_data_size: le_u64(fields, 40),
    };
    if header.length < MIN_HEADER_LENGTH {
        return Err(Status::invalid_argument(format!(
            "ptd extended header length {} < {MIN_HEADER_LENGTH}",
            header.length
        )));
    }
    let header_end = HEADER_OFFSET + u64::from(header.length);
    if header.flatbuffer_offset < header_end {
        return Err(Status::invalid_argument(format!(
            "ptd flatbuffer offset {} lies inside the extended header, which ends at {header_end}",
            header.flatbuffer_offset
        )));
    }
    let flatbuffer_end = header
        .flatbuffer_offset
        .checked_add(header.flatbuffer_size)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "ptd flatbuffer at offset {} of {} bytes overflows",
                header.flatbuffer_offset, header.flatbuffer_size
            ))
        })?;
    if flatbuffer_end > file_size {
        return Err(Status::out_of_range(format!(
            "ptd flatbuffer [{}, {flatbuffer_end}) runs past the end of the {file_size}-byte file",
            header.flatbuffer_offset
        )));
    }
    if flatbuffer_end > MAX_HEADER_BYTES {
        return Err(Status::invalid_argument(format!(
            "ptd flatbuffer of {flatbuffer_end} bytes exceeds the limit of {MAX_HEADER_BYTES} \
             bytes"
        )));
    }
    let segment_end = header
        .segment_base_offset
        .checked_add(header.segment_data_size)
        .ok_or_else(|| {
            Status::invalid_argument(format!(
                "ptd segment data at offset {} of {} bytes overflows",
                header.segment_base_offset, header.segment_data_size
            ))
        })?;
    if header.segment_base_offset < flatbuffer_end {
        return Err(Status::invalid_argument(format!(
            "ptd segment base offset {} lies inside the flatbuffer, which ends at \
             {flatbuffer_end}",
            header.segment_base_offset
        )));
    }
    if segment_end > file_size {
        return Err(Status::out_of_range(format!(
            "ptd segment data [{}, {segment_end}) runs past the end of the {file_size}-byte file",
            header.segment_base_offset
        )));
    }
    Ok(header)
}

/// Checks one key's layout against its segment's size.
fn check_layout(
    key: &str,
    layout: crate::executorch_schema::flat_tensor::TensorLayout<'_>,
    segment_size: u64,
) -> StatusResult<PtdLayout> {
    let scalar_type = layout.scalar_type().0;
    let Some(name) = dtype_name(scalar_type) else {
        return Err(Status::unimplemented(format!(
            "ptd key {key:?} has scalar type {scalar_type}, which the schema does not define"
        )));
    };
    let sizes: Vec<i32> = layout
        .sizes()
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let dim_order: Vec<u8> = layout
        .dim_order()
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    if let Some(&dim) = sizes.iter().find(|&&dim| dim < 0) {
        return Err(Status::invalid_argument(format!(
            "ptd key {key:?} has a negative size {dim} in {sizes:?}"
        )));
    }
    let mut seen = vec![false; sizes.len()];
    let permutation = dim_order.len() == sizes.len()
        && dim_order.iter().all(|&dim| {
            seen.get_mut(usize::from(dim))
                .is_some_and(|slot| !std::mem::replace(slot, true))
        });
    if !permutation {
        return Err(Status::invalid_argument(format!(
            "ptd key {key:?}: dim order {dim_order:?} is not a permutation of the {} dims of \
             sizes {sizes:?}",
            sizes.len()
        )));
    }
    if let Some(element) = element_bytes(scalar_type) {
        let nbytes = sizes
            .iter()
            .try_fold(element, |product, &dim| product.checked_mul(dim as u64));
        if nbytes != Some(segment_size) {
            return Err(Status::invalid_argument(format!(
                "ptd key {key:?}: its segment holds {segment_size} bytes but sizes {sizes:?} of \
                 {name} need {}",
                nbytes.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string())
            )));
        }
    }
    Ok(PtdLayout {
        scalar_type,
        sizes,
        dim_order,
    })
}
