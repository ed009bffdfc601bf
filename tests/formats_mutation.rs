//! Deterministic mutation testing of the three parsers (the in-CI counterpart of the fuzz
//! targets in `fuzz/`): thousands of mutated copies of the real peers' fixtures, each parsed
//! under the checks of `formats_support::checked` (no panic, bounded allocation, promised error
//! codes, index invariants). `safetensors` is also compared with the reference reader (the
//! `safetensors` crate) on every mutant: both must accept the same files and agree on them.

#![cfg(not(target_arch = "wasm32"))]

mod formats_support;

use formats_support::checked::parse_checked;
use formats_support::{Rng, fixture, format_of};
use webdelegate::params::formats::Format;
use webdelegate::params::{EntryStorage, ParameterIndex, StatusResult};

const MUTANTS_PER_FIXTURE: usize = 5000;

/// Values that sit on the boundaries parsers get wrong.
fn interesting(rng: &mut Rng, length: u64) -> u64 {
    const FIXED: [u64; 20] = [
        0,
        1,
        2,
        4,
        7,
        8,
        16,
        31,
        32,
        64,
        88,
        255,
        4096,
        65536,
        1 << 31,
        1 << 32,
        1 << 62,
        1 << 63,
        i64::MAX as u64,
        u64::MAX,
    ];
    match rng.below(4) {
        0 => length,
        1 => length.wrapping_add(rng.below(3)).wrapping_sub(1),
        _ => FIXED[rng.below(FIXED.len() as u64) as usize],
    }
}

/// A mutant of `original` whose changes fall in its first `region` bytes (the index).
fn mutate(rng: &mut Rng, original: &[u8], region: usize) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..=rng.below(2) {
        let region = region.min(bytes.len()).max(1);
        let at = rng.below(region as u64) as usize;
        let length = bytes.len() as u64;
        match rng.below(8) {
            0 => {
                if let Some(byte) = bytes.get_mut(at) {
                    *byte ^= 1 << rng.below(8);
                }
            }
            1 => {
                if let Some(byte) = bytes.get_mut(at) {
                    *byte = rng.next() as u8;
                }
            }
            2 | 3 => {
                let width = if rng.below(2) == 0 { 8 } else { 4 };
                let value = interesting(rng, length).to_le_bytes();
                for (offset, byte) in value.iter().take(width).enumerate() {
                    if let Some(slot) = bytes.get_mut(at + offset) {
                        *slot = *byte;
                    }
                }
            }
            4 => bytes.truncate(rng.below(length + 1) as usize),
            5 => {
                let end = (at + 1 + rng.below(16) as usize).min(bytes.len());
                bytes.drain(at.min(end)..end);
            }
            6 => {
                let insert: Vec<u8> = (0..=rng.below(16)).map(|_| rng.next() as u8).collect();
                let at = at.min(bytes.len());
                bytes.splice(at..at, insert);
            }
            _ => replace_number(rng, &mut bytes, at, length),
        }
    }
    bytes
}

/// Replaces the run of ASCII digits nearest after `at` with an interesting number (what a
/// lying JSON header looks like).
fn replace_number(rng: &mut Rng, bytes: &mut Vec<u8>, at: usize, length: u64) {
    let Some(start) = bytes
        .iter()
        .skip(at)
        .position(u8::is_ascii_digit)
        .map(|p| p + at)
    else {
        return;
    };
    let end = bytes[start..]
        .iter()
        .position(|byte| !byte.is_ascii_digit())
        .map_or(bytes.len(), |p| p + start);
    let text = interesting(rng, length).to_string();
    bytes.splice(start..end, text.into_bytes());
}

fn region(format: Format, bytes: &[u8]) -> usize {
    let index = parse_checked(format, bytes).expect("fixtures parse");
    let first_data = index
        .entries()
        .iter()
        .filter_map(|entry| match entry.storage {
            EntryStorage::Data { offset } => Some(offset as usize),
            EntryStorage::Splat { .. } => None,
        })
        .min();
    first_data.unwrap_or(bytes.len()).min(8192)
}

