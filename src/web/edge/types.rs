//! TypeScript declarations for the JavaScript shapes the API takes and returns, so that
//! `webdelegate.d.ts` says more than `any`.

use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = r#"
/** Tensor element types. */
export type DType = 'float32' | 'float64' | 'int32' | 'int64' | 'uint8' | 'bool';

/** A dense tensor: `data.length` must equal the product of `shape`. */
export interface TensorValue {
  tag: 'Tensor';
  dtype: DType;
  shape: number[];
  data: Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array;
}

/** A value passed to or returned from a delegate (ExecuTorch's EValue). */
export type EValue =
  | { tag: 'None' }
  | { tag: 'Int'; value: number | bigint }
  | { tag: 'Double'; value: number }
  | { tag: 'Bool'; value: boolean }
  | { tag: 'String'; value: string }
  | TensorValue;

/** One backend option: key of at most 63 bytes; string values of at most 255 bytes. */
export interface BackendOptionEntry {
  key: string;
  value: boolean | number | string;
}

/** One compile spec: the key and raw value used ahead of time. */
export interface CompileSpecEntry {
  key: string;
  value: Uint8Array | string;
}

/** Options of `Delegate.init`. */
export interface DelegateInitOptions {
  compileSpecs?: CompileSpecEntry[];
  methodName?: string;
  runtimeSpecs?: BackendOptionEntry[];
  /**
   * The provider scope that is this delegate's named data (ExecuTorch's `NamedDataMap`): a
   * backend's `init` reads it as `context.namedDataMap`. Needs `initWithParameters`.
   */
  namedDataScope?: string;
}

/** What `init` and `execute` of a JavaScript backend are told besides their arguments. */
export interface BackendCallContext {
  methodName: string | null;
  runtimeSpecs?: BackendOptionEntry[];
  /** `init` only: the named data of `DelegateInitOptions.namedDataScope` (absent without one). */
  namedDataMap?: NamedDataMap;
}

/**
 * A backend written in JavaScript. Throw `{ code, message }` (code: an ErrorCode name or number)
 * to report an ExecuTorch error; anything else thrown becomes `Internal`.
 */
export interface JsBackend {
  isAvailable(): boolean;
  init(processed: Uint8Array, compileSpecs: { key: string; value: Uint8Array }[],
       context: BackendCallContext): unknown | Promise<unknown>;
  execute(handle: any, args: EValue[], context: BackendCallContext):
    void | EValue[] | Promise<void | EValue[]>;
  setOption?(options: BackendOptionEntry[]): void;
  getOption?(options: BackendOptionEntry[]): BackendOptionEntry[] | void;
  destroy?(handle: any): void;
  /** Lifecycle signals (see `lifecycleNotify`); may return what it released. */
  notify?(signal: 'suspend' | 'resume' | 'lowMemory'):
    void | { gpuBytes?: number; hostBytes?: number };
  /** Zero the state tensors (e.g. a KV cache) behind `handle`, synchronously
   * (`Delegate.resetState()`); absent: `NotSupported`. */
  resetState?(handle: any): void;
}

/** Options of `Embedder.load` (plus every `HttpProviderOptions` key, e.g. `onProgress`). */
export interface EmbedderOptions {
  /**
   * `'auto'` (WebGPU when it has a device and the adapter is not a fallback adapter, i.e. WebGPU
   * emulated on the CPU; else CPU), `'webgpu'`, `'cpu'` or a registered name.
   */
  backend?: string;
  /** Weights file in the model directory (default `model.safetensors`). */
  weights?: string;
  /** Truncation length, 2 up to the model's max_position_embeddings (default: the directory's
   *  sentence_bert_config.json, else 256). */
  maxTokens?: number;
  /** Texts per execution, 1-1024 (default 16). */
  batchSize?: number;
  /** On the CPU backend, the most worker-pool threads this model's ops run on, 1-64, at most
   *  the installed pool's size (`useCpuThreads`); 1 keeps it on the calling thread. Default:
   *  the CPU backend's `threads` option at the time. Other backends ignore it. */
  threads?: number;
  /** On the WebGPU backend, the precision it computes in: `'auto'` (default: f16 only on a real
   *  GPU with shader-f16: the KV cache stored in f16, matmul tiles staged in f16, sums in f32),
   *  `'f32'` (the reference, every device) or `'f16'` (rejects with `NotSupported` where the
   *  device lacks shader-f16). `programStats().precision` tells which ran. Other backends
   *  ignore it. */
  gpuPrecision?: 'auto' | 'f32' | 'f16';
  /** Aborts the load: no request keeps running and nothing half-loaded is kept. */
  signal?: AbortSignal;
  onProgress?: (event: { scope: string; bytesDone: number; bytesTotal: number;
                         requestsDone: number; requestsTotal: number }) => void;
  [option: string]: unknown;
}

/** `Embedder.tokenize`'s result: a padded batch, ready for the sentence-embedding program. */
export interface TokenBatch {
  batch: number;
  seq: number;
  /** `batch * seq` token ids, row-major, padded with the tokenizer's padding id. */
  inputIds: BigInt64Array;
  /** 1 for tokens, 0 for padding. */
  attentionMask: BigInt64Array;
}

