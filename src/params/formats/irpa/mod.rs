//! IRPA indexes: IREE parameter archives, major version 0
//! (`runtime/src/iree/schemas/parameter_archive.h`, parsed as `io/formats/irpa/irpa_parser.c`).
//!
//! Layout (all little-endian, packed): a 32-byte prefix (magic `"IRPA"`, u16 major, u16 minor,
//! u64 header size, u64 next-header offset, u64 flags), the rest of the 88-byte v0 header (u64
//! entry count, then entry, metadata and storage segments as u64 offset/length pairs relative to
//! the header), and an entry table of 16-byte-aligned entries: a 60-byte common header (u64 entry
//! size, u32 type, u64 flags, name and metadata references into the metadata segment, u64
//! minimum alignment), extended to 85 bytes by splat entries (u64 length, 16 pattern bytes, u8
//! pattern length) and to 76 by data entries (a reference into the storage segment). Archives
//! may be chained by the next-header offset; each is indexed in turn.
//!
//! Reads: one [`INITIAL_READ_BYTES`] read holds a small archive's whole index; larger tables
//! cost one more read (entry table and metadata segment together when they are near each other).
//!
//! Codes as upstream: file shorter than a prefix or bad magic `INVALID_ARGUMENT`; header,
//! segments, entries or references past their bounds `OUT_OF_RANGE`; a version other than 0.0,
//! `EXTERNAL` (file-referencing) or unknown entry types `UNIMPLEMENTED`; a header size other than
//! 88 `INVALID_ARGUMENT`; `SKIP` entries ignored. Differences, all stricter: every sum is
//! overflow-checked (upstream adds unguarded); a splat pattern must be 1, 2, 4, 8 or 16 bytes
//! and divide the length (the schema's rule, which upstream does not check); a splat may be at
//! most [`MAX_SPLAT_BYTES`] long (`RESOURCE_EXHAUSTED`; upstream has no bound); names must be UTF-8;
//! entry tables and metadata segments are limited to [`MAX_HEADER_BYTES`]; at most
//! [`MAX_ARCHIVES`] chained archives. Duplicate keys are kept (lookup finds the first, as
//! upstream); minimum alignments are recorded by writers and not enforced by readers.

mod entries;

use crate::error::Status;
use crate::params::formats::{
    Format, INITIAL_READ_BYTES, MAX_HEADER_BYTES, PrefixCachedReader, known_size, read_exact,
};
use crate::params::{IndexEntry, ParameterIndex, RangeRead, StatusResult};
use entries::{Archive, le_u16, le_u32, le_u64};

/// `"IRPA"` read as a little-endian `u32`.
pub const MAGIC: u32 = 0x4150_5249;
/// Bytes of the version-independent header prefix.
pub const PREFIX_BYTES: u64 = 32;
/// Bytes of a version 0 header (prefix included).
pub const HEADER_V0_BYTES: u64 = 88;
/// Bytes of the header every entry starts with.
pub const ENTRY_HEADER_BYTES: u64 = 60;
/// Bytes of a splat entry.
pub const SPLAT_ENTRY_BYTES: u64 = 85;
/// Bytes of a data entry.
pub const DATA_ENTRY_BYTES: u64 = 76;
/// Alignment of entries in the entry table (and of headers in the file).
pub const ENTRY_ALIGNMENT: u64 = 16;
/// Writers' default alignment of parameter data.
pub const DEFAULT_DATA_ALIGNMENT: u64 = 64;
/// Writers' default alignment of the file size.
pub const DEFAULT_FILE_ALIGNMENT: u64 = 4096;
/// The most archives a chain of next-header offsets may link.
pub const MAX_ARCHIVES: usize = 1024;
/// The longest splat entry accepted (1 TiB): a splat's length costs nothing in the file, so it
/// is the one size a file can ask for without paying for it in bytes. Longer ones are
/// `RESOURCE_EXHAUSTED` (upstream has no bound).
pub const MAX_SPLAT_BYTES: u64 = 1 << 40;

