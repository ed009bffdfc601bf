//! [`DecoderSignature`]: where a decoder program's arguments are, found by the names the
//! builder declares ([`IDS`], [`POSITIONS`], ... [`LOGITS`]) rather than by position, with
//! the vocabulary and context the program was built for.

use crate::error::{Error, Result};
use crate::models::decoder::{IDS, KNOBS, LOGIT_ROWS, LOGITS, POSITIONS, TOKEN_MASK, TOKENS};
use crate::program::{Dim, Program, TensorId};

/// The argument index of each of a decoder program's inputs and outputs (ExecuTorch order:
/// the inputs, then the outputs), its vocabulary and its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderSignature {
    /// `ids`.
    pub ids: usize,
    /// `positions`.
    pub positions: usize,
    /// `logit_rows`.
    pub logit_rows: usize,
    /// `knobs`.
    pub knobs: usize,
    /// `token_mask`.
    pub token_mask: usize,
    /// `tokens`.
    pub tokens: usize,
    /// `logits`, when the program outputs them.
    pub logits: Option<usize>,
    /// How many arguments an execute takes (inputs and outputs).
    pub arguments: usize,
    /// Tokens of the vocabulary (rows of `token_embd.weight`).
    pub vocab: usize,
    /// Positions the KV caches hold.
    pub context: u64,
}

impl DecoderSignature {
    /// The signature of `program` (a [`decoder_program`](super::decoder_program)).
    ///
    /// # Errors
    /// `InvalidArgument` when an argument is missing, named twice, or the program has no
    /// embedding table or KV cache to tell its vocabulary and context.
    pub fn of(program: &Program) -> Result<Self> {
        let name = |id: TensorId| program.tensors.get(id as usize).map(|t| t.name.as_str());
        let arguments: Vec<Option<&str>> = program
            .inputs
            .iter()
            .chain(&program.outputs)
            .map(|&id| name(id))
            .collect();
        let find = |wanted: &str| -> Result<Option<usize>> {
            let mut found = arguments
                .iter()
                .enumerate()
                .filter(|(_, n)| **n == Some(wanted))
                .map(|(i, _)| i);
            match (found.next(), found.next()) {
                (first, None) => Ok(first),
                _ => Err(Error::invalid_argument(format!(
                    "the program names two arguments {wanted:?}"
                ))),
            }
        };
        let need = |wanted: &str| {
            find(wanted)?.ok_or_else(|| {
                Error::invalid_argument(format!("the program has no argument {wanted:?}"))
            })
        };
        let fixed = |id: TensorId, axis: usize| match program
            .tensors
            .get(id as usize)
            .and_then(|t| t.shape.get(axis))
        {
            Some(&Dim::Fixed(extent)) => Some(extent),
            _ => None,
        };
        let vocab = program
            .params
            .iter()
            .find(|p| p.key == "token_embd.weight")
            .and_then(|p| fixed(p.tensor, 0))
            .and_then(|v| usize::try_from(v).ok())
            .ok_or_else(|| Error::invalid_argument("the program has no token_embd.weight"))?;
        let context = program
            .states
            .first()
            .and_then(|&id| fixed(id, 0))
            .ok_or_else(|| Error::invalid_argument("the program has no KV cache"))?;
        Ok(Self {
            ids: need(IDS)?,
            positions: need(POSITIONS)?,
            logit_rows: need(LOGIT_ROWS)?,
            knobs: need(KNOBS)?,
            token_mask: need(TOKEN_MASK)?,
            tokens: need(TOKENS)?,
            logits: find(LOGITS)?,
            arguments: arguments.len(),
            vocab,
            context,
        })
    }
}
