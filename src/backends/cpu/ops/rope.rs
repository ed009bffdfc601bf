//! `Rope` on the CPU: per `[D]` row, the angles `f32(position) * inv_freq[i]` (inverse
//! frequencies from the op, once per execute), `sin`/`cos` by [`math::sin_cos`] times the
//! op's `attn_factor`, then the pair rotations of the op's style; elements past `dims` are
//! copied.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::error::{Error, Result};
use crate::program::ops::{Rope, RopeStyle};
use webdelegate_kernels::math;

/// The geometry of one rope: `rows` of `head_dim` elements, `heads` rows per position.
struct Geometry {
    head_dim: usize,
    heads: usize,
    seq: usize,
}

/// Rotates `x` (`[.., S, H, D]` as `geometry` says) by `positions` into `out`.
///
/// # Errors
/// `Internal` when lengths disagree with the geometry (validation rules that out).
fn rope(
    op: &Rope,
    x: &[f32],
    positions: &[i32],
    geometry: &Geometry,
    out: &mut [f32],
) -> Result<()> {
    let Geometry {
        head_dim,
        heads,
        seq,
    } = *geometry;
    let half = (op.dims / 2) as usize;
    if out.len() != x.len()
        || positions.len() != seq
        || 2 * half > head_dim
        || (head_dim > 0 && !x.len().is_multiple_of(head_dim))
    {
        return Err(Error::internal("rope operands disagree with its shapes"));
    }
    if head_dim == 0 || heads == 0 || seq == 0 {
        return Ok(());
    }
    let inverse = op.inverse_frequencies();
    let magnitude = op.scaling.attn_factor;
    let mut sin = vec![0.0f32; half];
    let mut cos = vec![0.0f32; half];
    for (r, (row, target)) in x
        .chunks_exact(head_dim)
        .zip(out.chunks_exact_mut(head_dim))
        .enumerate()
    {
        let s = (r / heads) % seq;
        if r % heads == 0 {
            let position = positions[s] as f32;
            for ((inv, sn), cs) in inverse.iter().zip(&mut sin).zip(&mut cos) {
                (*sn, *cs) = math::sin_cos(position * inv);
                *sn *= magnitude;
                *cs *= magnitude;
            }
        }
        let (step, offset) = match op.style {
            RopeStyle::Neox => (1, half),
            RopeStyle::GptJ => (2, 1),
        };
        for i in 0..half {
            let a = i * step;
            let b = a + offset;
            let (x0, x1) = (row[a], row[b]);
            target[a] = x0 * cos[i] - x1 * sin[i];
            target[b] = x0 * sin[i] + x1 * cos[i];
        }
        target[2 * half..].copy_from_slice(&row[2 * half..]);
    }
    Ok(())
}

impl CpuOp for Rope {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let shape = cx.frame.shape(self.x)?;
        let rank = shape.len();
        if rank < 3 {
            return Err(Error::internal("rope input has rank below 3"));
        }
        let geometry = Geometry {
            head_dim: shape[rank - 1],
            heads: shape[rank - 2],
            seq: shape[rank - 3],
        };
        let positions = cx.frame.typed::<i32>(self.positions)?.to_vec();
        cx.f32_result(self.out, |f, o| {
            rope(self, f.f32(self.x)?, &positions, &geometry, o)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_pairs_of_each_style_and_passes_the_rest() {
        let op = |style| Rope {
            x: 0,
            positions: 1,
            dims: 4,
            base: 10_000.0,
            style,
            out: 2,
            scaling: Default::default(),
        };
        // One position (1), one head, D = 6, dims = 4: angles 1 and 0.01.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let geometry = Geometry {
            head_dim: 6,
            heads: 1,
            seq: 1,
        };
        let (s0, c0, s1, c1) = (1f32.sin(), 1f32.cos(), 0.01f32.sin(), 0.01f32.cos());
        let mut out = [0.0; 6];
        rope(&op(RopeStyle::Neox), &x, &[1], &geometry, &mut out).unwrap();
        let want = [
            c0 - 3.0 * s0,
            2.0 * c1 - 4.0 * s1,
            s0 + 3.0 * c0,
            2.0 * s1 + 4.0 * c1,
            5.0,
            6.0,
        ];
        for (g, w) in out.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{out:?} vs {want:?}");
        }
        rope(&op(RopeStyle::GptJ), &x, &[1], &geometry, &mut out).unwrap();
        let want = [
            c0 - 2.0 * s0,
            s0 + 2.0 * c0,
            3.0 * c1 - 4.0 * s1,
            3.0 * s1 + 4.0 * c1,
            5.0,
            6.0,
        ];
        for (g, w) in out.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{out:?} vs {want:?}");
        }
        assert!(rope(&op(RopeStyle::GptJ), &x, &[1, 2], &geometry, &mut out).is_err());
    }
}
