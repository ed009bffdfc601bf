//! The range planner: turns the byte ranges a load wants (many tensors, many destinations) into a
//! few coalesced HTTP Range requests, and maps every request back to the destination pieces its
//! body feeds.
//!
//! Pure: no I/O, no clocks. What it promises:
//! - every wanted byte is covered by exactly one request (wanted ranges that overlap share bytes);
//! - neighbours closer than `gap_threshold` share a request (the gap bytes are fetched and
//!   dropped: that is the over-fetch, reported as [`Plan::bytes_fetched`] minus
//!   [`Plan::bytes_needed`]);
//! - no request is longer than `max_request_size`, except where an *atomic* range (one that must
//!   arrive in one body, e.g. a tensor whose SHA-256 is checked) is longer by itself;
//! - a contiguous run of `B` wanted bytes takes `ceil(B / max_request_size)` requests;
//! - every offset is checked with overflow-safe arithmetic against the file's size (when known).

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;

/// How requests are shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannerConfig {
    /// Neighbouring ranges at most this many bytes apart are fetched in one request.
    pub gap_threshold: u64,
    /// Most bytes in one request (at least 1).
    pub max_request_size: u64,
}

impl PlannerConfig {
    /// One request for everything: what a server without Range support gets.
    pub const UNBOUNDED: Self = Self {
        gap_threshold: u64::MAX,
        max_request_size: u64::MAX,
    };
}

/// A range of the file that a load needs, and where its bytes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// Absolute file offset of the first byte.
    pub file_offset: u64,
    /// Length in bytes.
    pub length: u64,
    /// Which destination (an index the caller chose, e.g. into its list of buffers).
    pub target: usize,
    /// Where the first byte goes within the destination.
    pub target_offset: u64,
    /// The range must arrive in one response body (never split across requests).
    pub atomic: bool,
}

/// Part of one request's body that goes to one destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Index of the [`Wanted`] range this piece belongs to.
    pub wanted: usize,
    /// The destination (from [`Wanted::target`]).
    pub target: usize,
    /// Where `file_offset` lands within the destination.
    pub target_offset: u64,
    /// Absolute file offset of the piece's first byte.
    pub file_offset: u64,
    /// Length in bytes.
    pub length: u64,
}

impl Piece {
    /// One past the piece's last file byte (cannot overflow: checked when planned).
    pub fn file_end(&self) -> u64 {
        self.file_offset + self.length
    }
}

/// One Range request: the file bytes `[start, end)` and the pieces they feed, sorted by file
/// offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedRequest {
    /// First byte requested.
    pub start: u64,
    /// One past the last byte requested.
    pub end: u64,
    /// Destination pieces within `[start, end)`, sorted by `file_offset`.
    pub pieces: Vec<Piece>,
}

impl PlannedRequest {
    /// Bytes requested.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the request asks for nothing (never true in a plan).
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// The requests for one load, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The requests, sorted by `start`, not overlapping.
    pub requests: Vec<PlannedRequest>,
    /// Distinct wanted bytes (the union of the wanted ranges).
    pub bytes_needed: u64,
    /// Bytes the requests ask for (needed bytes plus merged gaps).
    pub bytes_fetched: u64,
}

impl Plan {
    /// `(fetched - needed) / needed`; 0 when nothing is needed.
    pub fn overfetch_fraction(&self) -> f64 {
        if self.bytes_needed == 0 {
            return 0.0;
        }
        (self.bytes_fetched - self.bytes_needed) as f64 / self.bytes_needed as f64
    }
}

/// Checks every wanted range against the file and returns `(start, end, atomic)` per range.
fn checked_ranges(wanted: &[Wanted], file_size: Option<u64>) -> StatusResult<Vec<(u64, u64)>> {
    wanted
        .iter()
        .map(|w| {
            let end = w.file_offset.checked_add(w.length).ok_or_else(|| {
                Status::out_of_range(format!(
                    "range of {} bytes at file offset {} overflows",
                    w.length, w.file_offset
                ))
            })?;
            w.target_offset.checked_add(w.length).ok_or_else(|| {
                Status::out_of_range(format!(
                    "destination range of {} bytes at offset {} overflows",
                    w.length, w.target_offset
                ))
            })?;
            if let Some(size) = file_size
                && end > size
            {
                return Err(Status::out_of_range(format!(
                    "file range [{}, {end}) runs past the end of the {size}-byte file",
                    w.file_offset
                )));
            }
            Ok((w.file_offset, end))
        })
        .collect()
}

