//! Response semantics: Content-Range parsing (malformed and overflowing values rejected),
//! validators and If-Range, the status table, and the data-response check.

use crate::error::StatusCode;
use crate::params::http::transport::response::{
    BodyLayout, ContentRange, Validators, check_data_response, is_retryable, parse_content_range,
    status_error,
};
use crate::params::http::transport::{HttpRequest, ResponseHead};

fn head(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
    ResponseHead {
        status,
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

#[test]
fn content_range_parses_only_well_formed_satisfiable_ranges() {
    let cr = |start, end, total| Some(ContentRange { start, end, total });
    assert_eq!(parse_content_range("bytes 0-99/100"), cr(0, 100, Some(100)));
    assert_eq!(parse_content_range(" bytes  5-5/*"), cr(5, 6, None));
    for bad in [
        "bytes 10-5/100",
        "bytes 0-100/100",
        "bytes */100",
        "bytes 0-1",
        "items 0-1/2",
        "bytes -1-5/10",
        "bytes 0-18446744073709551615/*",
        "bytes 0-99/1x",
        "",
    ] {
        assert_eq!(parse_content_range(bad), None, "{bad:?}");
    }
}

#[test]
fn range_header_is_inclusive_and_never_empty() {
    let request = |range| HttpRequest {
        url: "u".into(),
        range,
        if_range: None,
    };
    assert_eq!(
        request(Some((0, 1024))).range_header().as_deref(),
        Some("bytes=0-1023")
    );
    assert_eq!(request(Some((7, 7))).range_header(), None);
    assert_eq!(request(None).range_header(), None);
}

#[test]
fn if_range_prefers_a_strong_etag_then_last_modified() {
    let v = Validators::from_head(&head(
        206,
        &[
            ("etag", "\"abc\""),
            ("last-modified", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ("content-range", "bytes 0-9/1000"),
        ],
    ));
    assert_eq!(v.size, Some(1000));
    assert_eq!(v.if_range().as_deref(), Some("\"abc\""));
    let weak = Validators {
        etag: Some("W/\"abc\"".into()),
        ..v.clone()
    };
    assert_eq!(
        weak.if_range().as_deref(),
        Some("Mon, 01 Jan 2024 00:00:00 GMT")
    );
    let none = Validators::default();
    assert_eq!(none.if_range(), None);
    assert!(!none.can_detect_changes());
    let full = Validators::from_head(&head(200, &[("content-length", "77")]));
    assert_eq!(full.size, Some(77));
}

#[test]
fn data_responses_are_checked_against_the_request_and_the_version() {
    let known = Validators {
        etag: Some("\"v1\"".into()),
        last_modified: None,
        size: Some(1000),
    };
    let ok = head(
        206,
        &[("etag", "\"v1\""), ("content-range", "bytes 100-199/1000")],
    );
    assert_eq!(
        check_data_response(&ok, 100, 200, &known, "u"),
        Ok(BodyLayout::Exact)
    );
    let shifted = head(
        206,
        &[("etag", "\"v1\""), ("content-range", "bytes 101-199/1000")],
    );
    assert_eq!(
        check_data_response(&shifted, 100, 200, &known, "u")
            .unwrap_err()
            .code(),
        StatusCode::DataLoss
    );
    let missing = head(206, &[("etag", "\"v1\"")]);
    assert_eq!(
        check_data_response(&missing, 100, 200, &known, "u")
            .unwrap_err()
            .code(),
        StatusCode::DataLoss
    );
    let new_etag = head(
        206,
        &[("etag", "\"v2\""), ("content-range", "bytes 100-199/1000")],
    );
    let err = check_data_response(&new_etag, 100, 200, &known, "u").unwrap_err();
    assert_eq!(err.code(), StatusCode::Aborted);
    assert!(err.message().contains("file changed mid-load"), "{err}");
    let new_size = head(206, &[("content-range", "bytes 100-199/999")]);
    assert_eq!(
        check_data_response(&new_size, 100, 200, &known, "u")
            .unwrap_err()
            .code(),
        StatusCode::Aborted
    );
    let whole_same = head(200, &[("etag", "\"v1\""), ("content-length", "1000")]);
    assert_eq!(
        check_data_response(&whole_same, 100, 200, &known, "u"),
        Ok(BodyLayout::WholeFile { skip: 100 })
    );
    let whole_new = head(200, &[("etag", "\"v2\""), ("content-length", "1000")]);
    assert_eq!(
        check_data_response(&whole_new, 100, 200, &known, "u")
            .unwrap_err()
            .code(),
        StatusCode::Aborted
    );
    let gzip = head(
        206,
        &[
            ("content-range", "bytes 100-199/1000"),
            ("content-encoding", "gzip"),
        ],
    );
    assert_eq!(
        check_data_response(&gzip, 100, 200, &known, "u")
            .unwrap_err()
            .code(),
        StatusCode::Unimplemented
    );
    let not_satisfiable = head(416, &[]);
    assert_eq!(
        check_data_response(&not_satisfiable, 100, 200, &known, "u")
            .unwrap_err()
            .code(),
        StatusCode::OutOfRange
    );
}

#[test]
fn statuses_map_to_iree_codes_and_only_transient_ones_retry() {
    for (status, code, retry) in [
        (400, StatusCode::InvalidArgument, false),
        (401, StatusCode::Unauthenticated, false),
        (403, StatusCode::PermissionDenied, false),
        (404, StatusCode::NotFound, false),
        (408, StatusCode::DeadlineExceeded, true),
        (410, StatusCode::NotFound, false),
        (412, StatusCode::FailedPrecondition, false),
        (416, StatusCode::OutOfRange, false),
        (418, StatusCode::FailedPrecondition, false),
        (429, StatusCode::Unavailable, true),
        (500, StatusCode::Unavailable, true),
        (501, StatusCode::Unimplemented, false),
        (503, StatusCode::Unavailable, true),
        (302, StatusCode::Unknown, false),
    ] {
        let error = status_error(status, "http://x/f", "bytes [0, 1)");
        assert_eq!(error.code(), code, "{status}");
        assert_eq!(is_retryable(&error), retry, "{status}");
        assert!(
            error.message().contains(&status.to_string()) && error.message().contains("http://x/f")
        );
    }
}
