//! `RmsNorm` on the CPU: the mean square of each row (eight-lane sum), then scale.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::walk::rows_of;
use crate::error::{Error, Result};
use crate::program::ops::RmsNorm;
use webdelegate_kernels::math::lane_sum;

/// `x / sqrt(mean(x^2) + eps) (* weight)` for each `width`-long row of `x`, into `out`.
///
/// # Errors
/// `Internal` when lengths disagree (validation rules that out).
fn rms_norm(
    x: &[f32],
    width: usize,
    weight: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) -> Result<()> {
    rows_of(x.len(), width, "rms_norm")?;
    if weight.is_some_and(|w| w.len() != width) {
        return Err(Error::internal("rms_norm weight has the wrong length"));
    }
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
        match weight {
            Some(weight) => {
                for ((o, &v), &w) in target.iter_mut().zip(row).zip(weight) {
                    *o = v * inverse_rms * w;
                }
            }
            None => {
                for (o, &v) in target.iter_mut().zip(row) {
                    *o = v * inverse_rms;
                }
            }
        }
    }
    Ok(())
}

impl CpuOp for RmsNorm {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let width = cx.frame.last_dim(self.x)?;
        cx.f32_result(self.out, |f, o| {
            let weight = self.weight.map(|id| f.f32(id)).transpose()?;
            rms_norm(f.f32(self.x)?, width, weight, self.eps, o)
        })
    }
}
