//! Text to model inputs: tokenisation with the model's own `tokenizer.json`, truncation, padding
//! and attention masks for batches ([`TextTokenizer`]); and the tokenizer a GGUF file carries in
//! its metadata, giving llama.cpp's ids and streaming text back ([`GgufTokenizer`]).

pub mod gguf_vocab;
mod tokenizer;

pub use gguf_vocab::{GgufTokenizer, IncrementalDecoder, TokenizerModel};
pub use tokenizer::{TextTokenizer, TokenBatch};
