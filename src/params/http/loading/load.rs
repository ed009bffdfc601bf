//! The transfer engine behind `load` and `gather`: spans are checked against the scope's index
//! (upstream's order: key, then access, then bounds), splat parameters are filled in place, file
//! bytes are planned into coalesced requests and run with bounded concurrency, and the unaligned
//! edges are written last. The first error (or an abort) drops every request still in flight,
//! which aborts it; nothing is reported loaded unless every byte arrived.

use crate::error::{Status, StatusCode};
use crate::params::http::loading::control::{AbortHandle, SuspendGate};
use crate::params::http::loading::progress::{LoadObserver, LoadStats, LoadTracker};
use crate::params::http::loading::queue::LoadQueue;
use crate::params::http::loading::runner::{RequestEnv, run_request};
use crate::params::http::loading::sink::{ExpectedDigest, LoadTargets, RangeDigest, RequestSink};
use crate::params::http::planning::options::{HttpProviderOptions, ScopeOptions};
use crate::params::http::planning::planner::{
    Piece, PlannedRequest, Wanted, plan, plan_whole_file,
};
use crate::params::http::transport::response::Validators;
use crate::params::http::transport::{BodyChunk, Transport};
use crate::params::{EntryStorage, ParameterIndex, SpanRequest, StatusResult, check_span};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::sync::atomic::{AtomicBool, Ordering};

/// A file the provider serves under a scope name, with its index and version.
pub struct RemoteScope {
    /// The scope name.
    pub name: String,
    /// The file's URL.
    pub url: String,
    /// Its parameters.
    pub index: ParameterIndex,
    /// Its version when the index was read.
    pub validators: Validators,
    /// Whether the server honours Range (turned off as soon as a data request gets the whole
    /// file).
    pub ranges_supported: AtomicBool,
    /// Digests and format.
    pub options: ScopeOptions,
}

/// Where a span's bytes come from.
enum Source<'i> {
    File { offset: u64 },
    Splat { pattern: &'i [u8], phase: usize },
}

/// A span checked against the index.
struct Resolved<'i> {
    key: &'i str,
    source: Source<'i>,
    length: u64,
    /// Where its bytes go, in order: consecutive pieces of the span.
    pieces: Vec<TargetPiece>,
    /// The span covers its whole parameter (so a per-parameter digest applies).
    whole: bool,
}

/// A stretch of a span in one destination.
#[derive(Clone, Copy, Debug)]
struct TargetPiece {
    target: usize,
    target_offset: u64,
    length: u64,
}

/// Where the spans of a load go.
#[derive(Clone, Copy, Debug)]
pub enum Placement<'p> {
    /// Every span to target 0 at its `buffer_offset`, checked against the target's size (in
    /// bytes): `gather`.
    Gather {
        /// The target's size.
        target_size: u64,
    },
    /// Span `i` cut into consecutive pieces of the given lengths (summing to its length), each
    /// at offset 0 of its own target, numbered across the spans in order: `load` (one piece per
    /// span, or several where a parameter is split across buffers).
    Pieces(&'p [Vec<u64>]),
}

/// What the engine needs from its provider.
pub struct Engine<'a> {
    /// Issues the GETs.
    pub transport: &'a dyn Transport,
    /// Settings.
    pub options: &'a HttpProviderOptions,
    /// The provider's suspend gate.
    pub gate: &'a SuspendGate,
    /// Progress and warnings.
    pub observer: Option<&'a dyn LoadObserver>,
}

