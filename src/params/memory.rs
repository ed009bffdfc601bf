//! A provider that serves parameters held in host memory: for tests, for small programs built in
//! code, and as the writable scratch provider. Scopes are either read-only or writable.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::buffer::{BufferAllocator, ParameterBuffer};
use crate::params::provider::{
    LoadedSpan, ParameterInfo, ParameterProvider, ShapeOrder, Signal, SpanRequest, unique_keys,
};
use crate::params::span::check_span;
use crate::send_sync::LocalBoxFuture;
use std::sync::Mutex;

struct Entry {
    key: String,
    bytes: Vec<u8>,
    dtype: Option<String>,
    shape: Option<Vec<u64>>,
}

struct Scope {
    name: String,
    writable: bool,
    entries: Vec<Entry>,
}

/// Parameters in host memory, grouped in scopes.
#[derive(Default)]
pub struct MemoryProvider {
    scopes: Mutex<Vec<Scope>>,
}

/// Where a validated span lies: the entry's index in its scope.
struct Resolved {
    entry: usize,
}

impl MemoryProvider {
    /// An empty provider.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the scope `name`, writable or read-only, with no parameters.
    pub fn add_scope(&self, name: &str, writable: bool) {
        let mut scopes = self.lock();
        scopes.retain(|scope| scope.name != name);
        scopes.push(Scope {
            name: name.to_owned(),
            writable,
            entries: Vec::new(),
        });
    }

    /// Adds parameter `key` to `scope` (creating a read-only scope if needed). A key added twice
    /// keeps the first, as upstream's index lookup finds the first match.
    pub fn insert(&self, scope: &str, key: &str, bytes: Vec<u8>) {
        self.insert_described(scope, key, bytes, None, None);
    }

