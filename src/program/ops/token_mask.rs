//! `token_mask`: the logits of tokens a grammar forbids become `-inf`, so that
//! [`Sample`](crate::program::ops::Sample) (greedy or not) only ever picks an allowed token.
//! The mask is an execute-time input of one bit per token, computed on the host each step by
//! the constrained decoder ([`models::grammar`](crate::models::grammar)); only `V / 32` words
//! travel to the device, never the logits.
//!
//! Build it with [`ProgramBuilder::push`](crate::program::ProgramBuilder::push):
//! `b.push(|out| TokenMask { logits, mask, out })`.

use crate::program::infer::{InferResult, dim_text, shape_text};
use crate::program::ops::support::{OpDef, Operands, expect_float, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// `out[r, v] = logits[r, v]` when bit `v % 32` of word `mask[m, v / 32]` is set, else `-inf`,
/// with `m = 0` when the mask has one row (one mask for every row) and `m = r` otherwise.
///
/// `logits` f32 `[R, V]`; `mask` i32 `[M, ceil(V / 32)]`, its words read as bits, `M` 1 or `R`
/// (checked at execute time when `M` is symbolic); bits past `V` in the last word are ignored.
/// An all-ones mask leaves every value as it was (NaN included); a row with no allowed token
/// becomes all `-inf`, which [`Sample`](crate::program::ops::Sample) resolves to index 0, so a
/// caller that can produce such a mask checks the chosen token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenMask {
    /// The logits, `[R, V]`.
    pub logits: TensorId,
    /// The allowed tokens as bits, `[M, ceil(V / 32)]`.
    pub mask: TensorId,
    /// The tensor the op writes, f32 `[R, V]`.
    pub out: TensorId,
}

impl TokenMask {
    /// Mask words per row for a vocabulary of `vocab` tokens.
    pub const fn words(vocab: u64) -> u64 {
        vocab.div_ceil(32)
    }
}

impl OpDef for TokenMask {
    fn name(&self) -> &'static str {
        "token_mask"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.logits, self.mask]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let logits = operands.get("logits", self.logits)?;
        let mask = operands.get("mask", self.mask)?;
        expect_float(&[&logits])?;
        mask.expect_dtype(&[DType::I32])?;
        let [rows, Dim::Fixed(vocab)] = logits.shape() else {
            return Err(format!(
                "{} is {}, expected [R, V] with a fixed V",
                logits.describe(),
                shape_text(logits.shape())
            ));
        };
        let words = Dim::Fixed(Self::words(*vocab));
        let rows_fit = |m: &Dim| match m {
            Dim::Fixed(1) | Dim::Symbol(_) => true,
            fixed => fixed == rows,
        };
        match mask.shape() {
            [m, w] if *w == words && rows_fit(m) => {}
            _ => {
                return Err(format!(
                    "{} is {}, expected [1 or {}, {}] (one bit per token)",
                    mask.describe(),
                    shape_text(mask.shape()),
                    dim_text(*rows),
                    dim_text(words)
                ));
            }
        }
        Ok((DType::F32, logits.shape().to_vec()))
    }

    fn attributes(&self) -> String {
        format!("logits={} mask={}", t(self.logits), t(self.mask))
    }
}