/// Sorted, disjoint, non-adjacent union of `ranges` (empty ranges dropped).
fn union(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.retain(|(start, end)| end > start);
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (start, end) in ranges {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// Groups the needed intervals into segments whose inner gaps are at most `gap_threshold`.
fn segments(needed: &[(u64, u64)], gap_threshold: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(start, end) in needed {
        match out.last_mut() {
            // `needed` is disjoint and sorted, so start > last.1.
            Some(last) if start - last.1 <= gap_threshold => last.1 = end,
            _ => out.push((start, end)),
        }
    }
    out
}

/// The atomic block containing `position` strictly inside it, if any (`atomic` is a sorted
/// disjoint union).
fn atomic_around(atomic: &[(u64, u64)], position: u64) -> Option<(u64, u64)> {
    let index = atomic.partition_point(|&(_, end)| end <= position);
    atomic
        .get(index)
        .copied()
        .filter(|&(start, end)| start < position && position < end)
}

/// `[start, end)` trimmed to the needed bytes inside it, or `None` when it holds none.
fn trim(needed: &[(u64, u64)], start: u64, end: u64) -> Option<(u64, u64)> {
    let first = needed.partition_point(|&(_, e)| e <= start);
    let last = needed.partition_point(|&(s, _)| s < end);
    if first >= last {
        return None;
    }
    let lo = needed.get(first)?.0.max(start);
    let hi = needed.get(last - 1)?.1.min(end);
    (lo < hi).then_some((lo, hi))
}

/// Plans the requests that fetch `wanted` from a file of `file_size` bytes (when known).
///
/// # Errors
/// `OUT_OF_RANGE` when a wanted range overflows or ends past the file; `INVALID_ARGUMENT` when
/// `max_request_size` is 0.
pub fn plan(
    wanted: &[Wanted],
    config: PlannerConfig,
    file_size: Option<u64>,
) -> StatusResult<Plan> {
    if config.max_request_size == 0 {
        return Err(Status::new(
            StatusCode::InvalidArgument,
            "max request size must be at least 1 byte",
        ));
    }
    let ranges = checked_ranges(wanted, file_size)?;
    let needed = union(ranges.clone());
    let atomic = union(
        ranges
            .iter()
            .zip(wanted)
            .filter(|(_, w)| w.atomic)
            .map(|(range, _)| *range)
            .collect(),
    );
    let mut bounds = Vec::new();
    for (seg_start, seg_end) in segments(&needed, config.gap_threshold) {
        let mut start = seg_start;
        while start < seg_end {
            let mut cut = start.saturating_add(config.max_request_size).min(seg_end);
            if let Some((a_start, a_end)) = atomic_around(&atomic, cut) {
                cut = if a_start > start { a_start } else { a_end };
            }
            if let Some(range) = trim(&needed, start, cut) {
                bounds.push(range);
            }
            start = cut;
        }
    }
    let mut requests: Vec<PlannedRequest> = bounds
        .iter()
        .map(|&(start, end)| PlannedRequest {
            start,
            end,
            pieces: Vec::new(),
        })
        .collect();
    attach_pieces(&mut requests, wanted, &ranges);
    let bytes_needed = needed.iter().map(|(s, e)| e - s).sum();
    let bytes_fetched = requests.iter().map(PlannedRequest::len).sum();
    Ok(Plan {
        requests,
        bytes_needed,
        bytes_fetched,
    })
}

/// One request for the whole file `[0, file_size)`, feeding every wanted range: for checks that
/// must see every byte in order (a SHA-256 of the file).
///
/// # Errors
/// As [`plan`].
pub fn plan_whole_file(wanted: &[Wanted], file_size: u64) -> StatusResult<Plan> {
    let ranges = checked_ranges(wanted, Some(file_size))?;
    let needed = union(ranges.clone());
    let mut requests = Vec::new();
    if file_size > 0 {
        requests.push(PlannedRequest {
            start: 0,
            end: file_size,
            pieces: Vec::new(),
        });
    }
    attach_pieces(&mut requests, wanted, &ranges);
    Ok(Plan {
        requests,
        bytes_needed: needed.iter().map(|(s, e)| e - s).sum(),
        bytes_fetched: file_size,
    })
}

/// Splits every wanted range over the (sorted, disjoint) requests that cover it.
fn attach_pieces(requests: &mut [PlannedRequest], wanted: &[Wanted], ranges: &[(u64, u64)]) {
    for (index, (w, &(start, end))) in wanted.iter().zip(ranges).enumerate() {
        if start == end {
            continue;
        }
        let first = requests.partition_point(|r| r.end <= start);
        for request in requests.iter_mut().skip(first) {
            if request.start >= end {
                break;
            }
            let lo = start.max(request.start);
            let hi = end.min(request.end);
            if lo < hi {
                request.pieces.push(Piece {
                    wanted: index,
                    target: w.target,
                    // lo - start <= length, and target_offset + length was checked.
                    target_offset: w.target_offset + (lo - start),
                    file_offset: lo,
                    length: hi - lo,
                });
            }
        }
    }
    for request in requests.iter_mut() {
        request
            .pieces
            .sort_by_key(|piece| (piece.file_offset, piece.wanted));
    }
}
