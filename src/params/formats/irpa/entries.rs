//! The entry table of one IRPA archive: walking its 16-byte-aligned entries and turning data
//! and splat entries into index entries.

use crate::error::{Status, StatusCode};
use crate::params::formats::align_up;
use crate::params::formats::irpa::{
    DATA_ENTRY_BYTES, ENTRY_ALIGNMENT, ENTRY_HEADER_BYTES, MAX_SPLAT_BYTES, Range,
    SPLAT_ENTRY_BYTES,
};
use crate::params::{EntryStorage, IndexEntry, StatusResult};

const TYPE_SKIP: u32 = 0;
const TYPE_SPLAT: u32 = 1;
const TYPE_DATA: u32 = 2;
const TYPE_EXTERNAL: u32 = 3;

/// One archive's entry table and metadata segment, in memory.
pub(crate) struct Archive<'a> {
    pub(crate) base: u64,
    pub(crate) table: &'a [u8],
    pub(crate) names: &'a [u8],
    pub(crate) storage: Range,
}

impl Archive<'_> {
    /// Walks `count` entries of the table, appending parameters and their metadata.
    pub(crate) fn walk(
        &self,
        count: u64,
        entries: &mut Vec<IndexEntry>,
        metadata: &mut Vec<Vec<u8>>,
    ) -> StatusResult<()> {
        let mut at = 0u64;
        let mut remaining = self.table.len() as u64;
        for _ in 0..count {
            if remaining < ENTRY_HEADER_BYTES {
                return Err(Status::out_of_range(
                    "IRPA entry table truncated; insufficient bytes for base entry header",
                ));
            }
            // `at + remaining` is the table's length, so `at` fits in usize.
            let entry = self.table.get(at as usize..).unwrap_or_default();
            let entry_size = le_u64(entry, 0, "IRPA entry size")?;
            if entry_size < ENTRY_HEADER_BYTES || remaining < entry_size {
                return Err(Status::out_of_range(
                    "IRPA entry table truncated; insufficient bytes for sized header",
                ));
            }
            let entry = entry.get(..entry_size as usize).unwrap_or_default();
            // The last entry's trailing padding may be missing from the table.
            let step = align_up(entry_size, ENTRY_ALIGNMENT).unwrap_or(u64::MAX);
            at = at.saturating_add(step);
            remaining = remaining.saturating_sub(step);
            self.add_entry(entry, entries, metadata)?;
        }
        Ok(())
    }

    fn add_entry(
        &self,
        entry: &[u8],
        entries: &mut Vec<IndexEntry>,
        metadata: &mut Vec<Vec<u8>>,
    ) -> StatusResult<()> {
        let kind = le_u32(entry, 8, "IRPA entry type")?;
        let name = self.metadata_ref(Range::at(entry, 20, "IRPA entry name")?, "entry name")?;
        let blob = self.metadata_ref(Range::at(entry, 36, "IRPA entry metadata")?, "metadata")?;
        let key = String::from_utf8(name.to_vec()).map_err(|error| {
            Status::invalid_argument(format!("IRPA entry name is not UTF-8: {error}"))
        })?;
        let (length, storage) = match kind {
            TYPE_SKIP => return Ok(()),
            TYPE_SPLAT => splat(&key, entry)?,
            TYPE_DATA => self.data(&key, entry)?,
            TYPE_EXTERNAL => {
                return Err(Status::unimplemented(format!(
                    "IRPA entry {key:?} references an external file, which is not supported"
                )));
            }
            other => {
                return Err(Status::unimplemented(format!(
                    "IRPA parser does not support entry type {other} (entry {key:?})"
                )));
            }
        };
        entries.push(IndexEntry {
            key,
            length,
            storage,
            dtype: None,
            shape: None,
        });
        metadata.push(blob.to_vec());
        Ok(())
    }

    /// The bytes a metadata-segment reference names (empty for a zero length).
    fn metadata_ref(&self, range: Range, what: &str) -> StatusResult<&[u8]> {
        if range.length == 0 {
            return Ok(&[]);
        }
        let end = range.end_within(
            self.names.len() as u64,
            &format!("IRPA {what} reference into the metadata segment"),
        )?;
        self.names
            .get(range.offset as usize..end as usize)
            .ok_or_else(|| Status::out_of_range(format!("IRPA {what} reference is out of range")))
    }

    fn data(&self, key: &str, entry: &[u8]) -> StatusResult<(u64, EntryStorage)> {
        if (entry.len() as u64) < DATA_ENTRY_BYTES {
            return Err(Status::out_of_range(format!(
                "IRPA data entry {key:?} length underflow"
            )));
        }
        let storage = Range::at(entry, 60, "IRPA data entry storage")?;
        if storage.length == 0 {
            return Ok((0, EntryStorage::Data { offset: 0 }));
        }
        storage.end_within(
            self.storage.length,
            &format!("IRPA data entry {key:?} storage reference"),
        )?;
        // Inside the storage segment, which was checked to lie inside the file.
        let offset = self.base + self.storage.offset + storage.offset;
        Ok((storage.length, EntryStorage::Data { offset }))
    }
}

fn splat(key: &str, entry: &[u8]) -> StatusResult<(u64, EntryStorage)> {
    if (entry.len() as u64) < SPLAT_ENTRY_BYTES {
        return Err(Status::out_of_range(format!(
            "IRPA splat entry {key:?} length underflow"
        )));
    }
    let length = le_u64(entry, 60, "IRPA splat length")?;
    if length > MAX_SPLAT_BYTES {
        return Err(Status::new(
            StatusCode::ResourceExhausted,
            format!(
                "IRPA splat entry {key:?} asks for {length} bytes, more than the \
                 {MAX_SPLAT_BYTES}-byte limit on one splat parameter"
            ),
        ));
    }
    let pattern_length = entry.get(84).copied().unwrap_or_default();
    if !matches!(pattern_length, 1 | 2 | 4 | 8 | 16) {
        return Err(Status::invalid_argument(format!(
            "IRPA splat entry {key:?} has pattern length {pattern_length}; it must be 1, 2, 4, 8 \
             or 16"
        )));
    }
    if length % u64::from(pattern_length) != 0 {
        return Err(Status::invalid_argument(format!(
            "IRPA splat entry {key:?}: pattern of {pattern_length} bytes does not divide its \
             length {length}"
        )));
    }
    let pattern = entry
        .get(68..68 + usize::from(pattern_length))
        .ok_or_else(|| Status::out_of_range("IRPA splat pattern out of range"))?
        .to_vec();
    Ok((length, EntryStorage::Splat { pattern }))
}

fn field<const N: usize>(bytes: &[u8], at: usize, what: &str) -> StatusResult<[u8; N]> {
    bytes
        .get(at..at + N)
        .and_then(|slice| slice.try_into().ok())
        .ok_or_else(|| -> Status { Status::out_of_range(format!("{what}: field out of range")) })
}

pub(crate) fn le_u16(bytes: &[u8], at: usize, what: &str) -> StatusResult<u16> {
    field(bytes, at, what).map(u16::from_le_bytes)
}

pub(crate) fn le_u32(bytes: &[u8], at: usize, what: &str) -> StatusResult<u32> {
    field(bytes, at, what).map(u32::from_le_bytes)
}

pub(crate) fn le_u64(bytes: &[u8], at: usize, what: &str) -> StatusResult<u64> {
    field(bytes, at, what).map(u64::from_le_bytes)
}
