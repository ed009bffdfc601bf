//! `LayerNorm` on the CPU: mean, biased variance, then scale and shift, row by row.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::walk::rows_of;
use crate::error::{Error, Result};
use crate::program::ops::LayerNorm;
use webdelegate_kernels::math::lane_sum;

/// Layer norm of each `width`-long row of `x` into `out`.
///
/// # Errors
/// `Internal` when lengths disagree (validation rules that out).
pub fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
    let width = gamma.len();
    rows_of(x.len(), width, "layer_norm")?;
    if beta.len() != width || out.len() != x.len() {
        return Err(Error::internal("layer_norm operands disagree in length"));
    }
    if width == 0 {
        return Ok(());
    }
    let inverse_width = 1.0 / width as f32;
    for (row, target) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let mean = lane_sum(row, |v| v) * inverse_width;
        let variance = lane_sum(row, |v| (v - mean) * (v - mean)) * inverse_width;
        let inverse_std = 1.0 / (variance + eps).sqrt();
        for (((o, &v), &g), &b) in target.iter_mut().zip(row).zip(gamma).zip(beta) {
            *o = (v - mean) * inverse_std * g + b;
        }
    }
    Ok(())
}

impl CpuOp for LayerNorm {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        cx.f32_result(self.out, |f, o| {
            layer_norm(
                f.f32(self.x)?,
                f.f32(self.gamma)?,
                f.f32(self.beta)?,
                self.eps,
                o,
            )
        })
    }
}
