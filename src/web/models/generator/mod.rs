//! `Generator`: text generation from one GGUF decoder file on an HTTP server — the
//! high-level API on top of the registry and the HTTP parameter provider, in the style of
//! transformers.js' and WebLLM's.
//!
//! `Generator.load(ggufUrl, options)` reads the file's header with Range requests (once: the
//! hyper-parameters and the vocabulary come from its metadata, the tensor index from the same
//! bytes), builds the decoder program whose parameters are the file's tensors
//! ([`crate::models::decoder`]), and initialises it on the backend the options ask for
//! (`'auto'`: see [`crate::web::loading`]); the weights stream from the server straight
//! into the backend's buffers. `generate(prompt, options)` returns an async iterator of
//! `{token, text, ms}` ([`stream`]); `generateText` resolves to the whole text;
//! `chat.completions.create(request)` runs OpenAI's chat completions over the model's own chat
//! template ([`chat`]); `applyChatTemplate` gives the rendered prompt. Calls run one at a time:
//! a stream takes its place in line at its first `next()` (a `generate()` never iterated holds
//! nothing), the others when called; `destroy()` rejects the waiting ones and ends a running
//! generation at its next step.

mod chat;
mod options;
mod stream;

use crate::error::{Error, Result};
use crate::fifo_slot::FifoSlot;
use crate::models::chat::ChatPrompt;
use crate::models::decoder::{DecoderLoadOptions, PreparedDecoder};
use crate::models::generator::TextGenerator;
use crate::models::grammar::GrammarCompiler;
use crate::params::http::{HttpProvider, ScopeOptions};
use crate::registry::BackendInitContext;
use crate::text::GgufTokenizer;
use crate::web::edge::errors::to_js_error;
use crate::web::loading::{init_on_first, race_abort, status_error};
use crate::web::providers::http::provider_from_options;
use crate::web::registry::introspect;
use chat::Chat;
use js_sys::{Float32Array, Object, Promise, Reflect, Uint32Array};
use options::{LoadOptions, evaluate_options, generate_options};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use stream::{GenerationStream, Prompt};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

type JsResult<T> = std::result::Result<T, JsValue>;

/// The provider scope the model's weights are served under.
const SCOPE: &str = "model";

/// What a generator's calls share, its chat API's included (`generator.chat` holds it too).
struct Shared {
    /// The model, lent to one call at a time.
    generator: FifoSlot<TextGenerator>,
    /// The tokenizer (usable while a generation holds the model).
    tokenizer: Arc<GgufTokenizer>,
    /// The weights' provider (its suspension pauses a generation).
    provider: Arc<HttpProvider>,
    /// Why the last generation ended.
    last_finish: Rc<Cell<Option<&'static str>>>,
    /// The model's chat prompt, or why there is none.
    chat_prompt: Result<ChatPrompt>,
    /// The `model` field of chat completions (the file's `general.name`, else its architecture).
    model: String,
    /// Structured output's compiler for this vocabulary, built at the first request that
    /// needs it (about a second for 262,144 tokens).
    grammar: RefCell<Option<Rc<GrammarCompiler>>>,
    /// Words of the program's token mask.
    mask_words: usize,
}

impl Shared {
    /// The grammar compiler, built on first use.
    fn grammar(&self) -> Result<Rc<GrammarCompiler>> {
        if let Some(compiler) = self.grammar.borrow().as_ref() {
            return Ok(Rc::clone(compiler));
        }
        let compiler = Rc::new(GrammarCompiler::new(&self.tokenizer)?);
        *self.grammar.borrow_mut() = Some(Rc::clone(&compiler));
        Ok(compiler)
    }
}

/// A loaded decoder model, ready to generate.
#[wasm_bindgen]
pub struct Generator {
    backend: String,
    fallback: Option<String>,
    architecture: &'static str,
    context: u64,
    shared: Rc<Shared>,
}

