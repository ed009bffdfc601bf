//! The browser's `fetch`: one GET with an `AbortController`, its status and chosen headers, and
//! its body read chunk by chunk from a `ReadableStream` as [`JsChunk`]s (never copied into wasm
//! memory here). Works in windows and workers (the global `fetch`). Browser only.
//!
//! Bodies are read with a BYOB ("bring your own buffer") reader into 1 MiB `ArrayBuffer`s that
//! are reused, across reads and across responses (a small pool per thread), so a multi-GiB load
//! makes no new `ArrayBuffer` per chunk: the default reader's fresh chunk arrays are collected
//! lazily by V8 and piled up to hundreds of MiB during a 5 GiB load. A chunk read this way is
//! *lent*: its bytes are valid until the next read of the same body, so
//! whoever keeps a chunk longer copies it ([`JsChunk::owned`]). A stream that has no BYOB
//! reader (not a byte stream) is read with the default reader, whose chunks are owned.
//!
//! Failures are [`FetchError`]s whose [`FetchFailure`] says what kind they are. A `fetch`
//! rejection is a `TypeError` both for a network failure and for a response the browser refuses
//! to expose (CORS: the server, or one it redirected to, does not allow this page's origin); the
//! browser does not say which. To tell them apart, a rejected request is probed with a
//! `no-cors` `HEAD` of the same URL: if that one fails too, the network is at fault
//! ([`FetchFailure::Network`], worth a retry). If it gets an (opaque) answer, the server is
//! reachable, and a second, CORS-mode `HEAD` decides: refused, the server does not allow this
//! origin ([`FetchFailure::Blocked`], permanent: "CORS"); answered, the server does allow it, so
//! the first failure was something else that may be transient (a connection closed before the
//! response, a body the browser could not decode) and it stays `Network`, retried. On a
//! cross-origin-isolated page (COEP `require-corp`) the probe is refused as well unless the
//! server sends `Cross-Origin-Resource-Policy`, so there a CORS failure cannot be told from a
//! network one: it stays `Network` (retried) and its message says that CORS may be the cause.

use crate::browser::chunk::JsChunk;
use crate::send_sync::LocalBoxFuture;
use std::cell::RefCell;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, ReadableStream, ReadableStreamDefaultReader, Request, RequestInit,
    RequestMode, Response,
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

    /// `ReadableStreamBYOBReader`: reads into a view the caller supplies.
    type ByobReader;

    /// `reader.read(view)`: resolves to `{done, value}`, `value` a view of the bytes read over
    /// the (transferred) buffer of `view`.
    #[wasm_bindgen(method, js_name = read)]
    fn read_into(this: &ByobReader, view: &js_sys::Uint8Array) -> js_sys::Promise;

    /// `reader.cancel()`.
    #[wasm_bindgen(method)]
    fn cancel(this: &ByobReader) -> js_sys::Promise;
}

/// Bytes of one reusable body buffer: a BYOB read fills at most this much.
const BODY_BUFFER_BYTES: u32 = 1 << 20;
/// Body buffers kept for reuse per thread (one per body being read at a time, typically).
const POOLED_BODY_BUFFERS: usize = 8;

thread_local! {
    /// Body buffers not in use, for the next body to read into.
    static BODY_BUFFERS: RefCell<Vec<js_sys::ArrayBuffer>> = const { RefCell::new(Vec::new()) };
}

/// A body buffer from the pool, or a new one.
fn take_body_buffer() -> js_sys::ArrayBuffer {
    BODY_BUFFERS
        .with(|pool| pool.borrow_mut().pop())
        .unwrap_or_else(|| js_sys::ArrayBuffer::new(BODY_BUFFER_BYTES))
}

/// Gives a body buffer back to the pool (a detached one, of length 0, is dropped).
fn return_body_buffer(buffer: js_sys::ArrayBuffer) {
    if buffer.byte_length() != BODY_BUFFER_BYTES {
        return;
    }
    BODY_BUFFERS.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.len() < POOLED_BODY_BUFFERS {
            pool.push(buffer);
        }
    });
}

