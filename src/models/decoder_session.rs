//! [`DecoderSession`]: one sequence run through an initialised [decoder
//! program](crate::models::decoder): it feeds tokens at the next positions (a prompt in chunks,
//! then one token per step), keeps the position the KV caches have reached, and returns the
//! chosen tokens (and, for a program built with logits, the selected rows' logits).
//!
//! The caches live in the delegate's state; the session only counts. Starting over is
//! [`DecoderSession::rewind`]: the attention op never reads a cache position past the query's,
//! so rows left from an earlier sequence are overwritten before they are read.

use crate::error::{Error, Result};
use crate::evalue::{EValue, Tensor, TensorData};
use crate::models::decoder::DecoderSignature;
use crate::registry::LoadedDelegate;

/// Which fed rows get logits (and a chosen token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows<'a> {
    /// Only the last fed token (generation).
    Last,
    /// Every fed token (scoring, teacher forcing, tests).
    All,
    /// These rows of the fed tokens (indices into this feed, each below its length), in the
    /// given order.
    Rows(&'a [u32]),
}

/// Sampling knobs of one step: `(temperature, top_k, top_p, u)` as the
/// [`Sample`](crate::program::ops::Sample) op reads them.
pub type Knobs = [f32; 4];

/// Greedy selection (temperature 0).
pub const GREEDY: Knobs = [0.0, 1.0, 1.0, 0.0];

/// What one [`DecoderSession::feed`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Fed {
    /// The chosen token of each selected row.
    pub tokens: Vec<u32>,
    /// The selected rows' logits, row after row (`vocab` each), when the program outputs them.
    pub logits: Option<Vec<f32>>,
}

/// One sequence over a decoder program's delegate.
pub struct DecoderSession {
    delegate: LoadedDelegate,
    signature: DecoderSignature,
    context: u64,
    vocab: usize,
    position: u64,
}

impl DecoderSession {
    /// A session over `delegate`, which runs the decoder program whose arguments `signature`
    /// locates.
    pub fn new(delegate: LoadedDelegate, signature: DecoderSignature) -> Self {
        Self {
            delegate,
            signature,
            context: signature.context,
            vocab: signature.vocab,
            position: 0,
        }
    }

    /// Whether the program outputs logits (see [`Fed::logits`]).
    pub fn has_logits(&self) -> bool {
        self.signature.logits.is_some()
    }

    /// Tokens of the program's vocabulary.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The next position to be fed (the tokens the caches hold).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Positions the caches hold at most.
    pub fn context(&self) -> u64 {
        self.context
    }

    /// The delegate (for stats, options and lifecycle).
    pub fn delegate(&self) -> &LoadedDelegate {
        &self.delegate
    }

    /// The delegate, mutably.
    pub fn delegate_mut(&mut self) -> &mut LoadedDelegate {
        &mut self.delegate
    }

    /// Starts a new sequence at position 0 (the caches are overwritten as it proceeds).
    pub fn rewind(&mut self) {
        self.position = 0;
    }

    /// Continues from `position` (at most the current one): the caches keep the rows before
    /// it, and the next feed overwrites the rest.
    ///
    /// # Errors
    /// `InvalidArgument` for a position past the current one.
    pub fn rewind_to(&mut self, position: u64) -> Result<()> {
        if position > self.position {
            return Err(Error::invalid_argument(format!(
                "cannot move forward to position {position} from {}",
                self.position
            )));
        }
        self.position = position;
        Ok(())
    }

    /// Clears the caches through the backend (after a dropped state, say) and rewinds.
    ///
    /// # Errors
    /// The backend's reset errors.
    pub fn reset(&mut self) -> Result<()> {
        self.delegate.reset_state()?;
        self.position = 0;
        Ok(())
    }

    /// Mask words per row: one bit per token of the program's vocabulary.
    pub fn mask_words(&self) -> usize {
        self.vocab.div_ceil(32)
    }

    /// Feeds `ids` at the next positions in one execute; `rows` chooses which get logits, each
    /// with `knobs`, choosing among every token.
    ///
    /// # Errors
    /// As [`feed_masked`](Self::feed_masked).
    pub async fn feed(&mut self, ids: &[u32], rows: LogitRows<'_>, knobs: Knobs) -> Result<Fed> {
        self.feed_masked(ids, rows, knobs, None).await
    }