/** Options of `Generator.load` (plus every `HttpProviderOptions` key, e.g. `onProgress`). */
export interface GeneratorOptions {
  /** `'auto'` (as `Embedder.load`), `'webgpu'`, `'cpu'` or a registered name. */
  backend?: string;
  /** Positions the KV cache holds, prompt plus generated tokens (default 2048, at most the
   *  model's training context). */
  contextLength?: number;
  /** Also output logits, for `evaluate` (default false: generation reads only the chosen
   *  tokens back). */
  logits?: boolean;
  /** On the CPU backend, the most worker-pool threads this model's ops run on, 1-64, at most
   *  the installed pool's size (`useCpuThreads`); 1 keeps it on the calling thread. Default:
   *  the CPU backend's `threads` option at the time. Other backends ignore it. */
  threads?: number;
  /** On the WebGPU backend, the precision it computes in: `'auto'` (default: f16 only on a real
   *  GPU with shader-f16: the KV cache stored in f16, matmul tiles staged in f16, sums in f32),
   *  `'f32'` (the reference, every device) or `'f16'` (rejects with `NotSupported` where the
   *  device lacks shader-f16). `programStats().precision` tells which ran. Other backends
   *  ignore it. */
  gpuPrecision?: 'auto' | 'f32' | 'f16';
  /** On the CPU backend, how the quantized (Q8_0 / Q5_0 / Q4_K / Q6_K) projections read their
   *  activations: `'f32'` (default: exact f32 products) or `'int8'` (each 32 values quantized
   *  to int8 with one scale, integer dots, as llama.cpp's CPU backend does: faster decode,
   *  logits within the activations' rounding). Other backends ignore it. */
  cpuActivations?: 'f32' | 'int8';
  /** A Jinja chat template used instead of the file's `tokenizer.chat_template` (for a file
   *  without one); it must compile, else the load rejects with `InvalidArgument`. */
  chatTemplate?: string;
  /** Aborts the load. */
  signal?: AbortSignal;
  onProgress?: (event: { scope: string; bytesDone: number; bytesTotal: number;
                         requestsDone: number; requestsTotal: number }) => void;
  [option: string]: unknown;
}

/** Options of `Generator.generate` and `generateText`. */
export interface GenerateOptions {
  /** Tokens to generate at most (default 128). */
  maxNewTokens?: number;
  /** Softmax temperature, 0 = greedy (default 0). */
  temperature?: number;
  /** Candidates kept by top-k, 0 = up to 1024 (default 40). */
  topK?: number;
  /** Nucleus mass kept by top-p, 0..1 (default 0.95). */
  topP?: number;
  /** Seed of the step draws (default 0): the same seed gives the same tokens. */
  seed?: number;
  /** Strings that end the generation (not included in the text). */
  stop?: string | string[];
  /** Add the vocabulary's BOS (default true). */
  addSpecial?: boolean;
  /** Read control tokens written in the prompt, e.g. `<start_of_turn>` (default true). */
  parseSpecial?: boolean;
  /** Ends the generation within one token: `next()` rejects with `InvalidState`. */
  signal?: AbortSignal;
}

/** Options of `Generator.tokenize`. */
export interface TokenizeOptions {
  addSpecial?: boolean;
  parseSpecial?: boolean;
}

/** Options of `Generator.evaluate`. */
export interface EvaluateOptions {
  /** Positions whose logits are returned, increasing (default none). */
  logitPositions?: number[];
}

/** `Generator.evaluate`'s result. */
export interface Evaluation {
  /** The greedy next token after each position. */
  tokens: Uint32Array;
  /** The logits at `logitPositions`, row after row (`vocabSize` each). */
  logits: Float32Array;
}

/** One message of a conversation (OpenAI's shape; extra fields reach the template as given). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | string;
  /** Text, or a list of parts such as `{type: 'text', text}`; `null` for a tool-call turn. */
  content?: string | Array<{ type: string; text?: string; [key: string]: unknown }> | null;
  /** An assistant's tool calls: `{id, type: 'function', function: {name, arguments}}`. */
  tool_calls?: Array<{ id?: string; type?: 'function'; function: { name: string; arguments: string | object } }>;
  /** A tool message's call id. */
  tool_call_id?: string;
  name?: string;
  [field: string]: unknown;
}

