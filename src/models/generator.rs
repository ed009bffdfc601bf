//! Text generation over a [`DecoderSession`]: a prompt becomes the GGUF's own tokens, is fed in
//! chunks (prefill), then one token per step is chosen on the device and streamed back as text
//! ([`Generation`] yields [`Piece`]s), until an end-of-generation token, a stop string, the
//! token budget or the context ends it.
//!
//! What the generator promises:
//! - **Reproducible sampling.** Step `i` of a generation draws `u = Sample::uniform(seed, i)`;
//!   the same prompt, knobs and seed give the same tokens on every run (and on both backends
//!   up to float near-ties), however the run is paused, suspended or rebuilt in between.
//! - **Prefix reuse.** The tokens whose keys and values the caches hold are remembered; a new
//!   prompt that starts with them feeds only the rest (a chat that grows turn by turn prefills
//!   each turn once). The last prompt token is always fed, as its logits choose the first
//!   generated token.
//! - **Structured output.** A generation started with a [`TokenMatcher`] chooses each token
//!   among those its grammar allows (the mask goes to the program's `token_mask` input), and
//!   ends as soon as the grammar is complete ([`FinishReason::EndOfGeneration`]); the token
//!   budget or the context can still cut it short ([`FinishReason::Length`],
//!   [`FinishReason::Context`]), leaving a prefix of a match.
//! - **Stop strings** end the text before the stop string; text that could still become one is
//!   held back, so no piece ever shows part of a stop string.
//! - **A dropped cache** (device loss, or `LowMemory` with the opt-in to drop state) is rebuilt:
//!   the caches are reset and every remembered token is fed again, then the step is retried
//!   once; [`GeneratorStats::rebuilds`] counts it.
//! - **Teacher forcing.** [`TextGenerator::evaluate`] runs given ids from position 0 in chunks
//!   of [`EVALUATE_CHUNK`]: the greedy token after every position, and the logits at the
//!   positions asked for (on a program built with logits), for scoring and reference checks.
//! - **Bounded work per call.** Prefill runs in chunks of [`PREFILL_CHUNK`] tokens; every call
//!   to [`TextGenerator::next_piece`] runs at most one decode step.

use crate::browser::timer::now_ms;
use crate::error::{Error, ErrorCode, Result};
use crate::models::decoder_session::{DecoderSession, Fed, GREEDY, Knobs, LogitRows};
use crate::models::grammar::TokenMatcher;
use crate::program::ops::Sample;
use crate::text::{GgufTokenizer, IncrementalDecoder};
use std::sync::Arc;

/// Tokens fed per prefill execute: long prompts run as several chunks, bounding activation
/// memory (and the time between two checks for an abort).
pub const PREFILL_CHUNK: usize = 256;

/// Tokens fed per execute by [`TextGenerator::evaluate`]: every row is selected there, so the
/// logits output holds `EVALUATE_CHUNK × vocab` floats (32 MiB for Gemma 3's 262,144 tokens).
pub const EVALUATE_CHUNK: usize = 32;

/// What [`TextGenerator::evaluate`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// The greedy next token after each position (the argmax of its logits; ties to the lowest
    /// id).
    pub tokens: Vec<u32>,
    /// The logits at the asked positions, row after row (`vocab` each).
    pub logits: Vec<f32>,
}

/// How one generation samples and when it stops.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Tokens to generate at most.
    pub max_new_tokens: u32,
    /// Softmax temperature; 0 (or less) is greedy.
    pub temperature: f32,
    /// Candidates kept by top-k (0: up to [`Sample::K_MAX`]).
    pub top_k: u32,
    /// Nucleus mass kept by top-p (1: all).
    pub top_p: f32,
    /// The seed of the step draws.
    pub seed: u64,
    /// Strings that end the generation (not included in the text).
    pub stop: Vec<String>,
    /// Whether the prompt's `<bos>`-style special tokens are added as the vocabulary says.
    pub add_special: bool,
    /// Whether control-token text in the prompt (`<start_of_turn>`) becomes those tokens.
    pub parse_special: bool,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        Self {
            max_new_tokens: 128,
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            seed: 0,
            stop: Vec::new(),
            add_special: true,
            parse_special: true,
        }
    }
}

