//! `scale`: `x * scale + bias` with constant factors.

use crate::program::infer::InferResult;
use crate::program::ops::support::{FLOAT, OpDef, Operands, expect_constant, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// `out = x * scale + bias`, f32, element-wise (`scale`, `bias` finite).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    /// The input.
    pub x: TensorId,
    /// The factor.
    pub scale: f32,
    /// The term added after scaling.
    pub bias: f32,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Scale {
    fn name(&self) -> &'static str {
        "scale"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        expect_constant("scale", self.scale, false)?;
        expect_constant("bias", self.bias, false)?;
        x.expect_dtype(FLOAT)?;
        Ok((DType::F32, x.shape().to_vec()))
    }

    fn attributes(&self) -> String {
        format!(
            "x={} scale={:?} bias={:?}",
            t(self.x),
            self.scale,
            self.bias
        )
    }
}
