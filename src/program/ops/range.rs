//! `range`: `0, 1, ..., n-1`.

use crate::program::infer::{InferResult, shape_text};
use crate::program::ops::support::{OpDef, Operands};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// The dtypes a range may have.
const RANGE: &[DType] = &[DType::I32, DType::I64, DType::F32];

/// `out` (1-D i32, i64 or f32 tensor of extent `n`) = `0, 1, ..., n-1` (position ids).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Range {
    /// The tensor the op writes.
    pub out: TensorId,
}

impl OpDef for Range {
    fn name(&self) -> &'static str {
        "range"
    }

    fn inputs(&self) -> Vec<TensorId> {
        Vec::new()
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, _operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        Err("range takes its extent and dtype from the declared output".to_owned())
    }

    fn check(&self, operands: &Operands<'_>) -> InferResult<()> {
        let out = operands.get("out", self.out)?;
        out.expect_dtype(RANGE)?;
        if out.shape().len() != 1 {
            return Err(format!(
                "{} is {}, expected one dim",
                out.describe(),
                shape_text(out.shape())
            ));
        }
        Ok(())
    }

    fn attributes(&self) -> String {
        String::new()
    }
}
