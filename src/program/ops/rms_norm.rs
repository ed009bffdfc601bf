//! `rms_norm`: root-mean-square normalisation over the last dim (Gemma, Llama).
//!
//! Build it with [`ProgramBuilder::push`](crate::program::ProgramBuilder::push):
//! `b.push(|out| RmsNorm { x, weight: Some(w), eps, out })`.

use crate::program::infer::{InferResult, dim_text, shape_text};
use crate::program::ops::support::{
    OpDef, Operands, expect_constant, expect_float, optional_text, tensor_text as t,
};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// RMS normalisation over the last dim `H`: `out = x / sqrt(mean(x^2) + eps) * weight`, the
/// mean over the `H` elements of each row; `weight` is an optional `[H]` (without it, the
/// normalised rows themselves: `x / sqrt(mean(x^2) + eps)`); `eps` finite and >= 0. f32.
/// (Gemma's `(1 + w)` is folded into `weight` by its converter: the op multiplies by `weight`
/// as it is.) A row of zeros with `eps` 0 gives NaN, as `0 / 0`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RmsNorm {
    /// The input.
    pub x: TensorId,
    /// The optional per-feature scale, `[H]`.
    #[serde(deserialize_with = "weight_of_any_version")]
    pub weight: Option<TensorId>,
    /// The stabiliser added to the mean square.
    pub eps: f32,
    /// The tensor the op writes.
    pub out: TensorId,
}

/// The weight as its blob's format version writes it: a plain id before version 3 (see
/// [`crate::program::format`]), an option since.
fn weight_of_any_version<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<TensorId>, D::Error> {
    if crate::program::format::legacy_rms_norm_weight() {
        TensorId::deserialize(deserializer).map(Some)
    } else {
        Option::<TensorId>::deserialize(deserializer)
    }
}

impl OpDef for RmsNorm {
    fn name(&self) -> &'static str {
        "rms_norm"
    }

    fn inputs(&self) -> Vec<TensorId> {
        let mut ids = vec![self.x];
        ids.extend(self.weight);
        ids
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        let weight = self
            .weight
            .map(|id| operands.get("weight", id))
            .transpose()?;
        expect_constant("eps", self.eps, true)?;
        expect_float(&[&x])?;
        if let Some(weight) = &weight {
            expect_float(&[weight])?;
        }
        let last = x
            .shape()
            .last()
            .copied()
            .ok_or_else(|| "x is a scalar; the op works over its last dim".to_owned())?;
        if let Some(weight) = &weight
            && weight.shape() != [last]
        {
            return Err(format!(
                "weight is {}, expected [{}] (x is {})",
                shape_text(weight.shape()),
                dim_text(last),
                shape_text(x.shape())
            ));
        }
        Ok((DType::F32, x.shape().to_vec()))
    }

    fn attributes(&self) -> String {
        format!(
            "x={} weight={} eps={:?}",
            t(self.x),
            optional_text(self.weight),
            self.eps
        )
    }
}
