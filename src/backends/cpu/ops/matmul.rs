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
        let out_len = f.numel(self.out)?;
        if let Some(threaded) = cx.threaded.filter(|t| t.has_packed(self.b)) {
            let a = f.operand(self.a)?;
            let shared = &mut cx.scratch.shared;
            let out = threaded.matmul(shared, self.b, (a, bias), &geometry, out_len)?;
            return Ok(Slot::Shared(out));
        }
        let packed = cx.packed.get(self.b as usize).and_then(Option::as_ref);
        let work = geometry.batch_count() * geometry.m * geometry.k * geometry.n;
        if let (None, None, Some(threaded)) = (packed, bias, cx.threaded)
            && geometry.batch_count() > 1
            && threaded.worth(work)
        {
            let operands = (f.operand(self.a)?, f.operand(self.b)?);
            let shared = &mut cx.scratch.shared;
            let out = threaded.batched_matmul(shared, operands, &geometry, out_len)?;
            return Ok(Slot::Shared(out));
        }
        let right = match packed {
            Some(packed) => RightOperand::Packed(packed),
            None => RightOperand::Values(f.f32(self.b)?),
        };
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
