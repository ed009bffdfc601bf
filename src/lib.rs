#![warn(missing_docs)]
// On the web nothing is `Send`: the runtime's `Arc`s hold browser objects by design (one thread;
// natively the same types are `Send + Sync`, see `send_sync`).
#![cfg_attr(web, allow(clippy::arc_with_non_send_sync))]
//! webdelegate: a WebAssembly runtime that runs ML programs in the browser on WebGPU and streams
//! their weights over HTTP Range requests into GPU memory.
//!
//! Two public interfaces, each in its own module:
//! - [`registry`]: ExecuTorch's delegate `BackendInterface` and the process-wide backend registry.
//! - [`params`]: IREE's parameter provider (`iree_io_parameter_provider_t`): in-memory and HTTP
//!   providers, provider lists, and the safetensors / GGUF / IRPA / ExecuTorch `.ptd` index
//!   readers.
//!
//! Around them: [`program`] (the processed blob a backend runs: IR, builder, format, validation),
//! [`backends`] (the WebGPU backend on `wgpu` and the CPU backend), [`pte`] (ExecuTorch `.pte`
//! programs: the reader and the method runtime over the registry; schemas in
//! [`executorch_schema`]), [`lifecycle`] (suspend, resume and low-memory signals), [`models`]
//! (programs for known checkpoints: BERT sentence embeddings, decoder LLMs from a GGUF, and the
//! generator and chat that run them) and, with the `text` feature, `text` (tokenisation, the GGUF's
//! own tokenizer, chat templates). [`quant`] holds ggml's block formats, [`error`] the one error
//! model (ExecuTorch codes and IREE status codes), [`evalue`] the values that cross a delegate
//! call, `send_sync` the platform's thread bounds. The `web` module (wasm32 only: the wasm-bindgen
//! API, grouped by concept) and `browser` (the platform: fetch, Cache API, timers, GPU-direct
//! writes) are the only code that speaks JavaScript.

pub mod backends;
pub(crate) mod browser;
pub mod error;
pub mod evalue;
pub mod executorch_schema;
// In-order turns on one value for the web `Embedder` and `Module`; platform-independent, so its tests run
// natively.
#[cfg(any(web, test))]
pub(crate) mod fifo_slot;
pub mod lifecycle;
pub mod models;
pub mod params;
pub mod program;
pub mod pte;
pub mod quant;
pub mod registry;
pub mod send_sync;
#[cfg(feature = "text")]
pub mod text;

#[cfg(web)]
pub mod web;

pub use error::{Error, ErrorCode, Result, Status, StatusCode};
pub use evalue::{EValue, ScalarType, Tensor, TensorData};
