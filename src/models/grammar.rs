//! Structured output: a JSON schema, a Lark grammar or a regular expression, compiled by
//! [llguidance](https://github.com/guidance-ai/llguidance) (the constrained-decoding engine
//! llama.cpp uses) against a GGUF vocabulary, gives the tokens allowed at each step as a bit
//! mask, which the decoder program applies where the token is chosen (the
//! [`TokenMask`](crate::program::ops::TokenMask) op before `Sample`, on the device for WebGPU:
//! no logits are read back).
//!
//! What this module promises:
//! - **Every output parses.** A generation that ends because the grammar is complete (or at an
//!   end-of-generation token, which the mask allows only where the grammar may end) matches the
//!   grammar; a generation cut short by the token budget or the context is a prefix of a match
//!   and nothing more.
//! - **JSON is written compactly and deterministically**: `", "` between items, `": "` after
//!   keys, no other whitespace (llguidance's `whitespace_flexible: false`), unless the schema's
//!   own `x-guidance` options say otherwise. Flexible whitespace lets a small model emit
//!   newlines forever; a fixed layout spends every token on content.
//! - **Untrusted grammars are bounded**: at most [`MAX_GRAMMAR_BYTES`] of source; llguidance's
//!   own limits bound compile and per-step work (lexer fuel, Earley items, lexer states); an
//!   unsupported or unsatisfiable schema is `InvalidArgument` with llguidance's message.
//! - **Cost**: building a [`GrammarCompiler`] for a vocabulary (its token trie and parser
//!   factory) takes about a second for 262,144 tokens in wasm, so one compiler serves every
//!   request on a model; compiling a grammar and each step's mask are the per-request costs
//!   (a mask is tens of microseconds typically, [`TokenMatcher::mask_ms`] counts them).

use crate::browser::timer::now_ms;
use crate::error::{Error, ErrorCode, Result};
use crate::text::GgufTokenizer;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;
use std::sync::Arc;

/// The largest grammar or schema source accepted (1 MiB).
pub const MAX_GRAMMAR_BYTES: usize = 1 << 20;

/// The deepest nesting of arrays and objects accepted in a JSON schema (the compiler recurses
/// over it; a real schema nests a few levels).
pub const MAX_SCHEMA_DEPTH: usize = 64;

/// What the output must match.
#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    /// A JSON schema (draft 2020-12 as llguidance supports it; `{"type": "object"}` is any
    /// object, OpenAI's `json_object`).
    JsonSchema(Value),
    /// A grammar in llguidance's Lark dialect.
    Lark(String),
    /// A regular expression (Rust `regex` syntax) the whole output matches.
    Regex(String),
}

impl Constraint {
    /// Any JSON object (OpenAI's `response_format: { type: 'json_object' }`).
    pub fn json_object() -> Self {
        Self::JsonSchema(serde_json::json!({ "type": "object" }))
    }