impl GenerateOptions {
    /// The knobs of step `step`.
    #[allow(clippy::cast_precision_loss)]
    fn knobs(&self, step: u64) -> Knobs {
        [
            self.temperature,
            self.top_k as f32,
            self.top_p,
            Sample::uniform(self.seed, step),
        ]
    }
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token (`<eos>`, `<end_of_turn>`, ...; it is not part of the text),
    /// or a constrained generation's grammar is complete.
    EndOfGeneration,
    /// A stop string appeared.
    Stop,
    /// `max_new_tokens` were generated.
    Length,
    /// The caches are full.
    Context,
}

impl FinishReason {
    /// The reason as JavaScript sees it: `"eos"`, `"stop"`, `"length"`, `"context"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::EndOfGeneration => "eos",
            Self::Stop => "stop",
            Self::Length => "length",
            Self::Context => "context",
        }
    }
}

/// One generated token and the text it completes.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    /// The token id.
    pub token: u32,
    /// The text that is now final (may be empty: a character split across tokens, or text
    /// held back while it could begin a stop string).
    pub text: String,
    /// Milliseconds this token took (for the first: the prefill).
    pub ms: f64,
}

/// Counters of a generator, over its life and its last generation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GeneratorStats {
    /// Tokens of the last prompt.
    pub prompt_tokens: u64,
    /// Of those, tokens whose cache rows were reused from before (not fed again).
    pub reused_tokens: u64,
    /// Milliseconds of the last prefill (the prompt's execute calls, up to the first token).
    pub prefill_ms: f64,
    /// Tokens generated by the last generation.
    pub generated_tokens: u64,
    /// Milliseconds of the last generation's decode steps (after the first token).
    pub decode_ms: f64,
    /// How often a dropped cache was rebuilt by feeding the remembered tokens again.
    pub rebuilds: u64,
    /// Token masks the last generation's grammar computed (0 when unconstrained).
    pub masks: u64,
    /// Milliseconds the last generation spent computing them (part of its prefill and decode
    /// times).
    pub mask_ms: f64,
}

impl GeneratorStats {
    /// Milliseconds per decode step of the last generation (NaN before one ran).
    #[allow(clippy::cast_precision_loss)]
    pub fn decode_ms_per_token(&self) -> f64 {
        let steps = self.generated_tokens.saturating_sub(1);
        if steps == 0 {
            f64::NAN
        } else {
            self.decode_ms / steps as f64
        }
    }
}

/// The state of one generation, driven by [`TextGenerator::next_piece`].
#[derive(Debug)]
pub struct Generation {
    options: GenerateOptions,
    /// The token chosen but not yet returned (the next one to feed after returning it).
    next: Option<u32>,
    produced: u32,
    decoder: IncrementalDecoder,
    held: String,
    finished: Option<FinishReason>,
    first_ms: f64,
    matcher: Option<TokenMatcher>,
}

impl Generation {
    /// Why it ended, once it has.
    pub fn finish_reason(&self) -> Option<FinishReason> {
        self.finished
    }
}

/// A tokenizer and a decoder session: prompts in, pieces of text out.
pub struct TextGenerator {
    tokenizer: Arc<GgufTokenizer>,
    session: DecoderSession,
    /// The tokens whose cache rows are valid, in position order.
    cached: Vec<u32>,
    stats: GeneratorStats,
}

