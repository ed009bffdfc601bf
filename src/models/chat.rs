//! Chat over a [`TextGenerator`]: a conversation becomes the model's own prompt (its chat
//! template rendered as transformers' `apply_chat_template` renders it, then its tokenizer with
//! control tokens parsed), and a completion is one generation from it.
//!
//! What a chat promises:
//! - **The model's template.** GGUF `tokenizer.chat_template` unless the caller passes one; a
//!   file without a template is refused (`NotFound`, saying to pass `chatTemplate`).
//! - **One BOS.** Templates write `{{ bos_token }}` themselves; where the vocabulary adds BOS
//!   and the rendered text does not start with it, it is added (llama.cpp's rule), never twice.
//! - **Cache reuse across turns.** A follow-up turn's prompt starts with the tokens the caches
//!   hold (the earlier turns as the template renders them), so only the new tokens are fed; a
//!   conversation that diverges reuses the longest common prefix (the generator's
//!   `reused_tokens`, OpenAI's `usage.prompt_tokens_details.cached_tokens`).
//! - **Generation ends at the end of the turn**: the vocabulary's end-of-generation tokens
//!   (eos, eot, eom and the turn terminators llama.cpp recognises), a stop string, `max_tokens`
//!   or the context.

use crate::error::{Error, ErrorCode, Result};
use crate::params::formats::gguf::GgufValue;
use crate::text::{ChatRender, ChatTemplate, GgufTokenizer, SpecialTokens};

/// The GGUF key of the model's chat template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// A model's chat template and its tokenizer: conversations in, prompt token ids out.
#[derive(Debug)]
pub struct ChatPrompt {
    template: ChatTemplate,
    bos: Option<u32>,
    add_bos: bool,
}

/// The special-token texts of `tokenizer`, as transformers' `special_tokens_map` gives them.
pub fn special_tokens(tokenizer: &GgufTokenizer) -> SpecialTokens {
    let text = |id: Option<u32>| {
        id.and_then(|id| tokenizer.token_text(id))
            .map(str::to_owned)
    };
    SpecialTokens {
        bos: text(tokenizer.bos()),
        eos: text(tokenizer.eos()),
        unk: text(tokenizer.unk()),
        pad: text(tokenizer.pad()),
    }
}

/// The chat template a GGUF file's metadata carries, if any.
///
/// # Errors
/// `InvalidArgument` when the key holds something other than a UTF-8 string.
pub fn template_source(metadata: &[(String, GgufValue)]) -> Result<Option<&str>> {
    match metadata.iter().find(|(key, _)| key == CHAT_TEMPLATE_KEY) {
        None => Ok(None),
        Some((_, value)) => value.as_str().map(Some).ok_or_else(|| {
            Error::invalid_argument(format!("{CHAT_TEMPLATE_KEY} is not a UTF-8 string"))
        }),
    }
}

impl ChatPrompt {
    /// The chat prompt of a model: `source` (the caller's template) or else the file's
    /// `tokenizer.chat_template` from `metadata`, seeing `tokenizer`'s special tokens.
    ///
    /// # Errors
    /// `NotFound` when neither gives a template; `InvalidArgument` for a template that does not
    /// compile (naming its line).
    pub fn new(
        source: Option<&str>,
        metadata: &[(String, GgufValue)],
        tokenizer: &GgufTokenizer,
    ) -> Result<Self> {
        let source = match source {
            Some(source) => source,
            None => template_source(metadata)?.ok_or_else(|| {
                Error::new(
                    ErrorCode::NotFound,
                    format!(
                        "this model file has no chat template ({CHAT_TEMPLATE_KEY}); pass one as \
                         the chatTemplate option"
                    ),
                )
            })?,
        };
        Ok(Self {
            template: ChatTemplate::new(source, special_tokens(tokenizer))?,
            bos: tokenizer.bos(),
            add_bos: tokenizer.add_bos_default(),
        })
    }

    /// The rendered prompt text of `request`.
    ///
    /// # Errors
    /// As [`ChatTemplate::render`].
    pub fn render(&self, request: &ChatRender<'_>) -> Result<String> {
        self.template.render(request)
    }

    /// The prompt token ids of `request`: rendered, then tokenized with control tokens parsed
    /// and no special tokens added but one BOS where the vocabulary wants it.
    ///
    /// # Errors
    /// As [`ChatTemplate::render`] and [`GgufTokenizer::encode`].
    pub fn token_ids(
        &self,
        tokenizer: &GgufTokenizer,
        request: &ChatRender<'_>,
    ) -> Result<Vec<u32>> {
        let text = self.render(request)?;
        let mut ids = tokenizer.encode(&text, false, true)?;
        if let Some(bos) = self.bos
            && self.add_bos
            && ids.first() != Some(&bos)
        {
            ids.insert(0, bos);
        }
        Ok(ids)
    }
}
