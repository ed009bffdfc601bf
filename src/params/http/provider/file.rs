//! A weights file on an HTTP server, read with small Range requests: what index parsers see
//! ([`RangeRead`]). Opening it reads a prefix (one request, which holds the whole header of
//! most files) and captures the file's validators (ETag, Last-Modified, size) and whether the
//! server honours Range; later reads outside the prefix go through the same checked, retried
//! path as parameter data, with `If-Range`, so an index is never read across two versions.

use crate::browser::timer::sleep;
use crate::error::{Status, StatusCode};
use crate::params::http::loading::control::SuspendGate;
use crate::params::http::loading::destination::Destination;
use crate::params::http::loading::progress::{LoadStats, LoadTracker};
use crate::params::http::loading::runner::{RequestEnv, run_request};
use crate::params::http::loading::sink::{LoadTargets, RequestSink};
use crate::params::http::planning::options::RetryPolicy;
use crate::params::http::planning::planner::{PlannerConfig, Wanted, plan};
use crate::params::http::transport::response::{
    Validators, is_retryable, parse_content_range, status_error,
};
use crate::params::http::transport::staging::StagingPool;
use crate::params::http::transport::{HttpRequest, Transport};
use crate::params::{HostBuffer, ParameterBuffer, RangeRead, StatusResult, check_span};
use crate::send_sync::LocalBoxFuture;
use std::cell::RefCell;
use std::sync::Arc;

/// An open remote file.
pub struct HttpFile<'t> {
    transport: &'t dyn Transport,
    url: String,
    validators: Validators,
    ranges_supported: bool,
    prefix: Vec<u8>,
    retry: RetryPolicy,
    pool: StagingPool,
}

impl std::fmt::Debug for HttpFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpFile")
            .field("url", &self.url)
            .field("validators", &self.validators)
            .field("ranges_supported", &self.ranges_supported)
            .field("prefix", &self.prefix.len())
            .finish_non_exhaustive()
    }
}

impl<'t> HttpFile<'t> {
    /// Opens `url`, reading its first `prefix` bytes.
    ///
    /// # Errors
    /// The status for an HTTP error (`NOT_FOUND` for 404, ...); `UNAVAILABLE` /
    /// `DEADLINE_EXCEEDED` once the retries are spent; `DATA_LOSS` for a malformed 206.
    pub async fn open(
        transport: &'t dyn Transport,
        url: &str,
        prefix: u64,
        retry: RetryPolicy,
        pool: StagingPool,
    ) -> StatusResult<Self> {
        let mut failures = 0;
        loop {
            match Self::try_open(transport, url, prefix.max(1), retry, pool.clone()).await {
                Err(error) if is_retryable(&error) && failures < retry.retries => {
                    failures += 1;
                    sleep(retry.backoff(failures)).await;
                }
                result => return result,
            }
        }
    }

