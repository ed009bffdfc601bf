//! What an HTTP response means for a ranged read: the file's validators (ETag, Last-Modified,
//! size), `Content-Range` parsing, the status-to-IREE-code table, and the check every data
//! response passes before a byte of its body is used.
//!
//! The rules: a 206 must carry exactly the requested range of a file of the known size; a 200
//! to a range request is either the server ignoring `Range` (same validators: the body is the
//! whole file, so skip to the wanted bytes) or the file having changed (`If-Range` did its job:
//! `ABORTED`, "file changed mid-load"). Bytes of two versions of a file are never mixed.

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::transport::ResponseHead;

/// What identifies one version of a file on the server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Validators {
    /// The `ETag`, as sent (possibly weak, `W/"..."`).
    pub etag: Option<String>,
    /// The `Last-Modified` date, as sent.
    pub last_modified: Option<String>,
    /// The file's size in bytes, when the server said.
    pub size: Option<u64>,
}

impl Validators {
    /// The validators a response carries (`size` from `Content-Range`'s total or, for a 200, from
    /// `Content-Length`).
    pub fn from_head(head: &ResponseHead) -> Self {
        let size = match head.status {
            206 => head
                .header("content-range")
                .and_then(parse_content_range)
                .and_then(|range| range.total),
            200 => head
                .header("content-length")
                .and_then(|v| v.trim().parse().ok()),
            _ => None,
        };
        Self {
            etag: head.header("etag").map(str::to_owned),
            last_modified: head.header("last-modified").map(str::to_owned),
            size,
        }
    }

    /// The `If-Range` value: the ETag when it is strong (weak ones may not be used), else the
    /// Last-Modified date; `None` when the server gave neither.
    pub fn if_range(&self) -> Option<String> {
        match &self.etag {
            Some(etag) if !etag.starts_with("W/") => Some(etag.clone()),
            _ => self.last_modified.clone(),
        }
    }

    /// Whether a version change can be detected at all.
    pub fn can_detect_changes(&self) -> bool {
        self.etag.is_some() || self.last_modified.is_some()
    }

    /// A description of how `head` shows a different version of the file, if it does.
    pub fn changed_in(&self, head: &ResponseHead) -> Option<String> {
        let now = Self::from_head(head);
        if let (Some(before), Some(after)) = (&self.etag, &now.etag)
            && before != after
        {
            return Some(format!("ETag was {before}, now {after}"));
        }
        if let (Some(before), Some(after)) = (&self.last_modified, &now.last_modified)
            && before != after
        {
            return Some(format!("Last-Modified was {before}, now {after}"));
        }
        if let (Some(before), Some(after)) = (self.size, now.size)
            && before != after
        {
            return Some(format!("size was {before} bytes, now {after}"));
        }
        None
    }
}

/// A parsed `Content-Range: bytes first-last/total`, as `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// The file's size, unless the server sent `*`.
    pub total: Option<u64>,
}

/// Parses `bytes first-last/total` (or `/*`); `None` for anything else (including an
/// unsatisfied-range form or a range that overflows).
pub fn parse_content_range(value: &str) -> Option<ContentRange> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let (first, last) = range.trim().split_once('-')?;
    let start: u64 = first.trim().parse().ok()?;
    let last: u64 = last.trim().parse().ok()?;
    let total = match total.trim() {
        "*" => None,
        digits => Some(digits.parse::<u64>().ok()?),
    };
    let end = last.checked_add(1)?;
    if start >= end || total.is_some_and(|size| end > size) {
        return None;
    }
    Some(ContentRange { start, end, total })
}

/// The IREE status for an HTTP error status, naming the URL and what was asked.
pub fn status_error(status: u16, url: &str, asked: &str) -> Status {
    let (code, meaning) = match status {
        400 => (StatusCode::InvalidArgument, "Bad Request"),
        401 => (StatusCode::Unauthenticated, "Unauthorized"),
        403 => (StatusCode::PermissionDenied, "Forbidden"),
        404 => (StatusCode::NotFound, "Not Found"),
        408 => (StatusCode::DeadlineExceeded, "Request Timeout"),
        410 => (StatusCode::NotFound, "Gone"),
        412 => (StatusCode::FailedPrecondition, "Precondition Failed"),
        416 => (
            StatusCode::OutOfRange,
            "Range Not Satisfiable: the file is shorter than its index says (did it change?)",
        ),
        429 => (StatusCode::Unavailable, "Too Many Requests"),
        501 => (StatusCode::Unimplemented, "Not Implemented"),
        500..=599 => (StatusCode::Unavailable, "server error"),
        402..=499 => (StatusCode::FailedPrecondition, "client error"),
        _ => (StatusCode::Unknown, "unexpected status"),
    };
    Status::new(
        code,
        format!("HTTP {status} ({meaning}) for {asked} of {url}"),
    )
}

/// Whether a failed attempt is worth repeating (network errors, timeouts, 5xx, 408, 429).
pub fn is_retryable(status: &Status) -> bool {
    matches!(
        status.code(),
        StatusCode::Unavailable | StatusCode::DeadlineExceeded
    )
}

/// How a data response's body relates to the bytes asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLayout {
    /// The body is exactly the requested bytes (a checked 206).
    Exact,
    /// The body is the whole file (a 200 from a server that ignores `Range`): skip `skip` bytes.
    WholeFile {
        /// Bytes before the first wanted one.
        skip: u64,
    },
}

/// Checks the head of the response to a request for `[start, end)` of `url`, whose version
/// `known` was captured when its index was read.
///
/// # Errors
/// `ABORTED` ("file changed mid-load") when the validators or size differ; `DATA_LOSS` for a 206
/// whose `Content-Range` is missing, malformed or not the range asked for; `UNIMPLEMENTED` for a
/// compressed body; [`status_error`]'s code for any other status.
pub fn check_data_response(
    head: &ResponseHead,
    start: u64,
    end: u64,
    known: &Validators,
    url: &str,
) -> StatusResult<BodyLayout> {
    let asked = format!("bytes [{start}, {end})");
    if matches!(head.status, 200 | 206) {
        if let Some(change) = known.changed_in(head) {
            return Err(Status::new(
                StatusCode::Aborted,
                format!("file changed mid-load: {url}: {change}; reload its index and retry"),
            ));
        }
        if let Some(encoding) = head.header("content-encoding")
            && !encoding.trim().eq_ignore_ascii_case("identity")
        {
            return Err(Status::new(
                StatusCode::Unimplemented,
                format!(
                    "{url} answered {asked} with Content-Encoding {encoding}: byte offsets of a \
                     compressed body do not match the file"
                ),
            ));
        }
    }
    match head.status {
        206 => {
            let value = head.header("content-range").ok_or_else(|| {
                Status::new(
                    StatusCode::DataLoss,
                    format!("206 without Content-Range for {asked} of {url}"),
                )
            })?;
            let range = parse_content_range(value).ok_or_else(|| {
                Status::new(
                    StatusCode::DataLoss,
                    format!("malformed Content-Range {value:?} for {asked} of {url}"),
                )
            })?;
            if range.start != start || range.end != end {
                return Err(Status::new(
                    StatusCode::DataLoss,
                    format!(
                        "server sent bytes [{}, {}) of {url} for a request of {asked}",
                        range.start, range.end
                    ),
                ));
            }
            Ok(BodyLayout::Exact)
        }
        200 => Ok(BodyLayout::WholeFile { skip: start }),
        status => Err(status_error(status, url, &asked)),
    }
}
