//! Model builders: turn a checkpoint's config and weight index into a webdelegate program whose
//! parameters reference the checkpoint's own keys ([`bert`], [`decoder`]); and running them:
//! [`decoder_session`] (one sequence's position over a decoder delegate) and [`generator`]
//! (text in, streamed text out).

pub mod bert;
pub mod catalog;
pub mod decoder;
pub mod decoder_session;
#[cfg(feature = "text")]
pub mod generator;
pub mod sbert;
