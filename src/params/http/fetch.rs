//! The browser transport: `fetch` with an `AbortController` per request, the body read with a
//! `ReadableStream` reader. Chunks stay JavaScript `Uint8Array`s ([`BodyChunk::Js`]); nothing is
//! copied into wasm memory here. Works in windows and workers (the global `fetch`).
//!
//! Idle timeout: an attempt fails with `DEADLINE_EXCEEDED` (and is aborted) when neither the
//! head nor a body chunk arrived for `idle_timeout`. One timer serves many chunks: it is re-armed
//! only when it fires, for the time left since the last chunk.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::cache::{CacheWriter, PersistentCache, data_key};
use crate::params::http::response::parse_content_range;
use crate::params::http::staging::StagingPool;
use crate::params::http::timer::{now_ms, sleep};
use crate::params::http::transport::{
    BodyChunk, HttpRequest, ResponseBody, ResponseHead, Transport,
};
use crate::send_sync::LocalBoxFuture;
use futures_util::future::{Either, select};
use js_sys::Uint8Array;
use std::rc::Rc;
use std::time::Duration;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, ReadableStream, ReadableStreamDefaultReader, Request, RequestInit,
    Response,
};

#[wasm_bindgen]
extern "C" {
    /// The global `fetch` (window and worker scopes alike).
    #[wasm_bindgen(js_name = fetch)]
    fn global_fetch(request: &Request) -> js_sys::Promise;

    /// What `ReadableStreamDefaultReader.read()` resolves to: `{done, value}`. Read through
    /// getters (no per-chunk property-name strings crossing into JS).
    type ReadResult;

    #[wasm_bindgen(method, getter)]
    fn done(this: &ReadResult) -> Option<bool>;

    #[wasm_bindgen(method, getter)]
    fn value(this: &ReadResult) -> JsValue;
}

