//! The native transport: `ureq` (a small, blocking HTTP/1.1 client) on one worker thread per
//! request, so planning, retry and resume are tested natively against real servers at full
//! speed. The thread reads the body into staging buffers and hands them over a rendezvous
//! channel: at most one chunk waits per request (backpressure, bounded memory).
//!
//! Timeouts: connect, and an idle timeout on every socket read (`timeout_per_read`), so a
//! stalled server fails the attempt with `DEADLINE_EXCEEDED` instead of hanging. Abort: the
//! thread stops at its next read (at most one idle timeout later) and closes the connection.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::transport::staging::{StagingBuffer, StagingPool};
use crate::params::http::transport::{
    BodyChunk, HttpRequest, ResponseBody, ResponseHead, Transport,
};
use crate::send_sync::LocalBoxFuture;
use futures_channel::{mpsc, oneshot};
use futures_util::{SinkExt, StreamExt};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Settings of the native client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeTransportOptions {
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
    /// Longest wait for the response head, and for each read of the body.
    pub idle_timeout: Duration,
}

impl Default for NativeTransportOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// HTTP/1.1 over `ureq` (no TLS: tests talk to 127.0.0.1).
#[derive(Clone)]
pub struct NativeTransport {
    agent: ureq::Agent,
}

impl std::fmt::Debug for NativeTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeTransport").finish_non_exhaustive()
    }
}

impl NativeTransport {
    /// A client with `options`.
    pub fn new(options: NativeTransportOptions) -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(options.connect_timeout))
            .timeout_recv_response(Some(options.idle_timeout))
            .timeout_per_read(Some(options.idle_timeout))
            .max_idle_connections_per_host(16)
            .build();
        Self {
            agent: ureq::Agent::new_with_config(config),
        }
    }
}

impl Default for NativeTransport {
    fn default() -> Self {
        Self::new(NativeTransportOptions::default())
    }
}

type ChunkResult = StatusResult<StagingBuffer>;

impl Transport for NativeTransport {
    fn get(
        &self,
        request: HttpRequest,
        pool: &StagingPool,
    ) -> LocalBoxFuture<'_, StatusResult<Box<dyn ResponseBody>>> {
        let (head_sender, head) = oneshot::channel::<StatusResult<ResponseHead>>();
        let (chunk_sender, chunks) = mpsc::channel::<ChunkResult>(0);
        let aborted = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            agent: self.agent.clone(),
            request,
            pool: pool.clone(),
            aborted: aborted.clone(),
        };
        let spawned = std::thread::Builder::new()
            .name("webdelegate-http".into())
            .spawn(move || worker.run(head_sender, chunk_sender));
        Box::pin(async move {
            let guard = AbortOnDrop(aborted.clone());
            spawned.map_err(|error| {
                Status::new(
                    StatusCode::ResourceExhausted,
                    format!("cannot start an HTTP worker thread: {error}"),
                )
            })?;
            let head = head.await.map_err(|_| {
                Status::new(StatusCode::Internal, "HTTP worker ended without a response")
            })??;
            std::mem::forget(guard);
            Ok(Box::new(NativeBody {
                head,
                chunks,
                aborted,
            }) as Box<dyn ResponseBody>)
        })
    }
}

