//! Malformed weight files: every truncation of each fixture's header, lying lengths and counts,
//! offsets past the end, overlaps, u64 overflow, unsupported versions and types. Each must give a
//! clear error with IREE's code (checked here case by case) and never panic or allocate much
//! more than the file's size (a counting allocator checks the largest single allocation).
#![cfg(not(target_arch = "wasm32"))]

#[path = "../formats_support/mod.rs"]
mod formats_support;

mod gguf;
mod irpa;
mod safetensors;

use formats_support::checked::{largest_allocation_during, parse_checked};
use formats_support::{FIXTURES, fixture, format_of};
use webdelegate::StatusCode;
use webdelegate::params::EntryStorage;
use webdelegate::params::formats::Format;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::params::formats::ptd::PtdIndex;
use webdelegate::params::formats::safetensors::SafetensorsIndex;

pub fn code(format: Format, bytes: &[u8]) -> StatusCode {
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
        Format::Ptd => PtdIndex::from_bytes(bytes).map(|index| index.header().flatbuffer_end()),
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
