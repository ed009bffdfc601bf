//! `gather`: embedding lookup.

use crate::program::infer::{self, InferResult};
use crate::program::ops::linear::is_weight_dtype;
use crate::program::ops::support::{IDS, OpDef, Operands, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Embedding lookup: `table` `[V, H]`, `ids` i32/i64 of any shape `S` -> `out` f32
/// `S + [H]`, `out[s, :] = table[ids[s], :]`. An id outside `0..V` is an execute-time
/// `InvalidArgument`, never an out-of-bounds read. The table is f32 or a ggml weight format
/// (`DType::Block`, e.g. a Q8_0 token embedding as GGUF stores it): its rows are decoded on
/// read with `crate::quant`'s rules, so the table is never converted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gather {
    /// The embedding table, `[V, H]`.
    pub table: TensorId,
    /// The ids of the rows to pick.
    pub ids: TensorId,
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Gather {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.table, self.ids]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let table = operands.get("table", self.table)?;
        let ids = operands.get("ids", self.ids)?;
        if !is_weight_dtype(table.dtype()) {
            return Err(format!(
                "{} is {}, expected f32 or a block format",
                table.describe(),
                table.dtype().name()
            ));
        }
        ids.expect_dtype(IDS)?;
        Ok((DType::F32, infer::gather(table.shape(), ids.shape())?))
    }

    fn attributes(&self) -> String {
        format!("table={} ids={}", t(self.table), t(self.ids))
    }
}
