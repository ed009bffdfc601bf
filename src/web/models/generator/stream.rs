//! `GenerationStream`: one `generate()` call as an async iterator of `{token, text, ms}`.
//!
//! The stream takes its place in line for the generator at its first `next()` (so a
//! `generate()` that is never iterated holds nothing; streams run one at a time, in the order
//! they were first iterated) and holds it until the generation ends, `return()` is called (a
//! `for await` loop that breaks), `destroy()` ends it, or an error ends it; then the next
//! stream proceeds. Each `next()` runs at most one decode step (the first runs the prefill),
//! after:
//! - letting the page's event loop run (a macrotask), so the page stays responsive and a Stop
//!   button can abort between two tokens even on the CPU backend;
//! - checking the caller's `AbortSignal`: once aborted, `next()` rejects with `InvalidState`
//!   ("generation aborted") and the stream is over, so an abort takes effect within one token;
//! - waiting while the page is suspended (hidden): no step runs until it is resumed, and then
//!   the generation continues where it was, with the same draws (the step index seeds them).
//!
//! Concurrent `next()` calls on one stream are answered in order, like a queue.

use crate::error::{Error, Result};
use crate::fifo_slot::{FifoSlot, SlotClosed, Turn};
use crate::models::generator::{GenerateOptions, Generation, GeneratorStats, Piece, TextGenerator};
use crate::models::grammar::TokenMatcher;
use crate::params::http::HttpProvider;
use crate::send_sync::LocalBoxFuture;
use crate::web::edge::errors::to_js_error;
use js_sys::{Object, Promise, Reflect};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(module = "/src/web/models/generator/stream.js")]
extern "C" {
    #[wasm_bindgen(js_name = asyncIterable)]
    fn async_iterable(stream: GenerationStream) -> JsValue;
}

/// How often a suspended generation looks whether the page is back (a hidden page's timers
/// are throttled anyway; nothing else runs while it waits).
const SUSPENDED_POLL: Duration = Duration::from_millis(200);

/// The generator, as far as this stream has it.
enum Hold {
    /// Not iterated yet: not in line.
    NotYet(FifoSlot<TextGenerator>),
    /// In line for it.
    Waiting(LocalBoxFuture<'static, std::result::Result<Turn<TextGenerator>, SlotClosed>>),
    /// Holding it.
    Held(Turn<TextGenerator>),
    /// Given back (the stream is over).
    Released,
}

/// What a generation starts from.
pub(super) enum Prompt {
    /// Text, tokenized when the generation starts (as the options say).
    Text(String),
    /// Token ids (a rendered chat), each chosen among what the matcher allows when there is
    /// one (structured output).
    Ids(Vec<u32>, Option<Box<TokenMatcher>>),
}

/// Everything one generation needs between `next()` calls.
struct StreamState {
    hold: Hold,
    prompt: Option<(Prompt, GenerateOptions)>,
    generation: Option<Generation>,
    signal: Option<web_sys::AbortSignal>,
    provider: Arc<HttpProvider>,
    finish: Rc<Cell<Option<&'static str>>>,
    usage: Rc<RefCell<GeneratorStats>>,
}

impl StreamState {
    fn release(&mut self, reason: &'static str) {
        self.hold = Hold::Released;
        if self.finish.get().is_none() {
            self.finish.set(Some(reason));
        }
    }

    fn aborted(&self) -> bool {
        self.signal
            .as_ref()
            .is_some_and(web_sys::AbortSignal::aborted)
    }

