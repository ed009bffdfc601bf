//! The wasm-bindgen surface: with [`crate::browser`], the only code that speaks JavaScript.
//!
//! Everything here converts at the edge and delegates to the platform-independent modules; no
//! runtime logic lives here. Every function that can fail throws a `WebDelegateError` carrying
//! the ExecuTorch code (see [`edge::errors`]); nothing panics on input from JavaScript.
//!
//! One folder per concept, each importing only the ones listed before it:
//! - [`edge`]: what every part shares — value conversions, option fields, errors both ways, the
//!   JS `ErrorCode` enum and the shared TypeScript shapes.
//! - [`lifecycle`]: page and worker events as `notify` on every provider and backend.
//! - [`providers`]: the parameter provider classes (`HttpParameterProvider`,
//!   `MemoryParameterProvider`, `ParameterProviderList`) and the hidden handle that brings any
//!   of them to Rust.
//! - [`registry`]: the backend registry's API, `Delegate`, JavaScript backends, the default
//!   backends and what a WebGPU delegate tells about itself.
//! - [`programs`]: building programs from JavaScript (`ProgramBuilder`, `bertProgram`) and, with
//!   the `bench` feature only (the bench's build, not the published package), the benchmark
//!   fixtures (`MatmulBench`, `QmatvecBench`, `BandwidthBench`).
//! - [`loading`]: what every high-level load shares (the backend choice, aborts, fetching a file).
//! - [`executorch`]: ExecuTorch programs (`Module`: a `.pte` with its `.ptd` streamed by Range).
//! - [`models`]: high-level model APIs (`Embedder`; `Generator` with its chat API,
//!   `generator.chat.completions.create`; `ChatTemplate`), with the `text` feature.

pub mod edge;
pub mod executorch;
pub mod lifecycle;
pub(crate) mod loading;
#[cfg(feature = "text")]
pub mod models;
pub mod programs;
pub mod providers;
pub mod registry;
