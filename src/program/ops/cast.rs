//! `cast`: element-wise dtype conversion.

use crate::program::infer::InferResult;
use crate::program::ops::support::{OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Element-wise type conversion to `out`'s dtype: float -> int truncates toward zero and
/// saturates (NaN becomes 0); int -> int saturates; int -> f32 rounds to nearest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cast {
    /// The input.
    pub x: TensorId,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Cast {
    fn name(&self) -> &'static str {
        "cast"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, _operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        Err("cast takes its dtype from the declared output".to_owned())
    }

    fn check(&self, operands: &Operands<'_>) -> InferResult<()> {
        let out = operands.get("out", self.out)?;
        let x = operands.get("x", self.x)?;
        out.expect_shape(x.shape())
    }

    fn attributes(&self) -> String {
        format!("x={}", t(self.x))
    }
}