    /// The next piece, or `None` once the generation is over.
    async fn advance(&mut self) -> Result<Option<Piece>> {
        if let Hold::NotYet(slot) = &self.hold {
            self.hold = Hold::Waiting(Box::pin(slot.acquire()));
        }
        if let Hold::Waiting(turn) = &mut self.hold {
            match turn.await {
                Ok(turn) => self.hold = Hold::Held(turn),
                Err(closed) => {
                    self.release("destroyed");
                    return Err(Error::invalid_state(match closed {
                        SlotClosed::Before => "this generator was destroyed",
                        SlotClosed::WhileWaiting => {
                            "this generator was destroyed while generate() waited for the one \
                             before it"
                        }
                    }));
                }
            }
        }
        // Let the page's event loop run (input, rendering, a Stop button's click) before each
        // step: the CPU backend computes a step without yielding, and promise callbacks alone
        // would keep the page frozen for the whole generation.
        crate::browser::timer::sleep(Duration::ZERO).await;
        while self.provider.is_suspended() && !self.aborted() {
            crate::browser::timer::sleep(SUSPENDED_POLL).await;
        }
        if self.aborted() {
            self.release("aborted");
            return Err(Error::invalid_state("generation aborted"));
        }
        if let Hold::Held(generator) = &self.hold
            && generator.slot_closed()
        {
            // destroy() while this generation held the generator: it ends now (the turn is
            // given back, so the model is freed), not after its remaining tokens.
            self.release("destroyed");
            return Err(Error::invalid_state("this generator was destroyed"));
        }
        let Hold::Held(generator) = &mut self.hold else {
            return Ok(None);
        };
        if self.generation.is_none() {
            let Some((prompt, options)) = self.prompt.take() else {
                return Ok(None);
            };
            let generation = match prompt {
                Prompt::Text(text) => generator.start(&text, options).await?,
                Prompt::Ids(ids, matcher) => {
                    generator
                        .start_constrained(&ids, options, matcher.map(|m| *m))
                        .await?
                }
            };
            self.generation = Some(generation);
        }
        let generation = self.generation.as_mut().expect("started above");
        let piece = generator.next_piece(generation).await?;
        // The generator's counters are this generation's until the next one starts: keep them.
        self.usage.borrow_mut().clone_from(generator.stats());
        match (&piece, generation.finish_reason()) {
            (_, Some(reason)) => self.release(reason.name()),
            (None, None) => self.release("length"),
            (Some(_), None) => {}
        }
        Ok(piece)
    }
}

/// One `generate()` call; JavaScript sees it wrapped as an async iterator.
#[wasm_bindgen]
pub struct GenerationStream {
    state: FifoSlot<StreamState>,
    finish: Rc<Cell<Option<&'static str>>>,
    usage: Rc<RefCell<GeneratorStats>>,
}

/// OpenAI's `usage` object for a generation's counters.
#[allow(clippy::cast_precision_loss)]
pub(super) fn usage_object(usage: &GeneratorStats) -> JsValue {
    let set = |object: &Object, key: &str, value: JsValue| {
        let _ = Reflect::set(object, &JsValue::from_str(key), &value);
    };
    let number = |n: u64| JsValue::from_f64(n as f64);
    let object = Object::new();
    set(&object, "prompt_tokens", number(usage.prompt_tokens));
    set(&object, "completion_tokens", number(usage.generated_tokens));
    set(
        &object,
        "total_tokens",
        number(usage.prompt_tokens + usage.generated_tokens),
    );
    let details = Object::new();
    set(&details, "cached_tokens", number(usage.reused_tokens));
    set(&object, "prompt_tokens_details", details.into());
    let extra = Object::new();
    let fed = usage.prompt_tokens.saturating_sub(usage.reused_tokens) as f64;
    let steps = usage.generated_tokens.saturating_sub(1) as f64;
    set(
        &extra,
        "prefill_tokens_per_s",
        JsValue::from_f64(fed / (usage.prefill_ms / 1000.0)),
    );
    set(
        &extra,
        "decode_tokens_per_s",
        JsValue::from_f64(steps / (usage.decode_ms / 1000.0)),
    );
    set(
        &extra,
        "time_to_first_token_s",
        JsValue::from_f64(usage.prefill_ms / 1000.0),
    );
    set(
        &extra,
        "time_per_output_token_s",
        JsValue::from_f64(usage.decode_ms / 1000.0 / steps),
    );
    if usage.masks > 0 {
        set(
            &extra,
            "grammar_mask_ms_per_token",
            JsValue::from_f64(usage.mask_ms / usage.masks as f64),
        );
    }
    set(&object, "extra", extra.into());
    object.into()
}

/// The iterator result `{value, done}`.
fn iterator_result(piece: Option<&Piece>) -> JsValue {
    let result = Object::new();
    let set = |object: &Object, key: &str, value: JsValue| {
        let _ = Reflect::set(object, &JsValue::from_str(key), &value);
    };
    match piece {
        Some(piece) => {
            let value = Object::new();
            set(&value, "token", JsValue::from(piece.token));
            set(&value, "text", JsValue::from_str(&piece.text));
            set(&value, "ms", JsValue::from_f64(piece.ms));
            set(&result, "value", value.into());
            set(&result, "done", JsValue::FALSE);
        }
        None => {
            set(&result, "value", JsValue::UNDEFINED);
            set(&result, "done", JsValue::TRUE);
        }
    }
    result.into()
}

impl GenerationStream {
    /// A stream for `prompt` that takes its place in line for `generator` at its first step.
    pub(super) fn new(
        generator: &FifoSlot<TextGenerator>,
        prompt: Prompt,
        options: GenerateOptions,
        signal: Option<web_sys::AbortSignal>,
        provider: Arc<HttpProvider>,
        last_finish: Rc<Cell<Option<&'static str>>>,
    ) -> Self {
        last_finish.set(None);
        let usage = Rc::new(RefCell::new(GeneratorStats::default()));
        let state = StreamState {
            hold: Hold::NotYet(generator.clone()),
            prompt: Some((prompt, options)),
            generation: None,
            signal,
            provider,
            finish: Rc::clone(&last_finish),
            usage: Rc::clone(&usage),
        };
        GenerationStream {
            state: FifoSlot::new(state),
            finish: last_finish,
            usage,
        }
    }

