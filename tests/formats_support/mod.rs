//! Shared by the format tests: the committed fixtures and their manifest (written by
//! `scripts/make-format-fixtures.py` with the real peers' writers), and a reader that counts.

#![allow(dead_code)]

#[cfg(not(target_arch = "wasm32"))]
pub mod checked;

use serde_json::Value;
use std::cell::RefCell;
use webdelegate::params::formats::{Format, parse_index};
use webdelegate::params::{EntryStorage, ParameterIndex, RangeRead, StatusResult};
use webdelegate::registry::LocalBoxFuture;

/// Every fixture: name and bytes.
pub const FIXTURES: [(&str, &[u8]); 13] = [
    (
        "mixed.safetensors",
        include_bytes!("../fixtures/formats/mixed.safetensors"),
    ),
    (
        "single.safetensors",
        include_bytes!("../fixtures/formats/single.safetensors"),
    ),
    (
        "empty.safetensors",
        include_bytes!("../fixtures/formats/empty.safetensors"),
    ),
    (
        "large_header.safetensors",
        include_bytes!("../fixtures/formats/large_header.safetensors"),
    ),
    (
        "mixed_v3.gguf",
        include_bytes!("../fixtures/formats/mixed_v3.gguf"),
    ),
    (
        "mixed_v2.gguf",
        include_bytes!("../fixtures/formats/mixed_v2.gguf"),
    ),
    (
        "align64_v3.gguf",
        include_bytes!("../fixtures/formats/align64_v3.gguf"),
    ),
    (
        "no_tensors.gguf",
        include_bytes!("../fixtures/formats/no_tensors.gguf"),
    ),
    (
        "vocab.gguf",
        include_bytes!("../fixtures/formats/vocab.gguf"),
    ),
    (
        "mixed.irpa",
        include_bytes!("../fixtures/formats/mixed.irpa"),
    ),
    (
        "single.irpa",
        include_bytes!("../fixtures/formats/single.irpa"),
    ),
    (
        "large_table.irpa",
        include_bytes!("../fixtures/formats/large_table.irpa"),
    ),
    (
        "chained.irpa",
        include_bytes!("../fixtures/formats/chained.irpa"),
    ),
];

/// The manifest: what the writers were given, and IREE's own index of each file.
pub fn manifest() -> serde_json::Value {
    serde_json::from_str(include_str!("../fixtures/formats/manifest.json"))
        .expect("the committed manifest is JSON")
}

/// The bytes of fixture `name`.
pub fn fixture(name: &str) -> &'static [u8] {
    FIXTURES
        .iter()
        .find(|(fixture, _)| *fixture == name)
        .map(|(_, bytes)| *bytes)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

/// The format of fixture `name`, from its extension.
pub fn format_of(name: &str) -> Format {
    webdelegate::params::formats::format_from_name(name).expect("fixtures have known extensions")
}

/// A file in memory that records every read (offset, length).
pub struct CountingReader<'a> {
    pub bytes: &'a [u8],
    pub reads: RefCell<Vec<(u64, u64)>>,
}

impl<'a> CountingReader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            reads: RefCell::new(Vec::new()),
        }
    }

    pub fn reads(&self) -> Vec<(u64, u64)> {
        self.reads.borrow().clone()
    }

    pub fn bytes_read(&self) -> u64 {
        self.reads.borrow().iter().map(|(_, length)| length).sum()
    }
}

impl RangeRead for CountingReader<'_> {
    fn size(&self) -> Option<u64> {
        Some(self.bytes.len() as u64)
    }

    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        self.reads.borrow_mut().push((offset, length));
        self.bytes.read_range(offset, length)
    }
}

/// Hex text to bytes.
pub fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("manifest hex"))
        .collect()
}

/// A deterministic xorshift generator for mutation tests.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        if bound == 0 { 0 } else { self.next() % bound }
    }
}

fn as_u64s(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|dim| dim.as_u64().expect("u64"))
        .collect()
}

/// Checks `index` (parsed from fixture `name`, `bytes`) against what the writer was given: the
/// same keys, and for each its length, dtype and shape, and the exact bytes at its offset (or
/// its splat pattern).
pub fn check_against_manifest(manifest: &Value, name: &str, bytes: &[u8], index: &ParameterIndex) {
    let expected = &manifest["files"][name];
    assert_eq!(
        expected["size"].as_u64(),
        Some(bytes.len() as u64),
        "{name}"
    );
    assert_eq!(index.file_size(), Some(bytes.len() as u64));
    let entries = expected["entries"].as_array().expect("entries");
    assert_eq!(index.entries().len(), entries.len(), "{name}: entry count");
    for want in entries {
        let key = want["key"].as_str().expect("key");
        let got = index
            .get(key)
            .unwrap_or_else(|| panic!("{name}: no entry {key:?}"));
        let context = format!("{name} / {key}");
        assert_eq!(
            Some(got.length),
            want["length"].as_u64(),
            "{context}: length"
        );
        if let Some(dtype) = want.get("dtype") {
            assert_eq!(got.dtype.as_deref(), dtype.as_str(), "{context}: dtype");
            assert_eq!(got.shape, Some(as_u64s(&want["shape"])), "{context}: shape");
        } else {
            assert_eq!((&got.dtype, &got.shape), (&None, &None), "{context}");
        }
        match (&got.storage, want.get("bytes_hex").and_then(Value::as_str)) {
            (EntryStorage::Data { offset }, Some(hex)) => {
                let offset = *offset as usize;
                let stored = &bytes[offset..offset + got.length as usize];
                assert_eq!(
                    stored,
                    unhex(hex).as_slice(),
                    "{context}: bytes at {offset}"
                );
            }
            (storage, _) => {
                let pattern = unhex(want["splat_pattern_hex"].as_str().expect("a splat"));
                assert_eq!(storage, &EntryStorage::Splat { pattern }, "{context}");
            }
        }
    }
}

