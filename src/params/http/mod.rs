//! The HTTP parameter provider: weights files on HTTP servers, read with Range requests and
//! streamed chunk by chunk into destination (GPU) buffers.
//!
//! The layers, bottom up, one file each:
//! - [`transport`]: one ranged GET and its chunked body — `fetch` in the browser ([`fetch`]),
//!   `ureq` natively ([`native`]);
//! - [`response`]: what a response means (validators, `Content-Range`, status codes);
//! - [`planner`]: spans of many parameters into few coalesced Range requests (pure);
//! - [`sink`], [`edges`], [`destination`], [`staging`]: one request's body into its pieces with
//!   4-byte-aligned writes through a small, reused staging pool;
//! - [`runner`]: one request with retries and resume from the first byte not yet consumed;
//!   [`group`], [`queue`]: when a server stops honouring Range mid-load, the first whole-file
//!   answer feeds every request not started yet (the file is read once more at most);
//! - [`file`]: a remote file as a [`crate::params::RangeRead`] for the index parsers;
//! - [`load`], [`provider`]: the [`HttpProvider`] itself, with [`progress`] events and
//!   [`control`] (abort, suspend).
//!
//! Host memory held by a load is bounded by the concurrency times the chunk size (plus, with the
//! persistent cache, at most 4 MiB queued per request for the Cache API, see `cache`); in the
//! browser body chunks go from the `ReadableStream` straight to `GPUQueue.writeBuffer`, so wasm
//! memory does not grow with the model (SHA-256 checks copy each chunk through one reused
//! staging buffer to hash it).

#[cfg(web)]
pub mod cache;
pub mod control;
pub mod destination;
pub mod edges;
#[cfg(web)]
pub mod fetch;
pub mod file;
#[cfg(web)]
pub mod gpu_direct;
pub mod group;
mod index_source;
pub mod load;
#[cfg(native)]
pub mod native;
pub mod options;
pub mod planner;
pub mod progress;
pub mod provider;
pub mod queue;
pub mod response;
pub mod runner;
pub mod sink;
pub mod staging;
pub mod timer;
pub mod transport;

#[cfg(test)]
mod tests;

pub use control::{AbortHandle, SuspendGate};
pub use file::HttpFile;
pub use options::{HttpProviderOptions, ScopeOptions, parse_sha256};
pub use progress::{LoadObserver, LoadProgress, LoadRecord, LoadStats};
pub use provider::{HttpProvider, LoadControl};
pub use response::Validators;
pub use runner::RetryPolicy;
pub use transport::{BodyChunk, HttpRequest, ResponseBody, ResponseHead, Transport};

#[cfg(native)]
pub use native::{NativeTransport, NativeTransportOptions};
