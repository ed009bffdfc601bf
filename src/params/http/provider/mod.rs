//! [`HttpProvider`]: IREE's parameter provider over weights files on HTTP servers.
//!
//! A scope names one file (a URL). Adding a scope reads the file's index with small Range
//! requests and captures its version (ETag / Last-Modified / size); every later data request
//! carries `If-Range` with that version, so a file replaced mid-load fails the load (`ABORTED`,
//! "file changed mid-load") instead of mixing bytes of two versions. Scopes are read-only.
//!
//! The top layer of the HTTP provider: the provider itself, a remote file as a
//! [`crate::params::RangeRead`] for the index parsers ([`file`]), and reading a scope's index
//! through it ([`index_source`]).

pub(crate) mod file;
mod index_source;

use crate::error::{Status, StatusCode};
use crate::lifecycle::Released;
use crate::params::formats::Format;
use crate::params::formats::gguf::GgufIndex;
use crate::params::http::loading::control::{AbortHandle, SuspendGate};
use crate::params::http::loading::destination::Destination;
use crate::params::http::loading::load::{Engine, Placement, RemoteScope, transfer};
use crate::params::http::loading::progress::{LoadObserver, LoadRecord, LoadStats};
use crate::params::http::loading::sink::LoadTargets;
use crate::params::http::planning::options::{HttpProviderOptions, ScopeOptions};
use crate::params::http::provider::file::HttpFile;
use crate::params::http::transport::Transport;
use crate::params::http::transport::response::Validators;
use crate::params::http::transport::staging::StagingPool;
use crate::params::provider::unique_keys;
use crate::params::{
    BufferAllocator, BufferPlacement, LoadedPiece, LoadedSpan, ParameterBuffer, ParameterIndex,
    ParameterInfo, ParameterProvider, PiecePlan, Signal, SpanRequest, StatusResult, plan_pieces,
};
use crate::send_sync::LocalBoxFuture;
use std::cell::RefCell;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// Per-load controls beyond the trait's arguments.
#[derive(Clone, Debug, Default)]
pub struct LoadControl {
    /// Cancels the load: it then fails with `CANCELLED`, every request it had in flight is
    /// aborted, and the buffers it allocated are dropped.
    pub abort: Option<AbortHandle>,
}

/// Serves parameters of weights files on HTTP servers.
pub struct HttpProvider {
    transport: Arc<dyn Transport>,
    options: HttpProviderOptions,
    pool: StagingPool,
    gate: SuspendGate,
    scopes: Mutex<Vec<Arc<RemoteScope>>>,
    observer: Option<Arc<dyn LoadObserver>>,
    last_load: Mutex<Option<LoadRecord>>,
    total_stats: Mutex<LoadStats>,
}

impl HttpProvider {
    /// A provider fetching through `transport` with `options` (normalized).
    pub fn new(transport: Arc<dyn Transport>, options: HttpProviderOptions) -> Self {
        let options = options.normalized();
        Self {
            transport,
            options,
            // Each request holds at most a few chunks at once (one being filled, one queued, one
            // being written); keep that many idle for reuse.
            pool: StagingPool::new(options.chunk_size, options.concurrency * 3),
            gate: SuspendGate::default(),
            scopes: Mutex::new(Vec::new()),
            observer: None,
            last_load: Mutex::new(None),
            total_stats: Mutex::new(LoadStats::default()),
        }
    }

