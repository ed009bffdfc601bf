//! Tuning of an [`crate::params::http::HttpProvider`] and of each scope it serves: request
//! sizes and gaps (the planner's), concurrency, staging, and how failed attempts are retried.

use crate::params::http::planning::planner::PlannerConfig;
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

/// Fewest and most requests in flight (upstream clamps its concurrency to [1, 8] too).
pub const CONCURRENCY_RANGE: (usize, usize) = (1, 8);

/// Provider-wide settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpProviderOptions {
    /// Requests in flight at once; clamped to [1, 8].
    pub concurrency: usize,
    /// Size of each host staging buffer (the native client's read size; the copy window for
    /// hashing and for destinations that are not GPU buffers in the browser). At least 4 KiB.
    pub chunk_size: usize,
    /// Most bytes in one Range request.
    pub max_request_size: u64,
    /// Neighbouring ranges at most this far apart share a request.
    pub gap_threshold: u64,
    /// Retries of failed attempts.
    pub retry: RetryPolicy,
    /// Bytes read when a file is opened (covers the header of most files in one request).
    pub index_prefetch: u64,
}

/// Defaults measured in headless Chromium against nginx on one machine (bench/suites/load.mjs):
/// two requests of up to 64 MiB in flight matched one plain streaming fetch of the whole file
/// (a single stream pays a round trip between requests; four streams of 16 MiB ran 20-30%
/// slower, competing for the same cores).
impl Default for HttpProviderOptions {
    fn default() -> Self {
        Self {
            concurrency: 2,
            chunk_size: 1 << 20,
            max_request_size: 64 << 20,
            gap_threshold: 64 << 10,
            retry: RetryPolicy {
                retries: 4,
                backoff_base: Duration::from_millis(100),
                backoff_max: Duration::from_secs(2),
            },
            index_prefetch: 64 << 10,
        }
    }
}

impl HttpProviderOptions {
    /// The settings with every value brought into its valid range.
    pub fn normalized(mut self) -> Self {
        self.concurrency = self
            .concurrency
            .clamp(CONCURRENCY_RANGE.0, CONCURRENCY_RANGE.1);
        self.chunk_size = self.chunk_size.clamp(4 << 10, 64 << 20);
        self.max_request_size = self.max_request_size.max(4 << 10);
        self.index_prefetch = self.index_prefetch.clamp(16, 64 << 20);
        self
    }

    /// The planner settings for a server that honours Range (`ranges`) or not.
    pub fn planner(&self, ranges: bool) -> PlannerConfig {
        if ranges {
            PlannerConfig {
                gap_threshold: self.gap_threshold,
                max_request_size: self.max_request_size,
            }
        } else {
            PlannerConfig::UNBOUNDED
        }
    }
}

/// Settings of one scope (one file).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScopeOptions {
    /// The file's format (`"safetensors"`, `"gguf"`, `"irpa"`, `"ptd"`); detected from the URL's
    /// extension or the file's first bytes when absent.
    pub format: Option<String>,
    /// SHA-256 of the whole file: every load of the scope then streams the whole file, in order,
    /// through the digest (one request), and fails with `DATA_LOSS` on a mismatch.
    pub sha256: Option<[u8; 32]>,
    /// SHA-256 per parameter: checked whenever a span covers the whole parameter (such a
    /// parameter is never split across requests).
    pub parameter_sha256: Vec<(String, [u8; 32])>,
}

/// Parses 64 hex digits into a SHA-256 digest.
pub fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut digest = [0u8; 32];
    for (index, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(digest)
}
