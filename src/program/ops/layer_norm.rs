//! `layer_norm`: layer normalisation over the last dim.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{
    OpDef, Operands, expect_constant, expect_float, tensor_text as t,
};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Layer normalisation over the last dim `H`: `(x - mean) / sqrt(var + eps) * gamma + beta`
/// with the biased variance; `gamma`, `beta` are `[H]`; `eps` finite and >= 0. f32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerNorm {
    /// The input.
    pub x: TensorId,
    /// The per-feature scale, `[H]`.
    pub gamma: TensorId,
    /// The per-feature shift, `[H]`.
    pub beta: TensorId,
    /// The stabiliser.
    pub eps: f32,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for LayerNorm {
    fn name(&self) -> &'static str {
        "layer_norm"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x, self.gamma, self.beta]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        let gamma = operands.get("gamma", self.gamma)?;
        let beta = operands.get("beta", self.beta)?;
        expect_constant("eps", self.eps, true)?;
        expect_float(&[&x, &gamma, &beta])?;
        let shape = infer::layer_norm(x.shape(), gamma.shape(), beta.shape())?;
        Ok((DType::F32, shape))
    }

    fn attributes(&self) -> String {
        format!(
            "x={} gamma={} beta={} eps={:?}",
            t(self.x),
            t(self.gamma),
            t(self.beta),
            self.eps
        )
    }
}
