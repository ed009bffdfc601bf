//! The shared edge: what every JavaScript-facing module uses to cross the boundary.
//!
//! [`convert`] turns JavaScript values into the runtime's (EValues, options, compile specs) and
//! back, checking untrusted shapes before copying; [`fields`] reads fields of option objects
//! and positional numbers as checked integers; [`errors`] turns every Rust error into a
//! `WebDelegateError` / `StatusError` and what a JavaScript backend throws into an [`Error`];
//! [`error_code`] is the `ErrorCode` enum JavaScript sees; `types` holds the TypeScript
//! declarations the registry's API takes and returns; [`wasm_memory`] the module's memory size
//! (`wasmMemoryBytes`, for memory checks).
//!
//! [`Error`]: crate::error::Error

pub mod convert;
pub mod error_code;
pub mod errors;
pub mod fields;
mod types;
pub mod wasm_memory;
