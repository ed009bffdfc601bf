//! Malformed weight files: every truncation of each fixture's header, lying lengths and counts,
//! offsets past the end, overlaps, u64 overflow, unsupported versions and types. Each must give a
//! clear error with IREE's code (checked here case by case) and never panic or allocate much
//! more than the file's size (a counting allocator checks the largest single allocation).

#![cfg(not(target_arch = "wasm32"))]

mod formats_support;

use formats_support::checked::{largest_allocation_during, parse_checked};
use formats_support::{FIXTURES, fixture, format_of};
use webdelegate::StatusCode;
use webdelegate::params::EntryStorage;
use webdelegate::params::formats::Format;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::params::formats::safetensors::SafetensorsIndex;

fn code(format: Format, bytes: &[u8]) -> StatusCode {
    match parse_checked(format, bytes) {
        Ok(index) => panic!("{format}: accepted {} entries", index.entries().len()),
        Err(error) => error.code(),
    }
}

/// The end of the index region: where the data section starts (IRPA: its first data byte).
fn header_end(format: Format, bytes: &[u8]) -> usize {
    let data_start = match format {
        Format::Safetensors => {
            pollster::block_on(SafetensorsIndex::parse(bytes)).map(|index| index.data_start())
        }
        Format::Gguf => pollster::block_on(GgufIndex::parse(bytes)).map(|index| index.data_start()),
        Format::Irpa => parse_checked(format, bytes).map(|index| {
            index
                .entries()
                .iter()
                .filter_map(|entry| match entry.storage {
                    EntryStorage::Data { offset } if entry.length > 0 => Some(offset),
                    _ => None,
                })
                .min()
                // All splats: the index ends with the metadata segment.
                .unwrap_or_else(|| {
                    let read =
                        |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
                    read(56) + read(64)
                })
        }),
    };
    data_start.expect("fixtures parse") as usize
}

#[test]
fn the_allocation_bound_is_measured() {
    let largest = largest_allocation_during(|| vec![0u8; 10 << 20].len());
    assert!(largest >= 10 << 20, "{largest}");
    let largest = largest_allocation_during(|| parse_checked(Format::Gguf, fixture("vocab.gguf")));
    assert!(largest > 0);
}

#[test]
fn every_truncation_of_every_header_fails_cleanly() {
    for (name, bytes) in FIXTURES {
        let format = format_of(name);
        let end = header_end(format, bytes).min(bytes.len());
        let step = if end > 8192 { 97 } else { 1 };
        for length in (0..end).step_by(step) {
            let truncated = &bytes[..length];
            let Err(error) = parse_checked(format, truncated) else {
                panic!("{name} truncated to {length} bytes was accepted");
            };
            assert!(
                [StatusCode::OutOfRange, StatusCode::InvalidArgument].contains(&error.code()),
                "{name} at {length}: {error}"
            );
        }
        // Truncations inside the data: safetensors and GGUF notice, IRPA's storage segment too.
        for length in end..bytes.len() {
            let _ = parse_checked(format, &bytes[..length]);
        }
    }
}