/// Checks `requests` against `scope` and places them as `placement` says.
///
/// # Errors
/// `NOT_FOUND` for an unknown key; `OUT_OF_RANGE` for a span past its parameter or the target;
/// `INTERNAL` when the pieces of a span do not add up to it.
fn resolve<'i>(
    scope: &'i RemoteScope,
    requests: &'i [SpanRequest],
    placement: Placement<'_>,
) -> StatusResult<Vec<Resolved<'i>>> {
    let mut resolved = Vec::with_capacity(requests.len());
    let mut next_target = 0usize;
    for (index, request) in requests.iter().enumerate() {
        let entry = scope.index.get(&request.key).ok_or_else(|| {
            Status::new(
                StatusCode::NotFound,
                format!("no parameter {:?} in scope {:?}", request.key, scope.name),
            )
        })?;
        let span = request.span;
        let what = format!("parameter {:?} of scope {:?}", request.key, scope.name);
        check_span(&what, span.parameter_offset, span.length, entry.length)?;
        let source = match &entry.storage {
            EntryStorage::Data { offset } => Source::File {
                offset: offset.checked_add(span.parameter_offset).ok_or_else(|| {
                    Status::new(
                        StatusCode::OutOfRange,
                        format!("{what}: file offset overflows"),
                    )
                })?,
            },
            EntryStorage::Splat { pattern } if !pattern.is_empty() => Source::Splat {
                pattern,
                phase: (span.parameter_offset % pattern.len() as u64) as usize,
            },
            EntryStorage::Splat { .. } => {
                return Err(Status::new(
                    StatusCode::DataLoss,
                    format!("{what}: splat with an empty pattern"),
                ));
            }
        };
        let pieces = match placement {
            Placement::Gather { target_size } => {
                check_span(
                    "target buffer",
                    span.buffer_offset,
                    span.length,
                    target_size,
                )?;
                vec![TargetPiece {
                    target: 0,
                    target_offset: span.buffer_offset,
                    length: span.length,
                }]
            }
            Placement::Pieces(lengths) => {
                let lengths = lengths.get(index).map(Vec::as_slice).unwrap_or_default();
                let total = lengths.iter().try_fold(0u64, |sum, &l| sum.checked_add(l));
                if total != Some(span.length) || lengths.is_empty() {
                    return Err(Status::internal(format!(
                        "{what}: its pieces do not add up to the span's {} bytes",
                        span.length
                    )));
                }
                lengths
                    .iter()
                    .map(|&length| {
                        next_target += 1;
                        TargetPiece {
                            target: next_target - 1,
                            target_offset: 0,
                            length,
                        }
                    })
                    .collect()
            }
        };
        resolved.push(Resolved {
            key: &request.key,
            source,
            length: span.length,
            pieces,
            whole: span.parameter_offset == 0 && span.length == entry.length,
        });
    }
    Ok(resolved)
}

/// Moves the bytes of `requests` of `scope` into `targets`, and reports what went over the
/// wire whether the load succeeded, failed or was cancelled.
///
/// # Errors
/// (In the result.) As [`resolve`]; `CANCELLED` when `abort` fires; transport, HTTP, validation
/// and digest errors as the first request that failed saw them.
pub async fn transfer(
    engine: &Engine<'_>,
    scope: &RemoteScope,
    requests: &[SpanRequest],
    placement: Placement<'_>,
    targets: &LoadTargets<'_>,
    abort: Option<&AbortHandle>,
) -> (LoadStats, StatusResult<()>) {
    let tracker = LoadTracker::new(&scope.name, engine.observer, LoadStats::default());
    let result = async {
        let resolved = resolve(scope, requests, placement)?;
        let cancelled = || {
            Status::new(
                StatusCode::Cancelled,
                format!("load of scope {:?} was cancelled", scope.name),
            )
        };
        if abort.is_some_and(AbortHandle::is_aborted) {
            return Err(cancelled());
        }
        let work = run(engine, scope, &resolved, targets, &tracker);
        match abort {
            None => work.await,
            Some(handle) => {
                let aborted = handle.aborted();
                futures_util::pin_mut!(work);
                futures_util::pin_mut!(aborted);
                match futures_util::future::select(work, aborted).await {
                    futures_util::future::Either::Left((result, _)) => result,
                    futures_util::future::Either::Right(((), _)) => Err(cancelled()),
                }
            }
        }
    }
    .await;
    let mut stats = tracker.stats();
    for destination in &targets.destinations {
        let counts = destination.write_counts();
        stats.bytes_written_direct = stats.bytes_written_direct.saturating_add(counts.direct);
        stats.bytes_written_via_host = stats.bytes_written_via_host.saturating_add(counts.via_host);
    }
    (stats, result)
}