/// A file of `size` bytes that starts with `head` and is zeros after it (no memory for them).
pub struct VirtualFile {
    pub head: Vec<u8>,
    pub size: u64,
}

impl RangeRead for VirtualFile {
    fn size(&self) -> Option<u64> {
        Some(self.size)
    }

    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            webdelegate::params::check_span("virtual file", offset, length, self.size)?;
            Ok((offset..offset + length)
                .map(|at| {
                    usize::try_from(at)
                        .ok()
                        .and_then(|at| self.head.get(at))
                        .copied()
                })
                .map(Option::unwrap_or_default)
                .collect())
        })
    }
}

fn le(values: &[u64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect()
}

/// Files of 6 to 12 GiB (virtual: zeros past their headers) whose tensors lie past 4 GiB, in
/// each format: offsets and lengths must survive exactly, also where `usize` is 32 bits.
pub fn check_offsets_past_4_gib() {
    const GIB: u64 = 1 << 30;
    // safetensors: "a" fills the first 4 GiB + 8 bytes, "b" follows.
    let header = format!(
        r#"{{"a":{{"dtype":"U8","shape":[{}],"data_offsets":[0,{}]}},"b":{{"dtype":"F32","shape":[2,{}],"data_offsets":[{},{}]}}}}"#,
        4 * GIB + 8,
        4 * GIB + 8,
        GIB / 4,
        4 * GIB + 8,
        6 * GIB + 8
    );
    let mut head = (header.len() as u64).to_le_bytes().to_vec();
    head.extend_from_slice(header.as_bytes());
    let data_start = head.len() as u64;
    let file = VirtualFile {
        size: data_start + 6 * GIB + 8,
        head,
    };
    let index = pollster::block_on(parse_index(Format::Safetensors, &file)).unwrap();
    let b = index.require("b").unwrap();
    assert_eq!(
        b.storage,
        EntryStorage::Data {
            offset: data_start + 4 * GIB + 8
        }
    );
    assert_eq!(
        (b.length, b.shape.clone()),
        (2 * GIB, Some(vec![2, GIB / 4]))
    );

    // GGUF: an 8 GiB I8 tensor, then an F32 one at 8 GiB past the data start.
    let mut head = b"GGUF".to_vec();
    head.extend_from_slice(&3u32.to_le_bytes());
    head.extend(le(&[2, 0]));
    for (name, dims, kind, offset) in [("big", 8 * GIB, 24u32, 0), ("after", 4, 0, 8 * GIB)] {
        head.extend(le(&[name.len() as u64]));
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(&1u32.to_le_bytes());
        head.extend(le(&[dims]));
        head.extend_from_slice(&kind.to_le_bytes());
        head.extend(le(&[offset]));
    }
    let data_start = (head.len() as u64).div_ceil(32) * 32;
    let file = VirtualFile {
        size: data_start + 8 * GIB + 16,
        head,
    };
    let index = pollster::block_on(parse_index(Format::Gguf, &file)).unwrap();
    assert_eq!(index.require("big").unwrap().length, 8 * GIB);
    let after = index.require("after").unwrap();
    assert_eq!(
        after.storage,
        EntryStorage::Data {
            offset: data_start + 8 * GIB
        }
    );

    // IRPA: one data entry 5 GiB into a 6 GiB storage segment at 4096.
    let mut head = b"IRPA".to_vec();
    head.extend_from_slice(&[0; 4]);
    head.extend(le(&[88, 0, 0, 1, 96, 80, 176, 4, 4096, 6 * GIB]));
    head.resize(96, 0);
    head.extend(le(&[80]));
    head.extend_from_slice(&2u32.to_le_bytes());
    head.extend(le(&[0, 0, 4, 0, 0, 64, 5 * GIB, GIB]));
    head.resize(176, 0);
    head.extend_from_slice(b"huge");
    let file = VirtualFile {
        size: 4096 + 6 * GIB,
        head,
    };
    let index = pollster::block_on(parse_index(Format::Irpa, &file)).unwrap();
    let huge = index.require("huge").unwrap();
    assert_eq!(
        (huge.storage.clone(), huge.length),
        (
            EntryStorage::Data {
                offset: 4096 + 5 * GIB
            },
            GIB
        )
    );
}
