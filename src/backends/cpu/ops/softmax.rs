//! `Softmax` on the CPU: the mask added (broadcast) first, then a stable softmax per row (the
//! kernels' `softmax_rows`, on the worker pool when there is one and the op is large enough).

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::ops::elementwise;
use crate::backends::cpu::values::Values;
use crate::backends::cpu::walk::rows_of;
use crate::error::{Error, Result};
use crate::program::BinaryOp;
use crate::program::ops::Softmax;
use webdelegate_kernels::KernelError;
use webdelegate_kernels::rows::softmax_rows;

/// Softmax of each `width`-long row of `values`, in place (a mask, if any, was already added).
///
/// # Errors
/// `Internal` when the length is not whole rows.
pub fn softmax_in_place(values: &mut [f32], width: usize) -> Result<()> {
    rows_of(values.len(), width, "softmax")?;
    softmax_rows(values, width).map_err(|KernelError(why)| Error::internal(why))
}

impl CpuOp for Softmax {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        let width = f.last_dim(self.out)?;
        let mut values = cx.scratch.pool.take(f.numel(self.out)?)?;
        match self.mask {
            Some(mask) => elementwise::binary(
                BinaryOp::Add,
                (f.f32(self.x)?, f.shape(self.x)?),
                (f.f32(mask)?, f.shape(mask)?),
                f.shape(self.out)?,
                &mut values,
            )?,
            None => values.copy_from_slice(f.f32(self.x)?),
        }
        match cx.threaded {
            Some(threaded) if width > 0 && threaded.worth(values.len()) => {
                threaded.softmax(&mut cx.scratch.shared, &mut values, width)?;
            }
            _ => softmax_in_place(&mut values, width)?,
        }
        Ok(Slot::Owned(Values::F32(values)))
    }
}
