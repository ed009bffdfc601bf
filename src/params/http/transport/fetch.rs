//! The browser transport: [`crate::browser::fetch`] with an abort handle per request, the body
//! read chunk by chunk as JavaScript chunks ([`BodyChunk::Js`]); nothing is copied into wasm
//! memory here. Works in windows and workers.
//!
//! Idle timeout: an attempt fails with `DEADLINE_EXCEEDED` (and is aborted) when neither the
//! head nor a body chunk arrived for `idle_timeout`. One timer serves many chunks: it is re-armed
//! only when it fires, for the time left since the last chunk.
//!
//! Failures: an abort is `CANCELLED`, a network failure `UNAVAILABLE` (retried), and a response
//! the browser refuses to expose — CORS: the server, or one it redirected to, does not allow
//! this page's origin — `PERMISSION_DENIED` at once, with a message that says so (retrying
//! cannot help; see [`crate::browser::fetch`] for how the two are told apart).
//!
//! The optional persistent cache (browser Cache API, [`crate::browser::cache`]): data responses
//! are kept per URL, file version (the `If-Range` validator: strong ETag or Last-Modified) and
//! byte range, so the next page load that plans the same requests gets them without touching
//! the network. Only the small index read still goes out, which is what learns the file's
//! current version: a changed file has a new validator, so stale entries are never used.
//! Without revalidation ([`FetchTransport::without_revalidation`], JS
//! `persistentCacheRevalidate: false`) the index read is kept too, so a second page load sends
//! nothing at all; a file changed on the server is then not seen until the cache is cleared,
//! and what is served stays one version (the cached index's validator keys every cached range).
//! Only an exact 206 of the range asked for is kept. An entry is closed as soon as its range's
//! bytes have been read (an index read stops reading there), and dropped if the body brings
//! more than its range, fails, or is aborted; when the Cache API falls behind, the load waits
//! for it at most its idle timeout, after which the entry is dropped and the load goes on.

use crate::browser::cache::{CacheWriter, PersistentCache, range_key};
use crate::browser::chunk::JsChunk;
use crate::browser::fetch::{
    BodyReader, CacheMode, FetchAbort, FetchError, FetchFailure, FetchRequest, fetch,
};
use crate::browser::timer::{now_ms, sleep};
use crate::error::Status;
use crate::params::StatusResult;
use crate::params::http::transport::response::parse_content_range;
use crate::params::http::transport::staging::StagingPool;
use crate::params::http::transport::{
    BodyChunk, HttpRequest, ResponseBody, ResponseHead, Transport,
};
use crate::send_sync::LocalBoxFuture;
use futures_util::future::{Either, select};
use std::rc::Rc;
use std::time::Duration;

/// Settings of the browser transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchOptions {
    /// Longest wait for the response head or the next body chunk.
    pub idle_timeout: Duration,
    /// The request's cache mode ([`CacheMode::NoStore`] bypasses the HTTP cache).
    pub cache: CacheMode,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30),
            cache: CacheMode::Default,
        }
    }
}

/// `fetch`-based [`Transport`], optionally keeping data responses in a persistent cache.
#[derive(Clone, Debug, Default)]
pub struct FetchTransport {
    options: FetchOptions,
    persistent: Option<Rc<PersistentCache>>,
    /// Whether the index read (a range without a validator) is served from the persistent
    /// cache too, instead of always going to the network to learn the file's current version.
    cached_index: bool,
}

impl FetchTransport {
    /// A transport with `options`.
    pub fn new(options: FetchOptions) -> Self {
        Self {
            options,
            persistent: None,
            cached_index: false,
        }
    }

    /// The transport keeping data responses in the Cache API cache named `name`.
    pub fn with_persistent_cache(mut self, name: &str) -> Self {
        self.persistent = Some(Rc::new(PersistentCache::new(name)));
        self
    }

    /// With a persistent cache: the index read is also kept and served from it, so a second
    /// page load sends no request at all. The price: a file changed on the server is not seen
    /// until the cache is cleared (what it serves stays consistent: the cached index's version
    /// keys every cached data range).
    pub fn without_revalidation(mut self) -> Self {
        self.cached_index = true;
        self
    }

    /// The persistent cache, when enabled.
    pub(crate) fn persistent_cache(&self) -> Option<&Rc<PersistentCache>> {
        self.persistent.as_ref()
    }
}

/// Whether a 206 is exactly `[start, end)` of version `validator` (`None`: of whatever version it
/// names, for an index read): only then may it be cached.
fn cacheable(head: &ResponseHead, validator: Option<&str>, start: u64, end: u64) -> bool {
    let same_version = match validator {
        Some(v) => head.header("etag") == Some(v) || head.header("last-modified") == Some(v),
        None => head.header("etag").is_some() || head.header("last-modified").is_some(),
    };
    let range = head.header("content-range").and_then(parse_content_range);
    head.status == 206 && same_version && range.is_some_and(|r| r.start == start && r.end == end)
}