fn run(name: &str, seed: u64, mut oracle: impl FnMut(&[u8], &StatusResult<ParameterIndex>)) {
    let format = format_of(name);
    let original = fixture(name);
    let region = region(format, original);
    let mut rng = Rng(seed);
    let (mut accepted, mut rejected) = (0, 0);
    for _ in 0..MUTANTS_PER_FIXTURE {
        let mutant = mutate(&mut rng, original, region);
        let result = parse_checked(format, &mutant);
        match result {
            Ok(_) => accepted += 1,
            Err(_) => rejected += 1,
        }
        oracle(&mutant, &result);
    }
    eprintln!("{name}: {accepted} accepted, {rejected} rejected");
    // The mutants must exercise both paths, or the test says little.
    assert!(
        rejected > MUTANTS_PER_FIXTURE / 10,
        "{name}: only {rejected} rejected"
    );
    assert!(
        accepted > 0 || name.ends_with(".safetensors"),
        "{name}: none accepted"
    );
}

#[test]
fn gguf_mutants() {
    for (seed, name) in [
        "mixed_v3.gguf",
        "mixed_v2.gguf",
        "align64_v3.gguf",
        "no_tensors.gguf",
    ]
    .into_iter()
    .enumerate()
    {
        run(name, 0x9E37_79B9_7F4A_7C15 ^ seed as u64, |_, _| {});
    }
}

#[test]
fn irpa_mutants() {
    for (seed, name) in ["mixed.irpa", "chained.irpa", "single.irpa"]
        .into_iter()
        .enumerate()
    {
        run(name, 0xD1B5_4A32_D192_ED03 ^ seed as u64, |_, _| {});
    }
}

#[test]
fn safetensors_mutants_agree_with_the_reference_reader() {
    let mut compared = 0;
    for (seed, name) in [
        "mixed.safetensors",
        "single.safetensors",
        "empty.safetensors",
    ]
    .into_iter()
    .enumerate()
    {
        run(name, 0x2545_F491_4F6C_DD1D ^ seed as u64, |bytes, ours| {
            compared += compare_with_reference(bytes, ours);
        });
    }
    eprintln!("{compared} accepted safetensors mutants compared with the reference");
    assert!(compared > 100, "only {compared} accepted mutants compared");
}

/// Both readers accept the same files (ours also accepts bytes after the data, and refuses
/// duplicate keys that the reference silently merges) and agree on every tensor.
fn compare_with_reference(bytes: &[u8], ours: &StatusResult<ParameterIndex>) -> usize {
    let theirs = safetensors::SafeTensors::read_metadata(bytes);
    match (ours, theirs) {
        (Ok(index), Ok((header_length, metadata))) => {
            let keys = metadata.offset_keys();
            assert_eq!(keys.len(), index.entries().len());
            for (key, entry) in keys.iter().zip(index.entries()) {
                let info = metadata.info(key).expect("listed");
                let (begin, end) = info.data_offsets;
                let offset = (8 + header_length + begin) as u64;
                assert_eq!(&entry.key, key);
                assert_eq!(entry.storage, EntryStorage::Data { offset });
                assert_eq!(entry.length, (end - begin) as u64);
                let shape: Vec<u64> = info.shape.iter().map(|&dim| dim as u64).collect();
                assert_eq!(entry.shape.as_ref(), Some(&shape));
            }
            1
        }
        (Err(error), Ok(_)) => {
            let merged = error.message().contains("repeats key");
            assert!(merged, "the reference accepts what we refuse: {error}");
            0
        }
        (Ok(index), Err(error)) => {
            let data_end = index
                .entries()
                .iter()
                .map(|entry| match entry.storage {
                    EntryStorage::Data { offset } => offset + entry.length,
                    EntryStorage::Splat { .. } => 0,
                })
                .max()
                .unwrap_or(0);
            let header_end = 8 + u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
            let trailing = data_end.max(header_end) < bytes.len() as u64;
            assert!(trailing, "we accept what the reference refuses ({error:?})");
            0
        }
        (Err(_), Err(_)) => 0,
    }
}