    /// The llguidance grammar, with this module's JSON layout unless the schema sets its own.
    fn grammar(&self) -> Result<TopLevelGrammar> {
        let too_long = |what: &str, len: usize| {
            Error::invalid_argument(format!(
                "the {what} is {len} bytes; at most {MAX_GRAMMAR_BYTES} are accepted"
            ))
        };
        match self {
            Self::JsonSchema(schema) => {
                if json_depth(schema) > MAX_SCHEMA_DEPTH {
                    return Err(Error::invalid_argument(format!(
                        "the JSON schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
                    )));
                }
                let len = serde_json::to_string(schema).map_or(usize::MAX, |s| s.len());
                if len > MAX_GRAMMAR_BYTES {
                    return Err(too_long("JSON schema", len));
                }
                let mut schema = match schema {
                    Value::Bool(true) => serde_json::json!({}),
                    Value::Object(_) => schema.clone(),
                    Value::Bool(false) => {
                        return Err(Error::invalid_argument(
                            "the JSON schema `false` admits no value",
                        ));
                    }
                    other => {
                        return Err(Error::invalid_argument(format!(
                            "a JSON schema is an object or a boolean, not {}",
                            json_kind(other)
                        )));
                    }
                };
                if let Value::Object(map) = &mut schema
                    && !map.contains_key("x-guidance")
                {
                    map.insert(
                        "x-guidance".to_owned(),
                        serde_json::json!({
                            "whitespace_flexible": false,
                            "item_separator": ", ",
                            "key_separator": ": ",
                        }),
                    );
                }
                Ok(TopLevelGrammar::from_json_schema(schema))
            }
            Self::Lark(source) => {
                if source.len() > MAX_GRAMMAR_BYTES {
                    return Err(too_long("grammar", source.len()));
                }
                Ok(TopLevelGrammar::from_lark(source.clone()))
            }
            Self::Regex(source) => {
                if source.len() > MAX_GRAMMAR_BYTES {
                    return Err(too_long("regular expression", source.len()));
                }
                Ok(TopLevelGrammar::from_regex(source))
            }
        }
    }
}

/// The nesting depth of `value` (a scalar is 0), without recursion.
fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// The JSON type name of `value`, for messages.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The bytes llguidance matches for each token, as llama.cpp's llguidance binding gives them:
/// the piece as text (`token_to_piece` without specials); a control token's piece prefixed
/// with [`TokTrie::SPECIAL_TOKEN_MARKER`] (so no grammar text can produce it); nothing for
/// unused ids (never allowed).
fn token_bytes(tokenizer: &GgufTokenizer, id: u32) -> Vec<u8> {
    let text = tokenizer.token_to_piece_with(id, false);
    if !text.is_empty() {
        return text;
    }
    let special = tokenizer.token_to_piece_with(id, true);
    if special.is_empty() {
        return special;
    }
    let mut marked = Vec::with_capacity(special.len() + 1);
    marked.push(TokTrie::SPECIAL_TOKEN_MARKER);
    marked.extend_from_slice(&special);
    marked
}

/// Compiles constraints against one vocabulary (expensive to build: one per model).
pub struct GrammarCompiler {
    factory: Arc<ParserFactory>,
    vocab: usize,
}

impl GrammarCompiler {
    /// A compiler for `tokenizer`'s vocabulary; the end-of-generation tokens end a generation
    /// where the grammar may end.
    ///
    /// # Errors
    /// `NotSupported` for a vocabulary without an end-of-generation token or of more than
    /// `u32::MAX` tokens; `Internal` when llguidance refuses the vocabulary.
    pub fn new(tokenizer: &GgufTokenizer) -> Result<Self> {
        let vocab = tokenizer.vocab_size();
        let count = u32::try_from(vocab)
            .map_err(|_| Error::not_supported("a vocabulary of more than 2^32 tokens"))?;
        let eog = tokenizer.end_of_generation();
        let eos = tokenizer
            .eos()
            .or_else(|| eog.first().copied())
            .ok_or_else(|| {
                Error::not_supported(
                    "structured output needs an end-of-generation token; the vocabulary has none",
                )
            })?;
        let mut ends: Vec<u32> = eog.iter().copied().filter(|&t| t < count).collect();
        if eos < count && !ends.contains(&eos) {
            ends.push(eos);
        }
        let words: Vec<Vec<u8>> = (0..count).map(|id| token_bytes(tokenizer, id)).collect();
        let trie = TokTrie::from(&TokRxInfo::new(count, eos), &words).with_eos_tokens(&ends);
        let env = ApproximateTokEnv::new(trie);
        let mut factory = ParserFactory::new_simple(&(Arc::new(env) as _))
            .map_err(|e| Error::internal(format!("llguidance refused the vocabulary: {e}")))?;
        factory.quiet();
        Ok(Self {
            factory: Arc::new(factory),
            vocab,
        })
    }

