//! High-level model APIs for JavaScript, each a whole task in one class on top of the registry and
//! the providers: [`embedder`] (`Embedder`: sentence embeddings from a BERT-family model
//! directory), [`generator`] (`Generator`: text generation from a GGUF, `generate` / `generateText`
//! / `evaluate`, and OpenAI-style chat, `generator.chat.completions.create`, in `generator::chat`)
//! and [`chat_template`] (`ChatTemplate`: a chat template on its own). The backend choice and abort
//! race every load shares are [`crate::web::loading`]'s.

pub mod chat_template;
pub mod embedder;
pub mod generator;
