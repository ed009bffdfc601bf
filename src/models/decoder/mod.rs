//! Decoder-only language models as webdelegate programs, built from a GGUF file's own
//! metadata (`general.architecture` and its keys) and tensor index: one file per
//! architecture ([`ARCHITECTURES`]) composing the shared blocks of `blocks.rs`, the way
//! llama.cpp's `src/models/<arch>.cpp` read. A new architecture is one new file and one line
//! in [`ARCHITECTURES`].
//!
//! The program references every weight by the GGUF tensor name (`token_embd.weight`,
//! `blk.0.attn_q.weight`, ...) in one scope, so a parameter provider serving the file streams
//! exactly the tensors the program reads, in their file format (block-quantized weights stay
//! quantized). [`DecoderConfig::from_gguf`] reads the hyper-parameters the way llama.cpp's
//! loader does (including the defaults it applies to absent keys); [`decoder_program`] checks
//! every tensor against them before emitting anything: a missing tensor, a wrong shape, an
//! unsupported dtype or a byte length that disagrees is `InvalidExternalData` naming the key.
//! [`load`] is the one way from a parsed file to a session (the web `Generator`, the tests and
//! the benches use it).
//!
//! One program serves prefill and decode (decision records 0025 and 0029 in `docs/decisions/`):
//! - inputs `ids` i32 `[S]` (tokens), `positions` i32 `[S]` (their absolute positions),
//!   `logit_rows` i32 `[R]` (which of the `S` rows get logits: the last one when generating,
//!   all of them when testing), `knobs` f32 `[R, 4]` (temperature, top-k, top-p, draw: see
//!   [`Sample`](crate::program::ops::Sample)), `token_mask` i32 `[M, ceil(vocab / 32)]` (the
//!   tokens a grammar allows, one bit each, `M` 1 for every row or `R`: see
//!   [`TokenMask`](crate::program::ops::TokenMask); all ones when unconstrained);
//! - outputs `tokens` i32 `[R]` (the chosen token of each selected row) and, when
//!   [`DecoderProgramOptions::logits`] is set, `logits` f32 `[R, vocab]`;
//! - per layer a key and a value cache, state tensors `[context, kv_heads, head_dim]` that the
//!   attention op appends to at `positions`, so a generator feeds the prompt once and then one
//!   token per execute. [`DecoderSignature`] finds each argument by these names.

mod blocks;
mod config;
mod gemma2;
mod gemma3;
mod llama;
mod load;
mod metadata;
mod phi3;
mod qwen2;
mod qwen3;
mod signature;

pub use config::{
    DecoderConfig, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS, RopeConfig, RopeFactors,
};
pub use load::{DEFAULT_CONTEXT, DecoderLoadOptions, LoadedDecoder, PreparedDecoder, load};
pub use signature::DecoderSignature;

use crate::error::{Error, ErrorCode, Result};
use crate::models::catalog::TensorCatalog;
use crate::program::{Program, TensorId};
use blocks::Decoder;
use metadata::Metadata;

/// One architecture: its `general.architecture` name, the reader of its own metadata keys
/// (after the shared ones) and its layer graph.
pub struct Architecture {
    /// The name, as `general.architecture` spells it (and as its metadata keys are prefixed).
    pub name: &'static str,
    /// Sets what the architecture reads or fixes (RoPE style, window pattern, scales).
    configure: fn(&Metadata<'_>, &mut DecoderConfig) -> Result<()>,
    /// Layer `layer` of the residual stream `x` `[S, hidden]`.
    layer: fn(&mut Decoder<'_>, u32, TensorId) -> Result<TensorId>,
}

impl std::fmt::Debug for Architecture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Architecture {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// Every architecture [`decoder_program`] builds.
pub static ARCHITECTURES: &[&Architecture] = &[
    &gemma2::GEMMA2,
    &gemma3::GEMMA3,
    &llama::LLAMA,
    &phi3::PHI3,
    &qwen2::QWEN2,
    &qwen3::QWEN3,
];

impl Architecture {
    /// The architecture named `name` (`general.architecture`).
    pub fn named(name: &str) -> Option<&'static Self> {
        ARCHITECTURES.iter().copied().find(|a| a.name == name)
    }

    /// The names of every architecture.
    pub fn names() -> Vec<&'static str> {
        ARCHITECTURES.iter().map(|a| a.name).collect()
    }
}

/// Choices the caller makes when building a decoder program.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderProgramOptions {
    /// Positions the KV caches hold (the longest prompt + generation); at most the model's
    /// training context.
    pub context: u64,
    /// Whether the program also outputs the selected rows' logits (tests and scoring;
    /// generation reads only the tokens).
    pub logits: bool,
    /// The RoPE frequency divisors of the tensor
    /// [`RopeConfig::factors_key`]`(context)` names, when the file has it (read by
    /// [`load`]); `None` otherwise.
    pub rope_factors: Option<Vec<f32>>,
}

impl DecoderProgramOptions {
    /// A program of `context` positions, with the `logits` output when `logits`, and no RoPE
    /// factors.
    pub fn new(context: u64, logits: bool) -> Self {
        Self {
            context,
            logits,
            rope_factors: None,
        }
    }
}

