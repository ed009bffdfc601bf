//! A batch tokenizer over Hugging Face's `tokenizers` (the same implementation the model was
//! trained with), configured the way sentence-transformers runs it: truncation to the model's
//! maximum sequence length, padding to the longest sequence of the batch, attention mask 1 for
//! tokens and 0 for padding.

use crate::error::{Error, ErrorCode, Result};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Token ids and attention mask of a batch, `[batch, seq]` row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBatch {
    /// Number of texts.
    pub batch: usize,
    /// Tokens per row (the longest text's, after truncation).
    pub seq: usize,
    /// Token ids, `batch * seq` values, padding id after each text's tokens.
    pub ids: Vec<i64>,
    /// 1 for real tokens, 0 for padding.
    pub mask: Vec<i64>,
}

/// Tokenises texts for one model.
pub struct TextTokenizer {
    inner: Tokenizer,
    max_tokens: usize,
}

impl TextTokenizer {
    /// A tokenizer from the contents of a `tokenizer.json`, truncating to `max_tokens` tokens
    /// (special tokens included).
    ///
    /// # Errors
    /// `InvalidArgument` when the JSON is not a tokenizer or `max_tokens` is below 2.
    pub fn from_json(json: &[u8], max_tokens: usize) -> Result<Self> {
        if max_tokens < 2 {
            return Err(Error::invalid_argument(
                "max_tokens must leave room for [CLS] and [SEP]",
            ));
        }
        let mut inner = Tokenizer::from_bytes(json)
            .map_err(|e| Error::invalid_argument(format!("bad tokenizer.json: {e}")))?;
        let pad_id = inner.get_padding().map_or(0, |p| p.pad_id);
        let pad_token = inner
            .get_padding()
            .map_or_else(|| "[PAD]".to_owned(), |p| p.pad_token.clone());
        inner
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(|e| {
                Error::invalid_argument(format!("cannot truncate to {max_tokens}: {e}"))
            })?;
        inner.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id,
            pad_token,
            ..PaddingParams::default()
        }));
        Ok(Self { inner, max_tokens })
    }

    /// The truncation length.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Tokenises `texts` into one padded batch.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty batch; `Internal` if the tokenizer fails.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<TokenBatch> {
        if texts.is_empty() {
            return Err(Error::invalid_argument("no texts to tokenise"));
        }
        let encodings = self
            .inner
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| Error::new(ErrorCode::Internal, format!("tokenisation failed: {e}")))?;
        let seq = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(texts.len() * seq);
        let mut mask = Vec::with_capacity(texts.len() * seq);
        for encoding in &encodings {
            if encoding.get_ids().len() != seq {
                return Err(Error::internal(
                    "tokenizer returned rows of different lengths",
                ));
            }
            ids.extend(encoding.get_ids().iter().map(|&id| i64::from(id)));
            mask.extend(encoding.get_attention_mask().iter().map(|&m| i64::from(m)));
        }
        Ok(TokenBatch {
            batch: texts.len(),
            seq,
            ids,
            mask,
        })
    }
}
