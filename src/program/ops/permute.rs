//! `permute`: dims reordered.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// `out` dim `i` is `x` dim `perm[i]`; `perm` is a permutation of `0..rank`. Any dtype.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Permute {
    /// The input.
    pub x: TensorId,
    /// For each output dim, the input dim it takes.
    pub perm: Vec<u32>,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Permute {
    fn name(&self) -> &'static str {
        "permute"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        Ok((x.dtype(), infer::permute(x.shape(), &self.perm)?))
    }

    fn attributes(&self) -> String {
        format!("x={} perm={:?}", t(self.x), self.perm)
    }
}