/** `chat.completions.create`'s request (OpenAI's chat completions). */
export interface ChatCompletionRequest {
  messages: ChatMessage[];
  /** Resolve to an async iterable of chunks instead of one completion (default false). */
  stream?: boolean;
  /** With `stream`: `{include_usage: true}` adds a last chunk with `usage` and no choices. */
  stream_options?: { include_usage?: boolean };
  /** Tokens to generate at most (default: until the turn ends or the context is full). */
  max_tokens?: number;
  /** The same as `max_tokens` (OpenAI's newer name). */
  max_completion_tokens?: number;
  /** 0..2, 0 = greedy (default 1, as OpenAI). */
  temperature?: number;
  /** Nucleus mass, 0..1 (default 1). */
  top_p?: number;
  /** Not OpenAI's: candidates kept by top-k (default 0 = up to 1024). */
  top_k?: number;
  /** Seed of the draws: the same seed gives the same text. */
  seed?: number;
  /** Strings that end the text (not included; `finish_reason: 'stop'`). */
  stop?: string | string[];
  /** Tool definitions, passed to the template as transformers passes `tools`. */
  tools?: Array<{ type: 'function'; function: { name: string; description?: string; parameters?: object } }>;
  /**
   * Structured output: every token is chosen among those the format allows (llguidance, on
   * the model's vocabulary), and the completion ends when the value is complete
   * (`finish_reason: 'stop'`; `'length'` when `max_tokens` cuts it, leaving a prefix of a valid
   * value). JSON is written compactly (`", "` and `": "`, no other whitespace). Cannot be
   * combined with `stop`.
   */
  response_format?: ResponseFormat;
  /** Extra template variables, e.g. `{enable_thinking: false}`. */
  chat_template_kwargs?: Record<string, unknown>;
  /** Ends the completion within one token with `finish_reason: 'abort'`. */
  signal?: AbortSignal;
  /** Accepted and ignored (one model per generator). */
  model?: string;
  [field: string]: unknown;
}

/**
 * `response_format` of a chat completion: plain text; any JSON object; a JSON schema (OpenAI's
 * `json_schema.schema`, or WebLLM's `schema` on `json_object`, an object or its JSON text); a
 * grammar in llguidance's Lark dialect; a regular expression the whole text matches.
 */
export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object'; schema?: object | string }
  | { type: 'json_schema'; json_schema: { name?: string; schema?: object | string; strict?: boolean } }
  | { type: 'grammar'; grammar: string }
  | { type: 'regex'; regex: string };

/** Token counts of a completion (OpenAI's `usage`, with WebLLM-style `extra` rates). */
export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** `cached_tokens`: prompt tokens whose KV cache was kept from an earlier turn. */
  prompt_tokens_details: { cached_tokens: number };
  extra: {
    prefill_tokens_per_s: number;
    decode_tokens_per_s: number;
    time_to_first_token_s: number;
    time_per_output_token_s: number;
    /** With `response_format`: milliseconds per token mask of the grammar. */
    grammar_mask_ms_per_token?: number;
  };
}

/** `chat.completions.create`'s result without `stream`. */
export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: 0;
    message: { role: 'assistant'; content: string };
    finish_reason: 'stop' | 'length' | 'abort';
    logprobs: null;
  }>;
  usage: ChatCompletionUsage;
}

/** One chunk of a streamed completion. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  /** Empty in the last chunk when `stream_options.include_usage`. */
  choices: Array<{
    index: 0;
    delta: { role?: 'assistant'; content?: string };
    finish_reason: 'stop' | 'length' | 'abort' | null;
    logprobs: null;
  }>;
  usage?: ChatCompletionUsage;
}

/** The special-token texts a `ChatTemplate` sees. */
export interface ChatSpecialTokens {
  bos_token?: string;
  eos_token?: string;
  unk_token?: string;
  pad_token?: string;
}

/** Options of `Generator.applyChatTemplate` and `ChatTemplate.render`. */
export interface ApplyChatTemplateOptions {
  /** Milliseconds since the epoch that `strftime_now` formats (default: now). */
  now?: number;
  /** End with the header of the assistant's turn (default true). */
  addGenerationPrompt?: boolean;
  tools?: ChatCompletionRequest['tools'];
  chatTemplateKwargs?: Record<string, unknown>;
}

/** One generated token. */
export interface GeneratedPiece {
  token: number;
  /** Text now final (empty while a character or a possible stop string is incomplete). */
  text: string;
  /** Milliseconds this token took (the first: the prefill). */
  ms: number;
}

/** `Generator.stats()`. */
export interface GeneratorStats {
  promptTokens?: number;
  reusedTokens?: number;
  prefillMs?: number;
  generatedTokens?: number;
  decodeMs?: number;
  decodeMsPerToken?: number;
  prefillTokensPerSecond?: number;
  decodeTokensPerSecond?: number;
  rebuilds?: number;
  grammarMasks?: number;
  grammarMaskMs?: number;
  finishReason: 'eos' | 'stop' | 'length' | 'context' | 'aborted' | 'return' | 'error' | 'destroyed' | null;
  bytesLoaded: number;
  requests: number;
  backend: string;
  fallbackReason: string | null;
  architecture: string;
  contextLength: number;
  vocabSize: number;
}

/**
 * The errors of the registry, backends and delegates (ExecuTorch codes). The parameter
 * providers reject with `StatusError` (IREE codes), a subclass of the same runtime class: test
 * `error.name` ('WebDelegateError' or 'StatusError') or read `error.code`.
 */
export interface WebDelegateError extends Error {
  name: 'WebDelegateError';
  /** The ExecuTorch code name, e.g. 'NotFound'. */
  code: keyof typeof ErrorCode;
  /** The ExecuTorch code value, e.g. 0x20. */
  codeValue: ErrorCode;
}
"#;