/// A request's cache mode (`RequestInit.cache`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheMode {
    /// The browser's HTTP cache as usual.
    #[default]
    Default,
    /// Bypass the HTTP cache entirely.
    NoStore,
    /// Always go to the network, then update the cache.
    Reload,
    /// Revalidate a cached response before using it.
    NoCache,
    /// Use any cached response, stale or not.
    ForceCache,
}

impl CacheMode {
    fn to_web(self) -> web_sys::RequestCache {
        match self {
            Self::Default => web_sys::RequestCache::Default,
            Self::NoStore => web_sys::RequestCache::NoStore,
            Self::Reload => web_sys::RequestCache::Reload,
            Self::NoCache => web_sys::RequestCache::NoCache,
            Self::ForceCache => web_sys::RequestCache::ForceCache,
        }
    }
}

/// What kind of failure a [`FetchError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchFailure {
    /// The request was aborted ([`FetchAbort::abort`]).
    Aborted,
    /// The network failed (the server could not be reached, the connection broke).
    Network,
    /// The server answered but the browser refused to expose the answer: CORS.
    Blocked,
    /// The request could not be made (a URL or header the browser refuses).
    Setup,
    /// The browser gave something that is not what the API promises.
    Unexpected,
}

/// A failed browser call: its kind and the browser's own words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchError {
    /// What kind of failure.
    pub failure: FetchFailure,
    /// The browser's message (`TypeError: Failed to fetch`, ...).
    pub message: String,
}

impl FetchError {
    fn new(failure: FetchFailure, message: impl Into<String>) -> Self {
        Self {
            failure,
            message: message.into(),
        }
    }

    /// A rejection: an `AbortError` is [`FetchFailure::Aborted`], anything else `failure`.
    fn rejected(value: &JsValue, failure: FetchFailure) -> Self {
        let message = js_message(value);
        let failure = if message.starts_with("AbortError") {
            FetchFailure::Aborted
        } else {
            failure
        };
        Self::new(failure, message)
    }
}

/// `name: message` of a JS error, or the value as text.
pub(crate) fn js_message(value: &JsValue) -> String {
    value
        .dyn_ref::<js_sys::Error>()
        .map(|e| format!("{}: {}", e.name(), e.message()))
        .or_else(|| value.as_string())
        .unwrap_or_else(|| format!("{value:?}"))
}

fn setup_error(value: &JsValue, what: &str) -> FetchError {
    FetchError::new(
        FetchFailure::Setup,
        format!("{what}: {}", js_message(value)),
    )
}

/// One GET to send.
#[derive(Clone, Debug)]
pub struct FetchRequest<'a> {
    /// Absolute URL (or one relative to the page).
    pub url: &'a str,
    /// Request headers (`Range`, `If-Range`, ...).
    pub headers: &'a [(&'a str, &'a str)],
    /// The cache mode.
    pub cache: CacheMode,
    /// Response headers to read (fetch exposes cross-origin only those the server lists in
    /// `Access-Control-Expose-Headers`); lower-case.
    pub read_headers: &'a [&'a str],
}

/// Aborts the request it belongs to (and errors its body stream). Cheap to clone.
#[derive(Clone, Debug)]
pub struct FetchAbort(AbortController);

impl FetchAbort {
    /// Aborts the request.
    pub fn abort(&self) {
        self.0.abort();
    }
}

/// A request on its way: the handle that aborts it and its response head, once in.
pub struct PendingFetch {
    /// Aborts the request.
    pub abort: FetchAbort,
    /// Resolves with the response once its head is in.
    pub response: LocalBoxFuture<'static, Result<FetchResponse, FetchError>>,
}

/// A response whose head is in.
#[derive(Debug)]
pub struct FetchResponse {
    /// HTTP status code.
    pub status: u16,
    /// The [`FetchRequest::read_headers`] the response has, as `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// The body, when there is one.
    pub body: Option<BodyReader>,
}

