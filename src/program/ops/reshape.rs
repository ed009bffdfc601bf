//! `reshape`: the same elements under a new shape (a view on both backends where possible).

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Same elements, new shape (`out`'s declared shape; element counts must match).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reshape {
    /// The input.
    pub x: TensorId,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Reshape {
    fn name(&self) -> &'static str {
        "reshape"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, _operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        Err("reshape takes its shape from the declared output".to_owned())
    }

    fn check(&self, operands: &Operands<'_>) -> InferResult<()> {
        let out = operands.get("out", self.out)?;
        let x = operands.get("x", self.x)?;
        out.expect_dtype(&[x.dtype()])?;
        infer::reshape(x.shape(), out.shape())
    }

    fn attributes(&self) -> String {
        format!("x={}", t(self.x))
    }
}
