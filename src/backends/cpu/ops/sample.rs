//! `Sample` on the CPU (the reference of the WebGPU kernel): ranking by [`order_key`], top-k
//! by selection over the row's indices (`select_nth_unstable`, then a sort of the k), then
//! the op's f32 chain in rank order.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::ops::argmax::argmax_row;
use crate::backends::cpu::values::{Values, filled};
use crate::error::{Error, Result};
use crate::program::ops::{Sample, SampleKnobs, order_key};
use std::cmp::Ordering;
use webdelegate_kernels::math;

/// Rank order: larger key first, then lower index.
fn by_rank(keys: &[u32]) -> impl Fn(&u32, &u32) -> Ordering + '_ {
    move |&a, &b| {
        keys[b as usize]
            .cmp(&keys[a as usize])
            .then_with(|| a.cmp(&b))
    }
}

/// The token [`Sample`] picks from `row` with `raw` knobs (steps 1-6 of its doc).
pub(crate) fn sample_row(row: &[f32], raw: [f32; 4]) -> Result<i32> {
    if row.is_empty() {
        return Ok(-1);
    }
    let knobs = SampleKnobs::resolve(raw, row.len());
    let first = argmax_row(row);
    let top = row.get(first as usize).copied().unwrap_or(f32::NAN);
    if knobs.top_k == 1 || !top.is_finite() {
        return Ok(first);
    }
    let keys: Vec<u32> = row.iter().map(|&v| order_key(v)).collect();
    let mut order: Vec<u32> = (0..row.len() as u32).collect();
    let k = knobs.top_k;
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, by_rank(&keys));
        order.truncate(k);
    }
    order.sort_unstable_by(by_rank(&keys));
    let negative_infinity = order_key(f32::NEG_INFINITY);
    let weights: Vec<f32> = order
        .iter()
        .enumerate()
        .map(|(j, &i)| {
            let d = (row[i as usize] - top) / knobs.temperature;
            if j == 0 {
                1.0
            } else if keys[i as usize] == negative_infinity || d.is_nan() || d < -87.0 {
                0.0
            } else {
                math::exp(d)
            }
        })
        .collect();
    let total: f32 = weights.iter().fold(0.0, |acc, &w| acc + w);
    let mut kept = weights.len();
    let mut mass = total;
    if knobs.top_p < 1.0 {
        let threshold = knobs.top_p * total;
        let mut running = 0.0f32;
        for (j, &w) in weights.iter().enumerate() {
            running += w;
            if running >= threshold {
                kept = j + 1;
                mass = running;
                break;
            }
        }
    }
    let target = knobs.u * mass;
    let mut running = 0.0f32;
    for (j, &w) in weights.iter().take(kept).enumerate() {
        running += w;
        if running > target {
            return Ok(order[j] as i32);
        }
    }
    Ok(order[kept - 1] as i32)
}

impl CpuOp for Sample {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let width = cx.frame.last_dim(self.logits)?;
        let rows = cx.frame.numel(self.out)?;
        let logits = cx.frame.f32(self.logits)?;
        let knobs = cx.frame.f32(self.knobs)?;
        if logits.len() != rows * width || knobs.len() != rows * 4 {
            return Err(Error::internal(
                "sample operands disagree with their shapes",
            ));
        }
        let mut out = filled(rows, -1i32)?;
        for (r, o) in out.iter_mut().enumerate() {
            let row = &logits[r * width..(r + 1) * width];
            let raw = [
                knobs[4 * r],
                knobs[4 * r + 1],
                knobs[4 * r + 2],
                knobs[4 * r + 3],
            ];
            *o = sample_row(row, raw)?;
        }
        Ok(Slot::Owned(Values::I32(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_by_hand() {
        // ln 1, ln 2, ln 3, ln 4 at temperature 1: weights 1/4, 2/4, 3/4, 1 relative to the
        // top (index 3); rank order 3, 2, 1, 0 with weights 1, .75, .5, .25 (total 2.5).
        let row = [0.0f32, 2f32.ln(), 3f32.ln(), 4f32.ln()];
        let pick = |t: f32, k: f32, p: f32, u: f32| sample_row(&row, [t, k, p, u]).unwrap();
        // Running sums 1, 1.75, 2.25, 2.5 over 2.5: boundaries at u = .4, .7, .9.
        assert_eq!(pick(1.0, 0.0, 1.0, 0.0), 3);
        assert_eq!(pick(1.0, 0.0, 1.0, 0.39), 3);
        assert_eq!(pick(1.0, 0.0, 1.0, 0.41), 2);
        assert_eq!(pick(1.0, 0.0, 1.0, 0.8), 1);
        assert_eq!(pick(1.0, 0.0, 1.0, 0.95), 0);
        assert_eq!(pick(1.0, 0.0, 1.0, 1.0), 0);
        // Top-k 2: total 1.75, boundary at 1 / 1.75 = .571.
        assert_eq!(pick(1.0, 2.0, 1.0, 0.56), 3);
        assert_eq!(pick(1.0, 2.0, 1.0, 0.58), 2);
        // Top-p .5: 1 >= .5 * 2.5 fails (1 < 1.25), 1.75 >= 1.25: keeps 2 (same as top-k 2).
        assert_eq!(pick(1.0, 0.0, 0.5, 0.58), 2);
        assert_eq!(pick(1.0, 0.0, 0.4, 0.99), 3);
        // Greedy.
        assert_eq!(pick(0.0, 0.0, 1.0, 0.99), 3);
        assert_eq!(pick(1.0, 1.0, 1.0, 0.99), 3);
        // Rows of one token, of -inf only, with +inf.
        assert_eq!(sample_row(&[5.0], [1.0, 0.0, 1.0, 0.5]).unwrap(), 0);
        let dead = [f32::NEG_INFINITY, f32::NAN];
        assert_eq!(sample_row(&dead, [1.0, 0.0, 1.0, 0.9]).unwrap(), 0);
        let inf = [1.0, f32::INFINITY, 2.0];
        assert_eq!(sample_row(&inf, [1.0, 0.0, 1.0, 0.9]).unwrap(), 1);
    }
}
