//! Where one request's body goes: its bytes, chunk by chunk and in file order, are cut into the
//! request's pieces and written to their destinations with 4-byte-aligned writes only. Up to 3
//! bytes per piece are carried from one chunk to the next to keep writes aligned; the unaligned
//! ends of each piece go to the [`EdgeStore`]. Optional SHA-256 digests (per parameter, per
//! file) are computed on the way through.
//!
//! The sink survives a failed attempt: after a retry or a suspension the request resumes at
//! [`RequestSink::position`], the first byte not yet consumed, with its carries and digests intact.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::loading::destination::Destination;
use crate::params::http::loading::edges::EdgeStore;
use crate::params::http::planning::planner::{Piece, PlannedRequest};
use crate::params::http::transport::BodyChunk;
use crate::params::http::transport::staging::StagingPool;
use sha2::{Digest, Sha256};
use std::cell::RefCell;

/// The destinations of one load, shared by its requests.
pub struct LoadTargets<'a> {
    /// One per planned target index.
    pub destinations: Vec<Destination<'a>>,
    /// Unaligned edge bytes, written after the last request.
    pub edges: RefCell<EdgeStore>,
    /// Host staging buffers (for copies out of JavaScript chunks).
    pub pool: StagingPool,
}

/// A SHA-256 to check over a range of the file (a whole parameter) or a whole request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpectedDigest {
    /// The digest the bytes must have.
    pub sha256: [u8; 32],
    /// What is checked, for the error message (e.g. `parameter "w" of scope "m"`).
    pub what: String,
}

struct Cursor {
    piece: Piece,
    /// First 4-aligned buffer position inside the piece (`u64::MAX`: none).
    aligned_start: u64,
    /// Last 4-aligned buffer position inside the piece (the streamed part is [start, end)).
    aligned_end: u64,
    /// Buffer position where `carry` begins (4-aligned).
    write_at: u64,
    carry: [u8; 4],
    carry_len: usize,
}

/// The file bytes `[start, end)` must have the SHA-256 `expected` (a parameter's bytes, which
/// the planner keeps in one request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeDigest {
    /// First file byte covered.
    pub start: u64,
    /// One past the last file byte covered.
    pub end: u64,
    /// The digest and what it is of.
    pub expected: ExpectedDigest,
}

struct RangeHash {
    start: u64,
    end: u64,
    hash: Sha256,
    expected: ExpectedDigest,
}

/// Feeds one planned request's body into its pieces.
pub struct RequestSink {
    cursors: Vec<Cursor>,
    first_open: usize,
    position: u64,
    end: u64,
    range_hashes: Vec<RangeHash>,
    request_hash: Option<(Sha256, ExpectedDigest)>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn check_digest(hash: Sha256, expected: &ExpectedDigest) -> StatusResult<()> {
    let actual = hash.finalize();
    if actual.as_slice() == expected.sha256 {
        return Ok(());
    }
    Err(Status::new(
        StatusCode::DataLoss,
        format!(
            "SHA-256 of {} is {}, expected {}",
            expected.what,
            hex(&actual),
            hex(&expected.sha256)
        ),
    ))
}

impl RequestSink {
    /// A sink for `request`; of `digests`, those whose ranges lie inside the request are
    /// checked (the planner keeps a digested range in one request), and `request_digest` over
    /// every byte of the request (a whole file).
    pub fn new(
        request: &PlannedRequest,
        digests: &[RangeDigest],
        request_digest: Option<ExpectedDigest>,
    ) -> Self {
        let cursors = request
            .pieces
            .iter()
            .map(|&piece| {
                let start = piece.target_offset;
                let end = start + piece.length; // checked by the planner
                let aligned_start = start.checked_next_multiple_of(4).unwrap_or(u64::MAX);
                let aligned_end = end - end % 4;
                Cursor {
                    piece,
                    aligned_start,
                    aligned_end,
                    write_at: aligned_start,
                    carry: [0; 4],
                    carry_len: 0,
                }
            })
            .collect();
        let range_hashes = digests
            .iter()
            .filter(|d| d.start < d.end && request.start <= d.start && d.end <= request.end)
            .map(|d| RangeHash {
                start: d.start,
                end: d.end,
                hash: Sha256::new(),
                expected: d.expected.clone(),
            })
            .collect();
        Self {
            cursors,
            first_open: 0,
            position: request.start,
            end: request.end,
            range_hashes,
            request_hash: request_digest.map(|expected| (Sha256::new(), expected)),
        }
    }

    /// The next file byte the sink expects: where a resumed request starts.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// One past the last file byte the sink takes (its request's end).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Whether every byte of the request was consumed.
    pub fn is_complete(&self) -> bool {
        self.position == self.end
    }

