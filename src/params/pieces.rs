//! A parameter across several buffers: where a span larger than the largest buffer a device
//! can make is cut, always at row boundaries, so every piece holds whole rows a kernel can use
//! on its own (rows of a `[.., rows, cols]` tensor: its innermost dimension, the contiguous run;
//! the other dimensions multiplied are the row count).
//!
//! Pure: no buffers, no I/O. What it promises, for a span `[offset, offset + length)` of a
//! parameter of `rows` rows of `row_bytes` bytes and a largest buffer of `max` bytes:
//! - the pieces are consecutive, in order, and cover the span exactly;
//! - every piece, rounded up to a whole 4-byte word (GPU writes are whole words), fits in `max`;
//! - a span that must be cut takes the fewest pieces whole rows allow (`n`, at most
//!   `⌊(max rounded down to a word) / row_bytes⌋` rows each), balanced: cuts fall at
//!   parameter-relative multiples of `⌈rows the span touches / n⌉ × row_bytes` (never a buffer of
//!   exactly the limit when it need not be: some drivers refuse that size, see `plan_pieces`);
//! - a span that fits in one buffer is one piece, whether or not the parameter has a shape;
//! - `RESOURCE_EXHAUSTED` (before anything is allocated or fetched) when the span must be cut
//!   but cannot be: the caller asked for one buffer, the parameter has no shape to cut by, or a
//!   single row is larger than `max`. The message names the size and the limit.

use crate::error::Status;
use crate::params::{LoadedSpan, ParameterInfo, StatusResult};

/// How a load places a span that does not fit in one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferPlacement {
    /// The largest buffer to make, in bytes, below the allocator's own limit (`None`: the
    /// allocator's limit, e.g. the device's `maxBufferSize`).
    pub max_buffer_bytes: Option<u64>,
    /// Cut a span that does not fit into several buffers at row boundaries (`false`: refuse
    /// it with `RESOURCE_EXHAUSTED`, as a caller that needs one buffer per span asks).
    pub split_rows: bool,
}

impl BufferPlacement {
    /// One buffer per span, at most the allocator's limit: what IREE's `load` promises.
    pub const SINGLE: Self = Self {
        max_buffer_bytes: None,
        split_rows: false,
    };

    /// Cut at row boundaries where a span exceeds the allocator's limit.
    pub const SPLIT_ROWS: Self = Self {
        max_buffer_bytes: None,
        split_rows: true,
    };

    /// The largest buffer this placement makes on an allocator whose limit is `allocator_max`.
    pub fn limit(&self, allocator_max: u64) -> u64 {
        self.max_buffer_bytes
            .map_or(allocator_max, |cap| cap.min(allocator_max))
    }
}

/// One piece of a span: the parameter's bytes `[parameter_offset, parameter_offset + length)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PiecePlan {
    /// Offset of the piece's first byte within the parameter.
    pub parameter_offset: u64,
    /// Bytes in the piece.
    pub length: u64,
    /// The rows the piece touches, `[first, end)` (a span that starts or ends inside a row
    /// touches part of it), when the parameter's shape is known.
    pub rows: Option<(u64, u64)>,
}

/// One piece of a loaded span: its bytes, in a buffer of their own.
#[derive(Clone, Debug)]
pub struct LoadedPiece {
    /// The buffer and where the piece's bytes are in it.
    pub span: LoadedSpan,
    /// Offset of the piece's first byte within the parameter.
    pub parameter_offset: u64,
    /// The rows it touches, `[first, end)`, when the parameter's shape is known.
    pub rows: Option<(u64, u64)>,
}

/// A parameter's row layout: `rows` rows of `row_bytes` bytes, from its shape and length.
fn row_layout(info: &ParameterInfo) -> Option<(u64, u64)> {
    let shape = info.row_major_shape()?;
    let (_, outer) = shape.split_last()?;
    let rows = outer
        .iter()
        .try_fold(1u64, |product, &d| product.checked_mul(d))?;
    if rows == 0 || !info.length.is_multiple_of(rows) {
        return None;
    }
    Some((rows, info.length / rows))
}

fn rows_of(layout: Option<(u64, u64)>, start: u64, end: u64) -> Option<(u64, u64)> {
    let (_, row_bytes) = layout?;
    if row_bytes == 0 {
        return None;
    }
    Some((start / row_bytes, end.div_ceil(row_bytes)))
}

