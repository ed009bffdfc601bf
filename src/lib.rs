//! webdelegate: a WebAssembly runtime that runs ML programs in the browser on WebGPU and streams
//! their weights over HTTP Range requests into GPU memory.
//!
//! Two public interfaces, each in its own module:
//! - [`registry`]: ExecuTorch's delegate `BackendInterface` and the process-wide backend registry.
//! - the parameter provider (IREE's `iree_io_parameter_provider_t`), in a later module.
//!
//! [`error`] holds the one error model (ExecuTorch codes and IREE status codes), [`evalue`] the
//! values that cross a delegate call. The `web` module (wasm32 only) is the only code that speaks
//! JavaScript.

pub mod backends;
pub mod error;
pub mod evalue;
pub mod fifo_slot;
pub mod lifecycle;
pub mod models;
pub mod params;
pub mod program;
pub mod registry;
#[cfg(feature = "text")]
pub mod text;

#[cfg(web)]
pub mod web;

pub use error::{Error, ErrorCode, Result, Status, StatusCode};
pub use evalue::{EValue, ScalarType, Tensor, TensorData};