    /// The stream as the async iterator `generate()` returns.
    pub(super) fn into_iterable(self) -> JsValue {
        async_iterable(self)
    }

    /// The whole text of the generation (every piece's text, in order).
    pub(super) async fn collect(self) -> Result<String> {
        let mut state = self
            .state
            .acquire()
            .await
            .map_err(|_| Error::invalid_state("the generation was ended"))?;
        let mut text = String::new();
        while let Some(piece) = state
            .advance()
            .await
            .inspect_err(|_| state.release("error"))?
        {
            text.push_str(&piece.text);
        }
        Ok(text)
    }
}

#[wasm_bindgen]
impl GenerationStream {
    /// The next `{value: {token, text, ms}, done}`; `{done: true}` once the generation is
    /// over. Rejects with `InvalidState` when aborted or the generator was destroyed, and with
    /// the backend's error when a step fails (the stream is then over).
    #[wasm_bindgen(unchecked_return_type = "Promise<IteratorResult<GeneratedPiece>>")]
    pub fn next(&self) -> Promise {
        let turn = self.state.acquire();
        wasm_bindgen_futures::future_to_promise(async move {
            let Ok(mut state) = turn.await else {
                return Ok(iterator_result(None));
            };
            match state.advance().await {
                Ok(piece) => Ok(iterator_result(piece.as_ref())),
                Err(error) => {
                    state.release("error");
                    Err(to_js_error(error))
                }
            }
        })
    }

    /// Ends the generation now (what a `for await` loop's `break` calls): the generator is
    /// free for the next call once this resolves.
    pub fn finish(&self) -> Promise {
        let turn = self.state.acquire();
        let slot = self.state.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            if let Ok(mut state) = turn.await {
                state.release("return");
            }
            slot.close();
            Ok(JsValue::UNDEFINED)
        })
    }

    /// OpenAI's `usage` of this generation so far: `{prompt_tokens, completion_tokens,
    /// total_tokens, prompt_tokens_details: {cached_tokens}, extra: {prefill_tokens_per_s,
    /// decode_tokens_per_s, time_to_first_token_s, time_per_output_token_s}}`.
    #[wasm_bindgen(getter = usage, unchecked_return_type = "ChatCompletionUsage")]
    pub fn usage_json(&self) -> JsValue {
        usage_object(&self.usage.borrow())
    }

    /// Why the generation ended (`"eos"`, `"stop"`, `"length"`, `"context"`, `"aborted"`,
    /// `"return"`, `"error"`, `"destroyed"`), or `undefined` while it runs.
    #[wasm_bindgen(getter, js_name = finishReason)]
    pub fn finish_reason(&self) -> Option<String> {
        self.finish.get().map(str::to_owned)
    }
}
