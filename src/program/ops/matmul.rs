//! `matmul`: batched matrix product with optional transposes and bias.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{
    OpDef, Operand, Operands, expect_float, optional_text, tensor_text as t,
};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Batched matrix product. `a` is `[..., M, K]` (`[..., K, M]` when `transpose_a`), `b` is
/// `[..., K, N]` (`[..., N, K]` when `transpose_b`); batch dims broadcast; optional `bias`
/// `[N]` is added to every row. `out` is `batch + [M, N]`. f32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatMul {
    /// The left operand.
    pub a: TensorId,
    /// The right operand.
    pub b: TensorId,
    /// An optional `[N]` term added to every row.
    pub bias: Option<TensorId>,
    /// Whether `a` is stored transposed.
    pub transpose_a: bool,
    /// Whether `b` is stored transposed.
    pub transpose_b: bool,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for MatMul {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn inputs(&self) -> Vec<TensorId> {
        let mut ids = vec![self.a, self.b];
        ids.extend(self.bias);
        ids
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let (a, b) = (operands.get("a", self.a)?, operands.get("b", self.b)?);
        let bias = self.bias.map(|id| operands.get("bias", id)).transpose()?;
        expect_float(&[&a, &b])?;
        if let Some(bias) = &bias {
            expect_float(&[bias])?;
        }
        let shape = infer::matmul(
            a.shape(),
            b.shape(),
            bias.as_ref().map(Operand::shape),
            self.transpose_a,
            self.transpose_b,
        )?;
        Ok((DType::F32, shape))
    }

    fn attributes(&self) -> String {
        format!(
            "a={} b={} bias={} transpose_a={} transpose_b={}",
            t(self.a),
            t(self.b),
            optional_text(self.bias),
            self.transpose_a,
            self.transpose_b
        )
    }
}
