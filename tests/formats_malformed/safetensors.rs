//! Malformed `safetensors` headers, case by case, with the codes IREE's parser uses.

use crate::formats_support::checked::parse_checked;
use webdelegate::StatusCode;
use webdelegate::params::formats::Format;

fn safetensors_file(header: &str, data: usize) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    bytes
}

#[test]
fn safetensors_malformed_headers_have_upstream_codes() {
    use StatusCode::*;
    let st = Format::Safetensors;
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        ("empty file", vec![], OutOfRange, "too short"),
        ("7 bytes", vec![0; 7], OutOfRange, "too short"),
        (
            "header past the file",
            {
                let mut b = safetensors_file("{}", 0);
                b[0] = 200;
                b
            },
            OutOfRange,
            "runs past",
        ),
        (
            "header over 100 MB",
            {
                let mut b = safetensors_file("{}", 0);
                b[..8].copy_from_slice(&100_000_001u64.to_le_bytes());
                b
            },
            InvalidArgument,
            "exceeds the limit",
        ),
        (
            "u64::MAX header length",
            {
                let mut b = safetensors_file("{}", 0);
                b[..8].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            InvalidArgument,
            "exceeds the limit",
        ),
        (
            "not JSON",
            safetensors_file("{\"a\":", 0),
            InvalidArgument,
            "JSON",
        ),
        (
            "not an object",
            safetensors_file("[1,2]", 0),
            InvalidArgument,
            "JSON",
        ),
        (
            "not UTF-8",
            {
                let mut b = safetensors_file("{\"\u{e9}\":1}", 0);
                b[10] = 0xFF;
                b
            },
            InvalidArgument,
            "UTF-8",
        ),
        (
            "end past the data",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}"#,
                4,
            ),
            InvalidArgument,
            "outside of the available data",
        ),
        (
            "begin after end",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}}"#,
                4,
            ),
            InvalidArgument,
            "outside of the available data",
        ),
        (
            "offsets near u64::MAX",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]}}"#,
                4,
            ),
            InvalidArgument,
            "outside of the available data",
        ),
        (
            "overlap",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}"#,
                8,
            ),
            InvalidArgument,
            "overlaps",
        ),
        (
            "gap",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}}"#,
                6,
            ),
            InvalidArgument,
            "gap",
        ),
        (
            "not starting at 0",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}"#,
                4,
            ),
            InvalidArgument,
            "gap",
        ),
        (
            "length disagrees with shape",
            safetensors_file(
                r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                8,
            ),
            InvalidArgument,
            "needs 12",
        ),
        (
            "shape overflows u64",
            safetensors_file(
                r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#,
                8,
            ),
            InvalidArgument,
            "overflows",
        ),
        (
            "bits overflow",
            safetensors_file(
                r#"{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}}"#,
                8,
            ),
            InvalidArgument,
            "overflows",
        ),
        (
            "F4 of odd count",
            safetensors_file(
                r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
                2,
            ),
            InvalidArgument,
            "whole bytes",
        ),
        (
            "negative shape",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}"#,
                1,
            ),
            InvalidArgument,
            "JSON",
        ),
        (
            "three offsets",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}"#,
                2,
            ),
            InvalidArgument,
            "JSON",
        ),
        (
            "missing dtype",
            safetensors_file(r#"{"a":{"shape":[1],"data_offsets":[0,1]}}"#, 1),
            InvalidArgument,
            "dtype",
        ),
        (
            "unknown dtype",
            safetensors_file(
                r#"{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}"#,
                1,
            ),
            Unimplemented,
            "unknown dtype",
        ),
        (
            "duplicate key",
            safetensors_file(
                r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}"#,
                2,
            ),
            InvalidArgument,
            "repeats key",
        ),
        (
            "metadata not strings",
            safetensors_file(r#"{"__metadata__":{"a":1}}"#, 0),
            InvalidArgument,
            "JSON",
        ),
        (
            "deep nesting",
            safetensors_file(
                &format!(
                    "{{\"a\":{{\"x\":{}{}}}}}",
                    "[".repeat(10_000),
                    "]".repeat(10_000)
                ),
                0,
            ),
            InvalidArgument,
            "JSON",
        ),
    ];
    for (what, bytes, want, contains) in cases {
        let Err(error) = parse_checked(st, &bytes) else {
            panic!("{what}: accepted");
        };
        assert_eq!(error.code(), want, "{what}: {error}");
        assert!(error.message().contains(contains), "{what}: {error}");
    }
    // Well-formed edge cases are accepted: empty tensors share an offset, scalars, padding,
    // extra fields, bytes after the data.
    let ok = safetensors_file(
        r#"{"e":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"s":{"dtype":"F64","shape":[],"data_offsets":[0,8],"extra":[1]},"z":{"dtype":"I8","shape":[0],"data_offsets":[8,8]}}    "#,
        8 + 5,
    );
    let index = parse_checked(st, &ok).unwrap();
    let keys: Vec<&str> = index.entries().iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["e", "s", "z"]);
}
