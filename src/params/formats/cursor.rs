//! A forward-only cursor over a [`RangeRead`] for formats whose index is a stream of
//! variable-length fields (GGUF): it reads ahead in growing chunks, drops bytes once consumed,
//! and skips fields without reading them.
//!
//! Memory held is one chunk (at most [`MAX_CHUNK`], or one field when a kept field is larger);
//! reads are few because chunks double (64 KiB, 128 KiB, ... 8 MiB). Every position is checked
//! against the file's size and the caller's limit before any read: a field that claims more
//! bytes than exist is `OUT_OF_RANGE` without a read, one past the limit `INVALID_ARGUMENT`.

use crate::error::Status;
use crate::params::formats::{INITIAL_READ_BYTES, read_exact};
use crate::params::{RangeRead, StatusResult};

/// The largest read-ahead chunk.
pub(crate) const MAX_CHUNK: u64 = 8 << 20;

/// A position in a file, with the bytes just ahead of it.
pub(crate) struct RangeCursor<'a, R: RangeRead + ?Sized> {
    reader: &'a R,
    /// The file's size in bytes.
    size: u64,
    /// The parser may not consume bytes at or past this absolute offset.
    limit: u64,
    /// What the limit protects, for messages (e.g. "GGUF header").
    what: &'static str,
    /// Absolute offset of the next byte to consume.
    position: u64,
    /// Bytes `[buffer_start, buffer_start + buffer.len())` of the file.
    buffer: Vec<u8>,
    buffer_start: u64,
    next_chunk: u64,
    reads: usize,
}

impl<'a, R: RangeRead + ?Sized> RangeCursor<'a, R> {
    /// A cursor at offset 0 of a file of `size` bytes, which may consume up to `limit` bytes.
    pub(crate) fn new(reader: &'a R, size: u64, limit: u64, what: &'static str) -> Self {
        Self {
            reader,
            size,
            limit: limit.min(size),
            what,
            position: 0,
            buffer: Vec::new(),
            buffer_start: 0,
            next_chunk: INITIAL_READ_BYTES,
            reads: 0,
        }
    }

    /// Absolute offset of the next byte to consume.
    pub(crate) fn position(&self) -> u64 {
        self.position
    }

    /// The file's size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// How many reads the cursor has made.
    #[cfg(test)]
    pub(crate) fn reads(&self) -> usize {
        self.reads
    }

    /// The end of `count` more bytes, checked against the file and the limit.
    fn end_of(&self, count: u64, field: &str) -> StatusResult<u64> {
        let end = self.position.checked_add(count).ok_or_else(|| {
            Status::out_of_range(format!(
                "{field} of {count} bytes at offset {} overflows",
                self.position
            ))
        })?;
        if end > self.size {
            return Err(Status::out_of_range(format!(
                "file truncated: {field} needs bytes [{}, {end}) but the file has {} bytes",
                self.position, self.size
            )));
        }
        if end > self.limit {
            return Err(Status::invalid_argument(format!(
                "{field} at offset {} runs past the {} limit of {} bytes",
                self.position, self.what, self.limit
            )));
        }
        Ok(end)
    }

    /// Checks that `count` more bytes exist and are within the limit, without reading them.
    pub(crate) fn check_available(&self, count: u64, field: &str) -> StatusResult<()> {
        self.end_of(count, field).map(|_| ())
    }

    /// Makes bytes `[position, position + count)` available in the buffer.
    async fn fill(&mut self, count: u64, field: &str) -> StatusResult<()> {
        let end = self.end_of(count, field)?;
        // Invariant: `buffer_start <= position` (the buffer never starts ahead of the cursor).
        let buffered_end = self.buffer_start + self.buffer.len() as u64;
        if count == 0 || end <= buffered_end {
            return Ok(());
        }
        // Keep the unconsumed tail, if the position is still inside the buffer.
        let keep_from = self.position;
        let tail = if keep_from < buffered_end {
            self.buffer
                .split_off((keep_from - self.buffer_start) as usize)
        } else {
            Vec::new()
        };
        let read_start = keep_from + tail.len() as u64;
        let wanted = (end - read_start).max(self.next_chunk);
        let read_length = wanted.min(self.size - read_start);
        let fresh = read_exact(self.reader, read_start, read_length).await?;
        self.reads += 1;
        self.next_chunk = (self.next_chunk * 2).min(MAX_CHUNK);
        self.buffer = tail;
        self.buffer.extend_from_slice(&fresh);
        self.buffer_start = keep_from;
        Ok(())
    }

    /// Consumes `count` bytes and returns them.
    pub(crate) async fn take(&mut self, count: u64, field: &str) -> StatusResult<&[u8]> {
        if count == 0 {
            return Ok(&[]);
        }
        self.fill(count, field).await?;
        let start = (self.position - self.buffer_start) as usize;
        self.position += count;
        // `fill` made these bytes present, so the range is inside the buffer.
        self.buffer
            .get(start..start + count as usize)
            .ok_or_else(|| Status::out_of_range(format!("{field}: cursor buffer underrun")))
    }

    /// Consumes `count` bytes without reading them (when not already buffered).
    pub(crate) fn skip(&mut self, count: u64, field: &str) -> StatusResult<()> {
        self.position = self.end_of(count, field)?;
        Ok(())
    }

    /// Consumes `N` bytes.
    pub(crate) async fn array<const N: usize>(&mut self, field: &str) -> StatusResult<[u8; N]> {
        let bytes = self.take(N as u64, field).await?;
        bytes
            .try_into()
            .map_err(|_| Status::out_of_range(format!("{field}: short read")))
    }

    /// Consumes a little-endian `u32`.
    pub(crate) async fn u32(&mut self, field: &str) -> StatusResult<u32> {
        Ok(u32::from_le_bytes(self.array(field).await?))
    }

    /// Consumes a little-endian `u64`.
    pub(crate) async fn u64(&mut self, field: &str) -> StatusResult<u64> {
        Ok(u64::from_le_bytes(self.array(field).await?))
    }
}