/// The index of an IRPA file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrpaIndex {
    archives: usize,
    entry_metadata: Vec<Vec<u8>>,
    index: ParameterIndex,
}

impl IrpaIndex {
    /// Reads the archive headers and entry tables of the file behind `reader`.
    ///
    /// # Errors
    /// See the module documentation; `FAILED_PRECONDITION` when the reader's size is unknown;
    /// reader errors pass through.
    pub async fn parse<R: RangeRead + ?Sized>(reader: &R) -> StatusResult<Self> {
        let size = known_size(reader, Format::Irpa)?;
        if size < PREFIX_BYTES {
            return Err(Status::invalid_argument(
                "not enough bytes for a valid IRPA header; file may be empty or truncated",
            ));
        }
        let reader = PrefixCachedReader::new(reader).await?;
        let mut parsed = Self {
            archives: 0,
            entry_metadata: Vec::new(),
            index: ParameterIndex::default(),
        };
        let mut entries = Vec::new();
        let mut base = 0u64;
        loop {
            parsed.archives += 1;
            if parsed.archives > MAX_ARCHIVES {
                return Err(Status::invalid_argument(format!(
                    "IRPA file chains more than {MAX_ARCHIVES} archives"
                )));
            }
            let next = parse_archive(&reader, size, base, &mut entries, &mut parsed).await?;
            if next == 0 {
                break;
            }
            // `parse_archive` checked that base + next is inside the file.
            base += next;
        }
        parsed.index = ParameterIndex::new(entries, Some(size));
        Ok(parsed)
    }

    /// How many archives the file chains (1 for most files).
    pub fn archives(&self) -> usize {
        self.archives
    }

    /// The metadata blob of entry `index` (in [`IrpaIndex::index`] order); empty when none.
    pub fn entry_metadata(&self, index: usize) -> Option<&[u8]> {
        self.entry_metadata.get(index).map(Vec::as_slice)
    }

    /// The parameters in table order: data entries with absolute offsets, splat entries with
    /// their patterns. IRPA records no dtype or shape.
    pub fn index(&self) -> &ParameterIndex {
        &self.index
    }

    /// The parameters, dropping the rest.
    pub fn into_index(self) -> ParameterIndex {
        self.index
    }
}

/// An offset/length pair as the archive stores it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Range {
    pub(crate) offset: u64,
    pub(crate) length: u64,
}

impl Range {
    pub(crate) fn at(bytes: &[u8], at: usize, what: &str) -> StatusResult<Self> {
        Ok(Self {
            offset: le_u64(bytes, at, what)?,
            length: le_u64(bytes, at + 8, what)?,
        })
    }

    /// The end of the range within a space of `limit` bytes, or `OUT_OF_RANGE`.
    pub(crate) fn end_within(self, limit: u64, what: &str) -> StatusResult<u64> {
        match self.offset.checked_add(self.length) {
            Some(end) if end <= limit => Ok(end),
            _ => Err(Status::out_of_range(format!(
                "{what} [{}, +{}) is out of range of {limit} bytes",
                self.offset, self.length
            ))),
        }
    }
}