/// Sends `request`.
///
/// # Errors
/// [`FetchFailure::Setup`] when the browser refuses to build the request.
pub fn fetch(request: &FetchRequest<'_>) -> Result<PendingFetch, FetchError> {
    let controller = AbortController::new().map_err(|e| setup_error(&e, "AbortController"))?;
    let init = RequestInit::new();
    init.set_method("GET");
    init.set_signal(Some(&controller.signal()));
    init.set_cache(request.cache.to_web());
    let headers = Headers::new().map_err(|e| setup_error(&e, "Headers"))?;
    for (name, value) in request.headers {
        headers
            .set(name, value)
            .map_err(|e| setup_error(&e, &format!("{name} header")))?;
    }
    init.set_headers(&headers);
    let url = request.url.to_owned();
    let js_request = Request::new_with_str_and_init(&url, &init)
        .map_err(|e| setup_error(&e, &format!("request for {url}")))?;
    let read_headers: Vec<String> = request
        .read_headers
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    let sent = JsFuture::from(global_fetch(&js_request));
    let response = Box::pin(async move {
        let value = match sent.await {
            Ok(value) => value,
            Err(error) => {
                let failure = FetchError::rejected(&error, FetchFailure::Network);
                if failure.failure != FetchFailure::Network {
                    return Err(failure);
                }
                if probe(&url, RequestMode::NoCors).await {
                    if probe(&url, RequestMode::Cors).await {
                        return Err(FetchError::new(
                            FetchFailure::Network,
                            format!(
                                "{} (not CORS: the server answers this page; the connection \
                                 closed before the response, or the browser could not decode \
                                 it)",
                                failure.message
                            ),
                        ));
                    }
                    return Err(FetchError::new(FetchFailure::Blocked, failure.message));
                }
                if cross_origin_isolated() {
                    return Err(FetchError::new(
                        FetchFailure::Network,
                        format!(
                            "{} (a network failure, or CORS: on this cross-origin-isolated page \
                             the browser does not tell the two apart)",
                            failure.message
                        ),
                    ));
                }
                return Err(failure);
            }
        };
        let response: Response = value
            .dyn_into()
            .map_err(|v| FetchError::new(FetchFailure::Unexpected, format!("fetch gave {v:?}")))?;
        Ok(response_of(&response, &read_headers))
    });
    Ok(PendingFetch {
        abort: FetchAbort(controller),
        response,
    })
}

/// Whether the page (or worker) is cross-origin isolated (the global `crossOriginIsolated`).
pub fn cross_origin_isolated() -> bool {
    js_sys::Reflect::get(&js_sys::global(), &JsValue::from_str("crossOriginIsolated"))
        .is_ok_and(|value| value.is_truthy())
}

/// Whether a `HEAD` of `url` in `mode` gets an answer (nothing of it is read; a `no-cors` one
/// is opaque, a `cors` one is refused unless the server allows this origin).
async fn probe(url: &str, mode: RequestMode) -> bool {
    let init = RequestInit::new();
    init.set_method("HEAD");
    init.set_mode(mode);
    init.set_cache(web_sys::RequestCache::NoStore);
    let Ok(probe) = Request::new_with_str_and_init(url, &init) else {
        return false;
    };
    JsFuture::from(global_fetch(&probe)).await.is_ok()
}

/// The head and body of `response`, reading the headers named in `read_headers`.
pub(crate) fn response_of(response: &Response, read_headers: &[String]) -> FetchResponse {
    let js_headers = response.headers();
    FetchResponse {
        status: response.status(),
        headers: read_headers
            .iter()
            .filter_map(|name| {
                let value = js_headers.get(name).ok().flatten()?;
                Some((name.clone(), value))
            })
            .collect(),
        body: response.body().as_ref().map(BodyReader::of),
    }
}

/// A response body being read, chunk by chunk.
#[derive(Debug)]
pub struct BodyReader(Reader);

