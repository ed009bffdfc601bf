//! `MatMul` on the CPU: the blocked GEMM (`gemm.rs`) over the op's geometry, with a weight
//! packed at init read in place, or on the worker pool (`threaded`) when the weight lives in
//! its shared memory, or when both operands are activations and the product is large enough.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::gemm::{self, RightOperand};
use crate::backends::cpu::values::Values;
use crate::error::Result;
use crate::program::geometry::MatMulGeometry;
use crate::program::ops::MatMul;

impl CpuOp for MatMul {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        let geometry = MatMulGeometry::new(
            f.shape(self.a)?,
            f.shape(self.b)?,
            self.transpose_a,
            self.transpose_b,
        )?;
        let bias = self.bias.map(|id| f.f32(id)).transpose()?;
        if let Some(threaded) = cx.threaded.filter(|t| t.has_packed(self.b)) {
            let mut out = cx.scratch.pool.take(f.numel(self.out)?)?;
            let a = f.f32(self.a)?;
            threaded.matmul(&mut cx.scratch.shared, self.b, a, bias, &geometry, &mut out)?;
            return Ok(Slot::Owned(Values::F32(out)));
        }
        let right = match cx.packed.get(self.b as usize) {
            Some(Some(packed)) => RightOperand::Packed(packed),
            _ => RightOperand::Values(f.f32(self.b)?),
        };
        let work = geometry.batch_count() * geometry.m * geometry.k * geometry.n;
        if let (RightOperand::Values(b), None, Some(threaded)) = (&right, bias, cx.threaded)
            && geometry.batch_count() > 1
            && threaded.worth(work)
        {
            let mut out = cx.scratch.pool.take(f.numel(self.out)?)?;
            let a = f.f32(self.a)?;
            threaded.batched_matmul(&mut cx.scratch.shared, a, b, &geometry, &mut out)?;
            return Ok(Slot::Owned(Values::F32(out)));
        }
        let mut out = cx.scratch.pool.take(f.numel(self.out)?)?;
        gemm::matmul(
            f.f32(self.a)?,
            right,
            bias,
            &geometry,
            &mut out,
            &mut cx.scratch.gemm,
        )?;
        Ok(Slot::Owned(Values::F32(out)))
    }
}
