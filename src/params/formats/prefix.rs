//! A reader that keeps a file's first bytes, so that format detection and the parser that follows
//! share one read.

use crate::params::formats::{INITIAL_READ_BYTES, read_exact};
use crate::params::{RangeRead, StatusResult};
use crate::send_sync::LocalBoxFuture;

/// Wraps a [`RangeRead`], holding the file's first [`INITIAL_READ_BYTES`] (or the whole file when
/// smaller). Reads inside that prefix are served from memory; a read that runs past it fetches
/// only the bytes after the prefix.
pub struct PrefixCachedReader<'a, R: RangeRead + ?Sized> {
    inner: &'a R,
    prefix: Vec<u8>,
}

impl<'a, R: RangeRead + ?Sized> PrefixCachedReader<'a, R> {
    /// Reads the prefix of `inner` (one read; none for an empty file or an unknown size).
    ///
    /// # Errors
    /// The inner reader's errors.
    pub async fn new(inner: &'a R) -> StatusResult<Self> {
        let length = inner.size().map_or(0, |size| size.min(INITIAL_READ_BYTES));
        let prefix = if length == 0 {
            Vec::new()
        } else {
            read_exact(inner, 0, length).await?
        };
        Ok(Self { inner, prefix })
    }

    /// The cached first bytes of the file.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }
}

impl<R: RangeRead + ?Sized> RangeRead for PrefixCachedReader<'_, R> {
    fn size(&self) -> Option<u64> {
        self.inner.size()
    }

    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            let cached = self.prefix.len() as u64;
            let end = offset.checked_add(length);
            match end {
                // Wholly inside the prefix (the bounds make the casts lossless).
                Some(end) if end <= cached => {
                    Ok(self.prefix[offset as usize..end as usize].to_vec())
                }
                // Starts inside the prefix and runs past it: fetch only the rest.
                Some(end) if offset < cached => {
                    let mut bytes = self.prefix[offset as usize..].to_vec();
                    bytes.extend(read_exact(self.inner, cached, end - cached).await?);
                    Ok(bytes)
                }
                _ => self.inner.read_range(offset, length).await,
            }
        })
    }
}