#[derive(Debug)]
enum Reader {
    /// A byte stream, read into a reused buffer: the chunks are lent.
    Byob {
        reader: ByobReader,
        /// The buffer the next read fills (`None` while a read holds it).
        buffer: std::rc::Rc<RefCell<Option<js_sys::ArrayBuffer>>>,
    },
    /// Any other stream: every chunk is a fresh array of its own.
    Default(ReadableStreamDefaultReader),
}

/// `stream.getReader({mode: 'byob'})`, or `None` when the stream refuses (it is not a byte
/// stream: `getReader` throws a `TypeError`).
fn byob_reader(stream: &ReadableStream) -> Option<ByobReader> {
    let options = js_sys::Object::new();
    js_sys::Reflect::set(&options, &"mode".into(), &"byob".into()).ok()?;
    let get_reader = js_sys::Reflect::get(stream, &"getReader".into())
        .ok()?
        .dyn_into::<js_sys::Function>()
        .ok()?;
    let reader = get_reader.call1(stream, &options).ok()?;
    Some(reader.unchecked_into())
}

impl std::fmt::Debug for ByobReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ByobReader")
    }
}

impl BodyReader {
    pub(crate) fn of(stream: &ReadableStream) -> Self {
        match byob_reader(stream) {
            Some(reader) => Self(Reader::Byob {
                reader,
                buffer: std::rc::Rc::new(RefCell::new(Some(take_body_buffer()))),
            }),
            None => Self(Reader::Default(
                stream
                    .get_reader()
                    .unchecked_into::<ReadableStreamDefaultReader>(),
            )),
        }
    }

    /// The next chunk, or `None` at the end of the body (the returned future holds no borrow).
    /// A lent chunk is valid until the next call (or the reader's drop).
    ///
    /// # Errors
    /// [`FetchFailure::Aborted`] after an abort, [`FetchFailure::Network`] when the connection
    /// failed, [`FetchFailure::Unexpected`] for a chunk that is not bytes.
    pub fn read(&self) -> LocalBoxFuture<'static, Result<Option<JsChunk>, FetchError>> {
        let (read, slot) = match &self.0 {
            Reader::Default(reader) => (JsFuture::from(reader.read()), None),
            Reader::Byob { reader, buffer } => {
                let into = buffer.borrow_mut().take().unwrap_or_else(take_body_buffer);
                let view = js_sys::Uint8Array::new(&into);
                (
                    JsFuture::from(reader.read_into(&view)),
                    Some(buffer.clone()),
                )
            }
        };
        Box::pin(async move {
            let result = read
                .await
                .map_err(|error| FetchError::rejected(&error, FetchFailure::Network))?
                .unchecked_into::<ReadResult>();
            let value = result.value();
            let array = value.dyn_into::<js_sys::Uint8Array>();
            if let (Some(slot), Ok(array)) = (&slot, &array) {
                // The view's buffer is the one the read was given, transferred: read into it next.
                *slot.borrow_mut() = Some(array.buffer());
            }
            if result.done().unwrap_or(true) {
                return Ok(None);
            }
            match array {
                Ok(array) if slot.is_some() => Ok(Some(JsChunk::lent(array))),
                Ok(array) => Ok(Some(JsChunk::from(array))),
                Err(v) => Err(FetchError::new(
                    FetchFailure::Unexpected,
                    format!("a body chunk is not bytes: {v:?}"),
                )),
            }
        })
    }

    /// Cancels the stream (for a body without a request to abort: a cached one), ignoring how
    /// that settles.
    pub fn cancel(&self) {
        let cancelled = JsFuture::from(match &self.0 {
            Reader::Default(reader) => reader.cancel(),
            Reader::Byob { reader, .. } => reader.cancel(),
        });
        wasm_bindgen_futures::spawn_local(async move {
            let _ = cancelled.await;
        });
    }
}

impl Drop for BodyReader {
    fn drop(&mut self) {
        if let Reader::Byob { buffer, .. } = &self.0
            && let Some(buffer) = buffer.borrow_mut().take()
        {
            return_body_buffer(buffer);
        }
    }
}