    /// The provider with `observer` receiving progress events and warnings.
    pub fn with_observer(mut self, observer: Arc<dyn LoadObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The settings in use.
    pub fn options(&self) -> &HttpProviderOptions {
        &self.options
    }

    /// Sends `signal` (what `notify` does) and reports what it released.
    ///
    /// - `Suspend`: the gate closes (no new request goes out, every request in flight is
    ///   aborted where it stands, keeping each byte already committed), and the staging pool is
    ///   dropped, buffers in use included as they come back. Reports the requests aborted and
    ///   the staging bytes dropped. A second `Suspend` finds nothing more to release.
    /// - `Resume`: the pool retains buffers again and the gate opens: every interrupted request
    ///   continues from its first byte not committed. Without a `Suspend` first, a no-op.
    /// - `LowMemory`: drops the idle staging buffers. The HTTP provider holds no other
    ///   re-creatable memory: the persistent cache lives in the browser's Cache API storage.
    pub fn signal(&self, signal: Signal) -> Released {
        let staging = (self.pool.idle_bytes() + self.pool.in_use_bytes()) as u64;
        match signal {
            Signal::Suspend => {
                if self.gate.is_suspended() {
                    return Released::default();
                }
                let aborted = self.gate.in_flight() as u64;
                self.gate.suspend();
                self.pool.set_retaining(false);
                Released {
                    host_bytes: staging,
                    requests_aborted: aborted,
                    ..Released::default()
                }
            }
            Signal::Resume => {
                self.pool.set_retaining(true);
                self.gate.resume();
                Released::default()
            }
            Signal::LowMemory => {
                let idle = self.pool.idle_bytes() as u64;
                self.pool.release();
                Released {
                    host_bytes: idle,
                    ..Released::default()
                }
            }
        }
    }

    /// Whether the provider is suspended.
    pub fn is_suspended(&self) -> bool {
        self.gate.is_suspended()
    }

    /// Requests in flight now.
    pub fn requests_in_flight(&self) -> usize {
        self.gate.in_flight()
    }

    /// The host staging pool (its counters bound the host memory a load holds).
    pub fn staging_pool(&self) -> &StagingPool {
        &self.pool
    }

    /// Statistics of the last load or gather that finished, successfully or not (a failed or
    /// cancelled one counts what it sent and received until it ended). Calls with no span, and
    /// `scatter`, are not loads.
    pub fn last_stats(&self) -> Option<LoadStats> {
        lock(&self.last_load).as_ref().map(|record| record.stats)
    }

    /// The last load or gather that finished: its statistics and how it ended.
    pub fn last_load(&self) -> Option<LoadRecord> {
        lock(&self.last_load).clone()
    }

    /// Statistics of every load and gather this provider finished (successfully or not),
    /// summed (a backend may fetch one program's parameters in several loads).
    pub fn total_stats(&self) -> LoadStats {
        *lock(&self.total_stats)
    }

    /// Serves the file at `url` as `scope` (replacing a scope of that name), reading its index
    /// in the format `options.format` names or the one detected.
    ///
    /// # Errors
    /// The HTTP status of the first read (`NOT_FOUND` for 404, ...); the index parser's errors.
    pub async fn add_scope(
        &self,
        scope: &str,
        url: &str,
        options: ScopeOptions,
    ) -> StatusResult<()> {
        let file = self.open(url).await?;
        let (format, index) = index_source::read_index(&file, options.format.as_deref()).await?;
        let options = ScopeOptions {
            format: Some(format.to_string()),
            ..options
        };
        self.insert(scope, &file, index, options);
        Ok(())
    }

    /// Serves the file at `url` as `scope` with an index the caller already has (read from a
    /// manifest, say); the file is still opened to capture its version.
    ///
    /// # Errors
    /// The HTTP status of the first read.
    pub async fn add_scope_with_index(
        &self,
        scope: &str,
        url: &str,
        index: ParameterIndex,
        options: ScopeOptions,
    ) -> StatusResult<()> {
        let file = self.open(url).await?;
        self.insert(scope, &file, index, options);
        Ok(())
    }

    /// Serves the GGUF file at `url` as `scope`, like [`HttpProvider::add_scope`], and returns
    /// its header with every metadata value kept (a model builder's hyper-parameters and
    /// vocabulary), read once with the same requests that read the index.
    ///
    /// # Errors
    /// As [`HttpProvider::add_scope`]; the GGUF parser's errors for a file that is not GGUF.
    pub async fn add_gguf_scope(
        &self,
        scope: &str,
        url: &str,
        options: ScopeOptions,
    ) -> StatusResult<GgufIndex> {
        let file = self.open(url).await?;
        let header = GgufIndex::parse(&file).await?;
        let options = ScopeOptions {
            format: Some(Format::Gguf.to_string()),
            ..options
        };
        self.insert(scope, &file, header.index().clone(), options);
        Ok(header)
    }

    /// Stops serving `scope`; whether it was served.
    pub fn remove_scope(&self, scope: &str) -> bool {
        let mut scopes = lock(&self.scopes);
        let before = scopes.len();
        scopes.retain(|s| s.name != scope);
        scopes.len() != before
    }

    /// The index of `scope`, if served.
    pub fn index(&self, scope: &str) -> Option<ParameterIndex> {
        self.scope(scope).map(|s| s.index.clone())
    }

    /// The version of `scope`'s file captured when its index was read.
    pub fn validators(&self, scope: &str) -> Option<Validators> {
        self.scope(scope).map(|s| s.validators.clone())
    }

    async fn open(&self, url: &str) -> StatusResult<HttpFile<'_>> {
        HttpFile::open(
            &*self.transport,
            url,
            self.options.index_prefetch,
            self.options.retry,
            self.pool.clone(),
        )
        .await
    }

