//! High-level model APIs for JavaScript, each a whole task in one class on top of the registry
//! and the providers: [`embedder`] (`Embedder`: sentence embeddings from a BERT-family model
//! directory) and [`generator`] (`Generator`: text generation and chat from a GGUF), and
//! [`chat_template`] (`ChatTemplate`: a chat template on its own). The backend choice
//! and abort race every load shares are [`crate::web::loading`]'s.

pub mod chat_template;
pub mod embedder;
pub mod generator;
