//! Text to model inputs: tokenisation with the model's own `tokenizer.json`, truncation, padding
//! and attention masks for batches ([`TextTokenizer`]); and the tokenizer a GGUF file carries in
//! its metadata, giving llama.cpp's ids and streaming text back ([`GgufTokenizer`]); and the
//! model's chat template, rendered as transformers' `apply_chat_template` does ([`ChatTemplate`]).

pub mod chat_template;
pub mod gguf_vocab;
mod tokenizer;

pub use chat_template::{ChatRender, ChatTemplate, SpecialTokens};
pub use gguf_vocab::{GgufTokenizer, IncrementalDecoder, TokenizerModel};
pub use tokenizer::{TextTokenizer, TokenBatch};