    /// The tokens of the vocabulary it was built for.
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// A matcher of `constraint` from its start, with masks of `mask_words` words (at least one
    /// bit per token of the vocabulary; a model whose embedding has padding rows has more).
    ///
    /// # Errors
    /// `InvalidArgument` for a source over [`MAX_GRAMMAR_BYTES`], a schema or grammar
    /// llguidance rejects (its message says why), or too few mask words.
    pub fn compile(&self, constraint: &Constraint, mask_words: usize) -> Result<TokenMatcher> {
        if mask_words < self.vocab.div_ceil(32) {
            return Err(Error::invalid_argument(format!(
                "{mask_words} mask words cannot hold {} tokens",
                self.vocab
            )));
        }
        let grammar = constraint.grammar()?;
        let parser = self.factory.create_parser(grammar).map_err(|e| {
            Error::invalid_argument(format!("the {}: {e}", constraint_name(constraint)))
        })?;
        let matcher = Matcher::new(Ok(parser));
        Ok(TokenMatcher {
            matcher,
            vocab: self.vocab,
            mask_words,
            mask_ms: 0.0,
            masks: 0,
        })
    }
}

/// What a constraint is called in messages.
fn constraint_name(constraint: &Constraint) -> &'static str {
    match constraint {
        Constraint::JsonSchema(_) => "JSON schema",
        Constraint::Lark(_) => "grammar",
        Constraint::Regex(_) => "regular expression",
    }
}

/// One generation's position in its grammar: the allowed tokens of the next step, and the
/// tokens it has taken.
pub struct TokenMatcher {
    matcher: Matcher,
    vocab: usize,
    mask_words: usize,
    mask_ms: f64,
    masks: u64,
}

impl std::fmt::Debug for TokenMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenMatcher")
            .field("vocab", &self.vocab)
            .field("stopped", &self.matcher.is_stopped())
            .field("masks", &self.masks)
            .finish_non_exhaustive()
    }
}

impl TokenMatcher {
    /// The tokens allowed next, one bit each (bit `t % 32` of word `t / 32`), in the mask
    /// width it was compiled for.
    ///
    /// # Errors
    /// `Internal` when llguidance fails (its step limits, say), with its message; the matcher
    /// is then finished.
    pub fn mask(&mut self) -> Result<Vec<u32>> {
        let started = now_ms();
        let computed = self.matcher.compute_mask().map_err(grammar_error)?;
        let mut words = vec![0u32; self.mask_words];
        let bits = computed.as_slice();
        let full = self.vocab / 32;
        let n = full.min(bits.len());
        words[..n].copy_from_slice(&bits[..n]);
        let tail = self.vocab % 32;
        if tail > 0
            && let (Some(&last), Some(slot)) = (bits.get(full), words.get_mut(full))
        {
            *slot = last & ((1u32 << tail) - 1);
        }
        self.mask_ms += now_ms() - started;
        self.masks += 1;
        if words.iter().all(|&w| w == 0) {
            return Err(Error::internal(
                "the grammar allows no token here (llguidance gave an empty mask)",
            ));
        }
        Ok(words)
    }

    /// Takes `token` (which the last [`mask`](Self::mask) allowed).
    ///
    /// # Errors
    /// `Internal` when the grammar does not allow `token`.
    pub fn accept(&mut self, token: u32) -> Result<()> {
        self.matcher.consume_token(token).map_err(grammar_error)
    }

    /// Whether the grammar is complete and admits nothing more (the generation ends here).
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    /// Milliseconds spent computing masks so far.
    pub fn mask_ms(&self) -> f64 {
        self.mask_ms
    }

    /// Masks computed so far.
    pub fn masks(&self) -> u64 {
        self.masks
    }
}

/// An llguidance failure at a step.
fn grammar_error(error: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::Internal,
        format!("constrained decoding failed: {error}"),
    )
}