    fn insert(
        &self,
        scope: &str,
        file: &HttpFile<'_>,
        index: ParameterIndex,
        options: ScopeOptions,
    ) {
        if !file.validators().can_detect_changes()
            && let Some(observer) = &self.observer
        {
            observer.warning(&format!(
                "{} sends neither ETag nor Last-Modified: a change of the file mid-load can only \
                 be detected by its size",
                file.url()
            ));
        }
        let remote = Arc::new(RemoteScope {
            name: scope.to_owned(),
            url: file.url().to_owned(),
            validators: Validators {
                size: file.validators().size.or(index.file_size()),
                ..file.validators().clone()
            },
            index,
            ranges_supported: AtomicBool::new(file.ranges_supported()),
            options,
        });
        let mut scopes = lock(&self.scopes);
        scopes.retain(|s| s.name != scope);
        scopes.push(remote);
    }

    fn scope(&self, scope: &str) -> Option<Arc<RemoteScope>> {
        lock(&self.scopes).iter().find(|s| s.name == scope).cloned()
    }

    fn require(&self, scope: &str) -> StatusResult<Arc<RemoteScope>> {
        self.scope(scope).ok_or_else(|| {
            Status::new(
                StatusCode::NotFound,
                format!("no parameter scope {scope:?}"),
            )
        })
    }

