//! The index of a weights file: which key lives at which bytes. Built by the format parsers
//! (`safetensors`, GGUF, IRPA) from small ranged reads, used by file-backed providers.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::provider::{ParameterInfo, ShapeOrder};
use crate::send_sync::LocalBoxFuture;

/// Where one parameter's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryStorage {
    /// `length` bytes at absolute file offset `offset`.
    Data {
        /// Absolute offset of the first byte within the file.
        offset: u64,
    },
    /// The parameter is `pattern` repeated (IRPA splat entries); no file bytes.
    Splat {
        /// The repeated pattern (1 to 16 bytes).
        pattern: Vec<u8>,
    },
}

/// One parameter in an index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// The key.
    pub key: String,
    /// Length in bytes.
    pub length: u64,
    /// Where the bytes are.
    pub storage: EntryStorage,
    /// Element type as the file names it (e.g. `"F32"`, `"Q8_0"`), when recorded.
    pub dtype: Option<String>,
    /// Shape, when recorded (in the file's own order).
    pub shape: Option<Vec<u64>>,
}

/// The parameters of one file, in file order. Lookup is linear and the first match wins, as
/// upstream's index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParameterIndex {
    entries: Vec<IndexEntry>,
    file_size: Option<u64>,
    shape_order: ShapeOrder,
}

impl ParameterIndex {
    /// An index of `entries` in a file of `file_size` bytes (when known), shapes row-major.
    pub fn new(entries: Vec<IndexEntry>, file_size: Option<u64>) -> Self {
        Self {
            entries,
            file_size,
            shape_order: ShapeOrder::RowMajor,
        }
    }

    /// The same index, its entries' shapes listed in `order`.
    pub fn with_shape_order(mut self, order: ShapeOrder) -> Self {
        self.shape_order = order;
        self
    }

    /// The order of the entries' shapes.
    pub fn shape_order(&self) -> ShapeOrder {
        self.shape_order
    }

    /// What `describe` reports for `key`.
    pub fn info(&self, key: &str) -> Option<ParameterInfo> {
        self.get(key).map(|entry| ParameterInfo {
            length: entry.length,
            dtype: entry.dtype.clone(),
            shape: entry.shape.clone(),
            shape_order: self.shape_order,
        })
    }

    /// The entry for `key` (the first, if a file repeats a key).
    pub fn get(&self, key: &str) -> Option<&IndexEntry> {
        self.entries.iter().find(|entry| entry.key == key)
    }

    /// The entry for `key`.
    ///
    /// # Errors
    /// `NOT_FOUND` naming the key.
    pub fn require(&self, key: &str) -> StatusResult<&IndexEntry> {
        self.get(key).ok_or_else(|| {
            Status::new(
                StatusCode::NotFound,
                format!("no parameter {key:?} in the index"),
            )
        })
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// The file's size in bytes, when known.
    pub fn file_size(&self) -> Option<u64> {
        self.file_size
    }
}

/// Ranged reads of one file: what an index parser needs, and no more. Implemented over HTTP
/// Range requests, in-memory bytes and local files.
pub trait RangeRead {
    /// The file's total size in bytes, when known.
    fn size(&self) -> Option<u64>;

    /// Exactly `length` bytes from `offset`.
    ///
    /// # Errors
    /// `OUT_OF_RANGE` when the range ends past the file; transport errors as statuses.
    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>>;
}

impl RangeRead for [u8] {
    fn size(&self) -> Option<u64> {
        Some(self.len() as u64)
    }

    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            crate::params::check_span("file", offset, length, self.len() as u64)?;
            Ok(self[offset as usize..(offset + length) as usize].to_vec())
        })
    }
}