impl TextGenerator {
    /// A generator over `session` (fresh: nothing cached) with `tokenizer` (shared, so a
    /// caller can tokenize while a generation holds the generator).
    pub fn new(tokenizer: Arc<GgufTokenizer>, session: DecoderSession) -> Self {
        Self {
            tokenizer,
            session,
            cached: Vec::new(),
            stats: GeneratorStats::default(),
        }
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Arc<GgufTokenizer> {
        &self.tokenizer
    }

    /// The session (its delegate holds the backend's stats and options).
    pub fn session(&self) -> &DecoderSession {
        &self.session
    }

    /// The session, mutably.
    pub fn session_mut(&mut self) -> &mut DecoderSession {
        &mut self.session
    }

    /// The counters.
    pub fn stats(&self) -> &GeneratorStats {
        &self.stats
    }

    /// Forgets the cached tokens (the next prompt is fed whole).
    pub fn forget(&mut self) {
        self.cached.clear();
        self.session.rewind();
    }

    /// Clears the caches through the backend and forgets the cached tokens.
    ///
    /// # Errors
    /// The backend's reset errors.
    pub fn reset(&mut self) -> Result<()> {
        self.cached.clear();
        self.session.reset()
    }

    /// Tokenizes `prompt`, feeds what the caches do not hold yet, and chooses the first token
    /// (returned by the first [`TextGenerator::next_piece`]).
    ///
    /// # Errors
    /// `InvalidArgument` for an empty prompt (no tokens) or one that does not fit the context
    /// with room for one generated token; the execute's errors.
    pub async fn start(&mut self, prompt: &str, options: GenerateOptions) -> Result<Generation> {
        let ids = self
            .tokenizer
            .encode(prompt, options.add_special, options.parse_special)?;
        self.start_ids(&ids, options).await
    }

    /// As [`TextGenerator::start`], from token ids.
    ///
    /// # Errors
    /// As [`TextGenerator::start`]; `InvalidArgument` for an id outside the vocabulary.
    pub async fn start_ids(&mut self, ids: &[u32], options: GenerateOptions) -> Result<Generation> {
        self.start_constrained(ids, options, None).await
    }

    /// As [`TextGenerator::start_ids`], choosing every token among those `matcher` allows
    /// (from its start; see the module docs).
    ///
    /// # Errors
    /// As [`TextGenerator::start`]; `InvalidArgument` for stop strings with a matcher (the
    /// grammar decides where the output ends); the matcher's errors.
    pub async fn start_constrained(
        &mut self,
        ids: &[u32],
        options: GenerateOptions,
        mut matcher: Option<TokenMatcher>,
    ) -> Result<Generation> {
        if matcher.is_some() && options.stop.iter().any(|s| !s.is_empty()) {
            return Err(Error::invalid_argument(
                "stop strings cannot be combined with a grammar (it decides where the output ends)",
            ));
        }
        if ids.is_empty() {
            return Err(Error::invalid_argument("the prompt has no tokens"));
        }
        self.check_ids(ids)?;
        let context = usize::try_from(self.session.context()).unwrap_or(usize::MAX);
        if ids.len() >= context {
            return Err(Error::invalid_argument(format!(
                "the prompt has {} tokens; the context holds {context} (with room for one more)",
                ids.len()
            )));
        }
        let started = now_ms();
        let first_mask = matcher.as_mut().map(TokenMatcher::mask).transpose()?;
        // Reuse the cached prefix, but always feed the last prompt token.
        let common = self
            .cached
            .iter()
            .zip(ids)
            .take_while(|(a, b)| a == b)
            .count()
            .min(ids.len() - 1);
        self.cached.truncate(common);
        self.session.rewind_to(common as u64)?;
        let mut first = None;
        let rest = &ids[common..];
        let chunks = rest.len().div_ceil(PREFILL_CHUNK);
        for (i, chunk) in rest.chunks(PREFILL_CHUNK).enumerate() {
            let knobs = options.knobs(0);
            let last = i + 1 == chunks;
            let mask = if last { first_mask.as_deref() } else { None };
            let fed = self.feed(chunk, LogitRows::Last, knobs, mask).await?;
            if last {
                first = fed.tokens.first().copied();
            }
        }
        let first = first.ok_or_else(|| Error::internal("the prefill chose no token"))?;
        let prefill_ms = now_ms() - started;
        self.stats.prompt_tokens = ids.len() as u64;
        self.stats.reused_tokens = common as u64;
        self.stats.prefill_ms = prefill_ms;
        self.stats.generated_tokens = 0;
        self.stats.decode_ms = 0.0;
        self.stats.masks = matcher.as_ref().map_or(0, TokenMatcher::masks);
        self.stats.mask_ms = matcher.as_ref().map_or(0.0, TokenMatcher::mask_ms);
        Ok(Generation {
            options,
            next: Some(first),
            produced: 0,
            decoder: IncrementalDecoder::new(),
            held: String::new(),
            finished: None,
            first_ms: prefill_ms,
            matcher,
        })
    }

    /// Runs `ids` from position 0 (teacher forcing): the greedy next token after every
    /// position, and the logits at `logit_positions` (strictly increasing, each below
    /// `ids.len()`; none for a program built without logits). What scoring, perplexity and
    /// checks against a reference need. The caches then hold `ids`, so a prompt that starts
    /// with them reuses them.
    ///
    /// # Errors
    /// `InvalidArgument` for no ids, an id outside the vocabulary, more ids than the context
    /// holds, or bad positions; `NotSupported` for positions on a program without logits; the
    /// execute's errors (the caches are then forgotten).
    pub async fn evaluate(&mut self, ids: &[u32], logit_positions: &[u32]) -> Result<Evaluation> {
        self.check_ids(ids)?;
        let context = usize::try_from(self.session.context()).unwrap_or(usize::MAX);
        if ids.len() > context {
            return Err(Error::invalid_argument(format!(
                "{} tokens do not fit the context of {context} positions",
                ids.len()
            )));
        }
        if !logit_positions.is_empty() && !self.session.has_logits() {
            return Err(Error::new(
                ErrorCode::NotSupported,
                "this model was loaded without logits (load it with logits: true)",
            ));
        }
        let increasing = logit_positions.windows(2).all(|w| w[0] < w[1]);
        if !increasing
            || logit_positions
                .last()
                .is_some_and(|&p| p as usize >= ids.len())
        {
            return Err(Error::invalid_argument(format!(
                "logit positions must increase and lie below {}, got {logit_positions:?}",
                ids.len()
            )));
        }
        self.forget();
        let mut out = Evaluation {
            tokens: Vec::with_capacity(ids.len()),
            logits: Vec::new(),
        };
        let vocab = self.tokenizer.vocab_size();
        let mut wanted = logit_positions.iter().copied().peekable();
        for (i, chunk) in ids.chunks(EVALUATE_CHUNK).enumerate() {
            let fed = match self.feed(chunk, LogitRows::All, GREEDY, None).await {
                Ok(fed) => fed,
                Err(error) => {
                    self.forget();
                    return Err(error);
                }
            };
            out.tokens.extend_from_slice(&fed.tokens);
            let start = i * EVALUATE_CHUNK;
            while let Some(p) = wanted.next_if(|&p| (p as usize) < start + chunk.len()) {
                let row = p as usize - start;
                let logits = fed.logits.as_deref().unwrap_or_default();
                let values = logits
                    .get(row * vocab..(row + 1) * vocab)
                    .ok_or_else(|| Error::internal("the logits output has the wrong size"))?;
                out.logits.extend_from_slice(values);
            }
        }
        Ok(out)
    }

    /// `InvalidArgument` for no ids or an id outside the vocabulary.
    fn check_ids(&self, ids: &[u32]) -> Result<()> {
        if ids.is_empty() {
            return Err(Error::invalid_argument("no tokens"));
        }
        let vocab = self.tokenizer.vocab_size();
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(Error::invalid_argument(format!(
                "token {bad} is outside the vocabulary of {vocab}"
            )));
        }
        Ok(())
    }

