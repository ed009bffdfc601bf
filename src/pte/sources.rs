//! Where a method's bytes lie in a `.pte` besides its own table: the file's segments (absolute
//! byte ranges), its constants (the `constant_segment`'s sub-segments or the older
//! `constant_buffer`) and inline delegate blobs, with the checked index and range helpers both
//! the container (`file`) and the plans (`plan`) use. Built by `file` once per file; read by
//! `plan` while it checks each method.

use crate::error::{Error, Result};
use crate::executorch_schema::program as fb;
use std::ops::Range;

/// One segment of the file: absolute byte range.
pub(crate) type SegmentRange = Range<usize>;

/// `what`'s `u64` as a `usize` within `limit`, or `InvalidProgram`.
pub(crate) fn checked_index(value: u64, limit: usize, what: &str) -> Result<usize> {
    usize::try_from(value)
        .ok()
        .filter(|&index| index < limit)
        .ok_or_else(|| {
            Error::invalid_program(format!(
                "{what} {value} is out of range (there are {limit})"
            ))
        })
}

/// Where constant tensor data lives: the flatbuffer's `constant_buffer` (older files) or the
/// sub-segments of the `constant_segment` (index 0 is reserved in both).
pub(crate) enum Constants {
    /// No constants.
    None,
    /// Absolute ranges of `constant_buffer` entries.
    Buffers(Vec<Range<usize>>),
    /// The constant segment's absolute range and the sub-segments' offsets within it.
    Segment {
        /// The segment.
        segment: Range<usize>,
        /// Where each constant starts, relative to the segment.
        offsets: Vec<u64>,
    },
}

/// The range `inner` occupies in `outer` (`inner` must be a sub-slice of `outer`, as every
/// slice the verified flatbuffer hands out is).
pub(crate) fn range_within(outer: &[u8], inner: &[u8]) -> Range<usize> {
    let start = (inner.as_ptr() as usize).wrapping_sub(outer.as_ptr() as usize);
    start..start.saturating_add(inner.len())
}

impl Constants {
    pub(crate) fn of(
        program: &fb::Program<'_>,
        segments: &[SegmentRange],
        bytes: &[u8],
    ) -> Result<Self> {
        if let Some(constant_segment) = program.constant_segment()
            && let Some(offsets) = constant_segment.offsets().filter(|o| !o.is_empty())
        {
            let index = checked_index(
                constant_segment.segment_index().into(),
                segments.len(),
                "the constant segment index",
            )?;
            return Ok(Self::Segment {
                segment: segments[index].clone(),
                offsets: offsets.iter().collect(),
            });
        }
        let Some(buffers) = program.constant_buffer().filter(|b| !b.is_empty()) else {
            return Ok(Self::None);
        };
        Ok(Self::Buffers(
            buffers
                .iter()
                .map(|buffer| range_within(bytes, buffer.storage().map_or(&[][..], |s| s.bytes())))
                .collect(),
        ))
    }

    /// The absolute range of constant `index` holding `nbytes`, checked against its buffer or
    /// segment.
    pub(crate) fn get(&self, index: usize, nbytes: usize) -> Result<Range<usize>> {
        let range = match self {
            Self::None => None,
            Self::Buffers(ranges) => ranges
                .get(index)
                .filter(|range| range.len() >= nbytes)
                .map(|range| range.start..range.start + nbytes),
            Self::Segment { segment, offsets } => offsets.get(index).and_then(|&offset| {
                let start = segment.start.checked_add(usize::try_from(offset).ok()?)?;
                let end = start.checked_add(nbytes)?;
                (end <= segment.end).then_some(start..end)
            }),
        };
        range.ok_or_else(|| {
            Error::invalid_program(format!(
                "constant {index} of {nbytes} bytes is missing or runs past its buffer"
            ))
        })
    }
}

/// What a plan reads besides its own table: the file, its segments, inline delegate blobs and
/// constants.
pub(crate) struct PlanSources<'a> {
    pub(crate) segments: &'a [SegmentRange],
    pub(crate) inline_delegate_data: &'a [Range<usize>],
    pub(crate) constants: &'a Constants,
}