    /// Consumes `length` bytes of `chunk` from `chunk_offset`: the file bytes at
    /// [`RequestSink::position`] onwards.
    ///
    /// # Errors
    /// `DATA_LOSS` for bytes past the request's end; destination write errors.
    pub fn consume(
        &mut self,
        targets: &LoadTargets<'_>,
        chunk: &BodyChunk,
        chunk_offset: usize,
        length: usize,
    ) -> StatusResult<()> {
        let start = self.position;
        let end = start
            .checked_add(length as u64)
            .filter(|&end| end <= self.end)
            .ok_or_else(|| {
                Status::new(
                    StatusCode::DataLoss,
                    format!("response body runs past the requested end at {}", self.end),
                )
            })?;
        if let Some((hash, _)) = &mut self.request_hash {
            for_host_bytes(chunk, chunk_offset, length, &targets.pool, |bytes| {
                hash.update(bytes)
            });
        }
        for range in &mut self.range_hashes {
            let lo = range.start.max(start);
            let hi = range.end.min(end);
            if lo < hi {
                let at = chunk_offset + (lo - start) as usize;
                for_host_bytes(chunk, at, (hi - lo) as usize, &targets.pool, |bytes| {
                    range.hash.update(bytes)
                });
            }
        }
        let mut index = self.first_open;
        while let Some(cursor) = self.cursors.get_mut(index) {
            if cursor.piece.file_offset >= end {
                break;
            }
            let lo = cursor.piece.file_offset.max(start);
            let hi = cursor.piece.file_end().min(end);
            if lo < hi {
                let at = chunk_offset + (lo - start) as usize;
                feed(cursor, targets, chunk, at, lo, hi)?;
            }
            index += 1;
        }
        while self
            .cursors
            .get(self.first_open)
            .is_some_and(|c| c.piece.file_end() <= end)
        {
            self.first_open += 1;
        }
        self.position = end;
        Ok(())
    }

    /// Checks the request's digests once every byte is in.
    ///
    /// # Errors
    /// `DATA_LOSS` when a digest differs; `INTERNAL` when bytes are missing.
    pub fn finish(&mut self) -> StatusResult<()> {
        if !self.is_complete() {
            return Err(Status::new(
                StatusCode::Internal,
                format!(
                    "request finished at byte {} before its end at {}",
                    self.position, self.end
                ),
            ));
        }
        for range in std::mem::take(&mut self.range_hashes) {
            check_digest(range.hash, &range.expected)?;
        }
        if let Some((hash, expected)) = self.request_hash.take() {
            check_digest(hash, &expected)?;
        }
        Ok(())
    }
}

/// Calls `f` on `length` bytes of `chunk` from `offset` in host memory (copied through a
/// staging buffer, window by window, when the chunk lives in JavaScript).
fn for_host_bytes(
    chunk: &BodyChunk,
    offset: usize,
    length: usize,
    pool: &StagingPool,
    mut f: impl FnMut(&[u8]),
) {
    match chunk {
        BodyChunk::Host(bytes) => f(bytes.get(offset..offset + length).unwrap_or(&[])),
        BodyChunk::Js(_) => {
            let mut staging = pool.take();
            let mut done = 0;
            while done < length {
                let step = (length - done).min(staging.capacity());
                if let Some(window) = staging.space().get_mut(..step) {
                    chunk.copy_to(offset + done, window);
                    f(window);
                }
                done += step;
            }
        }
    }
}

/// Feeds the file bytes `[lo, hi)` (at `at` in `chunk`) into one piece.
fn feed(
    cursor: &mut Cursor,
    targets: &LoadTargets<'_>,
    chunk: &BodyChunk,
    at: usize,
    lo: u64,
    hi: u64,
) -> StatusResult<()> {
    let piece = cursor.piece;
    let Some(destination) = targets.destinations.get(piece.target) else {
        return Err(Status::new(
            StatusCode::Internal,
            format!("no destination {}", piece.target),
        ));
    };
    // Buffer positions of the bytes: [b_lo, b_hi).
    let b_lo = piece.target_offset + (lo - piece.file_offset);
    let b_hi = b_lo + (hi - lo);
    let mid_lo = b_lo.max(cursor.aligned_start);
    let mid_hi = b_hi.min(cursor.aligned_end);
    // Head and tail edges: bytes outside the aligned middle.
    let edge = |from: u64, to: u64| -> StatusResult<()> {
        if from < to {
            let mut bytes = [0u8; 4];
            let count = ((to - from) as usize).min(4);
            if let Some(window) = bytes.get_mut(..count) {
                chunk.copy_to(at + (from - b_lo) as usize, window);
                targets
                    .edges
                    .borrow_mut()
                    .put_all(piece.target, from, window);
            }
        }
        Ok(())
    };
    if mid_lo >= mid_hi {
        // No aligned bytes in this stretch: all edge (at most 3 + 3 bytes in a piece).
        let head_end = b_hi.min(cursor.aligned_start);
        edge(b_lo, head_end)?;
        edge(b_lo.max(cursor.aligned_end).max(head_end), b_hi)?;
        return Ok(());
    }
    edge(b_lo, mid_lo)?;
    // The aligned middle, continuing the carry.
    let mut from = mid_lo;
    if cursor.carry_len > 0 {
        let take = (4 - cursor.carry_len).min((mid_hi - from) as usize);
        if let Some(window) = cursor
            .carry
            .get_mut(cursor.carry_len..cursor.carry_len + take)
        {
            chunk.copy_to(at + (from - b_lo) as usize, window);
        }
        cursor.carry_len += take;
        from += take as u64;
        if cursor.carry_len == 4 {
            destination.write_host(cursor.write_at, &cursor.carry)?;
            cursor.write_at += 4;
            cursor.carry_len = 0;
        }
    }
    let whole = (mid_hi - from) / 4 * 4;
    if whole > 0 {
        destination.write_chunk(
            cursor.write_at,
            chunk,
            at + (from - b_lo) as usize,
            whole as usize,
            &targets.pool,
        )?;
        cursor.write_at += whole;
        from += whole;
    }
    let rest = (mid_hi - from) as usize;
    if rest > 0 {
        if let Some(window) = cursor.carry.get_mut(..rest) {
            chunk.copy_to(at + (from - b_lo) as usize, window);
        }
        cursor.carry_len = rest;
    }
    edge(mid_hi, b_hi)
}