/// The input holding the tokens, i32 `[S]`.
pub const IDS: &str = "ids";
/// The input holding each token's absolute position, i32 `[S]`.
pub const POSITIONS: &str = "positions";
/// The input naming the rows that get logits, i32 `[R]` (values in `0..S`).
pub const LOGIT_ROWS: &str = "logit_rows";
/// The input holding each selected row's sampling knobs, f32 `[R, 4]`.
pub const KNOBS: &str = "knobs";
/// The input holding the allowed tokens as bits, i32 `[1 or R, ceil(vocab / 32)]`.
pub const TOKEN_MASK: &str = "token_mask";
/// The output: the chosen token of each selected row, i32 `[R]`.
pub const TOKENS: &str = "tokens";
/// The optional output: the selected rows' logits, f32 `[R, vocab]`.
pub const LOGITS: &str = "logits";

fn missing(key: &str) -> Error {
    Error::new(
        ErrorCode::InvalidExternalData,
        format!("the file has no tensor {key:?}"),
    )
}

/// The vocabulary size: the rows of `token_embd.weight` `[vocab, hidden]`.
///
/// # Errors
/// `InvalidExternalData` for a missing table or one of another shape.
pub fn vocabulary_rows(catalog: &dyn TensorCatalog, hidden: u64) -> Result<u64> {
    let embedding = catalog
        .tensor_info("token_embd.weight")
        .ok_or_else(|| missing("token_embd.weight"))?;
    embedding
        .row_major_shape()
        .and_then(|shape| match shape.as_slice() {
            [rows, cols] if *cols == hidden => Some(*rows),
            _ => None,
        })
        .ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidExternalData,
                format!(
                    "\"token_embd.weight\" has shape {:?}; [vocab, {hidden}] expected",
                    embedding.row_major_shape(),
                ),
            )
        })
}

/// Checks that the tokenizer's vocabulary (`tokens` entries) and the embedding table
/// (`token_embd.weight` rows) have one size: ids past the table would fail the gather, rows
/// past the vocabulary would be chosen as tokens without text.
///
/// # Errors
/// `InvalidExternalData` naming both sizes; as [`decoder_program`] for a missing or ill-shaped
/// table.
pub fn check_vocabulary(catalog: &dyn TensorCatalog, tokenizer_vocab: u64) -> Result<()> {
    let embedding = catalog
        .tensor_info("token_embd.weight")
        .ok_or_else(|| missing("token_embd.weight"))?;
    let rows = embedding
        .row_major_shape()
        .and_then(|shape| shape.first().copied())
        .ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidExternalData,
                "\"token_embd.weight\" records no shape",
            )
        })?;
    if rows != tokenizer_vocab {
        return Err(Error::new(
            ErrorCode::InvalidExternalData,
            format!(
                "the vocabulary has {tokenizer_vocab} tokens but the embedding table \
                 (\"token_embd.weight\") has {rows} rows"
            ),
        ));
    }
    Ok(())
}

/// The decoder program for `config`, reading the GGUF tensors `catalog` lists (an index or a
/// provider's [`ProviderCatalog`](crate::models::catalog::ProviderCatalog)) from `scope`. See
/// the module documentation for its inputs, outputs and state.
///
/// # Errors
/// `InvalidArgument` for a context of 0 or beyond the model's training context (or one whose
/// caches overflow), or when the file has RoPE factors the options do not carry (or carry in
/// another count); `InvalidExternalData` when a tensor is missing or disagrees with the
/// metadata on shape, dtype or size.
pub fn decoder_program(
    config: &DecoderConfig,
    catalog: &dyn TensorCatalog,
    scope: &str,
    options: &DecoderProgramOptions,
) -> Result<Program> {
    let context = options.context;
    if context == 0 || context > config.train_context {
        return Err(Error::invalid_argument(format!(
            "context {context} is outside 1..={} (the model's training context)",
            config.train_context
        )));
    }
    if i32::try_from(context).is_err() || config.kv_cache_bytes(context).is_none() {
        return Err(Error::invalid_argument(format!(
            "context {context} is too large"
        )));
    }
    let factors_key = config
        .rope
        .factors_key(context)
        .filter(|key| catalog.tensor_info(key).is_some());
    match (factors_key, &options.rope_factors) {
        (None, None) => {}
        (Some(key), None) => {
            return Err(Error::invalid_argument(format!(
                "the file's RoPE factors {key:?} were not read (decoder::load reads them)"
            )));
        }
        (None, Some(_)) => {
            return Err(Error::invalid_argument(
                "RoPE factors given for a file without them",
            ));
        }
        (Some(key), Some(values)) if values.len() != config.rope.dims as usize / 2 => {
            return Err(Error::new(
                ErrorCode::InvalidExternalData,
                format!(
                    "{key:?} holds {} factors; {} rotary pairs need one each",
                    values.len(),
                    config.rope.dims / 2
                ),
            ));
        }
        (Some(_), Some(_)) => {}
    }
    let vocab = vocabulary_rows(catalog, config.hidden)?;
    blocks::build(config, catalog, scope, options, vocab)
}
