//! Text to model inputs: tokenisation with the model's own `tokenizer.json`, truncation, padding
//! and attention masks for batches.

mod tokenizer;

pub use tokenizer::{TextTokenizer, TokenBatch};
