//! `slice`: a contiguous range along one axis.

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Elements `start..end` (end `None` = the dim's extent) along `axis`, step 1. Along a
/// symbolic dim an explicit `end` gives a fixed extent and execute-time binding requires the
/// symbol to be at least `end` (else `InvalidArgument`); an open end needs `start` 0. Any dtype.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// The input.
    pub x: TensorId,
    /// The dim the op works along.
    pub axis: u32,
    /// The first index taken.
    pub start: u64,
    /// One past the last index taken (`None`: the extent).
    pub end: Option<u64>,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Slice {
    fn name(&self) -> &'static str {
        "slice"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        let shape = infer::slice(x.shape(), self.axis, self.start, self.end)?;
        Ok((x.dtype(), shape))
    }

    fn attributes(&self) -> String {
        let end = self
            .end
            .map_or_else(|| "none".to_owned(), |e| e.to_string());
        format!(
            "x={} axis={} start={} end={end}",
            t(self.x),
            self.axis,
            self.start
        )
    }
}