#[test]
fn every_bit_flip_in_small_headers_is_handled() {
    for name in [
        "mixed.safetensors",
        "mixed_v3.gguf",
        "mixed_v2.gguf",
        "mixed.irpa",
    ] {
        let format = format_of(name);
        let original = fixture(name);
        let end = header_end(format, original);
        let mut copy = original.to_vec();
        for at in 0..end {
            for bit in [0, 3, 7] {
                copy[at] ^= 1 << bit;
                let _ = parse_checked(format, &copy);
                copy[at] ^= 1 << bit;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// safetensors

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

// ---------------------------------------------------------------------------------------------
// GGUF

/// A GGUF writer for hand-made malformed files (the well-formed ones come from gguf-py).
#[derive(Default)]
struct Gguf(Vec<u8>);

impl Gguf {
    fn new(version: u32, tensors: u64, kvs: u64) -> Self {
        let mut file = Self::default();
        file.u32(0x4655_4747).u32(version).u64(tensors).u64(kvs);
        file
    }
    fn u32(&mut self, value: u32) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }
    fn u64(&mut self, value: u64) -> &mut Self {
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }
    fn str(&mut self, text: &str) -> &mut Self {
        self.u64(text.len() as u64);
        self.0.extend_from_slice(text.as_bytes());
        self
    }
    fn tensor(&mut self, name: &str, dims: &[u64], kind: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &dim in dims {
            self.u64(dim);
        }
        self.u32(kind).u64(offset)
    }
    fn pad(&mut self, alignment: usize, data: usize) -> Vec<u8> {
        let mut bytes = self.0.clone();
        bytes.resize(bytes.len().div_ceil(alignment) * alignment + data, 0);
        bytes
    }
}

#[test]
fn gguf_malformed_headers_have_upstream_codes() {
    use StatusCode::*;
    let g = Format::Gguf;
    let one_f32 = |dims: &[u64], kind: u32, offset: u64, data: usize| {
        Gguf::new(3, 1, 0)
            .tensor("t", dims, kind, offset)
            .pad(32, data)
    };
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        (
            "bad magic",
            b"GGUX\x03\0\0\0".repeat(4),
            InvalidArgument,
            "magic",
        ),
        (
            "version 1",
            Gguf::new(1, 0, 0).pad(1, 0),
            Unimplemented,
            "version 1",
        ),
        (
            "version 4",
            Gguf::new(4, 0, 0).pad(1, 0),
            Unimplemented,
            "version 4",
        ),
        (
            "big-endian",
            Gguf::new(0x0300_0000, 0, 0).pad(1, 0),
            Unimplemented,
            "big-endian",
        ),
        (
            "tensor count u64::MAX",
            Gguf::new(3, u64::MAX, 0).pad(1, 64),
            InvalidArgument,
            "overflows",
        ),
        (
            "tensor count 2^40",
            Gguf::new(3, 1 << 40, 0).pad(1, 64),
            OutOfRange,
            "tensor infos",
        ),
        (
            "kv count 2^40",
            Gguf::new(3, 0, 1 << 40).pad(1, 64),
            OutOfRange,
            "key-value",
        ),
        (
            "key length u64::MAX",
            Gguf::new(3, 0, 1).u64(u64::MAX).pad(1, 64),
            OutOfRange,
            "overflows",
        ),
        (
            "key length past EOF",
            Gguf::new(3, 0, 1).u64(1000).pad(1, 64),
            OutOfRange,
            "truncated",
        ),
        (
            "empty key",
            Gguf::new(3, 0, 1).str("").u32(4).u32(1).pad(1, 0),
            InvalidArgument,
            "empty",
        ),
        (
            "duplicate key",
            Gguf::new(3, 0, 2)
                .str("k")
                .u32(4)
                .u32(1)
                .str("k")
                .u32(4)
                .u32(1)
                .pad(1, 0),
            InvalidArgument,
            "repeats key",
        ),
        (
            "unknown value type",
            Gguf::new(3, 0, 1).str("k").u32(13).u64(0).pad(1, 8),
            InvalidArgument,
            "value type 13",
        ),
        (
            "array count past EOF",
            Gguf::new(3, 0, 1)
                .str("k")
                .u32(9)
                .u32(4)
                .u64(1 << 50)
                .pad(1, 64),
            OutOfRange,
            "truncated",
        ),
        (
            "array count overflows",
            Gguf::new(3, 0, 1)
                .str("k")
                .u32(9)
                .u32(10)
                .u64(u64::MAX)
                .pad(1, 64),
            InvalidArgument,
            "overflows",
        ),
        (
            "string array lies",
            Gguf::new(3, 0, 1)
                .str("k")
                .u32(9)
                .u32(8)
                .u64(3)
                .str("a")
                .u64(u64::MAX - 1)
                .pad(1, 64),
            OutOfRange,
            "overflows",
        ),
        (
            "nesting too deep",
            {
                let mut file = Gguf::new(3, 0, 1);
                file.str("k").u32(9);
                for _ in 0..9 {
                    file.u32(9).u64(1);
                }
                file.u32(4).u64(0);
                file.pad(1, 0)
            },
            InvalidArgument,
            "nest deeper",
        ),
        (
            "alignment not a power of two",
            Gguf::new(3, 0, 1)
                .str("general.alignment")
                .u32(4)
                .u32(48)
                .pad(1, 0),
            InvalidArgument,
            "power of two",
        ),
        (
            "alignment zero",
            Gguf::new(3, 0, 1)
                .str("general.alignment")
                .u32(4)
                .u32(0)
                .pad(1, 0),
            InvalidArgument,
            "power of two",
        ),
        (
            "alignment not u32",
            Gguf::new(3, 0, 1)
                .str("general.alignment")
                .u32(10)
                .u64(64)
                .pad(1, 0),
            InvalidArgument,
            "uint32",
        ),
        (
            "five dims",
            one_f32(&[1, 1, 1, 1, 1], 0, 0, 4),
            InvalidArgument,
            "5 dimensions",
        ),
        (
            "unknown ggml type",
            one_f32(&[1], 4, 0, 64),
            Unimplemented,
            "ggml type 4",
        ),
        (
            "type past the table",
            one_f32(&[1], 1000, 0, 64),
            Unimplemented,
            "ggml type 1000",
        ),
        (
            "row not a block multiple",
            one_f32(&[33], 8, 0, 64),
            InvalidArgument,
            "block size",
        ),
        (
            "dim past i64",
            one_f32(&[1 << 63], 0, 0, 4),
            InvalidArgument,
            "exceeds",
        ),
        (
            "element count past i64",
            one_f32(&[1 << 32, 1 << 32], 0, 0, 4),
            InvalidArgument,
            "exceeds",
        ),
        (
            "bytes overflow u64",
            one_f32(&[1 << 62], 27, 0, 4),
            InvalidArgument,
            "overflows",
        ),
        (
            "data past EOF",
            one_f32(&[16], 0, 0, 60),
            InvalidArgument,
            "outside of the available data",
        ),
        (
            "offset not the expected one",
            one_f32(&[1], 0, 32, 64),
            InvalidArgument,
            "expected 0",
        ),
        (
            "offset u64::MAX",
            one_f32(&[1], 0, u64::MAX, 64),
            InvalidArgument,
            "expected 0",
        ),
        (
            "second tensor overlaps",
            Gguf::new(3, 2, 0)
                .tensor("a", &[16], 0, 0)
                .tensor("b", &[1], 0, 0)
                .pad(32, 128),
            InvalidArgument,
            "expected 64",
        ),
        (
            "duplicate tensor",
            Gguf::new(3, 2, 0)
                .tensor("a", &[1], 0, 0)
                .tensor("a", &[1], 0, 32)
                .pad(32, 64),
            InvalidArgument,
            "repeats tensor name",
        ),
        (
            "name not UTF-8",
            {
                let mut file = Gguf::new(3, 1, 0);
                file.u64(1);
                file.0.push(0xFF);
                file.u32(1).u64(1).u32(0).u64(0);
                file.pad(32, 4)
            },
            InvalidArgument,
            "UTF-8",
        ),
    ];
    for (what, bytes, want, contains) in cases {
        let Err(error) = parse_checked(g, &bytes) else {
            panic!("{what}: accepted");
        };
        assert_eq!(error.code(), want, "{what}: {error}");
        assert!(error.message().contains(contains), "{what}: {error}");
    }
    // Hand-made but valid: a zero-element tensor, a 4-D tensor, a nested array, alignment 1.
    let ok = Gguf::new(3, 2, 2)
        .str("general.alignment")
        .u32(4)
        .u32(1)
        .str("nested")
        .u32(9)
        .u32(9)
        .u64(1)
        .u32(4)
        .u64(2)
        .u32(7)
        .u32(8)
        .tensor("empty", &[0, 5], 0, 0)
        .tensor("four", &[2, 1, 3, 1], 1, 0)
        .pad(1, 12);
    let index = parse_checked(g, &ok).unwrap();
    assert_eq!(index.entries()[1].length, 12);
    assert_eq!(index.entries()[1].shape, Some(vec![2, 1, 3, 1]));
}

// ---------------------------------------------------------------------------------------------
// IRPA

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// Offsets of the entries of a fixture's (first) entry table.
fn irpa_entries(bytes: &[u8]) -> Vec<usize> {
    let read = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (count, mut at) = (read(32), read(40) as usize);
    (0..count)
        .map(|_| {
            let here = at;
            at += (read(at) as usize).div_ceil(16) * 16;
            here
        })
        .collect()
}

#[test]
fn irpa_malformed_archives_have_upstream_codes() {
    use StatusCode::*;
    let p = Format::Irpa;
    let base = fixture("mixed.irpa");
    let entries = irpa_entries(base);
    let (data0, splat1) = (entries[0], entries[1]);
    let patched = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = base.to_vec();
        edit(&mut bytes);
        bytes
    };
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        (
            "shorter than a prefix",
            base[..31].to_vec(),
            InvalidArgument,
            "not enough bytes",
        ),
        (
            "bad magic",
            patched(&|b| b[0] = b'X'),
            InvalidArgument,
            "magic",
        ),
        (
            "major 1",
            patched(&|b| b[4] = 1),
            Unimplemented,
            "version 1.0",
        ),
        (
            "minor 1",
            patched(&|b| b[6] = 1),
            Unimplemented,
            "version 0.1",
        ),
        (
            "header size 96",
            patched(&|b| put_u64(b, 8, 96)),
            InvalidArgument,
            "exactly 88",
        ),
        (
            "header size past EOF",
            patched(&|b| put_u64(b, 8, 1 << 40)),
            OutOfRange,
            "header",
        ),
        (
            "header size u64::MAX",
            patched(&|b| put_u64(b, 8, u64::MAX)),
            OutOfRange,
            "header",
        ),
        (
            "next header past EOF",
            patched(&|b| put_u64(b, 16, 4090)),
            OutOfRange,
            "linked header",
        ),
        (
            "next header u64::MAX",
            patched(&|b| put_u64(b, 16, u64::MAX)),
            OutOfRange,
            "linked header",
        ),
        (
            "entry count huge",
            patched(&|b| put_u64(b, 32, u64::MAX)),
            OutOfRange,
            "entry table truncated",
        ),
        (
            "entry segment past EOF",
            patched(&|b| put_u64(b, 48, 1 << 20)),
            OutOfRange,
            "entry segment",
        ),
        (
            "entry segment overflows",
            patched(&|b| put_u64(b, 40, u64::MAX)),
            OutOfRange,
            "entry segment",
        ),
        (
            "storage segment past EOF",
            patched(&|b| put_u64(b, 80, 1 << 40)),
            OutOfRange,
            "storage segment",
        ),
        (
            "metadata segment too short",
            patched(&|b| put_u64(b, 64, 2)),
            OutOfRange,
            "entry name reference",
        ),
        (
            "entry size 59",
            patched(&|b| put_u64(b, data0, 59)),
            OutOfRange,
            "sized header",
        ),
        (
            "entry size past table",
            patched(&|b| put_u64(b, data0, 1 << 30)),
            OutOfRange,
            "sized header",
        ),
        (
            "external entry",
            patched(&|b| b[data0 + 8] = 3),
            Unimplemented,
            "external file",
        ),
        (
            "unknown entry type",
            patched(&|b| b[data0 + 8] = 9),
            Unimplemented,
            "entry type 9",
        ),
        (
            "name past metadata",
            patched(&|b| put_u64(b, data0 + 20, 1 << 20)),
            OutOfRange,
            "entry name",
        ),
        (
            "name overflows",
            patched(&|b| put_u64(b, data0 + 20, u64::MAX)),
            OutOfRange,
            "entry name",
        ),
        (
            "metadata past segment",
            patched(&|b| put_u64(b, data0 + 44, 1 << 20)),
            OutOfRange,
            "metadata",
        ),
        (
            "data past storage",
            patched(&|b| put_u64(b, data0 + 68, 1 << 20)),
            OutOfRange,
            "storage reference",
        ),
        (
            "data offset overflows",
            patched(&|b| put_u64(b, data0 + 60, u64::MAX)),
            OutOfRange,
            "storage reference",
        ),
        (
            "data entry too small",
            patched(&|b| put_u64(b, data0, 70)),
            OutOfRange,
            "length underflow",
        ),
        (
            "splat entry too small",
            patched(&|b| put_u64(b, splat1, 80)),
            OutOfRange,
            "length underflow",
        ),
        (
            "splat pattern 17",
            patched(&|b| b[splat1 + 84] = 17),
            InvalidArgument,
            "pattern length 17",
        ),
        (
            "splat pattern 3",
            patched(&|b| b[splat1 + 84] = 3),
            InvalidArgument,
            "pattern length 3",
        ),
        (
            "splat pattern 0",
            patched(&|b| b[splat1 + 84] = 0),
            InvalidArgument,
            "pattern length 0",
        ),
        (
            "splat length not a multiple",
            patched(&|b| {
                b[splat1 + 84] = 2;
                put_u64(b, splat1 + 60, 63);
            }),
            InvalidArgument,
            "does not divide",
        ),
        (
            "name not UTF-8",
            patched(&|b| {
                let names = u64::from_le_bytes(b[56..64].try_into().unwrap()) as usize;
                b[names] = 0xFF;
            }),
            InvalidArgument,
            "UTF-8",
        ),
    ];
    for (what, bytes, want, contains) in cases {
        let Err(error) = parse_checked(p, &bytes) else {
            panic!("{what}: accepted");
        };
        assert_eq!(error.code(), want, "{what}: {error}");
        assert!(error.message().contains(contains), "{what}: {error}");
    }
    // A SKIP entry disappears from the index; the others stay.
    let skipped = patched(&|b| b[data0 + 8] = 0);
    let index = parse_checked(p, &skipped).unwrap();
    assert_eq!(index.entries().len(), entries.len() - 1);
    assert!(index.get("weight").is_none());
}

#[test]
fn irpa_chains_are_bounded() {
    // 1025 empty archives, each linking to the next: refused without 1025 reads going on forever.
    let mut bytes = Vec::new();
    for index in 0..1025u64 {
        let mut header = vec![0u8; 96];
        header[..4].copy_from_slice(b"IRPA");
        put_u64(&mut header, 8, 88);
        put_u64(&mut header, 16, if index < 1024 { 96 } else { 0 });
        bytes.extend_from_slice(&header);
    }
    assert_eq!(code(Format::Irpa, &bytes), StatusCode::InvalidArgument);
    assert!(parse_checked(Format::Irpa, &bytes[..96 * 1024]).is_err());
    let mut short = bytes[..96 * 1024].to_vec();
    put_u64(&mut short, 96 * 1023 + 16, 0);
    assert_eq!(
        parse_checked(Format::Irpa, &short).unwrap().entries().len(),
        0
    );
}
