//! `softmax`: over the last dim, with an optional additive mask.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{
    OpDef, Operand, Operands, expect_float, optional_text, tensor_text as t,
};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Softmax over the last dim of `x + mask` (when a mask is given; it broadcasts to `x`),
/// computed stably (max subtracted). f32.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Softmax {
    /// The input.
    pub x: TensorId,
    /// An optional additive mask, broadcast to `x`.
    pub mask: Option<TensorId>,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }

    fn inputs(&self) -> Vec<TensorId> {
        let mut ids = vec![self.x];
        ids.extend(self.mask);
        ids
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        let mask = self.mask.map(|id| operands.get("mask", id)).transpose()?;
        expect_float(&[&x])?;
        if let Some(mask) = &mask {
            expect_float(&[mask])?;
        }
        let shape = infer::softmax(x.shape(), mask.as_ref().map(Operand::shape))?;
        Ok((DType::F32, shape))
    }

    fn attributes(&self) -> String {
        format!("x={} mask={}", t(self.x), optional_text(self.mask))
    }
}
