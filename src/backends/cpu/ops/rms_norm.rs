//! `RmsNorm` on the CPU: the mean square of each row (eight-lane sum), then scale.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::walk::rows_of;
use crate::error::{Error, Result};
use crate::program::ops::RmsNorm;
use webdelegate_kernels::math::lane_sum;

/// `x / sqrt(mean(x^2) + eps) * weight` for each `weight.len()`-long row of `x`, into `out`.
///
/// # Errors
/// `Internal` when lengths disagree (validation rules that out).
fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
    let width = weight.len();
    rows_of(x.len(), width, "rms_norm")?;
    if out.len() != x.len() {
        return Err(Error::internal("rms_norm output has the wrong length"));
    }
    if width == 0 {
        return Ok(());
    }
    let inverse_width = 1.0 / width as f32;
    for (row, target) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let mean_square = lane_sum(row, |v| v * v) * inverse_width;
        let inverse_rms = 1.0 / (mean_square + eps).sqrt();
        for ((o, &v), &w) in target.iter_mut().zip(row).zip(weight) {
            *o = v * inverse_rms * w;
        }
    }
    Ok(())
}

impl CpuOp for RmsNorm {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        cx.f32_result(self.out, |f, o| {
            rms_norm(f.f32(self.x)?, f.f32(self.weight)?, self.eps, o)
        })
    }
}
