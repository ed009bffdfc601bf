//! `L2Normalize` on the CPU: each row divided by `max(||row||, eps)`.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::walk::rows_of;
use crate::error::{Error, Result};
use crate::program::ops::L2Normalize;
use webdelegate_kernels::math::lane_sum;

/// `x / max(||x||, eps)` for each row of `width`.
///
/// # Errors
/// `Internal` when lengths disagree.
pub fn l2_normalize(x: &[f32], width: usize, eps: f32, out: &mut [f32]) -> Result<()> {
    rows_of(x.len(), width, "l2_normalize")?;
    if out.len() != x.len() {
        return Err(Error::internal("l2_normalize output has the wrong length"));
    }
    if width == 0 {
        return Ok(());
    }
    for (row, target) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let norm = lane_sum(row, |v| v * v).sqrt();
        let inverse = 1.0 / norm.max(eps);
        for (o, &v) in target.iter_mut().zip(row) {
            *o = v * inverse;
        }
    }
    Ok(())
}

impl CpuOp for L2Normalize {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let width = cx.frame.last_dim(self.x)?;
        cx.f32_result(self.out, |f, o| {
            l2_normalize(f.f32(self.x)?, width, self.eps, o)
        })
    }
}