/// Settings of the browser transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchOptions {
    /// Longest wait for the response head or the next body chunk.
    pub idle_timeout: Duration,
    /// The request's cache mode (`RequestCache::NoStore` bypasses the HTTP cache).
    pub cache: web_sys::RequestCache,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(30),
            cache: web_sys::RequestCache::Default,
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
    pub fn persistent_cache(&self) -> Option<&Rc<PersistentCache>> {
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

fn reader_of(stream: &ReadableStream) -> ReadableStreamDefaultReader {
    stream
        .get_reader()
        .unchecked_into::<ReadableStreamDefaultReader>()
}

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

fn js_message(value: &JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| format!("{}: {}", e.name(), e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| format!("{value:?}"))
}

/// Maps a rejection: an abort is `CANCELLED`, anything else (a network failure) `UNAVAILABLE`.
fn rejection(value: &JsValue, what: &str) -> Status {
    let message = js_message(value);
    let code = if message.starts_with("AbortError") {
        StatusCode::Cancelled
    } else {
        StatusCode::Unavailable
    };
    Status::new(code, format!("{what}: {message}"))
}

fn setup_error(value: JsValue, what: &str) -> Status {
    Status::new(
        StatusCode::InvalidArgument,
        format!("{what}: {}", js_message(&value)),
    )
}

/// Aborts the request when dropped (unless disarmed).
struct AbortOnDrop(Option<AbortController>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(controller) = self.0.take() {
            controller.abort();
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
                    data_key(&url, validator, start, end),
                    Some(validator.clone()),
                    start,
                    end,
                )),
                (Some(_), Some((start, end)), None) if end > start && self.cached_index => {
                    Some((data_key(&url, INDEX_VERSION, start, end), None, start, end))
                }
                _ => None,
            };
            if let (Some(cache), Some((key, ..))) = (&self.persistent, &cache_key)
                && let Some((head, stream)) = cache.lookup(key).await
            {
                let body: Box<dyn ResponseBody> =
                    Box::new(self.body(head, Some(reader_of(&stream)), None, url));
                return Ok(body);
            }
            let controller =
                AbortController::new().map_err(|e| setup_error(e, "AbortController"))?;
            let init = RequestInit::new();
            init.set_method("GET");
            init.set_signal(Some(&controller.signal()));
            init.set_cache(self.options.cache);
            let headers = Headers::new().map_err(|e| setup_error(e, "Headers"))?;
            if let Some(range) = request.range_header() {
                headers
                    .set("Range", &range)
                    .map_err(|e| setup_error(e, "Range header"))?;
                if let Some(validator) = &request.if_range {
                    headers
                        .set("If-Range", validator)
                        .map_err(|e| setup_error(e, "If-Range header"))?;
                }
            }
            init.set_headers(&headers);
            let js_request = Request::new_with_str_and_init(&url, &init)
                .map_err(|e| setup_error(e, &format!("request for {url}")))?;
            let mut guard = AbortOnDrop(Some(controller.clone()));
            let response = JsFuture::from(global_fetch(&js_request));
            let timeout = sleep(self.options.idle_timeout);
            let response = match select(response, timeout).await {
                Either::Left((Ok(value), _)) => value,
                Either::Left((Err(error), _)) => {
                    return Err(rejection(&error, &format!("GET {url}")));
                }
                Either::Right(((), _)) => {
                    return Err(Status::new(
                        StatusCode::DeadlineExceeded,
                        format!(
                            "GET {url}: no response within {:?}",
                            self.options.idle_timeout
                        ),
                    ));
                }
            };
            let response: Response = response
                .dyn_into()
                .map_err(|v| Status::new(StatusCode::Internal, format!("fetch gave {v:?}")))?;
            let js_headers = response.headers();
            let head = ResponseHead {
                status: response.status(),
                headers: HEADERS
                    .iter()
                    .filter_map(|name| {
                        let value = js_headers.get(name).ok().flatten()?;
                        Some(((*name).to_owned(), value))
                    })
                    .collect(),
            };
            let stream = response.body();
            let mut writer = None;
            let mut entry_length = 0;
            if let (Some(cache), Some((key, validator, start, end)), Some(_)) =
                (&self.persistent, cache_key, &stream)
                && cacheable(&head, validator.as_deref(), start, end)
            {
                writer = cache.start_entry(key, &head);
                entry_length = end - start;
            }
            guard.0 = None;
            let mut body = self.body(head, stream.as_ref().map(reader_of), Some(controller), url);
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
        reader: Option<ReadableStreamDefaultReader>,
        controller: Option<AbortController>,
        url: String,
    ) -> FetchBody {
        FetchBody {
            head,
            reader,
            controller,
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
    reader: Option<ReadableStreamDefaultReader>,
    controller: Option<AbortController>,
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
            return Err(Status::new(StatusCode::Cancelled, "request was aborted"));
        }
        let Some(reader) = &self.reader else {
            return Ok(None);
        };
        let read = JsFuture::from(reader.read());
        futures_util::pin_mut!(read);
        let idle_ms = self.idle.as_secs_f64() * 1000.0;
        let result = loop {
            let timer = self.timer.get_or_insert_with(|| sleep(self.idle));
            match select(&mut read, timer).await {
                Either::Left((result, _)) => break result,
                Either::Right(((), _)) => {
                    let quiet = now_ms() - self.last_progress;
                    if quiet >= idle_ms {
                        self.abort();
                        return Err(Status::new(
                            StatusCode::DeadlineExceeded,
                            format!("body of {}: nothing received for {:?}", self.url, self.idle),
                        ));
                    }
                    let left = Duration::from_secs_f64((idle_ms - quiet).max(1.0) / 1000.0);
                    self.timer = Some(sleep(left));
                }
            }
        };
        self.last_progress = now_ms();
        let result = match result {
            Ok(result) => result.unchecked_into::<ReadResult>(),
            Err(error) => {
                self.fail_cache_entry("the response failed");
                return Err(rejection(&error, &format!("body of {}", self.url)));
            }
        };
        if result.done().unwrap_or(true) {
            if let Some(writer) = self.cache_writer.take() {
                writer.close();
            }
            return Ok(None);
        }
        let value = result.value();
        let array = match value.dyn_into::<Uint8Array>() {
            Ok(array) => array,
            Err(v) => {
                self.fail_cache_entry("a body chunk was not bytes");
                return Err(Status::new(
                    StatusCode::DataLoss,
                    format!("body chunk of {} is not bytes: {v:?}", self.url),
                ));
            }
        };
        self.feed_cache_entry(&array).await;
        Ok(Some(BodyChunk::Js(array)))
    }

    /// Pushes `chunk` into the cache entry; when the Cache API is behind, waits until it
    /// catches up, or drops the entry after the idle timeout (the load goes on without it).
    async fn feed_cache_entry(&mut self, chunk: &Uint8Array) {
        let Some(writer) = &self.cache_writer else {
            return;
        };
        if u64::from(chunk.length()) > self.cache_missing {
            // More bytes than the range: never store what the load itself will refuse.
            self.fail_cache_entry("the body is longer than its range");
            return;
        }
        let pending = writer.push(chunk);
        self.cache_missing = self.cache_missing.saturating_sub(u64::from(chunk.length()));
        if self.cache_missing == 0
            && let Some(writer) = self.cache_writer.take()
        {
            writer.close();
        }
        let Ok(promise) = pending.dyn_into::<js_sys::Promise>() else {
            return;
        };
        let caught_up = JsFuture::from(promise);
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
        match (self.controller.take(), self.reader.take()) {
            // Aborting the request errors its stream (and every tee branch).
            (Some(controller), _) => controller.abort(),
            // A cached body has no request: cancel its stream, ignoring how that settles.
            (None, Some(reader)) => {
                let cancelled = JsFuture::from(reader.cancel());
                wasm_bindgen_futures::spawn_local(async move {
                    let _ = cancelled.await;
                });
            }
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