async fn run(
    engine: &Engine<'_>,
    scope: &RemoteScope,
    resolved: &[Resolved<'_>],
    targets: &LoadTargets<'_>,
    tracker: &LoadTracker<'_>,
) -> StatusResult<()> {
    for span in resolved {
        if let Source::Splat { pattern, phase } = span.source {
            fill_splat(targets, span, pattern, phase)?;
        }
    }
    let mut wanted = Vec::new();
    let mut digests = Vec::new();
    for span in resolved {
        if let Source::File { offset } = span.source {
            let expected = span
                .whole
                .then(|| {
                    scope
                        .options
                        .parameter_sha256
                        .iter()
                        .find(|(k, _)| k == span.key)
                })
                .flatten()
                .map(|(key, sha256)| ExpectedDigest {
                    sha256: *sha256,
                    what: format!("parameter {key:?} of {}", scope.url),
                });
            // resolve checked offset + length against the file's index.
            let mut file_offset = offset;
            for piece in &span.pieces {
                wanted.push(Wanted {
                    file_offset,
                    length: piece.length,
                    target: piece.target,
                    target_offset: piece.target_offset,
                    // Adjacent atomic pieces form one atomic block: one request holds them all.
                    atomic: expected.is_some(),
                });
                file_offset = file_offset.saturating_add(piece.length);
            }
            if let Some(expected) = expected {
                digests.push(RangeDigest {
                    start: offset,
                    end: offset.saturating_add(span.length),
                    expected,
                });
            }
        }
    }
    let size = scope.validators.size.or(scope.index.file_size());
    let file_digest = scope.options.sha256.map(|sha256| ExpectedDigest {
        sha256,
        what: format!("file {}", scope.url),
    });
    let planned = match (&file_digest, size) {
        (Some(_), Some(size)) => plan_whole_file(&wanted, size)?,
        (Some(_), None) => {
            return Err(Status::new(
                StatusCode::FailedPrecondition,
                format!(
                    "cannot check the SHA-256 of {}: its size is unknown",
                    scope.url
                ),
            ));
        }
        (None, _) => {
            let ranges = scope.ranges_supported.load(Ordering::Relaxed);
            plan(&wanted, engine.options.planner(ranges), size)?
        }
    };
    tracker.planned(LoadStats {
        requests_planned: planned.requests.len() as u64,
        bytes_needed: planned.bytes_needed,
        bytes_planned: planned.bytes_fetched,
        ..LoadStats::default()
    });
    let digests = &digests;
    let file_digest = &file_digest;
    let queue = LoadQueue::new(
        &planned.requests,
        Box::new(move |request| RequestSink::new(request, digests, file_digest.clone())),
        &scope.ranges_supported,
    );
    let env = RequestEnv {
        transport: engine.transport,
        url: &scope.url,
        validators: &scope.validators,
        retry: engine.options.retry,
        gate: engine.gate,
        tracker,
        queue: Some(&queue),
    };
    let mut running = FuturesUnordered::new();
    loop {
        while running.len() < engine.options.concurrency {
            let Some(sink) = queue.next_sink() else {
                break;
            };
            let env = &env;
            running.push(async move { run_request(env, targets, sink).await });
        }
        match running.next().await {
            None => break,
            Some(result) => result?,
        }
    }
    drop(running);
    let edges = std::mem::take(&mut *targets.edges.borrow_mut());
    edges.flush(&targets.destinations).await
}

/// Writes a splat parameter's span: its pattern repeated, from `phase`, through the same
/// aligned path as file bytes, piece by piece.
fn fill_splat(
    targets: &LoadTargets<'_>,
    span: &Resolved<'_>,
    pattern: &[u8],
    phase: usize,
) -> StatusResult<()> {
    let mut phase = phase;
    for piece in &span.pieces {
        let request = PlannedRequest {
            start: 0,
            end: piece.length,
            pieces: vec![Piece {
                wanted: 0,
                target: piece.target,
                target_offset: piece.target_offset,
                file_offset: 0,
                length: piece.length,
            }],
        };
        let mut sink = RequestSink::new(&request, &[], None);
        let mut produced = 0u64;
        while produced < piece.length {
            let mut staging = targets.pool.take();
            let step = (piece.length - produced).min(staging.capacity() as u64) as usize;
            if let Some(window) = staging.space().get_mut(..step) {
                for byte in window.iter_mut() {
                    *byte = pattern.get(phase).copied().unwrap_or(0);
                    phase = (phase + 1) % pattern.len();
                }
            }
            staging.set_len(step);
            sink.consume(targets, &BodyChunk::Host(staging), 0, step)?;
            produced += step as u64;
        }
        sink.finish()?;
    }
    Ok(())
}