    /// Feeds `ids` (after the cached tokens) choosing among the tokens `mask` allows,
    /// rebuilding a dropped cache once.
    async fn feed(
        &mut self,
        ids: &[u32],
        rows: LogitRows<'_>,
        knobs: Knobs,
        mask: Option<&[u32]>,
    ) -> Result<Fed> {
        let fed = match self.session.feed_masked(ids, rows, knobs, mask).await {
            Err(error) if is_dropped_state(&error) => {
                self.rebuild().await?;
                self.session.feed_masked(ids, rows, knobs, mask).await?
            }
            other => other?,
        };
        self.cached.extend_from_slice(ids);
        Ok(fed)
    }

    /// Resets the caches and feeds every cached token again.
    async fn rebuild(&mut self) -> Result<()> {
        self.stats.rebuilds += 1;
        let cached = std::mem::take(&mut self.cached);
        self.session.reset()?;
        for chunk in cached.chunks(PREFILL_CHUNK) {
            self.session.feed(chunk, LogitRows::Last, GREEDY).await?;
        }
        self.cached = cached;
        Ok(())
    }

    /// The next piece of `generation`, or `None` once it has finished (then
    /// [`Generation::finish_reason`] says why; a final piece may flush held-back text).
    ///
    /// # Errors
    /// The execute's errors (the generation can be continued by calling again).
    pub async fn next_piece(&mut self, generation: &mut Generation) -> Result<Option<Piece>> {
        if generation.finished.is_some() {
            return Ok(None);
        }
        let Some(token) = generation.next else {
            return Ok(None);
        };
        let ms = if generation.produced == 0 {
            generation.first_ms
        } else {
            // Feed the previous token to choose this one.
            let started = now_ms();
            let step = u64::from(generation.produced);
            let knobs = generation.options.knobs(step);
            let mask = generation
                .matcher
                .as_mut()
                .map(TokenMatcher::mask)
                .transpose()?;
            let fed = self
                .feed(&[token], LogitRows::Last, knobs, mask.as_deref())
                .await?;
            let chosen = *fed
                .tokens
                .first()
                .ok_or_else(|| Error::internal("the step chose no token"))?;
            generation.next = Some(chosen);
            let ms = now_ms() - started;
            self.stats.decode_ms += ms;
            return self.emit(generation, chosen, ms).map(Some);
        };
        self.emit(generation, token, ms).map(Some)
    }