    /// Feeds `ids` at the next positions in one execute; `rows` chooses which get logits, each
    /// with `knobs`, choosing only among the tokens whose bit is set in `mask` (bit `t % 32` of
    /// word `t / 32`, [`mask_words`](Self::mask_words) words for every row; `None` allows
    /// every token).
    ///
    /// # Errors
    /// `InvalidArgument` for no ids, ids that would pass the context, no or out-of-range
    /// selected rows, or a mask of the wrong length (nothing is run);
    /// the execute's errors (then the position is unchanged, and the caches may hold part of
    /// the rows: feeding them again overwrites them).
    pub async fn feed_masked(
        &mut self,
        ids: &[u32],
        rows: LogitRows<'_>,
        knobs: Knobs,
        mask: Option<&[u32]>,
    ) -> Result<Fed> {
        if ids.is_empty() {
            return Err(Error::invalid_argument("no tokens to feed"));
        }
        let words = self.mask_words();
        let mask_values: Vec<i32> = match mask {
            None => vec![-1; words],
            Some(bits) if bits.len() == words => bits.iter().map(|&w| w as i32).collect(),
            Some(bits) => {
                return Err(Error::invalid_argument(format!(
                    "a token mask of {} words; {words} expected (one bit per token of {})",
                    bits.len(),
                    self.vocab
                )));
            }
        };
        let count = ids.len() as u64;
        let end = self
            .position
            .checked_add(count)
            .filter(|&e| e <= self.context);
        let Some(end) = end else {
            return Err(Error::invalid_argument(format!(
                "{count} tokens at position {} pass the context of {} positions",
                self.position, self.context
            )));
        };
        let as_i32 = |v: u64| i32::try_from(v).map_err(|_| Error::invalid_argument("too large"));
        let ids_i32 = ids
            .iter()
            .map(|&id| i32::try_from(id).map_err(|_| Error::invalid_argument("token id too large")))
            .collect::<Result<Vec<_>>>()?;
        let positions = (self.position..end)
            .map(as_i32)
            .collect::<Result<Vec<_>>>()?;
        let selected: Vec<i32> = match rows {
            LogitRows::Last => vec![as_i32(count - 1)?],
            LogitRows::All => (0..as_i32(count)?).collect(),
            LogitRows::Rows(list) => {
                if list.is_empty() || list.iter().any(|&r| u64::from(r) >= count) {
                    return Err(Error::invalid_argument(format!(
                        "logit rows {list:?} must be some of the {count} fed rows"
                    )));
                }
                list.iter()
                    .map(|&r| as_i32(u64::from(r)))
                    .collect::<Result<_>>()?
            }
        };
        let r = selected.len();
        let knob_values = knobs.iter().copied().cycle().take(r * 4).collect();
        let vector = |data: TensorData, n: usize| Tensor::new(vec![n], data).map(EValue::Tensor);
        let sig = self.signature;
        let mut args: Vec<EValue> = (0..sig.arguments).map(|_| EValue::None).collect();
        args[sig.ids] = vector(TensorData::Int32(ids_i32), ids.len())?;
        args[sig.positions] = vector(TensorData::Int32(positions), ids.len())?;
        args[sig.logit_rows] = vector(TensorData::Int32(selected), r)?;
        args[sig.knobs] =
            EValue::Tensor(Tensor::new(vec![r, 4], TensorData::Float32(knob_values))?);
        args[sig.token_mask] =
            EValue::Tensor(Tensor::new(vec![1, words], TensorData::Int32(mask_values))?);
        self.delegate.execute(&mut args).await?;
        let tokens = match args[sig.tokens].as_tensor().map(Tensor::data) {
            Some(TensorData::Int32(values)) => values
                .iter()
                .map(|&t| u32::try_from(t).map_err(|_| Error::internal("negative token")))
                .collect::<Result<Vec<_>>>()?,
            _ => return Err(Error::internal("the tokens output is not i32")),
        };
        let logits = if let Some(index) = sig.logits {
            let values = args[index]
                .as_tensor()
                .and_then(Tensor::as_f32)
                .filter(|v| v.len() == r * self.vocab)
                .ok_or_else(|| Error::internal("the logits output has the wrong size"))?;
            Some(values.to_vec())
        } else {
            None
        };
        self.position = end;
        Ok(Fed { tokens, logits })
    }
}