/// The version part of a cached index read's key: no validator is known before it.
const INDEX_VERSION: &str = "index-read";

/// Headers a response is read for (fetch exposes only these cross-origin if the server lists
/// them in Access-Control-Expose-Headers).
const HEADERS: [&str; 6] = [
    "content-range",
    "content-length",
    "etag",
    "last-modified",
    "accept-ranges",
    "content-encoding",
];

/// The status of a failed browser call about `what`.
fn status_of(error: FetchError, what: &str) -> Status {
    let FetchError { failure, message } = error;
    match failure {
        FetchFailure::Aborted => Status::cancelled(format!("{what}: {message}")),
        FetchFailure::Network => Status::unavailable(format!("{what}: {message}")),
        FetchFailure::Blocked => Status::permission_denied(format!(
            "{what}: the browser blocked the response (CORS): the server, or a server it \
             redirected to, does not allow this page's origin (no matching \
             Access-Control-Allow-Origin); retrying cannot help ({message})"
        )),
        FetchFailure::Setup => Status::invalid_argument(format!("{what}: {message}")),
        FetchFailure::Unexpected => Status::internal(format!("{what}: {message}")),
    }
}

/// Aborts the request when dropped (unless disarmed).
struct AbortOnDrop(Option<FetchAbort>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(abort) = self.0.take() {
            abort.abort();
        }
    }
}

impl Transport for FetchTransport {
    fn get(
        &self,
        request: HttpRequest,
        _pool: &StagingPool,
    ) -> LocalBoxFuture<'_, StatusResult<Box<dyn ResponseBody>>> {
        Box::pin(async move {
            let url = request.url.clone();
            let cache_key = match (&self.persistent, request.range, &request.if_range) {
                (Some(_), Some((start, end)), Some(validator)) if end > start => Some((
                    range_key(&url, validator, start, end),
                    Some(validator.clone()),
                    start,
                    end,
                )),
                (Some(_), Some((start, end)), None) if end > start && self.cached_index => {
                    Some((range_key(&url, INDEX_VERSION, start, end), None, start, end))
                }
                _ => None,
            };
            if let (Some(cache), Some((key, ..))) = (&self.persistent, &cache_key)
                && let Some((headers, reader)) = cache.lookup(key).await
            {
                let head = ResponseHead {
                    status: 206,
                    headers,
                };
                let body: Box<dyn ResponseBody> =
                    Box::new(self.body(head, Some(reader), None, url));
                return Ok(body);
            }
            let range = request.range_header();
            let mut headers = Vec::new();
            if let Some(range) = &range {
                headers.push(("Range", range.as_str()));
                if let Some(validator) = &request.if_range {
                    headers.push(("If-Range", validator.as_str()));
                }
            }
            let pending = fetch(&FetchRequest {
                url: &url,
                headers: &headers,
                cache: self.options.cache,
                read_headers: &HEADERS,
            })
            .map_err(|error| status_of(error, &format!("GET {url}")))?;
            let mut guard = AbortOnDrop(Some(pending.abort.clone()));
            let timeout = sleep(self.options.idle_timeout);
            let response = match select(pending.response, timeout).await {
                Either::Left((Ok(response), _)) => response,
                Either::Left((Err(error), _)) => {
                    return Err(status_of(error, &format!("GET {url}")));
                }
                Either::Right(((), _)) => {
                    return Err(Status::deadline_exceeded(format!(
                        "GET {url}: no response within {:?}",
                        self.options.idle_timeout
                    )));
                }
            };
            let head = ResponseHead {
                status: response.status,
                headers: response.headers,
            };
            let mut writer = None;
            let mut entry_length = 0;
            if let (Some(cache), Some((key, validator, start, end)), Some(_)) =
                (&self.persistent, cache_key, &response.body)
                && cacheable(&head, validator.as_deref(), start, end)
            {
                writer = cache.start_entry(key, &head.headers);
                entry_length = end - start;
            }
            guard.0 = None;
            let mut body = self.body(head, response.body, Some(pending.abort), url);
            body.cache_missing = writer.as_ref().map_or(0, |_| entry_length);
            body.cache_writer = writer;
            let body: Box<dyn ResponseBody> = Box::new(body);
            Ok(body)
        })
    }
}

