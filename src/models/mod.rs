//! Model builders: turn a checkpoint's config and weight index into a webdelegate program whose
//! parameters reference the checkpoint's own keys ([`bert`], [`decoder`]); and running them:
//! [`decoder_session`] (one sequence's position over a decoder delegate) and [`generator`]
//! (text in, streamed text out), with [`chat`] (conversations in, the model's own prompt out)
//! and [`grammar`] (structured output: the tokens a JSON schema or grammar allows each step).
//! [`catalog`] is the tensors a builder checks (from an index or a provider); [`sbert`]
//! sentence-transformers' truncation length.

pub mod bert;
pub mod catalog;
#[cfg(feature = "text")]
pub mod chat;
pub mod decoder;
pub mod decoder_session;
#[cfg(feature = "text")]
pub mod generator;
#[cfg(feature = "text")]
pub mod grammar;
pub mod sbert;
