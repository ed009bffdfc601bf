//! `LayerNorm` on the CPU: mean, biased variance, then scale and shift, row by row (the
//! kernels' `layer_norm_rows`, on the worker pool when there is one and the op is large
//! enough).

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::walk::rows_of;
use crate::error::{Error, Result};
use crate::program::ops::LayerNorm;
use webdelegate_kernels::KernelError;
use webdelegate_kernels::rows::layer_norm_rows;

/// Layer norm of each `width`-long row of `x` into `out`.
///
/// # Errors
/// `Internal` when lengths disagree (validation rules that out).
pub fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
    rows_of(x.len(), gamma.len(), "layer_norm")?;
    layer_norm_rows(x, (gamma, beta), eps, out).map_err(|KernelError(why)| Error::internal(why))
}

impl CpuOp for LayerNorm {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        if let Some(threaded) = cx.threaded
            && threaded.worth(f.numel(self.x)?)
        {
            let x = f.operand(self.x)?;
            let params = (f.f32(self.gamma)?, f.f32(self.beta)?);
            let out = threaded.layer_norm(&mut cx.scratch.shared, x, params, self.eps)?;
            return Ok(Slot::Shared(out));
        }
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
