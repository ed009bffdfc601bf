//! Runs one planned request to completion: sends the ranged GET (with `If-Range`), checks the
//! response head, streams the body into the request's [`RequestSink`], and on a network error,
//! idle timeout or 5xx waits (exponential backoff) and **resumes from the first byte not yet
//! consumed** with a new Range request. Suspending the provider aborts the request at once;
//! after the resume it continues the same way, from the first byte not consumed. Attempts are
//! bounded: a failure counts against the retry budget unless the attempt had made real progress
//! first. A whole-file answer (200) to a data request takes over the load's requests not started
//! yet, or hands this one to the load's open whole-file stream
//! ([`crate::params::http::loading::queue`]).

use crate::browser::timer::sleep;
use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::loading::control::SuspendGate;
use crate::params::http::loading::group::SinkGroup;
use crate::params::http::loading::progress::LoadTracker;
use crate::params::http::loading::queue::{LoadQueue, OpenStream};
use crate::params::http::loading::sink::{LoadTargets, RequestSink};
use crate::params::http::planning::options::RetryPolicy;
use crate::params::http::transport::response::{
    BodyLayout, Validators, check_data_response, is_retryable,
};
use crate::params::http::transport::{HttpRequest, ResponseBody, Transport};
use futures_util::future::{Either, select};

/// An attempt that received at least this many new bytes resets the failure count.
const PROGRESS_RESETS_FAILURES: u64 = 64 << 10;

/// What every request of one load shares.
pub struct RequestEnv<'a> {
    /// Issues the GETs.
    pub transport: &'a dyn Transport,
    /// The file.
    pub url: &'a str,
    /// The file's version, captured when its index was read.
    pub validators: &'a Validators,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// The provider's suspend gate.
    pub gate: &'a SuspendGate,
    /// Progress and statistics.
    pub tracker: &'a LoadTracker<'a>,
    /// The load's requests not started yet, which a whole-file (200) answer takes over; `None`
    /// for reads outside a load (index reads).
    pub queue: Option<&'a LoadQueue<'a>>,
}

enum Attempt {
    Done,
    Suspended,
    HandedOver,
}

/// Runs the request `sink` was made for until every byte of it is consumed — and, when its
/// answer turns out to be the whole file, every request of the load that had not started yet
/// (see [`crate::params::http::loading::queue`]).
///
/// # Errors
/// The first non-retryable error; the last retryable one once the retries are spent (its
/// message says how many attempts were made); `DATA_LOSS` from digest checks.
pub async fn run_request(
    env: &RequestEnv<'_>,
    targets: &LoadTargets<'_>,
    sink: RequestSink,
) -> StatusResult<()> {
    let mut group = SinkGroup::new(sink);
    let mut failures = 0u32;
    let mut attempts = 0u32;
    loop {
        for _ in 0..group.settle()? {
            env.tracker.request_done();
        }
        let Some((position, _)) = group.span() else {
            return Ok(());
        };
        if env.gate.is_suspended() {
            env.gate.opened().await;
        }
        // Once the file ignores Range, a retry would download it again: join the load's
        // whole-file stream instead when it has not passed this request yet.
        if let Some(queue) = env.queue
            && !queue.ranges_supported()
        {
            match queue.hand_over(position, group.take()) {
                Ok(()) => return Ok(()),
                Err(sinks) => group.add(sinks),
            }
        }
        let before = group.consumed();
        attempts += 1;
        match attempt(env, targets, &mut group).await {
            Ok(Attempt::Done) | Ok(Attempt::Suspended) => {}
            Ok(Attempt::HandedOver) => return Ok(()),
            Err(error) if is_retryable(&error) => {
                if group.consumed() - before >= PROGRESS_RESETS_FAILURES {
                    failures = 0;
                }
                failures += 1;
                if failures > env.retry.retries {
                    return Err(Status::new(
                        error.code(),
                        format!(
                            "{} (gave up after {attempts} attempts, {failures} in a row \
                             without progress)",
                            error.message()
                        ),
                    ));
                }
                env.tracker.retried();
                sleep(env.retry.backoff(failures)).await;
            }
            Err(error) => return Err(error),
        }
    }
}

