//! The optional persistent cache (browser Cache API): data responses are kept per URL, file
//! version (the `If-Range` validator: strong ETag or Last-Modified) and byte range, so the next
//! page load that plans the same requests gets them without touching the network. Only the
//! small index read still goes out, which is what learns the file's current version: a changed
//! file has a new validator, so stale entries are never used.
//!
//! A response is stored while it streams: its body is `tee()`d, one branch to the load, one to
//! `cache.put`. A body that fails or is aborted fails its `put`, so partial bodies are never
//! stored. The Cache API refuses 206 responses, so entries are stored as 200s with the original
//! range and validators in `x-webdelegate-*` headers.

use crate::params::http::transport::ResponseHead;
use js_sys::Reflect;
use std::cell::RefCell;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, CacheStorage, Headers, ReadableStream, Response, ResponseInit};

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

    /// Stores `body` (a branch of a response being read) under `key` with `head`'s range and
    /// validators. Fire and forget: failures (quota, a body that errors) just leave no entry.
    pub fn store(&self, key: String, head: &ResponseHead, body: ReadableStream) {
        let headers = match Headers::new() {
            Ok(headers) => headers,
            Err(_) => return,
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
            return;
        };
        let name = self.name.clone();
        let cached = self.cache.borrow().clone();
        wasm_bindgen_futures::spawn_local(async move {
            let cache = match cached {
                Some(cache) => cache,
                None => match storage() {
                    Some(storage) => match JsFuture::from(storage.open(&name)).await {
                        Ok(cache) => cache.unchecked_into::<Cache>(),
                        Err(_) => return,
                    },
                    None => return,
                },
            };
            let _ = JsFuture::from(cache.put_with_str(&key, &response)).await;
        });
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
