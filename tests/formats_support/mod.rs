//! Shared by the format tests: the committed fixtures and their manifest (written by
//! `scripts/make-format-fixtures.py` with the real peers' writers), and a reader that counts.

#![allow(dead_code)]

pub mod checked;

use std::cell::RefCell;
use webdelegate::params::formats::Format;
use webdelegate::params::{RangeRead, StatusResult};
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
