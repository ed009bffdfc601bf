//! `l2_normalize`: `x / max(||x||_2, eps)` over the last dim.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{FLOAT, OpDef, Operands, expect_constant, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// `x / max(||x||_2, eps)` over the last dim (PyTorch's `F.normalize`); `eps` finite and
/// >= 0. f32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct L2Normalize {
    /// The input.
    pub x: TensorId,
    /// The stabiliser.
    pub eps: f32,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for L2Normalize {
    fn name(&self) -> &'static str {
        "l2_normalize"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        expect_constant("eps", self.eps, true)?;
        x.expect_dtype(FLOAT)?;
        Ok((DType::F32, infer::last_axis(x.shape())?))
    }

    fn attributes(&self) -> String {
        format!("x={} eps={:?}", t(self.x), self.eps)
    }
}