    /// Accounts for token `token` (just chosen), deciding whether the generation ends.
    fn emit(&mut self, g: &mut Generation, token: u32, ms: f64) -> Result<Piece> {
        g.produced += 1;
        self.stats.generated_tokens = u64::from(g.produced);
        let mut complete = false;
        if let Some(matcher) = &mut g.matcher {
            self.stats.masks = matcher.masks();
            self.stats.mask_ms = matcher.mask_ms();
            if !self.tokenizer.is_end_of_generation(token) {
                matcher.accept(token)?;
                complete = matcher.is_finished();
            }
        }
        if self.tokenizer.is_end_of_generation(token) {
            g.finished = Some(FinishReason::EndOfGeneration);
            g.next = None;
            let mut text = std::mem::take(&mut g.held);
            text.push_str(&g.decoder.finish());
            return Ok(Piece { token, text, ms });
        }
        g.held.push_str(&g.decoder.push(&self.tokenizer, token));
        let text = if let Some(at) = first_stop(&g.held, &g.options.stop) {
            g.finished = Some(FinishReason::Stop);
            g.held.truncate(at);
            std::mem::take(&mut g.held)
        } else {
            let keep = stop_prefix_len(&g.held, &g.options.stop);
            let cut = g.held.len() - keep;
            let rest = g.held.split_off(cut);
            std::mem::replace(&mut g.held, rest)
        };
        if g.finished.is_none() {
            if complete {
                g.finished = Some(FinishReason::EndOfGeneration);
            } else if g.produced >= g.options.max_new_tokens {
                g.finished = Some(FinishReason::Length);
            } else if self.session.position() + 1 >= self.session.context() {
                g.finished = Some(FinishReason::Context);
            }
        }
        let mut text = text;
        if g.finished.is_some() {
            g.next = None;
            if g.finished != Some(FinishReason::Stop) {
                text.push_str(&std::mem::take(&mut g.held));
                text.push_str(&g.decoder.finish());
            }
        }
        Ok(Piece { token, text, ms })
    }
}

/// Whether `error` says the program's state was dropped (device loss, or `LowMemory` with the
/// opt-in): the caches must be rebuilt.
fn is_dropped_state(error: &Error) -> bool {
    error.code() == ErrorCode::InvalidState
        && error.message().contains("state")
        && error.message().contains("dropped")
}

/// The byte offset of the earliest stop string in `text`.
fn first_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
}

/// Bytes at the end of `text` that begin some stop string (held back until they cannot).
fn stop_prefix_len(text: &str, stops: &[String]) -> usize {
    let mut longest = 0;
    for stop in stops {
        for (end, _) in stop.char_indices().skip(1).chain([(stop.len(), ' ')]) {
            let prefix = &stop[..end];
            if end < stop.len() && text.ends_with(prefix) {
                longest = longest.max(prefix.len());
            }
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_are_found_and_their_prefixes_held() {
        let stops = vec!["\n\n".to_owned(), "END".to_owned()];
        assert_eq!(first_stop("abc\n\nd", &stops), Some(3));
        assert_eq!(first_stop("xENDy\n\n", &stops), Some(1));
        assert_eq!(first_stop("abc", &stops), None);
        assert_eq!(stop_prefix_len("abc\n", &stops), 1);
        assert_eq!(stop_prefix_len("abcEN", &stops), 2);
        assert_eq!(stop_prefix_len("abcE", &stops), 1);
        assert_eq!(stop_prefix_len("abc", &stops), 0);
        assert_eq!(stop_prefix_len("", &stops), 0);
        // Multi-byte stop strings are cut at character boundaries only.
        let stops = vec!["é!".to_owned()];
        assert_eq!(stop_prefix_len("caf\u{e9}", &stops), 2);
    }

    #[test]
    fn decode_rate_needs_a_step() {
        let mut stats = GeneratorStats::default();
        assert!(stats.decode_ms_per_token().is_nan());
        stats.generated_tokens = 5;
        stats.decode_ms = 8.0;
        assert!((stats.decode_ms_per_token() - 2.0).abs() < 1e-12);
    }
}
