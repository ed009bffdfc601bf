//! `mean_pool`: masked mean over the sequence (sentence-transformers' pooling).

use crate::program::infer::{self, InferResult};
use crate::program::ops::support::{FLOAT, MASK, OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Masked mean over the sequence: `x` f32 `[B, S, H]`, `mask` u8/i32/i64/f32 `[B, S]` ->
/// `out` `[B, H]` = `sum_s x * m / max(sum_s m, 1e-9)` with `m` = 1 where the mask is
/// non-zero and 0 elsewhere (sentence-transformers' pooling; masked positions contribute
/// nothing, whatever their values).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeanPool {
    /// The input.
    pub x: TensorId,
    /// The `[B, S]` mask: non-zero where a position counts.
    pub mask: TensorId,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for MeanPool {
    fn name(&self) -> &'static str {
        "mean_pool"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x, self.mask]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let (x, mask) = (operands.get("x", self.x)?, operands.get("mask", self.mask)?);
        x.expect_dtype(FLOAT)?;
        mask.expect_dtype(MASK)?;
        Ok((DType::F32, infer::mean_pool(x.shape(), mask.shape())?))
    }

    fn attributes(&self) -> String {
        format!("x={} mask={}", t(self.x), t(self.mask))
    }
}
