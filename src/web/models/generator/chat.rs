//! `generator.chat.completions.create(request)`: OpenAI's chat completions API (the shape
//! WebLLM users write) over a [`Generator`](super::Generator).
//!
//! `create` resolves to the completion object (`stream` false, the default) or to an async
//! iterable of `chat.completion.chunk`s (`stream: true`): a first chunk with the assistant role,
//! then one chunk per piece of text, then one with `finish_reason` (`"stop"`, `"length"` or
//! `"abort"`), then (with `stream_options: {include_usage: true}`) one with `usage` and no
//! choices. The request is checked, rendered and tokenized before `create` resolves; a bad
//! request rejects with `InvalidArgument` (or `NotSupported` for what we do not offer yet) and
//! nothing runs. A completion takes its turn on the generator like `generate()` (one at a time;
//! a streamed one at its first `next()`, a whole one at once), reuses the cached prefix of the conversation, and an aborted `signal` ends it
//! with `finish_reason: "abort"` and the text so far.

use super::Shared;
use super::options::{number, signal, stop_strings};
use super::stream::{GenerationStream, Prompt};
use crate::error::{Error, ErrorCode, Result};
use crate::models::generator::GenerateOptions;
use crate::models::grammar::Constraint;
use crate::text::ChatRender;
use crate::web::edge::errors::to_js_error;
use crate::web::edge::fields::{boolean, integer, optional, string};
use js_sys::{Object, Promise, Reflect};
use std::rc::Rc;
use std::sync::Arc;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(module = "/src/web/models/generator/stream.js")]
extern "C" {
    #[wasm_bindgen(js_name = chatChunks)]
    fn chat_chunks(stream: GenerationStream, meta: &JsValue) -> JsValue;
    #[wasm_bindgen(js_name = chatCompletion)]
    fn chat_completion(stream: GenerationStream, meta: &JsValue) -> Promise;
}

/// `generator.chat`: holds `completions`.
#[wasm_bindgen]
pub struct Chat {
    shared: Rc<Shared>,
}

impl Chat {
    pub(super) fn new(shared: Rc<Shared>) -> Self {
        Self { shared }
    }
}

#[wasm_bindgen]
impl Chat {
    /// `chat.completions`, whose `create` runs a chat completion.
    #[wasm_bindgen(getter)]
    pub fn completions(&self) -> ChatCompletions {
        ChatCompletions {
            shared: Rc::clone(&self.shared),
        }
    }
}

/// `generator.chat.completions`.
#[wasm_bindgen]
pub struct ChatCompletions {
    shared: Rc<Shared>,
}

/// A parsed request.
struct Request {
    messages: serde_json::Value,
    tools: Option<serde_json::Value>,
    extra: Option<serde_json::Value>,
    options: GenerateOptions,
    stream: bool,
    include_usage: bool,
    signal: Option<web_sys::AbortSignal>,
    constraint: Option<Constraint>,
}

fn invalid(status: crate::error::Status) -> Error {
    Error::invalid_argument(status.message().to_owned())
}

fn to_json(value: &JsValue, what: &str) -> Result<serde_json::Value> {
    serde_wasm_bindgen::from_value(value.clone())
        .map_err(|e| Error::invalid_argument(format!("{what} must be plain JSON data: {e}")))
}

