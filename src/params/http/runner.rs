//! Runs one planned request to completion: sends the ranged GET (with `If-Range`), checks the
//! response head, streams the body into the request's [`RequestSink`], and on a network error,
//! idle timeout or 5xx waits (exponential backoff) and **resumes from the first byte not yet
//! consumed** with a new Range request. Suspending the provider aborts the request at once;
//! after the resume it continues the same way, from the first byte not consumed. Attempts are bounded: a failure counts against the
//! retry budget unless the attempt had made real progress first.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::control::SuspendGate;
use crate::params::http::progress::LoadTracker;
use crate::params::http::response::{BodyLayout, Validators, check_data_response, is_retryable};
use crate::params::http::sink::{LoadTargets, RequestSink};
use crate::params::http::timer::sleep;
use crate::params::http::transport::{HttpRequest, ResponseBody, Transport};
use futures_util::future::{Either, select};
use std::time::Duration;

/// How failed attempts are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Failed attempts in a row (without progress) before the request fails.
    pub retries: u32,
    /// Wait before the first retry; doubled for each further one.
    pub backoff_base: Duration,
    /// Longest wait between attempts.
    pub backoff_max: Duration,
}

impl RetryPolicy {
    /// The wait before retry number `failures` (1-based).
    pub fn backoff(&self, failures: u32) -> Duration {
        let factor = 1u32
            .checked_shl(failures.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.backoff_base
            .saturating_mul(factor)
            .min(self.backoff_max)
    }
}

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
}

enum Attempt {
    Done,
    Suspended,
}

/// Runs the request `sink` was made for until every byte of `[sink.position(), end)` is consumed.
///
/// # Errors
/// The first non-retryable error; the last retryable one once the retries are spent (its
/// message says how many attempts were made); `DATA_LOSS` from digest checks.
pub async fn run_request(
    env: &RequestEnv<'_>,
    targets: &LoadTargets<'_>,
    sink: &mut RequestSink,
    end: u64,
) -> StatusResult<()> {
    let mut failures = 0u32;
    let mut attempts = 0u32;
    while !sink.is_complete() {
        if env.gate.is_suspended() {
            env.gate.opened().await;
        }
        let from = sink.position();
        attempts += 1;
        match attempt(env, targets, sink, from, end).await {
            Ok(Attempt::Done) | Ok(Attempt::Suspended) => {}
            Err(error) if is_retryable(&error) => {
                if sink.position() - from >= PROGRESS_RESETS_FAILURES {
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
    sink.finish()?;
    env.tracker.request_done();
    Ok(())
}

async fn attempt(
    env: &RequestEnv<'_>,
    targets: &LoadTargets<'_>,
    sink: &mut RequestSink,
    from: u64,
    end: u64,
) -> StatusResult<Attempt> {
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
    let mut skip = match layout {
        BodyLayout::Exact => 0,
        BodyLayout::WholeFile { skip } => {
            env.tracker.ranges_ignored(env.url);
            skip
        }
    };
    loop {
        // A chunk, or the gate closing first (then the request is dropped where it stands and
        // resumed later from the first byte not consumed).
        let next = unless_suspended(env.gate, body.next_chunk()).await;
        let Some(next) = next.transpose()? else {
            body.abort();
            return Ok(Attempt::Suspended);
        };
        let Some(chunk) = next else {
            break;
        };
        let length = chunk.len() as u64;
        let skipped = skip.min(length);
        skip -= skipped;
        let wanted = end - sink.position();
        let take = (length - skipped).min(wanted);
        if take > 0 {
            sink.consume(targets, &chunk, skipped as usize, take as usize)?;
        }
        env.tracker.chunk(length, take);
        let extra = length - skipped - take;
        if sink.is_complete() {
            return finish_body(body.as_mut(), layout, extra, env.url, end).await;
        }
    }
    Err(Status::new(
        StatusCode::Unavailable,
        format!(
            "response body for bytes [{from}, {end}) of {} ended after {} bytes",
            env.url,
            sink.position() - from
        ),
    ))
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
