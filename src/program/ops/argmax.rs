//! `argmax`: the index of the largest element of each row (greedy token selection), and the
//! total order on f32 that it, [`Sample`](crate::program::ops::Sample) and both backends rank
//! values by.
//!
//! Build it with [`ProgramBuilder::push`](crate::program::ProgramBuilder::push):
//! `b.push(|out| Argmax { x, out })`.

use crate::program::infer::{InferResult, shape_text};
use crate::program::ops::support::{OpDef, Operands, expect_float, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// The rank of `value` in the order every token-selection op uses, as a `u32` whose unsigned
/// order is that order: `-inf < .. < -0 = +0 < .. < +inf`, with NaN ranked as `-inf` (a NaN
/// is never preferred to a number; a row of NaN and `-inf` only yields its first index).
/// `-0` and `+0` rank equal (they tie, so the lower index wins).
pub fn order_key(value: f32) -> u32 {
    let value = if value.is_nan() {
        f32::NEG_INFINITY
    } else if value == 0.0 {
        0.0
    } else {
        value
    };
    let bits = value.to_bits();
    if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

/// Index of the maximum over the last dim: `x` f32 `[.., V]` -> `out` i32 `[..]`. Values are
/// ranked by [`order_key`] (NaN as `-inf`, `-0 = +0`); ties go to the lowest index; a row
/// with `V = 0` gives `-1`. Both backends return exactly the same index (no arithmetic, only
/// comparisons of keys).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Argmax {
    /// The input, `[.., V]`.
    pub x: TensorId,
    /// The tensor the op writes, i32 `[..]`.
    pub out: TensorId,
}

impl OpDef for Argmax {
    fn name(&self) -> &'static str {
        "argmax"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        expect_float(&[&x])?;
        let Some((_, rows)) = x.shape().split_last() else {
            return Err(format!(
                "{} is {}, expected [.., V] (rank >= 1)",
                x.describe(),
                shape_text(x.shape())
            ));
        };
        Ok((DType::I32, rows.to_vec()))
    }

    fn attributes(&self) -> String {
        format!("x={}", t(self.x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_key_orders_floats_with_nan_as_negative_infinity() {
        let ordered = [
            f32::NEG_INFINITY,
            -f32::MAX,
            -1.0,
            -f32::MIN_POSITIVE,
            -1e-45,
            0.0,
            1e-45,
            1.0,
            f32::MAX,
            f32::INFINITY,
        ];
        for pair in ordered.windows(2) {
            assert!(order_key(pair[0]) < order_key(pair[1]), "{pair:?}");
        }
        assert_eq!(order_key(-0.0), order_key(0.0));
        assert_eq!(order_key(f32::NAN), order_key(f32::NEG_INFINITY));
        assert_eq!(order_key(-f32::NAN), order_key(f32::NEG_INFINITY));
    }
}
