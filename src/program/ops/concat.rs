//! `concat`: tensors joined along one axis.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Concatenation along `axis`; all other dims equal; same dtype. The result's extent along
/// `axis` must be one dim: all inputs fixed there, or one symbolic and the others 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Concat {
    /// The tensors joined, in order.
    pub inputs: Vec<TensorId>,
    /// The dim the op works along.
    pub axis: u32,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Concat {
    fn name(&self) -> &'static str {
        "concat"
    }

    fn inputs(&self) -> Vec<TensorId> {
        self.inputs.clone()
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let first = self
            .inputs
            .first()
            .ok_or("concat needs at least one input")?;
        let dtype = operands.get("input", *first)?.dtype();
        let mut shapes = Vec::with_capacity(self.inputs.len());
        for id in &self.inputs {
            let input = operands.get("input", *id)?;
            input.expect_dtype(&[dtype])?;
            shapes.push(input.decl.shape.as_slice());
        }
        Ok((dtype, infer::concat(&shapes, self.axis)?))
    }

    fn attributes(&self) -> String {
        let list: Vec<String> = self.inputs.iter().map(|id| t(*id)).collect();
        format!("inputs=[{}] axis={}", list.join(", "), self.axis)
    }
}