/// Tells the worker to stop if the request future is dropped before the head arrives.
struct AbortOnDrop(Arc<AtomicBool>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

struct Worker {
    agent: ureq::Agent,
    request: HttpRequest,
    pool: StagingPool,
    aborted: Arc<AtomicBool>,
}

impl Worker {
    fn run(
        self,
        head_sender: oneshot::Sender<StatusResult<ResponseHead>>,
        mut chunk_sender: mpsc::Sender<ChunkResult>,
    ) {
        let url = self.request.url.clone();
        let mut builder = self.agent.get(&url);
        if let Some(range) = self.request.range_header() {
            builder = builder.header("Range", range);
            if let Some(validator) = &self.request.if_range {
                builder = builder.header("If-Range", validator);
            }
        }
        let response = match builder.call() {
            Ok(response) => response,
            Err(error) => {
                let _ = head_sender.send(Err(request_error(&error, &url)));
                return;
            }
        };
        let head = ResponseHead {
            status: response.status().as_u16(),
            headers: response
                .headers()
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_ascii_lowercase(), value)
                })
                .collect(),
        };
        if head_sender.send(Ok(head)).is_err() {
            return;
        }
        let mut reader = response.into_body().into_reader();
        loop {
            if self.aborted.load(Ordering::Relaxed) {
                return;
            }
            let mut buffer = self.pool.take();
            let (filled, outcome) = fill(&mut reader, &mut buffer, &self.aborted);
            buffer.set_len(filled);
            if filled > 0 && pollster::block_on(chunk_sender.send(Ok(buffer))).is_err() {
                return;
            }
            match outcome {
                Fill::Full => {}
                Fill::End | Fill::Aborted => return,
                Fill::Failed(error) => {
                    let status = read_error(&error, &url);
                    let _ = pollster::block_on(chunk_sender.send(Err(status)));
                    return;
                }
            }
        }
    }
}

enum Fill {
    Full,
    End,
    Aborted,
    Failed(std::io::Error),
}

/// Reads until `buffer` is full, the body ends, an error occurs or the request is aborted.
fn fill(reader: &mut impl Read, buffer: &mut StagingBuffer, aborted: &AtomicBool) -> (usize, Fill) {
    let space = buffer.space();
    let mut filled = 0;
    while filled < space.len() {
        if aborted.load(Ordering::Relaxed) {
            return (filled, Fill::Aborted);
        }
        let Some(window) = space.get_mut(filled..) else {
            break;
        };
        match reader.read(window) {
            Ok(0) => return (filled, Fill::End),
            Ok(count) => filled += count,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return (filled, Fill::Failed(error)),
        }
    }
    (filled, Fill::Full)
}

fn request_error(error: &ureq::Error, url: &str) -> Status {
    let code = match error {
        ureq::Error::Timeout(_) => StatusCode::DeadlineExceeded,
        ureq::Error::BadUri(_) | ureq::Error::Http(_) => StatusCode::InvalidArgument,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            StatusCode::DeadlineExceeded
        }
        _ => StatusCode::Unavailable,
    };
    Status::new(code, format!("GET {url} failed: {error}"))
}

fn read_error(error: &std::io::Error, url: &str) -> Status {
    let inner = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ureq::Error>());
    let timed_out = error.kind() == std::io::ErrorKind::TimedOut
        || matches!(inner, Some(ureq::Error::Timeout(_)));
    let code = if timed_out {
        StatusCode::DeadlineExceeded
    } else {
        StatusCode::Unavailable
    };
    Status::new(code, format!("reading the body of {url} failed: {error}"))
}

struct NativeBody {
    head: ResponseHead,
    chunks: mpsc::Receiver<ChunkResult>,
    aborted: Arc<AtomicBool>,
}

impl ResponseBody for NativeBody {
    fn head(&self) -> &ResponseHead {
        &self.head
    }

    fn next_chunk(&mut self) -> LocalBoxFuture<'_, StatusResult<Option<BodyChunk>>> {
        Box::pin(async move {
            if self.aborted.load(Ordering::Relaxed) {
                return Err(Status::new(StatusCode::Cancelled, "request was aborted"));
            }
            match self.chunks.next().await {
                Some(Ok(buffer)) => Ok(Some(BodyChunk::Host(buffer))),
                Some(Err(status)) => Err(status),
                None => Ok(None),
            }
        })
    }

    fn abort(&mut self) {
        self.aborted.store(true, Ordering::Relaxed);
        self.chunks.close();
    }
}

impl Drop for NativeBody {
    fn drop(&mut self) {
        self.abort();
    }
}
