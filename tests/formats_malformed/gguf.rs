//! Malformed GGUF headers, made by hand with a small writer, case by case.

use crate::formats_support::checked::parse_checked;
use webdelegate::StatusCode;
use webdelegate::params::formats::Format;

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
            "12 million token strings (more than MAX_ARRAY_ELEMENTS)",
            Gguf::new(3, 0, 1)
                .str("tokenizer.ggml.tokens")
                .u32(9)
                .u32(8)
                .u64(12_000_000)
                .pad(1, 4096),
            InvalidArgument,
            "at most 2097152",
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