impl FetchTransport {
    fn body(
        &self,
        head: ResponseHead,
        reader: Option<BodyReader>,
        abort: Option<FetchAbort>,
        url: String,
    ) -> FetchBody {
        FetchBody {
            head,
            reader,
            abort,
            cache_writer: None,
            cache_missing: 0,
            aborted: false,
            idle: self.options.idle_timeout,
            timer: None,
            last_progress: now_ms(),
            url,
        }
    }
}

struct FetchBody {
    head: ResponseHead,
    reader: Option<BodyReader>,
    abort: Option<FetchAbort>,
    /// The persistent-cache entry this body fills as it is read, if any.
    cache_writer: Option<CacheWriter>,
    /// Bytes the cache entry still needs: it is complete (and closed) once they have been read,
    /// even if the reader stops there without reading the stream's end (an index read does).
    cache_missing: u64,
    aborted: bool,
    idle: Duration,
    timer: Option<LocalBoxFuture<'static, ()>>,
    last_progress: f64,
    url: String,
}

impl FetchBody {
    async fn read(&mut self) -> StatusResult<Option<BodyChunk>> {
        if self.aborted {
            return Err(Status::cancelled("request was aborted"));
        }
        let Some(reader) = &self.reader else {
            return Ok(None);
        };
        let mut read = reader.read();
        let idle_ms = self.idle.as_secs_f64() * 1000.0;
        let result = loop {
            let timer = self.timer.get_or_insert_with(|| sleep(self.idle));
            match select(&mut read, timer).await {
                Either::Left((result, _)) => break result,
                Either::Right(((), _)) => {
                    let quiet = now_ms() - self.last_progress;
                    if quiet >= idle_ms {
                        self.abort();
                        return Err(Status::deadline_exceeded(format!(
                            "body of {}: nothing received for {:?}",
                            self.url, self.idle
                        )));
                    }
                    let left = Duration::from_secs_f64((idle_ms - quiet).max(1.0) / 1000.0);
                    self.timer = Some(sleep(left));
                }
            }
        };
        self.last_progress = now_ms();
        let chunk = match result {
            Ok(Some(chunk)) => chunk,
            Ok(None) => {
                if let Some(writer) = self.cache_writer.take() {
                    writer.close();
                }
                return Ok(None);
            }
            Err(error) if error.failure == FetchFailure::Unexpected => {
                self.fail_cache_entry("a body chunk was not bytes");
                return Err(Status::data_loss(format!(
                    "body of {}: {}",
                    self.url, error.message
                )));
            }
            Err(error) => {
                self.fail_cache_entry("the response failed");
                return Err(status_of(error, &format!("body of {}", self.url)));
            }
        };
        self.feed_cache_entry(&chunk).await;
        Ok(Some(BodyChunk::Js(chunk)))
    }

    /// Pushes `chunk` into the cache entry; when the Cache API is behind, waits until it
    /// catches up, or drops the entry after the idle timeout (the load goes on without it).
    async fn feed_cache_entry(&mut self, chunk: &JsChunk) {
        let Some(writer) = &self.cache_writer else {
            return;
        };
        let length = chunk.len() as u64;
        if length > self.cache_missing {
            // More bytes than the range: never store what the load itself will refuse.
            self.fail_cache_entry("the body is longer than its range");
            return;
        }
        let pending = writer.push(chunk);
        self.cache_missing = self.cache_missing.saturating_sub(length);
        if self.cache_missing == 0
            && let Some(writer) = self.cache_writer.take()
        {
            writer.close();
        }
        let Some(caught_up) = pending else {
            return;
        };
        match select(caught_up, sleep(self.idle)).await {
            Either::Left(_) => self.last_progress = now_ms(),
            Either::Right(((), _)) => self.fail_cache_entry("the Cache API fell behind"),
        }
    }

    /// Drops the cache entry being written (it is not stored).
    fn fail_cache_entry(&mut self, reason: &str) {
        if let Some(writer) = self.cache_writer.take() {
            writer.fail(reason);
        }
    }
}

impl ResponseBody for FetchBody {
    fn head(&self) -> &ResponseHead {
        &self.head
    }

    fn next_chunk(&mut self) -> LocalBoxFuture<'_, StatusResult<Option<BodyChunk>>> {
        Box::pin(self.read())
    }

    fn abort(&mut self) {
        self.aborted = true;
        self.fail_cache_entry("the response was not read to its end");
        match (self.abort.take(), self.reader.take()) {
            // Aborting the request errors its stream.
            (Some(abort), _) => abort.abort(),
            // A cached body has no request: cancel its stream.
            (None, Some(reader)) => reader.cancel(),
            (None, None) => {}
        }
        self.timer = None;
    }
}

impl Drop for FetchBody {
    fn drop(&mut self) {
        self.abort();
    }
}
