//! `Argmax` on the CPU: the first index of the largest [`order_key`] of each row (also the
//! greedy pick of `Sample`).

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::values::{Values, filled};
use crate::error::{Error, Result};
use crate::program::ops::{Argmax, order_key};

/// The first index of the largest [`order_key`] of `row`, or -1 for an empty row.
pub(crate) fn argmax_row(row: &[f32]) -> i32 {
    let mut best: Option<(u32, usize)> = None;
    for (i, &v) in row.iter().enumerate() {
        let key = order_key(v);
        if best.is_none_or(|(b, _)| key > b) {
            best = Some((key, i));
        }
    }
    best.map_or(-1, |(_, i)| i as i32)
}

/// `Argmax` of every `width`-long row of `x`.
fn argmax(x: &[f32], width: usize, rows: usize) -> Result<Vec<i32>> {
    let mut out = filled(rows, -1i32)?;
    if width == 0 {
        return Ok(out);
    }
    if x.len() != rows * width {
        return Err(Error::internal("argmax input disagrees with its shape"));
    }
    for (o, row) in out.iter_mut().zip(x.chunks_exact(width)) {
        *o = argmax_row(row);
    }
    Ok(out)
}

impl CpuOp for Argmax {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let width = cx.frame.last_dim(self.x)?;
        let rows = cx.frame.numel(self.out)?;
        let out = argmax(cx.frame.f32(self.x)?, width, rows)?;
        Ok(Slot::Owned(Values::I32(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_ranks_nan_as_negative_infinity_and_ties_low() {
        assert_eq!(argmax_row(&[]), -1);
        assert_eq!(argmax_row(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax_row(&[f32::NAN, -1.0]), 1);
        assert_eq!(argmax_row(&[f32::NAN, f32::NEG_INFINITY, f32::NAN]), 0);
        assert_eq!(argmax_row(&[-0.0, 0.0]), 0);
        assert_eq!(argmax_row(&[1.0, f32::INFINITY, f32::INFINITY]), 1);
    }
}