/// How many pieces cutting `[start, end)` at multiples of `step` makes.
fn cut_count(start: u64, end: u64, step: u64) -> u64 {
    if step == 0 || end <= start {
        return 0;
    }
    (end - 1) / step - start / step + 1
}

/// The pieces of the span `[offset, offset + length)` of the parameter `info` (named `what` in
/// errors) under `placement`, on an allocator whose largest buffer is `allocator_max` bytes.
///
/// # Errors
/// `RESOURCE_EXHAUSTED` as the module docs say; `OUT_OF_RANGE` when the span overflows.
pub fn plan_pieces(
    what: &str,
    info: &ParameterInfo,
    offset: u64,
    length: u64,
    placement: BufferPlacement,
    allocator_max: u64,
) -> StatusResult<Vec<PiecePlan>> {
    let end = offset
        .checked_add(length)
        .ok_or_else(|| Status::out_of_range(format!("{what}: span end overflows")))?;
    let max = placement.limit(allocator_max);
    let usable = max - max % 4;
    let layout = row_layout(info);
    let rounded = length.checked_next_multiple_of(4).unwrap_or(u64::MAX);
    if rounded <= usable {
        return Ok(vec![PiecePlan {
            parameter_offset: offset,
            length,
            rows: rows_of(layout, offset, end),
        }]);
    }
    let too_large = |why: String| {
        Status::resource_exhausted(format!(
            "{what}: {length} bytes do not fit in one buffer of at most {max} bytes{why}"
        ))
    };
    if !placement.split_rows {
        return Err(too_large(
            " (one buffer was asked for; allow splitting by rows to load it)".to_owned(),
        ));
    }
    let Some((_, row_bytes)) = layout else {
        return Err(too_large(
            " and it has no shape to split by rows (its index records none, or the shape \
             disagrees with its length)"
                .to_owned(),
        ));
    };
    let rows_per_piece = usable / row_bytes;
    if rows_per_piece == 0 {
        return Err(too_large(format!(
            " and one of its rows alone is {row_bytes} bytes"
        )));
    }
    // The fewest pieces the limit allows, then as even as whole rows make them: a piece of
    // exactly the device's limit is what some drivers refuse (SwiftShader reports an
    // out-of-memory for a buffer of exactly its 1 GiB maxBufferSize).
    let fewest = cut_count(offset, end, rows_per_piece * row_bytes);
    let touched_rows = end.div_ceil(row_bytes) - offset / row_bytes;
    let step = touched_rows.div_ceil(fewest.max(1)).min(rows_per_piece) * row_bytes; // <= usable
    let mut pieces = Vec::new();
    let mut start = offset;
    while start < end {
        let cut = (start / step + 1).saturating_mul(step).min(end);
        pieces.push(PiecePlan {
            parameter_offset: start,
            length: cut - start,
            rows: rows_of(layout, start, cut),
        });
        start = cut;
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StatusCode;
    use crate::params::ShapeOrder;

    fn info(shape: &[u64], length: u64, order: ShapeOrder) -> ParameterInfo {
        ParameterInfo {
            length,
            dtype: Some("F32".into()),
            shape: Some(shape.to_vec()),
            shape_order: order,
        }
    }

    fn split(max: u64) -> BufferPlacement {
        BufferPlacement {
            max_buffer_bytes: Some(max),
            split_rows: true,
        }
    }

    fn check_cover(pieces: &[PiecePlan], offset: u64, length: u64, max: u64) {
        let mut at = offset;
        for piece in pieces {
            assert_eq!(piece.parameter_offset, at);
            assert!(piece.length > 0);
            assert!(piece.length.next_multiple_of(4) <= max, "{piece:?} > {max}");
            at += piece.length;
        }
        assert_eq!(at, offset + length);
    }

    #[test]
    fn a_span_that_fits_is_one_piece_with_its_rows() {
        let i = info(&[10, 25], 1000, ShapeOrder::RowMajor);
        let pieces = plan_pieces("w", &i, 0, 1000, BufferPlacement::SINGLE, 1000).unwrap();
        assert_eq!(
            pieces,
            vec![PiecePlan {
                parameter_offset: 0,
                length: 1000,
                rows: Some((0, 10)),
            }]
        );
    }

    #[test]
    fn whole_rows_per_piece_and_the_rest_in_the_last() {
        // 10 rows of 100 bytes, buffers of at most 350 bytes: 3 rows each.
        let i = info(&[10, 25], 1000, ShapeOrder::RowMajor);
        let pieces = plan_pieces("w", &i, 0, 1000, split(350), u64::MAX).unwrap();
        check_cover(&pieces, 0, 1000, 350);
        let rows: Vec<_> = pieces.iter().map(|p| p.rows.unwrap()).collect();
        assert_eq!(rows, vec![(0, 3), (3, 6), (6, 9), (9, 10)]);
        // GGUF lists the innermost dimension first: the same layout.
        let ggml = info(&[25, 10], 1000, ShapeOrder::InnermostFirst);
        assert_eq!(
            plan_pieces("w", &ggml, 0, 1000, split(350), u64::MAX).unwrap(),
            pieces
        );
    }

    #[test]
    fn a_cut_span_is_balanced_and_never_a_buffer_of_exactly_the_limit() {
        // 6 rows, 4 fit the limit: 3 + 3, not 4 (exactly the limit) + 2.
        let i = info(&[6, 25], 600, ShapeOrder::RowMajor);
        let pieces = plan_pieces("w", &i, 0, 600, split(400), u64::MAX).unwrap();
        let rows: Vec<_> = pieces.iter().map(|p| p.rows.unwrap()).collect();
        assert_eq!(rows, vec![(0, 3), (3, 6)]);
    }

    #[test]
    fn a_partial_span_is_cut_at_the_parameters_row_boundaries() {
        let i = info(&[2, 5, 25], 1000, ShapeOrder::RowMajor);
        // From inside row 1 to inside row 8.
        let pieces = plan_pieces("w", &i, 150, 700, split(300), 300).unwrap();
        check_cover(&pieces, 150, 700, 300);
        let cuts: Vec<_> = pieces.iter().map(|p| p.parameter_offset).collect();
        assert_eq!(cuts, vec![150, 300, 600]);
        assert_eq!(pieces[0].rows, Some((1, 3)));
        assert_eq!(pieces[2].rows, Some((6, 9)));
    }

    #[test]
    fn odd_row_sizes_round_up_to_a_word_within_the_limit() {
        // Rows of 22 bytes (a Q5_0 block): 4 rows are 88 bytes; a 90-byte limit holds 88.
        let i = ParameterInfo {
            length: 22 * 9,
            dtype: Some("Q5_0".into()),
            shape: Some(vec![32, 9]),
            shape_order: ShapeOrder::InnermostFirst,
        };
        let pieces = plan_pieces("w", &i, 0, 198, split(90), u64::MAX).unwrap();
        check_cover(&pieces, 0, 198, 90);
        assert_eq!(pieces.len(), 3);
        // A limit of 111 bytes is 108 usable (whole words): still 4 rows, not 5 (110 bytes,
        // 112 as words).
        let pieces = plan_pieces("w", &i, 0, 198, split(111), u64::MAX).unwrap();
        check_cover(&pieces, 0, 198, 111);
    }

    #[test]
    fn what_cannot_be_cut_is_resource_exhausted_naming_size_and_limit() {
        let i = info(&[10, 25], 1000, ShapeOrder::RowMajor);
        let single = plan_pieces("w", &i, 0, 1000, BufferPlacement::SINGLE, 512).unwrap_err();
        assert_eq!(single.code(), StatusCode::ResourceExhausted);
        assert!(single.message().contains("1000 bytes") && single.message().contains("512"));
        let row = plan_pieces("w", &i, 0, 1000, split(99), u64::MAX).unwrap_err();
        assert_eq!(row.code(), StatusCode::ResourceExhausted);
        assert!(row.message().contains("100 bytes"), "{row}");
        let shapeless = ParameterInfo {
            shape: None,
            ..i.clone()
        };
        let none = plan_pieces("w", &shapeless, 0, 1000, split(500), u64::MAX).unwrap_err();
        assert_eq!(none.code(), StatusCode::ResourceExhausted);
        let wrong = ParameterInfo { length: 999, ..i };
        assert!(plan_pieces("w", &wrong, 0, 999, split(500), u64::MAX).is_err());
    }

    #[test]
    fn the_allocators_limit_applies_below_a_larger_cap() {
        let i = info(&[10, 25], 1000, ShapeOrder::RowMajor);
        let pieces = plan_pieces("w", &i, 0, 1000, split(10_000), 200).unwrap();
        check_cover(&pieces, 0, 1000, 200);
        assert_eq!(pieces.len(), 5);
        assert!(plan_pieces("w", &i, u64::MAX, 2, split(8), 8).is_err());
    }
}