/// Checks and reads `request`.
#[allow(clippy::cast_possible_truncation)]
fn parse_request(request: &JsValue) -> Result<Request> {
    if !request.is_object() {
        return Err(Error::invalid_argument(
            "create() takes a request object: {messages, ...}",
        ));
    }
    let messages = optional(request, "messages")
        .ok_or_else(|| Error::invalid_argument("messages is required"))?;
    if !js_sys::Array::is_array(&messages) || js_sys::Array::from(&messages).length() == 0 {
        return Err(Error::invalid_argument(
            "messages must be a non-empty array of {role, content}",
        ));
    }
    let messages = to_json(&messages, "messages")?;
    let tools = optional(request, "tools")
        .filter(|v| !v.is_null())
        .map(|v| to_json(&v, "tools"))
        .transpose()?;
    let extra = optional(request, "chat_template_kwargs")
        .filter(|v| !v.is_null())
        .map(|v| to_json(&v, "chat_template_kwargs"))
        .transpose()?;
    if extra.as_ref().is_some_and(|e| !e.is_object()) {
        return Err(Error::invalid_argument(
            "chat_template_kwargs must be an object",
        ));
    }
    let constraint = optional(request, "response_format")
        .filter(|v| !v.is_null())
        .map(|format| response_format(&format))
        .transpose()?
        .flatten();
    if integer(request, "n")
        .map_err(invalid)?
        .is_some_and(|n| n != 1)
    {
        return Err(Error::new(ErrorCode::NotSupported, "n must be 1"));
    }
    if boolean(request, "logprobs").map_err(invalid)? == Some(true) {
        return Err(Error::new(
            ErrorCode::NotSupported,
            "logprobs are not supported",
        ));
    }
    for penalty in ["frequency_penalty", "presence_penalty"] {
        if number(request, penalty, -2.0..=2.0)?.is_some_and(|p| p != 0.0) {
            return Err(Error::new(
                ErrorCode::NotSupported,
                format!("{penalty} is not supported (only 0)"),
            ));
        }
    }
    // OpenAI's defaults: temperature 1, top_p 1 (no top-k beyond the sampler's 1024 bound).
    let mut options = GenerateOptions {
        max_new_tokens: u32::MAX,
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        add_special: false,
        parse_special: true,
        ..GenerateOptions::default()
    };
    let max_tokens = match integer(request, "max_tokens").map_err(invalid)? {
        Some(n) => Some(n),
        None => integer(request, "max_completion_tokens").map_err(invalid)?,
    };
    if let Some(n) = max_tokens {
        options.max_new_tokens = u32::try_from(n).ok().filter(|&n| n >= 1).ok_or_else(|| {
            Error::invalid_argument(format!("max_tokens must be 1..=2^32-1, got {n}"))
        })?;
    }
    if let Some(t) = number(request, "temperature", 0.0..=2.0)? {
        options.temperature = t as f32;
    }
    if let Some(p) = number(request, "top_p", 0.0..=1.0)? {
        options.top_p = p as f32;
    }
    if let Some(k) = integer(request, "top_k").map_err(invalid)? {
        options.top_k = u32::try_from(k).unwrap_or(u32::MAX);
    }
    if let Some(seed) = integer(request, "seed").map_err(invalid)? {
        options.seed = seed;
    }
    if let Some(stop) = stop_strings(request)? {
        options.stop = stop;
    }
    let include_usage = optional(request, "stream_options")
        .filter(|v| !v.is_null())
        .map(|o| boolean(&o, "include_usage").map_err(invalid))
        .transpose()?
        .flatten()
        .unwrap_or(false);
    Ok(Request {
        messages,
        tools,
        extra,
        options,
        stream: boolean(request, "stream")
            .map_err(invalid)?
            .unwrap_or(false),
        include_usage,
        signal: signal(request)?,
        constraint,
    })
}

/// The constraint `response_format` asks for (`None` for `text`): OpenAI's `json_object` and
/// `json_schema` (`{json_schema: {name, schema, strict}}`), WebLLM's `json_object` with a
/// `schema` (an object or its JSON text), and llguidance's `grammar` (its Lark dialect) and
/// `regex`.
fn response_format(format: &JsValue) -> Result<Option<Constraint>> {
    if !format.is_object() {
        return Err(Error::invalid_argument(
            "response_format must be an object: {type: 'text' | 'json_object' | 'json_schema' | \
             'grammar' | 'regex', ...}",
        ));
    }
    let schema_of = |holder: &JsValue, what: &str| -> Result<Option<serde_json::Value>> {
        match optional(holder, "schema").filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(text) if text.is_string() => {
                let text = text.as_string().unwrap_or_default();
                serde_json::from_str(&text).map(Some).map_err(|e| {
                    Error::invalid_argument(format!("{what}.schema is not valid JSON: {e}"))
                })
            }
            Some(value) => to_json(&value, &format!("{what}.schema")).map(Some),
        }
    };
    let text_of = |key: &str| -> Result<String> {
        string(format, key).map_err(invalid)?.ok_or_else(|| {
            Error::invalid_argument(format!("response_format.{key} (a string) is required"))
        })
    };
    match string(format, "type").map_err(invalid)?.as_deref() {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(
            schema_of(format, "response_format")?
                .map_or_else(Constraint::json_object, Constraint::JsonSchema),
        )),
        Some("json_schema") => {
            let holder = optional(format, "json_schema")
                .filter(JsValue::is_object)
                .ok_or_else(|| {
                    Error::invalid_argument(
                        "response_format.json_schema must be {name, schema, strict}",
                    )
                })?;
            Ok(Some(
                schema_of(&holder, "response_format.json_schema")?
                    .map_or_else(Constraint::json_object, Constraint::JsonSchema),
            ))
        }
        Some("grammar") => Ok(Some(Constraint::Lark(text_of("grammar")?))),
        Some("regex") => Ok(Some(Constraint::Regex(text_of("regex")?))),
        other => Err(Error::invalid_argument(format!(
            "response_format.type {:?} is none of 'text', 'json_object', 'json_schema', \
             'grammar', 'regex'",
            other.unwrap_or_default()
        ))),
    }
}

