//! The optional persistent cache (browser Cache API): data responses are kept per URL, file
//! version (the `If-Range` validator: strong ETag or Last-Modified) and byte range, so the next
//! page load that plans the same requests gets them without touching the network. Only the
//! small index read still goes out, which is what learns the file's current version: a changed
//! file has a new validator, so stale entries are never used. Without revalidation
//! (`FetchTransport::without_revalidation`, JS `persistentCacheRevalidate: false`) the index read
//! is kept too, so a second page load sends nothing at all; a file changed on the server is then
//! not seen until the cache is cleared, and what is served stays one version (the cached index's
//! validator keys every cached range).
//!
//! An entry is closed as soon as its range's bytes have been read (an index read stops reading
//! there), and dropped if the body brings more than its range.
//!
//! A response is stored while it streams: each chunk the load reads is also pushed into a
//! [`CacheWriter`], whose stream `cache.put` consumes. The writer queues at most
//! [`CACHE_WRITER_QUEUE_BYTES`]; past that the load waits for the Cache API to catch up (for at
//! most its idle timeout, after which the entry is dropped and the load goes on), so the page
//! holds at most that much per response in flight (plus the chunk being read) on top of what a
//! load without the cache holds. (`ReadableStream.tee()`, used before, let the slower branch
//! queue up to a whole response, up to `maxRequestSize` per request in flight.) A body that fails
//! or is aborted fails its writer and so its `put`: partial bodies are never stored. The Cache
//! API refuses 206 responses, so entries are stored as 200s with the original range and
//! validators in `x-webdelegate-*` headers.

use crate::params::http::transport::ResponseHead;
use js_sys::Reflect;
use std::cell::RefCell;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, CacheStorage, Headers, ReadableStream, Response, ResponseInit};

/// Most bytes a cache entry's writer queues before the load waits for the Cache API.
pub const CACHE_WRITER_QUEUE_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

#[wasm_bindgen(module = "/src/params/http/cache_writer.js")]
extern "C" {
    /// The body of one cache entry, filled chunk by chunk with backpressure (cache_writer.js).
    pub type CacheWriter;

    #[wasm_bindgen(js_name = makeCacheWriter)]
    fn make_cache_writer(high_water_mark: f64) -> CacheWriter;

    #[wasm_bindgen(method, getter)]
    fn stream(this: &CacheWriter) -> ReadableStream;

    /// Queues `chunk`: `undefined`, or a promise to await when the Cache API is behind.
    #[wasm_bindgen(method)]
    pub fn push(this: &CacheWriter, chunk: &js_sys::Uint8Array) -> JsValue;

    /// Ends the entry: the response was read to its end.
    #[wasm_bindgen(method)]
    pub fn close(this: &CacheWriter);

    /// Fails the entry (it is not stored).
    #[wasm_bindgen(method)]
    pub fn fail(this: &CacheWriter, reason: &str);
}

impl std::fmt::Debug for CacheWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheWriter")
    }
}

/// Headers kept with a stored range (and given back as the cached response's head).
const KEPT: [&str; 3] = ["content-range", "etag", "last-modified"];
const PREFIX: &str = "x-webdelegate-";

/// A named Cache API cache, opened on first use.
pub struct PersistentCache {
    name: String,
    cache: RefCell<Option<Cache>>,
}

impl std::fmt::Debug for PersistentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentCache")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

fn storage() -> Option<CacheStorage> {
    Reflect::get(&js_sys::global(), &JsValue::from_str("caches"))
        .ok()
        .and_then(|value| value.dyn_into::<CacheStorage>().ok())
}

/// The cache key of `[start, end)` of version `validator` of `url` (a URL of its own, so it
/// never collides with a real request).
pub fn data_key(url: &str, validator: &str, start: u64, end: u64) -> String {
    let encode = |text: &str| String::from(js_sys::encode_uri_component(text));
    format!(
        "https://webdelegate.invalid/range/v1?url={}&version={}&bytes={start}-{end}",
        encode(url),
        encode(validator)
    )
}

impl PersistentCache {
    /// The cache named `name` (not opened yet).
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            cache: RefCell::new(None),
        }
    }

    async fn open(&self) -> Option<Cache> {
        if let Some(cache) = self.cache.borrow().clone() {
            return Some(cache);
        }
        let opened = JsFuture::from(storage()?.open(&self.name)).await.ok()?;
        let cache = opened.dyn_into::<Cache>().ok()?;
        *self.cache.borrow_mut() = Some(cache.clone());
        Some(cache)
    }

    /// The stored response for `key`: its head (as the original 206) and body, or `None`.
    pub async fn lookup(&self, key: &str) -> Option<(ResponseHead, ReadableStream)> {
        let cache = self.open().await?;
        let found = JsFuture::from(cache.match_with_str(key)).await.ok()?;
        let response = found.dyn_into::<Response>().ok()?;
        let stored = response.headers();
        let mut headers = Vec::new();
        for name in KEPT {
            if let Ok(Some(value)) = stored.get(&format!("{PREFIX}{name}")) {
                headers.push((name.to_owned(), value));
            }
        }
        let body = response.body()?;
        Some((
            ResponseHead {
                status: 206,
                headers,
            },
            body,
        ))
    }

    /// Starts the entry `key` for a response with `head`'s range and validators: its bytes are
    /// the chunks pushed into the returned writer. `None` when the entry cannot be made. Fire and
    /// forget: failures (quota, a writer that fails) just leave no entry.
    pub fn start_entry(&self, key: String, head: &ResponseHead) -> Option<CacheWriter> {
        let writer = make_cache_writer(CACHE_WRITER_QUEUE_BYTES);
        self.store(key, head, &writer).then_some(writer)
    }

    /// Stores `writer`'s stream under `key` with `head`'s range and validators; whether the
    /// store started.
    fn store(&self, key: String, head: &ResponseHead, writer: &CacheWriter) -> bool {
        let body = writer.stream();
        let headers = match Headers::new() {
            Ok(headers) => headers,
            Err(_) => return false,
        };
        for name in KEPT {
            if let Some(value) = head.header(name) {
                let _ = headers.set(&format!("{PREFIX}{name}"), value);
            }
        }
        let init = ResponseInit::new();
        init.set_status(200);
        init.set_headers_headers(&headers);
        let Ok(response) = Response::new_with_opt_readable_stream_and_init(Some(&body), &init)
        else {
            return false;
        };
        let name = self.name.clone();
        let cached = self.cache.borrow().clone();
        let Some(storage) = storage() else {
            return false;
        };
        let writer: CacheWriter = AsRef::<JsValue>::as_ref(writer).clone().unchecked_into();
        wasm_bindgen_futures::spawn_local(async move {
            let cache = match cached {
                Some(cache) => cache,
                None => match JsFuture::from(storage.open(&name)).await {
                    Ok(cache) => cache.unchecked_into::<Cache>(),
                    Err(_) => {
                        // Nobody will read the entry: release the writer (its pushes stop
                        // waiting and do nothing).
                        writer.fail("the cache could not be opened");
                        return;
                    }
                },
            };
            let _ = JsFuture::from(cache.put_with_str(&key, &response)).await;
        });
        true
    }

    /// Deletes the whole cache.
    pub async fn clear(&self) -> bool {
        self.cache.borrow_mut().take();
        match storage() {
            Some(storage) => JsFuture::from(storage.delete(&self.name))
                .await
                .ok()
                .and_then(|deleted| deleted.as_bool())
                .unwrap_or(false),
            None => false,
        }
    }
}