    /// Serves every tensor of `index` (a weights file's, e.g. a GGUF header's
    /// `GgufIndex::index`) in `scope`, each copied from `file` (the whole file's bytes) with
    /// its dtype and row-major shape.
    ///
    /// # Errors
    /// `OUT_OF_RANGE` for an entry past the end of `file`; `INVALID_ARGUMENT` for a splat
    /// entry (no bytes to copy).
    pub fn insert_index(
        &self,
        scope: &str,
        index: &crate::params::ParameterIndex,
        file: &[u8],
    ) -> StatusResult<()> {
        for entry in index.entries() {
            let crate::params::EntryStorage::Data { offset } = entry.storage else {
                return Err(Status::new(
                    StatusCode::InvalidArgument,
                    format!("{:?} is a splat, not bytes of the file", entry.key),
                ));
            };
            let range = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(entry.length).ok())
                .and_then(|(start, length)| Some(start..start.checked_add(length)?))
                .filter(|range| range.end <= file.len())
                .ok_or_else(|| {
                    Status::new(
                        StatusCode::OutOfRange,
                        format!("{:?} lies past the file's {} bytes", entry.key, file.len()),
                    )
                })?;
            let info = index.info(&entry.key);
            let shape = info
                .as_ref()
                .and_then(crate::params::ParameterInfo::row_major_shape);
            self.insert_described(
                scope,
                &entry.key,
                file[range].to_vec(),
                entry.dtype.clone(),
                shape,
            );
        }
        Ok(())
    }

    /// Adds parameter `key` with its dtype and shape (see [`MemoryProvider::insert`]).
    pub fn insert_described(
        &self,
        scope: &str,
        key: &str,
        bytes: Vec<u8>,
        dtype: Option<String>,
        shape: Option<Vec<u64>>,
    ) {
        let mut scopes = self.lock();
        let index = match scopes.iter().position(|s| s.name == scope) {
            Some(index) => index,
            None => {
                scopes.push(Scope {
                    name: scope.to_owned(),
                    writable: false,
                    entries: Vec::new(),
                });
                scopes.len() - 1
            }
        };
        scopes[index].entries.push(Entry {
            key: key.to_owned(),
            bytes,
            dtype,
            shape,
        });
    }

    /// A copy of parameter `key`'s bytes.
    pub fn get(&self, scope: &str, key: &str) -> Option<Vec<u8>> {
        let scopes = self.lock();
        let scope = scopes.iter().find(|s| s.name == scope)?;
        scope
            .entries
            .iter()
            .find(|e| e.key == key)
            .map(|e| e.bytes.clone())
    }

    /// The keys of `scope`, in insertion order (empty for an unknown scope).
    pub fn keys(&self, scope: &str) -> Vec<String> {
        self.lock()
            .iter()
            .find(|s| s.name == scope)
            .map_or_else(Vec::new, |s| {
                s.entries.iter().map(|e| e.key.clone()).collect()
            })
    }

    /// Whether `scope` exists and is writable.
    pub fn is_writable(&self, scope: &str) -> bool {
        self.lock().iter().any(|s| s.name == scope && s.writable)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Scope>> {
        self.scopes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Validates every request against `scope` (and `buffer_size`, when given) before any byte
    /// moves: key, then access, then bounds — upstream's order.
    fn resolve(
        scopes: &[Scope],
        scope: &str,
        requests: &[SpanRequest],
        needs_write: bool,
        buffer_size: Option<u64>,
    ) -> StatusResult<(usize, Vec<Resolved>)> {
        let scope_index = scopes.iter().position(|s| s.name == scope).ok_or_else(|| {
            Status::new(
                StatusCode::NotFound,
                format!("no parameter scope {scope:?}"),
            )
        })?;
        let found = &scopes[scope_index];
        let mut resolved = Vec::with_capacity(requests.len());
        for request in requests {
            let entry = found
                .entries
                .iter()
                .position(|e| e.key == request.key)
                .ok_or_else(|| {
                    Status::new(
                        StatusCode::NotFound,
                        format!("no parameter {:?} in scope {scope:?}", request.key),
                    )
                })?;
            if needs_write && !found.writable {
                return Err(Status::new(
                    StatusCode::PermissionDenied,
                    format!("scope {scope:?} is read-only"),
                ));
            }
            let what = format!("parameter {:?}", request.key);
            let span = request.span;
            check_span(
                &what,
                span.parameter_offset,
                span.length,
                found.entries[entry].bytes.len() as u64,
            )?;
            if let Some(size) = buffer_size {
                check_span("buffer", span.buffer_offset, span.length, size)?;
            }
            resolved.push(Resolved { entry });
        }
        Ok((scope_index, resolved))
    }
}

/// `start..start + length` in a host slice, already bounds-checked.
fn range(start: u64, length: u64) -> std::ops::Range<usize> {
    start as usize..(start + length) as usize
}

impl ParameterProvider for MemoryProvider {
    fn notify(&self, _signal: Signal) -> StatusResult<()> {
        // Nothing here can be dropped and re-created: the bytes *are* the source.
        Ok(())
    }

    fn query_support(&self, scope: &str) -> bool {
        self.lock().iter().any(|s| s.name == scope)
    }

    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
        let scopes = self.lock();
        let entry = scopes
            .iter()
            .find(|s| s.name == scope)?
            .entries
            .iter()
            .find(|e| e.key == key)?;
        Some(ParameterInfo {
            length: entry.bytes.len() as u64,
            dtype: entry.dtype.clone(),
            shape: entry.shape.clone(),
            shape_order: ShapeOrder::RowMajor,
        })
    }

    /// The scope's keys in insertion order, a key inserted twice once (the first is served).
    fn list_keys(&self, scope: &str) -> Option<Vec<String>> {
        let scopes = self.lock();
        let found = scopes.iter().find(|s| s.name == scope)?;
        Some(unique_keys(found.entries.iter().map(|e| e.key.as_str())))
    }

    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
        Box::pin(async move {
            let scopes = self.lock();
            let (scope_index, resolved) = Self::resolve(&scopes, scope, requests, false, None)?;
            let mut loaded = Vec::with_capacity(requests.len());
            for (request, found) in requests.iter().zip(resolved) {
                let span = request.span;
                let buffer = allocator.allocate(span.length, &request.key)?;
                let bytes = &scopes[scope_index].entries[found.entry].bytes;
                buffer.write(0, &bytes[range(span.parameter_offset, span.length)])?;
                loaded.push(LoadedSpan {
                    buffer,
                    offset: 0,
                    length: span.length,
                });
            }
            Ok(loaded)
        })
    }

    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            if requests.is_empty() {
                return Ok(());
            }
            let scopes = self.lock();
            let (scope_index, resolved) =
                Self::resolve(&scopes, scope, requests, false, Some(target.size()))?;
            for (request, found) in requests.iter().zip(resolved) {
                let span = request.span;
                let bytes = &scopes[scope_index].entries[found.entry].bytes;
                target.write(
                    span.buffer_offset,
                    &bytes[range(span.parameter_offset, span.length)],
                )?;
            }
            Ok(())
        })
    }

    fn scatter<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            if requests.is_empty() {
                return Ok(());
            }
            let entries = {
                let scopes = self.lock();
                let (_, resolved) =
                    Self::resolve(&scopes, scope, requests, true, Some(source.size()))?;
                resolved.into_iter().map(|r| r.entry).collect::<Vec<_>>()
            };
            // Read everything first (reads await; the lock is not held across them), then write.
            let mut chunks = Vec::with_capacity(requests.len());
            for request in requests {
                chunks.push(
                    source
                        .read(request.span.buffer_offset, request.span.length)
                        .await?,
                );
            }
            let mut scopes = self.lock();
            let scope = scopes.iter_mut().find(|s| s.name == scope).ok_or_else(|| {
                Status::new(
                    StatusCode::Aborted,
                    format!("scope {scope:?} vanished during scatter"),
                )
            })?;
            for ((request, entry), chunk) in requests.iter().zip(entries).zip(chunks) {
                let target = scope.entries.get_mut(entry).ok_or_else(|| {
                    Status::new(StatusCode::Aborted, "scope changed during scatter")
                })?;
                check_span(
                    "parameter",
                    request.span.parameter_offset,
                    chunk.len() as u64,
                    target.bytes.len() as u64,
                )?;
                target.bytes[range(request.span.parameter_offset, chunk.len() as u64)]
                    .copy_from_slice(&chunk);
            }
            Ok(())
        })
    }
}