/// The prompt token ids of a parsed request, with the generator's chat prompt.
fn prompt_ids(shared: &Shared, request: &Request) -> Result<Vec<u32>> {
    let prompt = shared.chat_prompt.as_ref().map_err(Clone::clone)?;
    prompt.token_ids(
        &shared.tokenizer,
        &ChatRender {
            messages: Some(&request.messages),
            tools: request.tools.as_ref(),
            documents: None,
            add_generation_prompt: true,
            extra: request.extra.as_ref(),
            now_ms: None,
        },
    )
}

fn set(object: &Object, key: &str, value: &JsValue) {
    let _ = Reflect::set(object, &JsValue::from_str(key), value);
}

#[wasm_bindgen]
impl ChatCompletions {
    /// Runs a chat completion: `request` is OpenAI's `{messages, stream, max_tokens
    /// (max_completion_tokens), temperature (default 1), top_p (1), top_k (non-standard),
    /// seed, stop, tools, response_format (`{type: 'json_object'}`, `{type: 'json_schema',
    /// json_schema: {schema}}`, `{type: 'grammar', grammar}` in llguidance's Lark dialect,
    /// `{type: 'regex', regex}`: every token is chosen among those the grammar allows, and the
    /// completion ends when it is complete; `stop` cannot be combined with it), stream_options:
    /// {include_usage}, chat_template_kwargs (extra template variables), signal}`. Resolves to
    /// a `ChatCompletion`, or with `stream: true` to an async iterable of
    /// `ChatCompletionChunk`s. Rejects with `InvalidArgument` for a bad request or a template
    /// that refuses the conversation, `NotFound` when the model has no chat template (pass
    /// `chatTemplate` to `Generator.load`), `NotSupported` for `n > 1`, `logprobs` or
    /// penalties. The first structured request on a model builds its grammar compiler (about a
    /// second for a 262,144-token vocabulary); compiling a schema takes milliseconds.
    #[wasm_bindgen(
        unchecked_return_type = "Promise<ChatCompletion | AsyncIterableIterator<ChatCompletionChunk>>"
    )]
    pub fn create(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ChatCompletionRequest")] request: JsValue,
    ) -> Promise {
        let started = parse_request(&request).and_then(|mut request| {
            let ids = prompt_ids(&self.shared, &request)?;
            let matcher = match request.constraint.take() {
                Some(constraint) => Some(Box::new(
                    self.shared
                        .grammar()?
                        .compile(&constraint, self.shared.mask_words)?,
                )),
                None => None,
            };
            Ok((request, ids, matcher))
        });
        let (request, ids, matcher) = match started {
            Ok(started) => started,
            Err(error) => return Promise::reject(&to_js_error(error)),
        };
        let stream = GenerationStream::new(
            &self.shared.generator,
            Prompt::Ids(ids, matcher),
            request.options,
            request.signal.clone(),
            Arc::clone(&self.shared.provider),
            Rc::clone(&self.shared.last_finish),
        );
        let meta = Object::new();
        set(&meta, "model", &JsValue::from_str(&self.shared.model));
        set(
            &meta,
            "includeUsage",
            &JsValue::from_bool(request.include_usage),
        );
        if let Some(signal) = &request.signal {
            set(&meta, "signal", signal);
        }
        if request.stream {
            Promise::resolve(&chat_chunks(stream, &meta))
        } else {
            chat_completion(stream, &meta)
        }
    }
}
