//! Model builders: turn a checkpoint's config and weight index into a webdelegate program whose
//! parameters reference the checkpoint's own keys.

pub mod bert;
pub mod catalog;
pub mod decoder;
pub mod decoder_session;
#[cfg(feature = "text")]
pub mod generator;
pub mod sbert;
