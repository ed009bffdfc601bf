//! The wasm-bindgen surface: the only module that speaks JavaScript.
//!
//! Everything here converts at the edge and delegates to the platform-independent modules; no
//! runtime logic lives here. Every function that can fail throws a `WebDelegateError` carrying
//! the ExecuTorch code (see [`errors`]); nothing panics on input from JavaScript.

pub mod api;
pub mod backends;
pub mod bench;
pub mod bert_program;
pub mod convert;
pub mod defaults;
#[cfg(feature = "text")]
pub mod embedder;
pub mod errors;
pub mod gpu_parameter;
pub mod http_options;
pub mod http_provider;
mod http_types;
mod introspect;
pub mod js_backend;
pub mod lifecycle;
mod lifecycle_types;
pub mod memory_provider;
pub mod program_builder;
pub mod provider_handle;
pub mod provider_list;
pub mod provider_ops;
mod provider_types;
pub mod types;
