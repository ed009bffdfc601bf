//! Transport, the bottom layer of the HTTP provider: one ranged HTTP GET, its status and
//! headers, and its body as a stream of chunks; what a response means ([`response`]); and the
//! host buffers bodies are read into ([`staging`]).
//!
//! The browser implements the seam with `fetch` (`fetch`: [`crate::browser::fetch`] and, when
//! enabled, the persistent cache over [`crate::browser::cache`]), native builds with a blocking
//! HTTP/1.1 client on worker threads (`native`, ureq). Which one exists is decided by the two
//! module declarations below and nowhere else; everything above this layer (planning,
//! validation, retry, resume, streaming into buffers) is shared.
//!
//! Contract: `get` resolves once the status line and headers are in; a body yields chunks in
//! order and `None` at its end; dropping a body (or calling [`ResponseBody::abort`]) aborts the
//! request. Failures are statuses: `UNAVAILABLE` for network errors, `DEADLINE_EXCEEDED` when
//! nothing arrived for the idle timeout (both retryable), `CANCELLED` after an abort.

#[cfg(web)]
pub(crate) mod fetch;
#[cfg(native)]
pub(crate) mod native;
pub(crate) mod response;
pub(crate) mod staging;
#[cfg(test)]
mod tests;

use crate::browser::chunk::JsChunk;
use crate::params::StatusResult;
use crate::params::http::transport::staging::{StagingBuffer, StagingPool};
use crate::send_sync::{LocalBoxFuture, MaybeSendSync};

/// One GET.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequest {
    /// Absolute URL (or, in a page, one relative to the page).
    pub url: String,
    /// The bytes `[start, end)` to ask for with a `Range` header, or the whole file.
    pub range: Option<(u64, u64)>,
    /// An `If-Range` validator (a strong ETag or an HTTP date), sent with `range`.
    pub if_range: Option<String>,
}

impl HttpRequest {
    /// The `Range` header value, e.g. `bytes=0-1023` for `[0, 1024)`; `None` without a range or
    /// for an empty one (HTTP cannot ask for zero bytes).
    pub fn range_header(&self) -> Option<String> {
        let (start, end) = self.range?;
        (end > start).then(|| format!("bytes={start}-{}", end - 1))
    }
}

/// The status and headers of a response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResponseHead {
    /// HTTP status code.
    pub status: u16,
    /// Header names (lower-case) and values, as received.
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// A piece of a response body, where the platform keeps it.
pub enum BodyChunk {
    /// Bytes in host (wasm or native) memory; `len` of them are valid.
    Host(StagingBuffer),
    /// A JavaScript `Uint8Array` from a `ReadableStream`: never copied into wasm memory unless
    /// something must read the bytes (a hash, a destination that is not a GPU buffer). Natively
    /// [`JsChunk`] has no values, so this variant never occurs there.
    Js(JsChunk),
}

impl BodyChunk {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Self::Host(bytes) => bytes.len(),
            Self::Js(chunk) => chunk.len(),
        }
    }

    /// Whether the chunk is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `target.len()` bytes from `offset` into `target` (the caller keeps the range within
    /// [`BodyChunk::len`]).
    pub fn copy_to(&self, offset: usize, target: &mut [u8]) {
        match self {
            Self::Host(bytes) => {
                if let Some(source) = bytes.get(offset..offset.saturating_add(target.len())) {
                    target.copy_from_slice(source);
                }
            }
            Self::Js(chunk) => chunk.copy_to(offset, target),
        }
    }
}

/// A response body being received.
pub trait ResponseBody {
    /// Status and headers.
    fn head(&self) -> &ResponseHead;

    /// The next chunk, or `None` at the end of the body.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the connection failed, `DEADLINE_EXCEEDED` when nothing arrived for the
    /// idle timeout, `CANCELLED` after [`ResponseBody::abort`].
    fn next_chunk(&mut self) -> LocalBoxFuture<'_, StatusResult<Option<BodyChunk>>>;

    /// Stops receiving; the connection is closed or returned. Also done on drop.
    fn abort(&mut self);
}

/// Issues GETs.
pub trait Transport: MaybeSendSync {
    /// Sends `request` and resolves with the response once its head is in (any status).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the server cannot be reached or the connection fails,
    /// `DEADLINE_EXCEEDED` on the idle timeout, `INVALID_ARGUMENT` for a URL the client refuses.
    /// Host buffers for the body come from `pool` (where the platform needs any).
    fn get(
        &self,
        request: HttpRequest,
        pool: &StagingPool,
    ) -> LocalBoxFuture<'_, StatusResult<Box<dyn ResponseBody>>>;
}
