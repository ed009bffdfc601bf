//! Row-by-row traversal of a [`StridedWalk`]: the outer dims are walked with an odometer, the
//! innermost dim is handed to a kernel as one row, so per-element work stays in tight loops.
//!
//! Before any row is visited, every operand's largest offset is checked against its length, so
//! kernels may slice rows with `get(..)` once per row and never per element.

use crate::error::{Error, Result};
use crate::program::geometry::StridedWalk;

/// One innermost row: where it starts in the output and in each operand, and each operand's
/// stride along it.
#[derive(Clone, Copy, Debug)]
pub struct Row<const N: usize> {
    /// Offset of the row's first element in the (contiguous) output.
    pub out: usize,
    /// Offset of the row's first element in each operand.
    pub offsets: [usize; N],
    /// Each operand's stride along the row.
    pub strides: [usize; N],
    /// Elements in the row.
    pub len: usize,
}

/// Calls `visit` for each innermost row of `walk`, whose operands have `lens` elements.
///
/// # Errors
/// `Internal` when the walk does not have `N` operands or would read past an operand; else
/// `visit`'s error.
pub fn for_each_row<const N: usize>(
    walk: &StridedWalk,
    lens: [usize; N],
    mut visit: impl FnMut(Row<N>) -> Result<()>,
) -> Result<()> {
    if walk.strides.len() != N {
        return Err(Error::internal(
            "strided walk has the wrong number of operands",
        ));
    }
    let rank = walk.shape.len();
    let Some((&len, outer)) = walk.shape.split_last() else {
        return Ok(());
    };
    if walk.shape.contains(&0) {
        return Ok(());
    }
    for (operand, strides) in walk.strides.iter().enumerate() {
        let last = walk
            .shape
            .iter()
            .zip(strides)
            .try_fold(0usize, |acc, (&extent, &stride)| {
                (extent - 1)
                    .checked_mul(stride)
                    .and_then(|span| acc.checked_add(span))
            });
        if last.is_none_or(|last| last >= lens[operand]) {
            return Err(Error::internal(format!(
                "strided walk reads past operand {operand} of {} elements",
                lens[operand]
            )));
        }
    }
    let mut strides = [0; N];
    for (slot, operand) in strides.iter_mut().zip(&walk.strides) {
        *slot = operand[rank - 1];
    }
    let mut index = vec![0usize; outer.len()];
    let mut offsets = [0usize; N];
    let mut out = 0;
    loop {
        visit(Row {
            out,
            offsets,
            strides,
            len,
        })?;
        out += len;
        // Advance the odometer over the outer dims.
        let mut axis = outer.len();
        loop {
            if axis == 0 {
                return Ok(());
            }
            axis -= 1;
            index[axis] += 1;
            for (offset, operand) in offsets.iter_mut().zip(&walk.strides) {
                *offset += operand[axis];
            }
            if index[axis] < outer[axis] {
                break;
            }
            for (offset, operand) in offsets.iter_mut().zip(&walk.strides) {
                *offset -= operand[axis] * outer[axis];
            }
            index[axis] = 0;
        }
    }
}

/// Checks that `len` elements are whole rows of `width`.
///
/// # Errors
/// `Internal` when they are not.
pub fn rows_of(len: usize, width: usize, what: &str) -> Result<()> {
    if width == 0 || len.is_multiple_of(width) {
        Ok(())
    } else {
        Err(Error::internal(format!(
            "{what}: {len} elements are not whole rows of {width}"
        )))
    }
}