    fn engine(&self) -> Engine<'_> {
        Engine {
            transport: &*self.transport,
            options: &self.options,
            gate: &self.gate,
            observer: self.observer.as_deref(),
        }
    }

    /// [`ParameterProvider::load`] with per-load controls: one buffer per span.
    ///
    /// # Errors
    /// As [`ParameterProvider::load`]; `CANCELLED` when `control.abort` fires;
    /// `RESOURCE_EXHAUSTED`, before anything is fetched, for a span larger than the allocator's
    /// largest buffer.
    pub async fn load_with(
        &self,
        allocator: &dyn BufferAllocator,
        scope: &str,
        requests: &[SpanRequest],
        control: &LoadControl,
    ) -> StatusResult<Vec<LoadedSpan>> {
        let loaded = self
            .load_pieces_with(allocator, scope, requests, BufferPlacement::SINGLE, control)
            .await?;
        loaded
            .into_iter()
            .map(|pieces| match <[LoadedPiece; 1]>::try_from(pieces) {
                Ok([piece]) => Ok(piece.span),
                Err(_) => Err(Status::internal("a single-buffer load returned pieces")),
            })
            .collect()
    }

    /// Loads `requests` of `scope` into new buffers of `allocator`, each span in as many
    /// buffers as `placement` needs (cut at row boundaries, [`crate::params::plan_pieces`]):
    /// per span, its pieces in order. Everything is checked and allocated before the first byte
    /// is fetched; a failure or an abort drops every buffer the load made.
    ///
    /// # Errors
    /// As [`HttpProvider::load_with`]; `RESOURCE_EXHAUSTED` when a span cannot be placed or the
    /// allocator runs out of memory.
    pub async fn load_pieces_with(
        &self,
        allocator: &dyn BufferAllocator,
        scope: &str,
        requests: &[SpanRequest],
        placement: BufferPlacement,
        control: &LoadControl,
    ) -> StatusResult<Vec<Vec<LoadedPiece>>> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let (stats, result) = self
            .load_spans(allocator, scope, requests, placement, control)
            .await;
        self.finished(stats, result.as_ref().map(|_| ()).map_err(Clone::clone));
        result
    }

    async fn load_spans(
        &self,
        allocator: &dyn BufferAllocator,
        scope: &str,
        requests: &[SpanRequest],
        placement: BufferPlacement,
        control: &LoadControl,
    ) -> (LoadStats, StatusResult<Vec<Vec<LoadedPiece>>>) {
        let prepared = self
            .prepare_load(allocator, scope, requests, placement)
            .await;
        let (remote, destinations, plans) = match prepared {
            Ok(prepared) => prepared,
            Err(error) => return (LoadStats::default(), Err(error)),
        };
        let lengths: Vec<Vec<u64>> = plans
            .iter()
            .map(|pieces| pieces.iter().map(|p| p.length).collect())
            .collect();
        let targets = LoadTargets {
            destinations,
            edges: RefCell::default(),
            pool: self.pool.clone(),
        };
        let (stats, result) = transfer(
            &self.engine(),
            &remote,
            requests,
            Placement::Pieces(&lengths),
            &targets,
            control.abort.as_ref(),
        )
        .await;
        let loaded = result.and_then(|()| {
            let mut buffers = targets.destinations.iter().map(Destination::shared_buffer);
            plans
                .into_iter()
                .map(|pieces| {
                    pieces
                        .into_iter()
                        .map(|plan| {
                            let buffer = buffers
                                .next()
                                .flatten()
                                .ok_or_else(|| Status::internal("a loaded piece has no buffer"))?;
                            Ok(LoadedPiece {
                                span: LoadedSpan {
                                    buffer: buffer.clone(),
                                    offset: 0,
                                    length: plan.length,
                                },
                                parameter_offset: plan.parameter_offset,
                                rows: plan.rows,
                            })
                        })
                        .collect()
                })
                .collect()
        });
        (stats, loaded)
    }

    /// Checks every span and plans its pieces, then allocates one destination per piece.
    async fn prepare_load(
        &self,
        allocator: &dyn BufferAllocator,
        scope: &str,
        requests: &[SpanRequest],
        placement: BufferPlacement,
    ) -> StatusResult<(
        Arc<RemoteScope>,
        Vec<Destination<'static>>,
        Vec<Vec<PiecePlan>>,
    )> {
        let remote = self.require(scope)?;
        // Check and plan every span before allocating anything.
        let mut plans = Vec::with_capacity(requests.len());
        let mut sizes = Vec::new();
        for request in requests {
            let entry = remote.index.require(&request.key)?;
            let what = format!("parameter {:?} of scope {scope:?}", request.key);
            crate::params::check_span(
                &what,
                request.span.parameter_offset,
                request.span.length,
                entry.length,
            )?;
            let info = remote
                .index
                .info(&request.key)
                .ok_or_else(|| Status::internal(format!("{what}: no index entry")))?;
            let pieces = plan_pieces(
                &what,
                &info,
                request.span.parameter_offset,
                request.span.length,
                placement,
                allocator.max_buffer_size(),
            )?;
            for piece in &pieces {
                // GPU writes are whole 4-byte words: round the buffer up; the padding is ours
                // (plan_pieces kept the rounded size within the limit).
                let size = piece.length.checked_next_multiple_of(4).ok_or_else(|| {
                    Status::resource_exhausted(format!("{what}: span too large to allocate"))
                })?;
                let label = match (pieces.len(), piece.rows) {
                    (1, _) | (_, None) => request.key.clone(),
                    (_, Some((first, end))) => format!("{} rows {first}..{end}", request.key),
                };
                sizes.push((size, label));
            }
            plans.push(pieces);
        }
        let buffers = allocator.allocate_all(&sizes).await?;
        let destinations = buffers
            .into_iter()
            .zip(plans.iter().flatten())
            .map(|(buffer, piece)| Destination::shared(buffer, Some(piece.length)))
            .collect();
        Ok((remote, destinations, plans))
    }

    /// [`ParameterProvider::gather`] with per-load controls.
    ///
    /// # Errors
    /// As [`ParameterProvider::gather`]; `CANCELLED` when `control.abort` fires (the target may
    /// then hold some of the bytes).
    pub async fn gather_with(
        &self,
        scope: &str,
        target: &dyn ParameterBuffer,
        requests: &[SpanRequest],
        control: &LoadControl,
    ) -> StatusResult<()> {
        if requests.is_empty() {
            return Ok(());
        }
        let (stats, result) = match self.require(scope) {
            Ok(remote) => {
                let targets = LoadTargets {
                    destinations: vec![Destination::borrowed(target)],
                    edges: RefCell::default(),
                    pool: self.pool.clone(),
                };
                transfer(
                    &self.engine(),
                    &remote,
                    requests,
                    Placement::Gather {
                        target_size: target.size(),
                    },
                    &targets,
                    control.abort.as_ref(),
                )
                .await
            }
            Err(error) => (LoadStats::default(), Err(error)),
        };
        self.finished(stats, result.clone());
        result
    }

    /// Records a finished load or gather.
    fn finished(&self, stats: LoadStats, outcome: StatusResult<()>) {
        *lock(&self.last_load) = Some(LoadRecord { stats, outcome });
        let mut total = lock(&self.total_stats);
        *total = total.plus(&stats);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Every critical section is a single assignment or retain: a poisoned lock is consistent.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ParameterProvider for HttpProvider {
    fn notify(&self, signal: Signal) -> StatusResult<()> {
        self.signal(signal);
        Ok(())
    }

    fn query_support(&self, scope: &str) -> bool {
        self.scope(scope).is_some()
    }

    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
        self.scope(scope)?.index.info(key)
    }

    /// The index's keys in file order, a repeated key once (its first entry, which lookups find).
    fn list_keys(&self, scope: &str) -> Option<Vec<String>> {
        let remote = self.scope(scope)?;
        Some(unique_keys(
            remote.index.entries().iter().map(|e| e.key.as_str()),
        ))
    }

    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
        Box::pin(async move {
            self.load_with(allocator, scope, requests, &LoadControl::default())
                .await
        })
    }

    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            self.gather_with(scope, target, requests, &LoadControl::default())
                .await
        })
    }

    fn scatter<'a>(
        &'a self,
        _source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            if requests.is_empty() {
                return Ok(());
            }
            // Upstream's order: the key first, then access.
            let remote = self.require(scope)?;
            for request in requests {
                remote.index.require(&request.key)?;
            }
            Err(Status::new(
                StatusCode::PermissionDenied,
                format!("scope {scope:?} is served over HTTP and is read-only"),
            ))
        })
    }
}
