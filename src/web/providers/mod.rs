//! IREE's parameter providers from JavaScript.
//!
//! The three classes: [`http`] (`HttpParameterProvider`: weights files over HTTP, `loadToGpu`,
//! statistics; its options in [`http_options`], what `loadToGpu` returns in [`gpu_parameter`],
//! its `signal` in [`abort_listener`]), [`memory`] (`MemoryParameterProvider`) and [`list`]
//! (`ParameterProviderList`, over the growable [`growing_list`]). [`ops`] writes the operations they share once (describe, notify,
//! host-memory read / gather / write / scatter); [`handle`] brings any of them to Rust as a
//! [`crate::params::SharedProvider`]. `types` and `http_types` hold their TypeScript shapes.
//! Errors are `StatusError`s with IREE codes.

pub mod abort_listener;
pub mod gpu_parameter;
pub mod growing_list;
pub mod handle;
pub mod http;
pub mod http_options;
mod http_types;
pub mod list;
pub mod memory;
pub mod ops;
mod types;
