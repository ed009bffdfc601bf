//! `gelu`, `tanh`, `relu`, `gelu_tanh`, `silu`: element-wise one-input float functions.

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
    /// GELU, tanh form (PyTorch `gelu(approximate='tanh')`, Gemma's `gelu_pytorch_tanh`):
    /// `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`. Finite for every finite
    /// `x`: the tanh saturates instead of overflowing (`x` for large `x`, `-0` for large `-x`);
    /// `+-inf` give their limits (`inf`, `-0`), NaN stays NaN.
    GeluTanh,
    /// SiLU (swish): `x * sigmoid(x) = x / (1 + e^-x)`, without overflow: `e^-|x|` only, so
    /// large `x` give `x` and large `-x` give `-0`; `+-inf` give their limits (`inf`, `-0`),
    /// NaN stays NaN.
    Silu,
}

impl UnaryOp {
    /// The function's name in dumps and messages, e.g. `"gelu"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Gelu => "gelu",
            Self::Tanh => "tanh",
            Self::Relu => "relu",
            Self::GeluTanh => "gelu_tanh",
            Self::Silu => "silu",
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