/// Indexes the archive whose header is at `base`; returns its next-header offset.
async fn parse_archive<R: RangeRead + ?Sized>(
    reader: &PrefixCachedReader<'_, R>,
    size: u64,
    base: u64,
    entries: &mut Vec<IndexEntry>,
    parsed: &mut IrpaIndex,
) -> StatusResult<u64> {
    if base.checked_add(PREFIX_BYTES).is_none_or(|end| end > size) {
        return Err(Status::invalid_argument(format!(
            "not enough bytes for a valid IRPA header at offset {base}; file may be truncated"
        )));
    }
    let prefix = read_exact(reader, base, PREFIX_BYTES).await?;
    let magic = le_u32(&prefix, 0, "IRPA magic")?;
    if magic != MAGIC {
        return Err(Status::invalid_argument(format!(
            "IRPA file magic missing or invalid {magic:08X}; expected {MAGIC:08X}"
        )));
    }
    let major = le_u16(&prefix, 4, "IRPA version")?;
    let minor = le_u16(&prefix, 6, "IRPA version")?;
    let header_size = le_u64(&prefix, 8, "IRPA header size")?;
    let next_header = le_u64(&prefix, 16, "IRPA next header offset")?;
    if base.checked_add(header_size).is_none_or(|end| end > size) {
        return Err(Status::out_of_range(format!(
            "IRPA header at {base} of reported size {header_size} runs past the {size}-byte file"
        )));
    }
    let next_end = base
        .checked_add(next_header)
        .and_then(|next| next.checked_add(PREFIX_BYTES));
    if next_header != 0 && next_end.is_none_or(|end| end > size) {
        return Err(Status::out_of_range(format!(
            "IRPA linked header at {base} + {next_header} runs past the {size}-byte file"
        )));
    }
    if major != 0 || minor > 0 {
        return Err(Status::unimplemented(format!(
            "IRPA version {major}.{minor} not supported; this reader supports 0.0"
        )));
    }
    if header_size != HEADER_V0_BYTES {
        return Err(Status::invalid_argument(format!(
            "IRPA v0 header expected to be exactly {HEADER_V0_BYTES} bytes but was reported as \
             {header_size}"
        )));
    }
    let header = read_exact(reader, base, HEADER_V0_BYTES).await?;
    let entry_count = le_u64(&header, 32, "IRPA entry count")?;
    let entry_segment = Range::at(&header, 40, "IRPA entry segment")?;
    let metadata_segment = Range::at(&header, 56, "IRPA metadata segment")?;
    let storage_segment = Range::at(&header, 72, "IRPA storage segment")?;
    let available = size - base;
    for (segment, what) in [
        (entry_segment, "IRPA entry segment"),
        (metadata_segment, "IRPA metadata segment"),
        (storage_segment, "IRPA storage segment"),
    ] {
        if segment.length != 0 {
            segment.end_within(available, what)?;
        }
    }
    for (segment, what) in [
        (entry_segment, "IRPA entry table"),
        (metadata_segment, "IRPA metadata segment"),
    ] {
        if segment.length > MAX_HEADER_BYTES {
            return Err(Status::invalid_argument(format!(
                "{what} of {} bytes exceeds the limit of {MAX_HEADER_BYTES} bytes",
                segment.length
            )));
        }
    }
    let (table, names) = read_segments(reader, base, entry_segment, metadata_segment).await?;
    let archive = Archive {
        base,
        table: &table,
        names: &names,
        storage: storage_segment,
    };
    archive.walk(entry_count, entries, &mut parsed.entry_metadata)?;
    Ok(next_header)
}

/// Reads the entry table and the metadata segment: one read when they lie near each other.
async fn read_segments<R: RangeRead + ?Sized>(
    reader: &PrefixCachedReader<'_, R>,
    base: u64,
    table: Range,
    names: Range,
) -> StatusResult<(Vec<u8>, Vec<u8>)> {
    // Both ranges were checked to lie inside the file (or are empty), so no sum overflows.
    let start = |range: Range| base + range.offset;
    let end = |range: Range| base + range.offset + range.length;
    let read = |range: Range| async move {
        if range.length == 0 {
            Ok(Vec::new())
        } else {
            read_exact(reader, start(range), range.length).await
        }
    };
    if table.length == 0 || names.length == 0 {
        return Ok((read(table).await?, read(names).await?));
    }
    let union_start = start(table).min(start(names));
    let union_end = end(table).max(end(names));
    let union_length = union_end - union_start;
    if union_length > table.length + names.length + INITIAL_READ_BYTES {
        return Ok((read(table).await?, read(names).await?));
    }
    let bytes = read_exact(reader, union_start, union_length).await?;
    let slice = |range: Range| -> StatusResult<Vec<u8>> {
        let from = (start(range) - union_start) as usize;
        bytes
            .get(from..from + range.length as usize)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Status::out_of_range("IRPA segment read came back short"))
    };
    Ok((slice(table)?, slice(names)?))
}
