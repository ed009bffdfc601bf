//! The Cache API as the persistent cache of ranged responses needs it: a named cache opened on
//! first use, entries looked up by key (their kept headers and body), entries written while a
//! response streams, and the whole cache deleted. Browser only. Which responses are kept, and
//! under which keys, is the caller's policy (the HTTP provider's fetch transport).
//!
//! A response is stored while it streams: each chunk the load reads is also pushed into a
//! [`CacheWriter`] (cache_writer.js), whose stream `cache.put` consumes. The writer queues at
//! most [`CACHE_WRITER_QUEUE_BYTES`]; past that [`CacheWriter::push`] hands back a wait, so the
//! page holds at most that much per response in flight (plus the chunk being read).
//! (`ReadableStream.tee()`, used before, let the slower branch queue up to a whole response.) A
//! writer that fails ([`CacheWriter::fail`]) fails its `put`: partial bodies are never stored.
//! The Cache API refuses 206 responses, so entries are stored as 200s with the kept headers
//! under `x-webdelegate-*` names.

use crate::browser::chunk::JsChunk;
use crate::browser::fetch::BodyReader;
use crate::send_sync::LocalBoxFuture;
use js_sys::Reflect;
use std::cell::RefCell;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, CacheStorage, Headers, ReadableStream, Response, ResponseInit};

/// Most bytes a cache entry's writer queues before the load waits for the Cache API.
pub const CACHE_WRITER_QUEUE_BYTES: f64 = 4.0 * 1024.0 * 1024.0;

#[wasm_bindgen(module = "/src/browser/cache_writer.js")]
extern "C" {
    /// The body of one cache entry, filled chunk by chunk with backpressure (cache_writer.js).
    type JsCacheWriter;

    #[wasm_bindgen(js_name = makeCacheWriter)]
    fn make_cache_writer(high_water_mark: f64) -> JsCacheWriter;

    #[wasm_bindgen(method, getter)]
    fn stream(this: &JsCacheWriter) -> ReadableStream;

    /// Queues `chunk`: `undefined`, or a promise to await when the Cache API is behind.
    #[wasm_bindgen(method)]
    fn push(this: &JsCacheWriter, chunk: &js_sys::Uint8Array) -> JsValue;

    /// Ends the entry: the response was read to its end.
    #[wasm_bindgen(method)]
    fn close(this: &JsCacheWriter);

    /// Fails the entry (it is not stored).
    #[wasm_bindgen(method)]
    fn fail(this: &JsCacheWriter, reason: &str);
}

/// The writer of one cache entry: the chunks pushed into it are the entry's body.
pub struct CacheWriter(JsCacheWriter);

impl std::fmt::Debug for CacheWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheWriter")
    }
}

impl CacheWriter {
    /// Queues `chunk` (shared with the caller when it is owned, a copy when it is lent: the
    /// queue outlives the next read). `None` when the writer has room; otherwise a future that
    /// resolves once the Cache API has caught up.
    pub fn push(&self, chunk: &JsChunk) -> Option<LocalBoxFuture<'static, ()>> {
        let pending = self.0.push(&chunk.owned());
        let promise = pending.dyn_into::<js_sys::Promise>().ok()?;
        let caught_up = JsFuture::from(promise);
        Some(Box::pin(async move {
            let _ = caught_up.await;
        }))
    }

    /// Ends the entry: its body is complete.
    pub fn close(&self) {
        self.0.close();
    }

    /// Fails the entry (it is not stored), saying why.
    pub fn fail(&self, reason: &str) {
        self.0.fail(reason);
    }
}

/// Headers kept with a stored entry (and given back by [`PersistentCache::lookup`]).
pub const KEPT_HEADERS: [&str; 3] = ["content-range", "etag", "last-modified"];
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
pub fn range_key(url: &str, validator: &str, start: u64, end: u64) -> String {
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

    /// The stored entry for `key`: its kept headers ([`KEPT_HEADERS`]) and its body, or `None`.
    pub async fn lookup(&self, key: &str) -> Option<(Vec<(String, String)>, BodyReader)> {
        let cache = self.open().await?;
        let found = JsFuture::from(cache.match_with_str(key)).await.ok()?;
        let response = found.dyn_into::<Response>().ok()?;
        let stored = response.headers();
        let mut headers = Vec::new();
        for name in KEPT_HEADERS {
            if let Ok(Some(value)) = stored.get(&format!("{PREFIX}{name}")) {
                headers.push((name.to_owned(), value));
            }
        }
        let body = response.body()?;
        Some((headers, BodyReader::of(&body)))
    }

    /// Starts the entry `key`, keeping those of `headers` named in [`KEPT_HEADERS`]: its bytes
    /// are the chunks pushed into the returned writer. `None` when the entry cannot be made. Fire
    /// and forget: failures (quota, a writer that fails) just leave no entry.
    pub fn start_entry(&self, key: String, headers: &[(String, String)]) -> Option<CacheWriter> {
        let writer = make_cache_writer(CACHE_WRITER_QUEUE_BYTES);
        self.store(key, headers, &writer)
            .then_some(CacheWriter(writer))
    }

    /// Stores `writer`'s stream under `key` with the kept `headers`; whether the store started.
    fn store(&self, key: String, headers: &[(String, String)], writer: &JsCacheWriter) -> bool {
        let kept = headers;
        let body = writer.stream();
        let headers = match Headers::new() {
            Ok(headers) => headers,
            Err(_) => return false,
        };
        for name in KEPT_HEADERS {
            let value = kept
                .iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                .map(|(_, value)| value);
            if let Some(value) = value {
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
        let writer: JsCacheWriter = AsRef::<JsValue>::as_ref(writer).clone().unchecked_into();
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
