//! `Softmax` on the CPU: a stable softmax per row with the mask added first (the kernels'
//! `masked_softmax_rows`, which adds a mask that repeats over leading and trailing row dims row
//! by row; any other broadcast is added separately), on the worker pool when there is one and
//! the op is large enough.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::ops::elementwise;
use crate::backends::cpu::values::Values;
use crate::backends::cpu::walk::rows_of;
use crate::error::{Error, Result};
use crate::program::BinaryOp;
use crate::program::ops::Softmax;
use webdelegate_kernels::KernelError;
use webdelegate_kernels::rows::{MaskRows, masked_softmax_rows, softmax_rows};

/// Softmax of each `width`-long row of `values`, in place (a mask, if any, was already added).
///
/// # Errors
/// `Internal` when the length is not whole rows.
pub fn softmax_in_place(values: &mut [f32], width: usize) -> Result<()> {
    rows_of(values.len(), width, "softmax")?;
    softmax_rows(values, width).map_err(|KernelError(why)| Error::internal(why))
}

/// The kernels' `MaskRows` period and count of a `mask_shape` mask over `out_shape` scores,
/// when the mask broadcasts over leading and trailing row dims only and has the scores' width
/// (an attention mask `[b, 1, 1, s]` over `[b, h, s, s]`, a causal `[s, s]`); `None` for any other
/// broadcast, which adds the mask separately.
fn mask_rows(out_shape: &[usize], mask_shape: &[usize]) -> Option<(usize, usize)> {
    let (&width, out_rows) = out_shape.split_last()?;
    if mask_shape.len() > out_shape.len() || mask_shape.last() != Some(&width) {
        return None;
    }
    let pad = out_shape.len() - mask_shape.len();
    let mask_dim = |i: usize| if i < pad { 1 } else { mask_shape[i - pad] };
    let varying: Vec<usize> = (0..out_rows.len()).filter(|&i| mask_dim(i) != 1).collect();
    let (Some(&lo), Some(&last)) = (varying.first(), varying.last()) else {
        return Some((1, 1));
    };
    let hi = last + 1;
    if (lo..hi).any(|i| mask_dim(i) != out_rows[i]) {
        return None;
    }
    let count: usize = out_rows[lo..hi].iter().product();
    let period: usize = out_rows[hi..].iter().product();
    // Empty scores (a zero dim) have no mask rows to pick: the separate add handles them.
    (count > 0 && period > 0).then_some((period, count))
}

impl CpuOp for Softmax {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        let width = f.last_dim(self.out)?;
        let len = f.numel(self.out)?;
        let mask = match self.mask {
            Some(id) => Some((id, mask_rows(f.shape(self.out)?, f.shape(id)?))),
            None => None,
        };
        if let Some(threaded) = cx.threaded
            && width > 0
            && threaded.worth(len)
            && mask.is_none_or(|(_, rows)| rows.is_some())
        {
            let x = f.operand(self.x)?;
            let mask = match mask {
                Some((id, Some((period, count)))) => Some((f.f32(id)?, period, count)),
                _ => None,
            };
            let out = threaded.softmax(&mut cx.scratch.shared, x, mask, width)?;
            return Ok(Slot::Shared(out));
        }
        let mut values = cx.scratch.pool.take(len)?;
        let kernel_error = |KernelError(why)| Error::internal(why);
        match mask {
            Some((id, Some((period, count)))) => {
                let rows = MaskRows {
                    values: f.f32(id)?,
                    period,
                    count,
                };
                masked_softmax_rows(f.f32(self.x)?, Some(rows), 0, width, &mut values)
                    .map_err(kernel_error)?;
            }
            Some((id, None)) => {
                elementwise::binary(
                    BinaryOp::Add,
                    (f.f32(self.x)?, f.shape(self.x)?),
                    (f.f32(id)?, f.shape(id)?),
                    f.shape(self.out)?,
                    &mut values,
                )?;
                softmax_in_place(&mut values, width)?;
            }
            None => masked_softmax_rows(f.f32(self.x)?, None, 0, width, &mut values)
                .map_err(kernel_error)?,
        }
        Ok(Slot::Owned(Values::F32(values)))
    }
}

#[cfg(test)]
mod tests {
    use super::mask_rows;

    #[test]
    fn mask_rows_cover_leading_and_trailing_broadcasts() {
        // An attention mask over scores [b, h, s, s], reshaped to [b, 1, 1, s]: one mask row
        // per batch.
        assert_eq!(mask_rows(&[2, 3, 5, 5], &[2, 1, 1, 5]), Some((15, 2)));
        // Per batch and head, [b, h, 1, s].
        assert_eq!(mask_rows(&[2, 3, 5, 5], &[2, 3, 1, 5]), Some((5, 6)));
        // A causal [s, s]: one mask row per query, repeating over batch and heads.
        assert_eq!(mask_rows(&[2, 3, 5, 5], &[5, 5]), Some((1, 5)));
        // One row for all.
        assert_eq!(mask_rows(&[1, 3, 5, 5], &[1, 5]), Some((1, 1)));
        // [b, 1, s, s] skips the heads inside the varying dims: added separately.
        assert_eq!(mask_rows(&[2, 3, 5, 5], &[2, 1, 5, 5]), None);
        // A mask broadcast along the width, or a scalar, is added separately.
        assert_eq!(mask_rows(&[2, 3, 5, 5], &[2, 1, 1, 1]), None);
        assert_eq!(mask_rows(&[2, 3, 5, 5], &[]), None);
        // Empty scores: no mask rows.
        assert_eq!(mask_rows(&[0, 3, 5, 5], &[0, 1, 1, 5]), None);
        assert_eq!(mask_rows(&[2, 3, 0, 5], &[2, 1, 1, 5]), None);
    }
}