async fn attempt(
    env: &RequestEnv<'_>,
    targets: &LoadTargets<'_>,
    group: &mut SinkGroup,
) -> StatusResult<Attempt> {
    let Some((from, end)) = group.span() else {
        return Ok(Attempt::Done);
    };
    let request = HttpRequest {
        url: env.url.to_owned(),
        range: Some((from, end)),
        if_range: env.validators.if_range(),
    };
    env.tracker.request_sent();
    let _in_flight = env.gate.request();
    // The response head, or the gate closing first: a request still waiting for its head is
    // aborted too (dropping it aborts it), and sent again from the same byte on resume.
    let head = unless_suspended(env.gate, env.transport.get(request, &targets.pool)).await;
    let Some(mut body) = head.transpose()? else {
        return Ok(Attempt::Suspended);
    };
    let layout = check_data_response(body.head(), from, end, env.validators, env.url)?;
    let mut stream = None;
    let at = match layout {
        BodyLayout::Exact => from,
        BodyLayout::WholeFile { .. } => {
            env.tracker.ranges_ignored(env.url);
            if let Some(queue) = env.queue {
                queue.ranges_ignored();
                match queue.hand_over(from, group.take()) {
                    Ok(()) => {
                        body.abort();
                        return Ok(Attempt::HandedOver);
                    }
                    Err(sinks) => group.add(sinks),
                }
                group.add(queue.claim_rest());
                stream = Some(queue.open_stream());
            }
            0
        }
    };
    let window = Window { at, end, layout };
    let result = stream_body(env, targets, group, body.as_mut(), window, stream.as_ref()).await;
    if let Some(stream) = stream {
        // Sinks handed over while the last chunk was awaited: the group owes them their bytes.
        group.add(stream.close());
    }
    match result? {
        Streamed::Complete { extra } => {
            finish_body(body.as_mut(), layout, extra, env.url, end).await
        }
        Streamed::Suspended => {
            body.abort();
            Ok(Attempt::Suspended)
        }
        Streamed::HandedOver => {
            body.abort();
            Ok(Attempt::HandedOver)
        }
        Streamed::Ended { received } => Err(Status::new(
            StatusCode::Unavailable,
            format!(
                "response body for bytes [{from}, {end}) of {} ended after {received} bytes",
                env.url
            ),
        )),
    }
}

/// Where a body's bytes lie: its first byte is file byte `at`; a 206 (`Exact`) ends at `end`.
#[derive(Clone, Copy)]
struct Window {
    at: u64,
    end: u64,
    layout: BodyLayout,
}

enum Streamed {
    /// Every sink of the group is complete; `extra` bytes of the last chunk lay past `end`.
    Complete { extra: u64 },
    /// The gate closed.
    Suspended,
    /// A newer whole-file stream superseded this one and took its sinks.
    HandedOver,
    /// The body ended, after `received` bytes, with sinks still waiting.
    Ended { received: u64 },
}

/// Feeds the body to the group until the group is complete (taking in the sinks handed over to
/// `stream`, when this body is the load's whole-file stream).
async fn stream_body(
    env: &RequestEnv<'_>,
    targets: &LoadTargets<'_>,
    group: &mut SinkGroup,
    body: &mut dyn ResponseBody,
    window: Window,
    mut stream: Option<&OpenStream<'_, '_>>,
) -> StatusResult<Streamed> {
    let mut at = window.at;
    loop {
        // A chunk, or the gate closing first (then the request is dropped where it stands and
        // resumed later from the first byte not consumed).
        let next = unless_suspended(env.gate, body.next_chunk()).await;
        let Some(next) = next.transpose()? else {
            return Ok(Streamed::Suspended);
        };
        let Some(chunk) = next else {
            return Ok(Streamed::Ended {
                received: at - window.at,
            });
        };
        let length = chunk.len();
        let fed = group.feed(targets, &chunk, 0, at, length)?;
        env.tracker.chunk(length as u64, fed.consumed);
        for _ in 0..fed.completed {
            env.tracker.request_done();
        }
        let chunk_end = at.saturating_add(length as u64);
        if let Some(open) = stream {
            if open.is_current() {
                group.add(open.advance(chunk_end));
            } else if let Some(queue) = env.queue
                && let Some((position, _)) = group.span()
            {
                // Superseded by a stream that starts before our sinks: hand them over, or,
                // when it already passed them, finish them alone.
                match queue.hand_over(position, group.take()) {
                    Ok(()) => return Ok(Streamed::HandedOver),
                    Err(sinks) => group.add(sinks),
                }
                stream = None;
            }
        }
        if group.is_complete() {
            let extra = match window.layout {
                BodyLayout::Exact => chunk_end.saturating_sub(window.end),
                BodyLayout::WholeFile { .. } => 0,
            };
            return Ok(Streamed::Complete { extra });
        }
        at = chunk_end;
    }
}

/// `work`'s output, or `None` when the gate closes first (`work` is then dropped where it
/// stands, which aborts a request).
async fn unless_suspended<T>(gate: &SuspendGate, work: impl Future<Output = T>) -> Option<T> {
    let closed = gate.closed();
    futures_util::pin_mut!(work);
    futures_util::pin_mut!(closed);
    match select(work, closed).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}

/// After the last wanted byte: a 206 must end there; a whole-file 200 is cut short.
async fn finish_body(
    body: &mut dyn ResponseBody,
    layout: BodyLayout,
    extra: u64,
    url: &str,
    end: u64,
) -> StatusResult<Attempt> {
    if layout == BodyLayout::Exact {
        let more = if extra > 0 {
            extra
        } else {
            match body.next_chunk().await? {
                Some(chunk) => chunk.len() as u64,
                None => 0,
            }
        };
        if more > 0 {
            return Err(Status::new(
                StatusCode::DataLoss,
                format!("response for {url} ran {more}+ bytes past the requested end at {end}"),
            ));
        }
    }
    body.abort();
    Ok(Attempt::Done)
}