fn set(object: &Object, key: &str, value: JsValue) {
    let _ = Reflect::set(object, &JsValue::from_str(key), &value);
}

#[allow(clippy::cast_precision_loss)]
fn number(value: u64) -> JsValue {
    JsValue::from_f64(value as f64)
}

#[wasm_bindgen]
impl Generator {
    /// Loads the GGUF decoder at `ggufUrl` (architectures `gemma2`, `gemma3`, `llama`, `phi3`, `qwen2`, `qwen3`).
    /// `options`: `backend` (`'auto'` default, `'webgpu'`, `'cpu'`), `contextLength`
    /// (positions the KV cache holds, default 2048, at most the model's training context),
    /// `logits` (default false: also output logits, for `evaluate`), `chatTemplate` (a Jinja
    /// chat template to use instead of the file's `tokenizer.chat_template`; it must compile),
    /// `signal` (AbortSignal),
    /// and the HTTP provider's options (`onProgress`, `concurrency`,
    /// `persistentCache`, ...). Rejects with a `WebDelegateError`: `InvalidArgument` for a bad
    /// option, `NotFound`/`AccessFailed` when the file cannot be fetched,
    /// `InvalidExternalData` for a file whose tensors disagree with its metadata,
    /// `NotSupported` for another architecture, `InvalidState` when aborted.
    pub async fn load(
        #[wasm_bindgen(js_name = ggufUrl)] url: String,
        #[wasm_bindgen(unchecked_param_type = "GeneratorOptions")] options: Option<JsValue>,
    ) -> JsResult<Generator> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        Self::load_inner(&url, &options).await.map_err(to_js_error)
    }

    async fn load_inner(url: &str, js_options: &JsValue) -> Result<Generator> {
        let options = LoadOptions::from_js(js_options)?;
        let (provider, _cache) = provider_from_options(js_options)
            .map_err(|s| Error::invalid_argument(s.message().to_owned()))?;
        let provider = Arc::new(provider);
        crate::web::lifecycle::attach(&provider);
        let work = async {
            let _ = JsFuture::from(crate::web::registry::defaults::ready()).await;
            let header = provider
                .add_gguf_scope(SCOPE, url, ScopeOptions::default())
                .await
                .map_err(status_error)?;
            let load_options = DecoderLoadOptions {
                context: options.context,
                logits: options.logits,
            };
            let prepared =
                PreparedDecoder::prepare(&header, provider.as_ref(), SCOPE, load_options).await?;
            // A template that does not compile fails the load only when the caller gave it;
            // the file's own is reported when chat is used (generate() still works).
            let chat_prompt = ChatPrompt::new(
                options.chat_template.as_deref(),
                header.metadata(),
                &prepared.tokenizer,
            );
            if options.chat_template.is_some()
                && let Err(error) = &chat_prompt
            {
                return Err(error.clone());
            }
            let model_name = header
                .metadata_value("general.name")
                .and_then(|v| v.as_str())
                .map(str::to_owned);
            drop(header);
            let blob = prepared.blob()?;
            let init = BackendInitContext::new()
                .with_method_name("generate")
                .with_parameters(Arc::clone(&provider) as crate::params::SharedProvider);
            let placed = init_on_first(&options.backend, &blob, &init, &options.specs).await?;
            Ok((prepared, placed, chat_prompt, model_name))
        };
        let (prepared, placed, chat_prompt, model_name) =
            race_abort(work, options.signal.as_ref(), &provider).await?;
        let session = prepared.session(placed.delegate);
        let PreparedDecoder {
            config, tokenizer, ..
        } = prepared;
        let context = session.context();
        let tokenizer = Arc::new(tokenizer);
        let mask_words = session.mask_words();
        Ok(Generator {
            backend: placed.backend,
            fallback: placed.fallback,
            architecture: config.arch.name,
            context,
            shared: Rc::new(Shared {
                generator: FifoSlot::new(TextGenerator::new(Arc::clone(&tokenizer), session)),
                tokenizer,
                provider,
                last_finish: Rc::new(Cell::new(None)),
                chat_prompt,
                model: model_name.unwrap_or_else(|| config.arch.name.to_owned()),
                grammar: RefCell::new(None),
                mask_words,
            }),
        })
    }

    /// Generates a continuation of `prompt`: an async iterator of `{token, text, ms}` (`text`
    /// may be empty while a character or a possible stop string is incomplete; `ms` of the
    /// first piece is the prefill). `options`: `maxNewTokens` (default 128), `temperature`
    /// (0 = greedy, the default), `topK` (40), `topP` (0.95), `seed` (0), `stop` (a string or
    /// strings that end the text, not included), `addSpecial` (the vocabulary's BOS, default
    /// true), `parseSpecial` (control tokens written in the prompt, default true), `signal`.
    /// Throws `InvalidArgument` for a bad option at once.
    #[wasm_bindgen(unchecked_return_type = "AsyncIterableIterator<GeneratedPiece>")]
    pub fn generate(
        &self,
        prompt: String,
        #[wasm_bindgen(unchecked_param_type = "GenerateOptions")] options: Option<JsValue>,
    ) -> JsResult<JsValue> {
        let (options, signal) =
            generate_options(&options.unwrap_or(JsValue::UNDEFINED)).map_err(to_js_error)?;
        Ok(GenerationStream::new(
            &self.shared.generator,
            Prompt::Text(prompt),
            options,
            signal,
            Arc::clone(&self.shared.provider),
            Rc::clone(&self.shared.last_finish),
        )
        .into_iterable())
    }

    /// As `generate`, resolving to the whole generated text.
    #[wasm_bindgen(js_name = generateText, unchecked_return_type = "Promise<string>")]
    pub fn generate_text(
        &self,
        prompt: String,
        #[wasm_bindgen(unchecked_param_type = "GenerateOptions")] options: Option<JsValue>,
    ) -> Promise {
        let parsed = generate_options(&options.unwrap_or(JsValue::UNDEFINED));
        let stream = parsed.map(|(options, signal)| {
            GenerationStream::new(
                &self.shared.generator,
                Prompt::Text(prompt),
                options,
                signal,
                Arc::clone(&self.shared.provider),
                Rc::clone(&self.shared.last_finish),
            )
        });
        wasm_bindgen_futures::future_to_promise(async move {
            let text = stream
                .map_err(to_js_error)?
                .collect()
                .await
                .map_err(to_js_error)?;
            Ok(JsValue::from_str(&text))
        })
    }

    /// OpenAI's chat completions: `generator.chat.completions.create(request)` (see
    /// `ChatCompletions.create`).
    #[wasm_bindgen(getter)]
    pub fn chat(&self) -> Chat {
        Chat::new(Rc::clone(&self.shared))
    }

    /// The prompt text the model's chat template gives `messages` (as transformers'
    /// `apply_chat_template(messages, tokenize=False)`): `options.addGenerationPrompt` (default
    /// true), `tools`, `chatTemplateKwargs` (extra template variables). Throws `NotFound` when
    /// the model has no template, `InvalidArgument` for bad messages or a template that
    /// refuses them (naming the template line).
    #[wasm_bindgen(js_name = applyChatTemplate)]
    pub fn apply_chat_template(
        &self,
        #[wasm_bindgen(unchecked_param_type = "ChatMessage[]")] messages: JsValue,
        #[wasm_bindgen(unchecked_param_type = "ApplyChatTemplateOptions")] options: Option<JsValue>,
    ) -> JsResult<String> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        let prompt = self
            .shared
            .chat_prompt
            .as_ref()
            .map_err(|e| to_js_error(e.clone()))?;
        crate::web::models::chat_template::render_messages(messages, &options, |request| {
            prompt.render(request)
        })
        .map_err(to_js_error)
    }

    /// The token ids of `text` as this model's tokenizer gives them (llama.cpp's ids).
    /// `options`: `addSpecial` (default true: the vocabulary's BOS), `parseSpecial` (default
    /// true: control tokens written in the text).
    pub fn tokenize(
        &self,
        text: &str,
        #[wasm_bindgen(unchecked_param_type = "TokenizeOptions")] options: Option<JsValue>,
    ) -> JsResult<Uint32Array> {
        let options = options.unwrap_or(JsValue::UNDEFINED);
        let flag = |key: &str| {
            crate::web::edge::fields::boolean(&options, key)
                .map(|v| v.unwrap_or(true))
                .map_err(|s| to_js_error(Error::invalid_argument(s.message().to_owned())))
        };
        let ids = self
            .shared
            .tokenizer
            .encode(text, flag("addSpecial")?, flag("parseSpecial")?)
            .map_err(to_js_error)?;
        Ok(Uint32Array::from(ids.as_slice()))
    }

    /// The text of `ids` (control tokens as their text; bytes that do not form UTF-8 as
    /// U+FFFD).
    pub fn detokenize(&self, ids: Vec<u32>) -> String {
        self.shared.tokenizer.decode(&ids)
    }

    /// Runs the token ids `ids` from the first position (teacher forcing) and resolves to
    /// `{tokens, logits}`: the greedy next token after every position, and the logits at
    /// `options.logitPositions` (increasing; needs a generator loaded with `logits: true`),
    /// row after row. For scoring, perplexity and checks against a reference. The KV cache then
    /// holds `ids`. Waits for a running generation to end. Rejects with `InvalidArgument` for
    /// bad ids or positions, `NotSupported` for positions without `logits: true`.
    #[wasm_bindgen(unchecked_return_type = "Promise<Evaluation>")]
    pub fn evaluate(
        &self,
        ids: Vec<u32>,
        #[wasm_bindgen(unchecked_param_type = "EvaluateOptions")] options: Option<JsValue>,
    ) -> Promise {
        let positions = evaluate_options(&options.unwrap_or(JsValue::UNDEFINED));
        let turn = self.shared.generator.acquire();
        wasm_bindgen_futures::future_to_promise(async move {
            let positions = positions.map_err(to_js_error)?;
            let mut generator = turn
                .await
                .map_err(|_| to_js_error(Error::invalid_state("this generator was destroyed")))?;
            let evaluation = generator
                .evaluate(&ids, &positions)
                .await
                .map_err(to_js_error)?;
            let object = Object::new();
            set(
                &object,
                "tokens",
                Uint32Array::from(evaluation.tokens.as_slice()).into(),
            );
            set(
                &object,
                "logits",
                Float32Array::from(evaluation.logits.as_slice()).into(),
            );
            Ok(object.into())
        })
    }

    /// Forgets the conversation: clears the KV cache, so the next prompt is fed whole. Waits
    /// for a running generation to end.
    pub fn reset(&self) -> Promise {
        let turn = self.shared.generator.acquire();
        wasm_bindgen_futures::future_to_promise(async move {
            let mut generator = turn
                .await
                .map_err(|_| to_js_error(Error::invalid_state("this generator was destroyed")))?;
            generator.reset().map_err(to_js_error)?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Counters: `promptTokens`, `reusedTokens` (prompt tokens whose cache was kept from the
    /// last call), `prefillMs`, `generatedTokens`, `decodeMs`, `decodeMsPerToken`,
    /// `prefillTokensPerSecond`, `decodeTokensPerSecond`, `rebuilds` (caches rebuilt after a
    /// device loss), `grammarMasks` and `grammarMaskMs` (token masks of a structured output and
    /// the milliseconds they took), `finishReason`, `bytesLoaded`, `requests`, `backend`, `fallbackReason`,
    /// `architecture`, `contextLength`, `vocabSize`. The generation counters are `null` while a
    /// generation runs.
    #[wasm_bindgen(unchecked_return_type = "GeneratorStats")]
    pub fn stats(&self) -> JsValue {
        let object = Object::new();
        self.shared.generator.peek(|generator| {
            if let Some(generator) = generator {
                let s = generator.stats();
                set(&object, "promptTokens", number(s.prompt_tokens));
                set(&object, "reusedTokens", number(s.reused_tokens));
                set(&object, "prefillMs", JsValue::from_f64(s.prefill_ms));
                set(&object, "generatedTokens", number(s.generated_tokens));
                set(&object, "decodeMs", JsValue::from_f64(s.decode_ms));
                let per_token = s.decode_ms_per_token();
                set(&object, "decodeMsPerToken", JsValue::from_f64(per_token));
                #[allow(clippy::cast_precision_loss)]
                let prefill_rate =
                    (s.prompt_tokens - s.reused_tokens) as f64 / (s.prefill_ms / 1000.0);
                set(
                    &object,
                    "prefillTokensPerSecond",
                    JsValue::from_f64(prefill_rate),
                );
                set(
                    &object,
                    "decodeTokensPerSecond",
                    JsValue::from_f64(1000.0 / per_token),
                );
                set(&object, "rebuilds", number(s.rebuilds));
                set(&object, "grammarMasks", number(s.masks));
                set(&object, "grammarMaskMs", JsValue::from_f64(s.mask_ms));
            }
        });
        let loaded = self.shared.provider.total_stats();
        let finish = self.shared.last_finish.get();
        set(
            &object,
            "finishReason",
            finish.map_or(JsValue::NULL, JsValue::from_str),
        );
        set(&object, "bytesLoaded", number(loaded.bytes_received));
        set(&object, "requests", number(loaded.requests_sent));
        set(&object, "backend", JsValue::from_str(&self.backend));
        set(
            &object,
            "fallbackReason",
            self.fallback
                .as_deref()
                .map_or(JsValue::NULL, JsValue::from_str),
        );
        set(
            &object,
            "architecture",
            JsValue::from_str(self.architecture),
        );
        set(&object, "contextLength", number(self.context));
        set(
            &object,
            "vocabSize",
            number(self.shared.tokenizer.vocab_size() as u64),
        );
        object.into()
    }

    /// The backend that runs the model (`"webgpu"` or `"cpu"`).
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.clone()
    }

    /// Why the preferred backend was not used (`undefined` when it was).
    #[wasm_bindgen(getter, js_name = fallbackReason)]
    pub fn fallback_reason(&self) -> Option<String> {
        self.fallback.clone()
    }

    /// Positions the KV cache holds (prompt + generated tokens).
    #[wasm_bindgen(getter, js_name = contextLength)]
    pub fn context_length(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let context = self.context as f64;
        context
    }

    /// Where the model's bytes are, by purpose (wasm, the CPU pool's shared memory, the GPU);
    /// `null` while generating or after `destroy()`.
    #[wasm_bindgen(js_name = memoryStats, unchecked_return_type = "MemoryStats | null")]
    pub fn memory_stats(&self) -> JsValue {
        self.shared
            .generator
            .peek(|g| introspect::memory_stats(g.map(|g| g.session().delegate())))
    }

    /// The WebGPU program's stats (states, plans, bind groups, parameters); `null` on the CPU
    /// backend, while generating, or after `destroy()`.
    #[wasm_bindgen(js_name = programStats, unchecked_return_type = "WebGpuProgramStats | null")]
    pub fn program_stats(&self) -> JsValue {
        self.shared
            .generator
            .peek(|g| introspect::program_stats(g.map(|g| g.session().delegate())))
    }

    /// Frees the model (GPU buffers, caches): waiting calls reject with `InvalidState`, a
    /// running generation ends at its next step.
    pub fn destroy(&self) {
        self.shared.generator.close();
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        self.shared.generator.close();
    }
}
