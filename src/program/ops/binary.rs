//! `add`, `sub`, `mul`, `div`: element-wise two-input float functions with broadcasting.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{OpDef, Operands, expect_float, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Element-wise two-input float functions, with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (IEEE: division by zero gives ±inf or NaN).
    Div,
}

impl BinaryOp {
    /// The function's name in dumps and messages, e.g. `"add"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Sub => "sub",
            Self::Mul => "mul",
            Self::Div => "div",
        }
    }
}

/// `out = a (op) b`, f32, broadcast.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binary {
    /// Which function.
    pub op: BinaryOp,
    /// The left operand.
    pub a: TensorId,
    /// The right operand.
    pub b: TensorId,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Binary {
    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.a, self.b]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let (a, b) = (operands.get("a", self.a)?, operands.get("b", self.b)?);
        expect_float(&[&a, &b])?;
        Ok((DType::F32, infer::broadcast(a.shape(), b.shape())?))
    }

    fn attributes(&self) -> String {
        format!("a={} b={}", t(self.a), t(self.b))
    }
}
