//! `sample`: token selection on the device with temperature, top-k and top-p from
//! execute-time knobs, and the counter-based RNG ([`Sample::uniform`]) a generator draws each
//! step's `u` from.
//!
//! Build it with [`ProgramBuilder::push`](crate::program::ProgramBuilder::push):
//! `b.push(|out| Sample { logits, knobs, out })`.

use crate::program::infer::{InferResult, dim_text, shape_text};
use crate::program::ops::support::{OpDef, Operands, expect_float, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Token selection per row: `logits` f32 `[R, V]`, `knobs` f32 `[R, 4]` =
/// `(temperature, top_k, top_p, u)` per row (an execute-time input, so changing them rebuilds
/// nothing) -> `out` i32 `[R]`, the chosen index of each row. Only the ids are written: nothing
/// of size `V` leaves the device.
///
/// The chain (as llama.cpp's `top_k -> temp -> top_p -> dist`, i.e. Hugging Face's order;
/// llama.cpp's *default* chain applies top-p before the temperature), per row:
/// 1. Values are ranked by [`order_key`](crate::program::ops::order_key) (NaN as `-inf`),
///    ties to the lowest index, exactly as [`Argmax`](crate::program::ops::Argmax).
/// 2. `k` = `floor(top_k)` clamped to `1..=K_MAX`; `top_k < 1` or NaN (e.g. 0) means
///    [`Sample::K_MAX`]; then at most `V`. **`K_MAX` = 1024 is a deliberate bound**: the GPU
///    selects the candidates in one workgroup (radix select + bitonic sort in workgroup memory),
///    so "no top-k" keeps the 1024 most likely tokens, whose mass is all but the whole
///    distribution for a trained LM.
/// 3. Greedy when `!(temperature > 0)` (0, negative, NaN) or `k == 1`: the row's
///    [`Argmax`](crate::program::ops::Argmax), exactly. Also when the largest logit is not
///    finite (`+inf`, or a row of only `-inf`/NaN): its first occurrence.
/// 4. The `k` candidates `c_0..c_{k-1}` in rank order; `w_j = exp((l_j - l_0) / temperature)`
///    in f32 (`w_0 = 1`; `w_j = 0` when the exponent is below -87 or `l_j` is `-inf`/NaN).
/// 5. Top-p: when `top_p < 1`, keep the shortest prefix `m >= 1` whose running f32 sum
///    `w_0 + .. + w_{m-1} >= top_p * Z` (`Z` the sum over all `k`, summed in rank order);
///    otherwise (`top_p >= 1`, NaN) `m = k`.
/// 6. Pick: `u` clamped to `[0, 1]` (NaN as 0); the first `j < m` whose running sum exceeds
///    `u * (w_0 + .. + w_{m-1})`, else `c_{m-1}`.
///
/// Both backends run this in f32 in the same order; they differ only in `exp`'s last bits, so
/// the same knobs give the same token except when `u` falls within float rounding of a
/// boundary between two candidates (a near-tie).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The logits, `[R, V]`.
    pub logits: TensorId,
    /// `(temperature, top_k, top_p, u)` per row, `[R, 4]`.
    pub knobs: TensorId,
    /// The tensor the op writes, i32 `[R]`.
    pub out: TensorId,
}

/// One row's knobs after the rules of [`Sample`] (steps 2, 3, 6).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleKnobs {
    /// The temperature (> 0 unless `k == 1`).
    pub temperature: f32,
    /// Candidates kept by top-k, `1..=min(K_MAX, V)` (1 when greedy).
    pub top_k: usize,
    /// The top-p mass (`>= 1` keeps every candidate).
    pub top_p: f32,
    /// The draw, in `[0, 1]`.
    pub u: f32,
}

impl SampleKnobs {
    /// The knobs `[temperature, top_k, top_p, u]` of a row of `vocab` (>= 1) logits.
    pub fn resolve([temperature, top_k, top_p, u]: [f32; 4], vocab: usize) -> Self {
        let k = if top_k >= 1.0 {
            (top_k.min(Sample::K_MAX as f32) as usize).max(1)
        } else {
            Sample::K_MAX
        };
        let k = k.min(vocab.max(1));
        let greedy = temperature.is_nan() || temperature <= 0.0;
        let u = if u > 0.0 { u.min(1.0) } else { 0.0 };
        Self {
            temperature: if greedy { 1.0 } else { temperature },
            top_k: if greedy { 1 } else { k },
            top_p,
            u,
        }
    }
}

