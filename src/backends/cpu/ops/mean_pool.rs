//! `MeanPool` on the CPU: masked sums over the sequence, divided by the kept count.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::values::ValuesRef;
use crate::error::{Error, Result};
use crate::program::ops::MeanPool;

/// Whether each mask element keeps its position (non-zero), as 1.0 or 0.0.
fn mask_weights(mask: ValuesRef<'_>) -> Vec<f32> {
    let keep = |nonzero: bool| if nonzero { 1.0 } else { 0.0 };
    match mask {
        ValuesRef::F32(v) => v.iter().map(|&m| keep(m != 0.0)).collect(),
        ValuesRef::I32(v) => v.iter().map(|&m| keep(m != 0)).collect(),
        ValuesRef::I64(v) => v.iter().map(|&m| keep(m != 0)).collect(),
        ValuesRef::U8(v) => v.iter().map(|&m| keep(m != 0)).collect(),
        // Not a mask dtype (validation refuses it); the empty result fails the length check.
        ValuesRef::Blocks(..) => Vec::new(),
    }
}

/// Masked mean over the sequence: `x` `[batch, seq, hidden]`, `mask` `[batch, seq]` -> `out`
/// `[batch, hidden]` = `sum_s x * m / max(sum_s m, 1e-9)`, `m` = 1 where the mask is non-zero.
///
/// # Errors
/// `Internal` when lengths disagree with `[batch, seq, hidden]`.
pub fn mean_pool(
    x: &[f32],
    mask: ValuesRef<'_>,
    [batch, seq, hidden]: [usize; 3],
    out: &mut [f32],
) -> Result<()> {
    if x.len() != batch * seq * hidden || mask.len() != batch * seq || out.len() != batch * hidden {
        return Err(Error::internal(
            "mean_pool operands disagree with their shape",
        ));
    }
    out.fill(0.0);
    if hidden == 0 {
        return Ok(());
    }
    let weights = mask_weights(mask);
    for b in 0..batch {
        let target = &mut out[b * hidden..(b + 1) * hidden];
        let mut count = 0.0f32;
        for s in 0..seq {
            let weight = weights[b * seq + s];
            if weight == 0.0 {
                continue;
            }
            count += weight;
            let row = &x[(b * seq + s) * hidden..(b * seq + s + 1) * hidden];
            for (o, &v) in target.iter_mut().zip(row) {
                *o += v * weight;
            }
        }
        let inverse = 1.0 / count.max(1e-9);
        for o in target.iter_mut() {
            *o *= inverse;
        }
    }
    Ok(())
}

impl CpuOp for MeanPool {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let dims = match *cx.frame.shape(self.x)? {
            [batch, seq, hidden] => [batch, seq, hidden],
            _ => return Err(Error::internal("mean_pool input is not 3-D")),
        };
        cx.f32_result(self.out, |f, o| {
            mean_pool(f.f32(self.x)?, f.get(self.mask)?, dims, o)
        })
    }
}
