//! `gelu`, `tanh`, `relu`: element-wise one-input float functions.

use crate::program::infer::InferResult;
use crate::program::ops::support::{FLOAT, OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Element-wise one-input float functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// `x * 0.5 * (1 + erf(x / sqrt(2)))` (the exact, erf form).
    Gelu,
    /// Hyperbolic tangent.
    Tanh,
    /// `max(x, 0)`.
    Relu,
}

impl UnaryOp {
    /// The function's name in dumps and messages, e.g. `"gelu"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Gelu => "gelu",
            Self::Tanh => "tanh",
            Self::Relu => "relu",
        }
    }
}

/// `out = f(x)`, f32, element-wise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unary {
    /// Which function.
    pub op: UnaryOp,
    /// The input.
    pub x: TensorId,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Unary {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        x.expect_dtype(FLOAT)?;
        Ok((DType::F32, x.shape().to_vec()))
    }

    fn attributes(&self) -> String {
        format!("x={}", t(self.x))
    }
}
