//! High-level model APIs for JavaScript, each a whole task in one class on top of the registry
//! and the providers: [`embedder`] (`Embedder`: sentence embeddings from a BERT-family model
//! directory);
//! [`loading`]: the backend choice and abort race every load shares.

pub mod embedder;
pub mod generator;
pub(crate) mod loading;
