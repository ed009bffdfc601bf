//! `Softmax` on the CPU: the mask added (broadcast) first, then a stable softmax per row.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::ops::elementwise;
use crate::backends::cpu::walk::rows_of;
use crate::error::Result;
use crate::program::BinaryOp;
use crate::program::ops::Softmax;
use webdelegate_kernels::math::{self, LANES, lane_max};

/// Softmax of each `width`-long row of `values`, in place (a mask, if any, was already added).
///
/// # Errors
/// `Internal` when the length is not whole rows.
pub fn softmax_in_place(values: &mut [f32], width: usize) -> Result<()> {
    rows_of(values.len(), width, "softmax")?;
    if width == 0 {
        return Ok(());
    }
    for row in values.chunks_exact_mut(width) {
        let max = lane_max(row);
        let mut acc = [0.0f32; LANES];
        let mut chunks = row.chunks_exact_mut(LANES);
        for chunk in &mut chunks {
            for (slot, v) in acc.iter_mut().zip(chunk.iter_mut()) {
                *v = math::exp(*v - max);
                *slot += *v;
            }
        }
        let mut sum: f32 = 0.0;
        for v in chunks.into_remainder() {
            *v = math::exp(*v - max);
            sum += *v;
        }
        sum += acc.iter().sum::<f32>();
        let inverse = 1.0 / sum;
        for v in row.iter_mut() {
            *v *= inverse;
        }
    }
    Ok(())
}

impl CpuOp for Softmax {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let width = cx.frame.last_dim(self.out)?;
        cx.f32_result(self.out, |f, o| {
            match self.mask {
                Some(mask) => elementwise::binary(
                    BinaryOp::Add,
                    (f.f32(self.x)?, f.shape(self.x)?),
                    (f.f32(mask)?, f.shape(mask)?),
                    f.shape(self.out)?,
                    o,
                )?,
                None => o.copy_from_slice(f.f32(self.x)?),
            }
            softmax_in_place(o, width)
        })
    }
}