    async fn try_open(
        transport: &'t dyn Transport,
        url: &str,
        prefix: u64,
        retry: RetryPolicy,
        pool: StagingPool,
    ) -> StatusResult<Self> {
        let request = HttpRequest {
            url: url.to_owned(),
            range: Some((0, prefix)),
            if_range: None,
        };
        let mut body = transport.get(request, &pool).await?;
        let head = body.head().clone();
        let validators = Validators::from_head(&head);
        let (ranges_supported, limit) = match head.status {
            206 => {
                let range = head
                    .header("content-range")
                    .and_then(parse_content_range)
                    .filter(|r| r.start == 0 && r.end <= prefix)
                    .ok_or_else(|| {
                        let answered = match head.header("content-range") {
                            Some(value) => format!("with Content-Range \"{value}\""),
                            None => "without a Content-Range".to_owned(),
                        };
                        Status::data_loss(format!(
                            "{url} answered a request for the first {prefix} bytes {answered}"
                        ))
                    })?;
                (true, range.end)
            }
            200 => (
                false,
                validators.size.map_or(prefix, |size| size.min(prefix)),
            ),
            416 if head
                .header("content-range")
                .is_some_and(|v| v.trim() == "bytes */0") =>
            {
                // An empty file: nothing to read, but its validators still count.
                let validators = Validators {
                    size: Some(0),
                    ..validators
                };
                return Ok(Self {
                    transport,
                    url: url.to_owned(),
                    validators,
                    ranges_supported: true,
                    prefix: Vec::new(),
                    retry,
                    pool,
                });
            }
            status => return Err(status_error(status, url, "the first bytes")),
        };
        let mut bytes = Vec::with_capacity(usize::try_from(limit).unwrap_or(0).min(1 << 20));
        while (bytes.len() as u64) < limit {
            let Some(chunk) = body.next_chunk().await? else {
                break;
            };
            let take = (chunk.len() as u64).min(limit - bytes.len() as u64) as usize;
            let at = bytes.len();
            bytes.resize(at + take, 0);
            if let Some(window) = bytes.get_mut(at..) {
                chunk.copy_to(0, window);
            }
        }
        body.abort();
        if (bytes.len() as u64) < limit && ranges_supported {
            return Err(Status::new(
                StatusCode::Unavailable,
                format!("{url}: the first {limit} bytes ended after {}", bytes.len()),
            ));
        }
        Ok(Self {
            transport,
            url: url.to_owned(),
            validators,
            ranges_supported,
            prefix: bytes,
            retry,
            pool,
        })
    }

    /// The file's version as first seen.
    pub fn validators(&self) -> &Validators {
        &self.validators
    }

    /// Whether the server answered the first read with 206 Partial Content.
    pub fn ranges_supported(&self) -> bool {
        self.ranges_supported
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bytes read when the file was opened.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    async fn fetch(&self, offset: u64, length: u64) -> StatusResult<Vec<u8>> {
        if let Some(size) = self.validators.size {
            check_span(&format!("read of {}", self.url), offset, length, size)?;
        }
        let end = offset.checked_add(length).ok_or_else(|| {
            Status::new(StatusCode::OutOfRange, "read range overflows".to_owned())
        })?;
        if end <= self.prefix.len() as u64 {
            return Ok(self
                .prefix
                .get(offset as usize..end as usize)
                .unwrap_or(&[])
                .to_vec());
        }
        let rounded = length.checked_next_multiple_of(4).ok_or_else(|| {
            Status::new(StatusCode::OutOfRange, "read length overflows".to_owned())
        })?;
        let buffer = Arc::new(HostBuffer::zeroed(rounded)?);
        let wanted = [Wanted {
            file_offset: offset,
            length,
            target: 0,
            target_offset: 0,
            atomic: false,
        }];
        let config = if self.ranges_supported {
            PlannerConfig {
                gap_threshold: 0,
                max_request_size: u64::MAX,
            }
        } else {
            PlannerConfig::UNBOUNDED
        };
        let planned = plan(&wanted, config, self.validators.size)?;
        let targets = LoadTargets {
            destinations: vec![Destination::shared(buffer.clone(), Some(length))],
            edges: RefCell::new(Default::default()),
            pool: self.pool.clone(),
        };
        let gate = SuspendGate::default();
        let tracker = LoadTracker::new(&self.url, None, LoadStats::default());
        let env = RequestEnv {
            transport: self.transport,
            url: &self.url,
            validators: &self.validators,
            retry: self.retry,
            gate: &gate,
            tracker: &tracker,
            queue: None,
        };
        for request in &planned.requests {
            run_request(&env, &targets, RequestSink::new(request, &[], None)).await?;
        }
        let LoadTargets {
            destinations,
            edges,
            ..
        } = targets;
        edges.into_inner().flush(&destinations).await?;
        buffer.read(0, length).await
    }
}

impl RangeRead for HttpFile<'_> {
    fn size(&self) -> Option<u64> {
        self.validators.size
    }

    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(self.fetch(offset, length))
    }
}
