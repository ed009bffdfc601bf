//! `GenerationStream`: one `generate()` call as an async iterator of `{token, text, ms}`.
//!
//! The stream takes its place in line for the generator when `generate()` is called (calls run
//! in call order, one at a time) and holds it until the generation ends, `return()` is called
//! (a `for await` loop that breaks), or an error ends it; then the next call proceeds. Each
//! `next()` runs at most one decode step (the first runs the prefill), after:
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
use crate::models::generator::{GenerateOptions, Generation, Piece, TextGenerator};
use crate::params::http::HttpProvider;
use crate::send_sync::LocalBoxFuture;
use crate::web::edge::errors::to_js_error;
use js_sys::{Object, Promise, Reflect};
use std::cell::Cell;
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
    /// In line for it.
    Waiting(LocalBoxFuture<'static, std::result::Result<Turn<TextGenerator>, SlotClosed>>),
    /// Holding it.
    Held(Turn<TextGenerator>),
    /// Given back (the stream is over).
    Released,
}

/// Everything one generation needs between `next()` calls.
struct StreamState {
    hold: Hold,
    prompt: Option<(String, GenerateOptions)>,
    generation: Option<Generation>,
    signal: Option<web_sys::AbortSignal>,
    provider: Arc<HttpProvider>,
    finish: Rc<Cell<Option<&'static str>>>,
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
        let Hold::Held(generator) = &mut self.hold else {
            return Ok(None);
        };
        if self.generation.is_none() {
            let Some((prompt, options)) = self.prompt.take() else {
                return Ok(None);
            };
            self.generation = Some(generator.start(&prompt, options).await?);
        }
        let generation = self.generation.as_mut().expect("started above");
        let piece = generator.next_piece(generation).await?;
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
    /// A stream for `prompt` that waits for `generator`'s slot (its place in line taken now).
    pub(super) fn new(
        generator: &FifoSlot<TextGenerator>,
        prompt: String,
        options: GenerateOptions,
        signal: Option<web_sys::AbortSignal>,
        provider: Arc<HttpProvider>,
        last_finish: Rc<Cell<Option<&'static str>>>,
    ) -> Self {
        last_finish.set(None);
        let state = StreamState {
            hold: Hold::Waiting(Box::pin(generator.acquire())),
            prompt: Some((prompt, options)),
            generation: None,
            signal,
            provider,
            finish: Rc::clone(&last_finish),
        };
        GenerationStream {
            state: FifoSlot::new(state),
            finish: last_finish,
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

    /// Why the generation ended (`"eos"`, `"stop"`, `"length"`, `"context"`, `"aborted"`,
    /// `"return"`, `"error"`, `"destroyed"`), or `undefined` while it runs.
    #[wasm_bindgen(getter, js_name = finishReason)]
    pub fn finish_reason(&self) -> Option<String> {
        self.finish.get().map(str::to_owned)
    }
}
