//! The HTTP parameter provider: weights files on HTTP servers, read with Range requests and
//! streamed chunk by chunk into destination (GPU) buffers.
//!
//! Four layers, bottom up, one folder each (arrows point down only):
//! - `transport`: one ranged GET and its chunked body (the [`Transport`] seam) — `fetch` in the
//!   browser (over [`crate::browser`], with the optional persistent cache), `ureq` natively —,
//!   what a response means (validators, `Content-Range`, status codes) and the host staging
//!   buffers bodies are read into;
//! - `planning`: spans of many parameters into few coalesced Range requests (pure), and the
//!   tuning options;
//! - `loading`: one request with retries and resume, the whole-file fallback when a server stops
//!   honouring Range, the sinks that stream a body into its pieces with 4-byte-aligned writes
//!   (zero-copy to GPU buffers through [`crate::params::DirectWrite`]), progress and control;
//! - `provider`: the [`HttpProvider`] itself and [`HttpFile`] (a remote file for the index
//!   parsers).
//!
//! This module's surface is what the API needs; the pieces inside are reachable for fuzzing and
//! tests through [`internal`] only.
//!
//! Host memory held by a load is bounded by the concurrency times the chunk size (plus, with the
//! persistent cache, at most 4 MiB queued per request for the Cache API, see
//! [`crate::browser::cache`]); in the browser body chunks go from the `ReadableStream` straight
//! to `GPUQueue.writeBuffer`, so wasm memory does not grow with the model (SHA-256 checks copy
//! each chunk through one reused staging buffer to hash it).

mod loading;
mod planning;
mod provider;
mod transport;

pub use loading::control::{AbortHandle, SuspendGate};
pub use loading::progress::{LoadObserver, LoadProgress, LoadRecord, LoadStats};
pub use planning::options::{HttpProviderOptions, RetryPolicy, ScopeOptions, parse_sha256};
pub use provider::file::HttpFile;
pub use provider::{HttpProvider, LoadControl};
pub use transport::response::Validators;
pub use transport::staging::{StagingBuffer, StagingPool};
pub use transport::{BodyChunk, HttpRequest, ResponseBody, ResponseHead, Transport};

#[cfg(web)]
pub use crate::browser::fetch::CacheMode;
#[cfg(web)]
pub use transport::fetch::{FetchOptions, FetchTransport};
#[cfg(native)]
pub use transport::native::{NativeTransport, NativeTransportOptions};

/// The pieces inside the provider, for fuzz targets and tests that exercise one layer on its
/// own (the planner, the sinks, a destination's write paths). Not part of the API: paths and
/// names here may change with any release.
#[doc(hidden)]
pub mod internal {
    pub use super::loading::destination::{Destination, WriteCounts};
    pub use super::loading::edges::EdgeStore;
    pub use super::loading::sink::{ExpectedDigest, LoadTargets, RangeDigest, RequestSink};
    pub use super::planning::options::CONCURRENCY_RANGE;
    pub use super::planning::planner::{
        Piece, Plan, PlannedRequest, PlannerConfig, Wanted, plan, plan_whole_file,
    };
    pub use super::transport::response::{
        BodyLayout, check_data_response, is_retryable, parse_content_range, status_error,
    };
}
