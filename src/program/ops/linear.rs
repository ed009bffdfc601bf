//! `linear`: a linear layer over f32 or ggml block-format weights (a quantized matmul), with
//! dequantization inside the kernel.
//!
//! Build it with [`ProgramBuilder::push`](crate::program::ProgramBuilder::push):
//! `b.push(|out| Linear { x, weight, bias: None, out })`.

use crate::program::infer::{InferResult, dim_text, shape_text};
use crate::program::ops::support::{
    OpDef, Operands, expect_float, optional_text, tensor_text as t,
};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// A linear layer: `out[..., n] = sum_k x[..., k] * weight[n, k] (+ bias[n])`.
///
/// `x` is f32 `[..., K]` (rank >= 1; every leading dim is a row of activations); `weight` is
/// `[N, K]`, f32 or a ggml weight format (`DType::Block`: F16, BF16, Q4_0, Q5_0, Q8_0, Q4_K,
/// Q5_K, Q6_K) laid out as ggml lays it out: row `n` is output `n`, contiguous along `K`,
/// exactly a GGUF tensor with `ne = [K, N]`. Values are decoded as `crate::quant` decodes them
/// and accumulated in f32 (the order of the sum is the backend's). `bias` is an optional f32
/// `[N]`. `out` is f32 `[..., N]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    /// The activations, `[..., K]`.
    pub x: TensorId,
    /// The weight, `[N, K]`, f32 or a block format.
    pub weight: TensorId,
    /// An optional `[N]` term added to every row.
    pub bias: Option<TensorId>,
    /// The tensor the op writes.
    pub out: TensorId,
}

/// Whether `dtype` is a weight dtype `linear` (and `gather`'s table) accepts: f32 or a block
/// format.
pub fn is_weight_dtype(dtype: DType) -> bool {
    dtype == DType::F32 || dtype.is_block()
}

impl OpDef for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn inputs(&self) -> Vec<TensorId> {
        let mut ids = vec![self.x, self.weight];
        ids.extend(self.bias);
        ids
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        let weight = operands.get("weight", self.weight)?;
        let bias = self.bias.map(|id| operands.get("bias", id)).transpose()?;
        expect_float(&[&x])?;
        if let Some(bias) = &bias {
            expect_float(&[bias])?;
        }
        if !is_weight_dtype(weight.dtype()) {
            return Err(format!(
                "{} is {}, expected f32 or a block format (f16, bf16, q4_0, q5_0, q8_0, q4_k, \
                 q5_k, q6_k)",
                weight.describe(),
                weight.dtype().name()
            ));
        }
        let (&k, rows) = x
            .shape()
            .split_last()
            .ok_or_else(|| "x is a scalar; the op works over its last dim".to_owned())?;
        let &[n, wk] = weight.shape() else {
            return Err(format!(
                "{} is {}, expected [N, K]",
                weight.describe(),
                shape_text(weight.shape())
            ));
        };
        if wk != k {
            return Err(format!(
                "x is {} but weight rows are {} long (weight {}): K must agree",
                shape_text(x.shape()),
                dim_text(wk),
                shape_text(weight.shape())
            ));
        }
        if let Some(bias) = &bias
            && bias.shape() != [n]
        {
            return Err(format!(
                "{} is {}, expected [{}]",
                bias.describe(),
                shape_text(bias.shape()),
                dim_text(n)
            ));
        }
        let mut shape = rows.to_vec();
        shape.push(n);
        Ok((DType::F32, shape))
    }

    fn attributes(&self) -> String {
        format!(
            "x={} weight={} bias={}",
            t(self.x),
            t(self.weight),
            optional_text(self.bias)
        )
    }
}