impl Sample {
    /// The most candidates top-k keeps (see [`Sample`], step 2).
    pub const K_MAX: usize = 1024;

    /// A reproducible draw in `[0, 1)` for step `step` of a generation seeded with `seed`:
    /// output number `step` (from 0) of splitmix64 seeded with `seed` (state
    /// `seed + (step + 1) * 0x9E3779B97F4A7C15`, then its finaliser), its top 24 bits over
    /// `2^24`. Counter-based: any step can be drawn without the ones before it, so a generator
    /// restarted at step `n` draws what it would have drawn.
    pub fn uniform(seed: u64, step: u64) -> f32 {
        let mut z = seed.wrapping_add(step.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / 16_777_216.0
    }
}

impl OpDef for Sample {
    fn name(&self) -> &'static str {
        "sample"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.logits, self.knobs]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let logits = operands.get("logits", self.logits)?;
        let knobs = operands.get("knobs", self.knobs)?;
        expect_float(&[&logits, &knobs])?;
        let [rows, _] = logits.shape() else {
            return Err(format!(
                "{} is {}, expected [R, V]",
                logits.describe(),
                shape_text(logits.shape())
            ));
        };
        if knobs.shape() != [*rows, Dim::Fixed(4)] {
            return Err(format!(
                "{} is {}, expected [{}, 4] (temperature, top_k, top_p, u per row)",
                knobs.describe(),
                shape_text(knobs.shape()),
                dim_text(*rows)
            ));
        }
        Ok((DType::I32, vec![*rows]))
    }

    fn attributes(&self) -> String {
        format!("logits={} knobs={}", t(self.logits), t(self.knobs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_splitmix64_and_in_range() {
        // splitmix64 seeded with 0: first output 0xE220A8397B1DCDAF (Vigna's reference).
        let first = Sample::uniform(0, 0);
        assert_eq!(
            first,
            (0xE220_A839_7B1D_CDAFu64 >> 40) as f32 / 16_777_216.0
        );
        let mut seen = std::collections::HashSet::new();
        for step in 0..1000 {
            let u = Sample::uniform(42, step);
            assert!((0.0..1.0).contains(&u));
            assert_eq!(u, Sample::uniform(42, step), "reproducible");
            seen.insert(u.to_bits());
        }
        assert!(seen.len() > 990, "draws differ step to step");
        assert_ne!(Sample::uniform(1, 0), Sample::uniform(2, 0));
    }

    #[test]
    fn knobs_resolve_by_the_rules() {
        let greedy = SampleKnobs::resolve([0.0, 40.0, 0.9, 0.5], 100);
        assert_eq!(greedy.top_k, 1);
        assert_eq!(
            SampleKnobs::resolve([f32::NAN, 40.0, 0.9, 0.5], 100).top_k,
            1
        );
        assert_eq!(SampleKnobs::resolve([1.0, 0.0, 1.0, 0.5], 5000).top_k, 1024);
        assert_eq!(SampleKnobs::resolve([1.0, 0.0, 1.0, 0.5], 10).top_k, 10);
        assert_eq!(SampleKnobs::resolve([1.0, 1e9, 1.0, 0.5], 5000).top_k, 1024);
        assert_eq!(SampleKnobs::resolve([1.0, 2.9, 1.0, 0.5], 5000).top_k, 2);
        assert_eq!(
            SampleKnobs::resolve([1.0, f32::NAN, 1.0, 0.5], 5000).top_k,
            1024
        );
        assert_eq!(SampleKnobs::resolve([1.0, 3.0, 1.0, f32::NAN], 5).u, 0.0);
        assert_eq!(SampleKnobs::resolve([1.0, 3.0, 1.0, 7.0], 5).u, 1.0);
    }
}
