//! The `.ptd` index against files ExecuTorch 1.5.1 wrote (scripts/make-ptd-fixtures.py:
//! `NamedDataStore` + `FlatTensorSerializer`, and a real `to_executorch(external_constants=True)`
//! export). Oracle: the manifest, which holds what ExecuTorch's own deserializer
//! (`FlatTensorSerializer.deserialize`, flatc underneath) reads from each file: the extended
//! header, every key's segment index, exact bytes and layout. Also: how few reads it takes, and
//! the fixtures with one field patched (header fields, flatbuffer vector counts, segment and
//! layout fields), every truncation, bit flips and random mutations: coded errors, never a
//! panic, allocations bounded.

#![cfg(not(target_arch = "wasm32"))]

#[path = "formats_support/mod.rs"]
mod formats_support;

use formats_support::checked::parse_checked;
use formats_support::{CountingReader, Rng, unhex};
use serde_json::Value;
use webdelegate::StatusCode;
use webdelegate::params::formats::ptd::PtdIndex;
use webdelegate::params::formats::{
    Format, INITIAL_READ_BYTES, detect_and_parse_index, parse_index,
};
use webdelegate::params::{EntryStorage, ParameterIndex, ShapeOrder};

const FIXTURES: [(&str, &[u8]); 4] = [
    ("mixed.ptd", include_bytes!("fixtures/ptd/mixed.ptd")),
    ("shared.ptd", include_bytes!("fixtures/ptd/shared.ptd")),
    ("empty.ptd", include_bytes!("fixtures/ptd/empty.ptd")),
    ("linear.ptd", include_bytes!("fixtures/ptd/linear.ptd")),
];

fn manifest() -> Value {
    serde_json::from_str(include_str!("fixtures/ptd/manifest.json")).expect("manifest JSON")
}

fn fixture(name: &str) -> &'static [u8] {
    FIXTURES
        .iter()
        .find(|(fixture, _)| *fixture == name)
        .map(|(_, bytes)| *bytes)
        .unwrap_or_else(|| panic!("no fixture {name}"))
}

fn u64s(value: &Value) -> Vec<u64> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_u64().expect("u64"))
        .collect()
}

#[test]
fn every_key_matches_what_executorch_reads_back() {
    let manifest = manifest();
    let files = manifest["files"].as_object().expect("files");
    assert_eq!(files.len(), FIXTURES.len());
    for (name, bytes) in FIXTURES {
        let want = &files[name];
        assert_eq!(want["size"].as_u64(), Some(bytes.len() as u64), "{name}");
        let parsed = PtdIndex::from_bytes(bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let header = parsed.header();
        let h = &want["header"];
        assert_eq!(
            [
                u64::from(header.length),
                header.flatbuffer_offset,
                header.flatbuffer_size,
                header.segment_base_offset,
                header.segment_data_size
            ],
            [
                "length",
                "flatbuffer_offset",
                "flatbuffer_size",
                "segment_base_offset",
                "segment_data_size"
            ]
            .map(|field| h[field].as_u64().expect(field)),
            "{name}: header"
        );
        assert_eq!(parsed.version(), 0);
        assert_eq!(
            parsed.segments().len() as u64,
            want["segments"].as_u64().unwrap()
        );
        let index = parsed.index();
        assert_eq!(index.file_size(), Some(bytes.len() as u64));
        assert_eq!(index.shape_order(), ShapeOrder::RowMajor);
        let entries = want["entries"].as_array().expect("entries");
        assert_eq!(index.entries().len(), entries.len(), "{name}");
        // The same keys in the same (table) order as ExecuTorch's deserializer lists them.
        for (got, want) in index.entries().iter().zip(entries) {
            let key = want["key"].as_str().unwrap();
            let context = format!("{name} / {key}");
            assert_eq!(got.key, key, "{context}");
            assert_eq!(Some(got.length), want["length"].as_u64(), "{context}");
            let EntryStorage::Data { offset } = got.storage else {
                panic!("{context}: .ptd has no splats")
            };
            let stored = &bytes[offset as usize..(offset + got.length) as usize];
            assert_eq!(
                stored,
                unhex(want["bytes_hex"].as_str().unwrap()).as_slice(),
                "{context}: bytes at {offset}"
            );
            assert_eq!(got.dtype.as_deref(), want["dtype"].as_str(), "{context}");
            let shape = (!want["shape"].is_null()).then(|| u64s(&want["shape"]));
            assert_eq!(got.shape, shape, "{context}: shape");
            let named = parsed.get(key).unwrap();
            assert_eq!(
                u64::from(named.segment_index),
                want["segment_index"].as_u64().unwrap(),
                "{context}"
            );
            let layout = &want["layout"];
            match &named.layout {
                None => assert!(layout.is_null(), "{context}: layout missing"),
                Some(got) => {
                    assert_eq!(
                        i64::from(got.scalar_type),
                        layout["scalar_type"].as_i64().unwrap(),
                        "{context}"
                    );
                    let sizes: Vec<u64> = got.sizes.iter().map(|&d| d as u64).collect();
                    assert_eq!(sizes, u64s(&layout["sizes"]), "{context}");
                    let order: Vec<u64> = got.dim_order.iter().map(|&d| u64::from(d)).collect();
                    assert_eq!(order, u64s(&layout["dim_order"]), "{context}");
                }
            }
        }
    }
}

#[test]
fn keys_executorch_deduplicated_share_one_byte_range() {
    let index = PtdIndex::from_bytes(fixture("shared.ptd")).unwrap();
    let encoder = index.index().require("encoder.weight").unwrap();
    let decoder = index.index().require("decoder.weight").unwrap();
    let bias = index.index().require("bias").unwrap();
    assert_eq!(encoder.storage, decoder.storage);
    assert_eq!(encoder.length, decoder.length);
    assert_ne!(encoder.storage, bias.storage);
    assert_eq!(index.segments().len(), 2);
}

#[test]
fn one_read_per_file_and_detection_by_magic_reuses_it() {
    for (name, bytes) in FIXTURES {
        assert!((bytes.len() as u64) < INITIAL_READ_BYTES);
        let reader = CountingReader::new(bytes);
        let index = pollster::block_on(parse_index(Format::Ptd, &reader)).unwrap();
        assert_eq!(reader.reads(), vec![(0, bytes.len() as u64)], "{name}");
        // Without an extension: detected by the FT01 identifier, still one read.
        let reader = CountingReader::new(bytes);
        let (format, detected) =
            pollster::block_on(detect_and_parse_index("https://host/weights", &reader)).unwrap();
        assert_eq!(format, Format::Ptd, "{name}");
        assert_eq!(detected, index, "{name}");
        assert_eq!(reader.reads().len(), 1, "{name}");
    }
}

/// A larger file whose flatbuffer still fits the first read: one read of 64 KiB, no byte of the
/// segment data past it.
#[test]
fn segment_data_is_never_read() {
    let mut bytes = fixture("mixed.ptd").to_vec();
    // Grow the last segment's padding region: a file with 1 MiB more segment data after it.
    let header_size_at = 40;
    let data_size = u64::from_le_bytes(bytes[header_size_at..48].try_into().unwrap());
    bytes.resize(bytes.len() + (1 << 20), 0);
    bytes[header_size_at..48].copy_from_slice(&(data_size + (1 << 20)).to_le_bytes());
    let reader = CountingReader::new(&bytes);
    let index = pollster::block_on(parse_index(Format::Ptd, &reader)).unwrap();
    assert_eq!(reader.reads(), vec![(0, INITIAL_READ_BYTES)]);
    assert_eq!(index, parse_index_of("mixed.ptd", bytes.len() as u64));
}

fn parse_index_of(name: &str, file_size: u64) -> ParameterIndex {
    let index = PtdIndex::from_bytes(fixture(name)).unwrap().into_index();
    ParameterIndex::new(index.entries().to_vec(), Some(file_size))
}

// ---- malformed files -------------------------------------------------------------------------

fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

fn u32_at(bytes: &[u8], at: usize) -> usize {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize
}

/// Minimal flatbuffer navigation, to patch fields of the real files (independent of the
/// generated code): where field `field` of the table at `table` is stored, if present.
fn field_at(bytes: &[u8], table: usize, field: usize) -> Option<usize> {
    let soffset = i32::from_le_bytes(bytes[table..table + 4].try_into().unwrap());
    let vtable = (table as i64 - i64::from(soffset)) as usize;
    let vtable_len = u16::from_le_bytes(bytes[vtable..vtable + 2].try_into().unwrap()) as usize;
    let slot = 4 + 2 * field;
    if slot >= vtable_len {
        return None;
    }
    let offset = u16::from_le_bytes(bytes[vtable + slot..vtable + slot + 2].try_into().unwrap());
    (offset != 0).then_some(table + offset as usize)
}

/// The target of the offset stored at `at`.
fn follow(bytes: &[u8], at: usize) -> usize {
    at + u32_at(bytes, at)
}

/// Where vector field `field` of the root table starts (its u32 length).
fn root_vector(bytes: &[u8], field: usize) -> usize {
    let root = u32_at(bytes, 0);
    follow(bytes, field_at(bytes, root, field).expect("vector present"))
}

/// The table at element `i` of the vector at `vector`.
fn element(bytes: &[u8], vector: usize, i: usize) -> usize {
    follow(bytes, vector + 4 + 4 * i)
}

// FlatTensor fields: version 0, segments 1, named_data 2. DataSegment: offset 0, size 1.
// NamedData: key 0, segment_index 1, tensor_layout 2. TensorLayout: scalar_type 0, sizes 1,
// dim_order 2.
const SEGMENTS: usize = 1;
const NAMED_DATA: usize = 2;

#[track_caller]
fn expect_code(bytes: &[u8], code: StatusCode, needle: &str) {
    let error = parse_checked(Format::Ptd, bytes).expect_err("a malformed file was accepted");
    assert_eq!(error.code(), code, "{error}");
    assert!(
        error.message().contains(needle),
        "{error} (wanted {needle:?})"
    );
}

#[test]
fn patched_headers_have_coded_errors() {
    use StatusCode::*;
    let base = fixture("mixed.ptd");
    let size = base.len() as u64;
    let patched = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = base.to_vec();
        edit(&mut bytes);
        bytes
    };
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        ("empty file", Vec::new(), OutOfRange, "too short"),
        ("7 bytes", base[..7].to_vec(), OutOfRange, "too short"),
        ("47 bytes", base[..47].to_vec(), OutOfRange, "too short"),
        (
            "a .pte's identifier",
            patched(&|b| b[4..8].copy_from_slice(b"ET12")),
            InvalidArgument,
            "identifier \"ET12\"",
        ),
        (
            "wrong identifier in a short file",
            patched(&|b| {
                b.truncate(20);
                b[7] = b'2';
            }),
            InvalidArgument,
            "identifier",
        ),
        (
            "header magic",
            patched(&|b| b[8..12].copy_from_slice(b"eh00")),
            InvalidArgument,
            "magic \"eh00\"",
        ),
        (
            "header length 39",
            patched(&|b| put_u32(b, 12, 39)),
            InvalidArgument,
            "length 39 < 40",
        ),
        (
            "header length u32::MAX",
            patched(&|b| put_u32(b, 12, u32::MAX)),
            InvalidArgument,
            "inside the extended header",
        ),
        (
            "flatbuffer offset inside the header",
            patched(&|b| put_u64(b, 16, 40)),
            InvalidArgument,
            "inside the extended header",
        ),
        (
            "flatbuffer offset past the end",
            patched(&|b| put_u64(b, 16, size)),
            OutOfRange,
            "past the end",
        ),
        (
            "flatbuffer size past the end",
            patched(&|b| put_u64(b, 24, size)),
            OutOfRange,
            "past the end",
        ),
        (
            "flatbuffer offset + size overflows",
            patched(&|b| put_u64(b, 24, u64::MAX - 40)),
            InvalidArgument,
            "overflows",
        ),
        (
            "flatbuffer size short by 8 (the verifier sees a cut buffer)",
            patched(&|b| {
                let fb_size = u64::from_le_bytes(b[24..32].try_into().unwrap());
                put_u64(b, 24, fb_size / 2);
            }),
            InvalidArgument,
            "malformed",
        ),
        (
            "segment base past the end",
            patched(&|b| put_u64(b, 32, size + 1)),
            OutOfRange,
            "segment data",
        ),
        (
            "segment data size past the end",
            patched(&|b| {
                let data = u64::from_le_bytes(b[40..48].try_into().unwrap());
                put_u64(b, 40, data + 1);
            }),
            OutOfRange,
            "segment data",
        ),
        (
            "segment base + size overflows",
            patched(&|b| put_u64(b, 40, u64::MAX - 100)),
            InvalidArgument,
            "overflows",
        ),
        (
            "segment base inside the flatbuffer",
            patched(&|b| put_u64(b, 32, 64)),
            InvalidArgument,
            "inside the flatbuffer",
        ),
    ];
    for (what, bytes, code, needle) in cases {
        let error = parse_checked(Format::Ptd, &bytes)
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!(error.code(), code, "{what}: {error}");
        assert!(error.message().contains(needle), "{what}: {error}");
    }
}

#[test]
fn patched_tables_have_coded_errors() {
    use StatusCode::*;
    let base = fixture("mixed.ptd");
    let manifest = manifest();
    let data_size = manifest["files"]["mixed.ptd"]["header"]["segment_data_size"]
        .as_u64()
        .unwrap();
    let segments = root_vector(base, SEGMENTS);
    let named = root_vector(base, NAMED_DATA);
    let count = u32_at(base, named);
    assert_eq!(
        count,
        manifest["files"]["mixed.ptd"]["entries"]
            .as_array()
            .unwrap()
            .len()
    );
    let patched = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = base.to_vec();
        edit(&mut bytes);
        bytes
    };
    // Huge counts: the vectors claim far more elements than the bytes hold.
    for vector in [segments, named] {
        for claimed in [count as u32 + 1, 0x7fff_ffff, u32::MAX] {
            expect_code(
                &patched(&|b| put_u32(b, vector, claimed)),
                InvalidArgument,
                "malformed",
            );
        }
    }
    // Segment 1 (its offset is not the default 0, so it is stored).
    let segment1 = element(base, segments, 1);
    let offset_at = field_at(base, segment1, 0).expect("offset stored");
    let size_at = field_at(base, segment1, 1).expect("size stored");
    expect_code(
        &patched(&|b| put_u64(b, size_at, data_size)),
        InvalidArgument,
        "segment 1",
    );
    expect_code(
        &patched(&|b| put_u64(b, offset_at, u64::MAX - 3)),
        InvalidArgument,
        "overflows",
    );
    expect_code(
        &patched(&|b| put_u64(b, offset_at, data_size)),
        InvalidArgument,
        "runs past",
    );
    // Key 1 ("model.f16", segment 1): segment index out of range.
    let key1 = element(base, named, 1);
    let index_at = field_at(base, key1, 1).expect("segment_index stored");
    expect_code(
        &patched(&|b| put_u32(b, index_at, 20)),
        InvalidArgument,
        "names segment 20",
    );
    expect_code(
        &patched(&|b| put_u32(b, index_at, u32::MAX)),
        InvalidArgument,
        "names segment",
    );
    // Pointing it at another key's segment of another size: the layout disagrees.
    expect_code(
        &patched(&|b| put_u32(b, index_at, 0)),
        InvalidArgument,
        "holds 24 bytes but sizes [4] of F16 need 8",
    );
    // Its layout: a scalar type the schema does not define, a negative size, a dim order
    // that is not a permutation.
    let layout = follow(base, field_at(base, key1, 2).expect("layout"));
    let scalar_at = field_at(base, layout, 0).expect("scalar type stored (HALF = 5)");
    assert_eq!(base[scalar_at], 5);
    for code in [8u8, 9, 10, 18, 21, 30, 0x80] {
        expect_code(
            &patched(&|b| b[scalar_at] = code),
            Unimplemented,
            "does not define",
        );
    }
    let sizes = follow(base, field_at(base, layout, 1).expect("sizes"));
    assert_eq!(u32_at(base, sizes), 1);
    expect_code(
        &patched(&|b| put_u32(b, sizes + 4, u32::MAX)),
        InvalidArgument,
        "negative size -1",
    );
    let dim_order = follow(base, field_at(base, layout, 2).expect("dim_order"));
    expect_code(
        &patched(&|b| b[dim_order + 4] = 1),
        InvalidArgument,
        "not a permutation",
    );
    // Key 1 renamed to key 0's name: a duplicate.
    let key0_name = follow(base, field_at(base, element(base, named, 0), 0).unwrap());
    let key1_name = follow(base, field_at(base, key1, 0).unwrap());
    let duplicated = patched(&|b| {
        let name = b[key0_name + 4..key0_name + 4 + u32_at(b, key0_name)].to_vec();
        // "model.f32" and "model.f16" have the same length: overwrite in place.
        assert_eq!(name.len(), u32_at(b, key1_name));
        b[key1_name + 4..key1_name + 4 + name.len()].copy_from_slice(&name);
    });
    expect_code(&duplicated, InvalidArgument, "repeats key \"model.f32\"");
    // A key that is not UTF-8: the verifier refuses it.
    expect_code(
        &patched(&|b| b[key1_name + 4] = 0xff),
        InvalidArgument,
        "malformed",
    );
}

#[test]
fn every_truncation_is_out_of_range() {
    for (name, bytes) in FIXTURES {
        for length in 0..bytes.len() {
            let Err(error) = parse_checked(Format::Ptd, &bytes[..length]) else {
                panic!("{name} truncated to {length} bytes was accepted");
            };
            assert_eq!(
                error.code(),
                StatusCode::OutOfRange,
                "{name} at {length}: {error}"
            );
        }
    }
}

#[test]
fn every_bit_flip_in_the_flatbuffer_is_handled() {
    for (name, bytes) in FIXTURES {
        let end = PtdIndex::from_bytes(bytes)
            .unwrap()
            .header()
            .flatbuffer_end() as usize;
        let mut copy = bytes.to_vec();
        let (mut accepted, mut refused) = (0, 0);
        for at in 0..end {
            for bit in 0..8 {
                copy[at] ^= 1 << bit;
                match parse_checked(Format::Ptd, &copy) {
                    Ok(_) => accepted += 1,
                    Err(_) => refused += 1,
                }
                copy[at] ^= 1 << bit;
            }
        }
        eprintln!("{name}: {accepted} flips accepted, {refused} refused");
        assert!(refused > 0 && accepted > 0, "{name}");
    }
}

#[test]
fn random_mutants_never_panic() {
    const INTERESTING: [u64; 12] = [
        0,
        1,
        7,
        8,
        40,
        48,
        128,
        4096,
        1 << 31,
        1 << 32,
        i64::MAX as u64,
        u64::MAX,
    ];
    let mut rng = Rng(0x5EED_0F97_D5A1);
    for (name, original) in FIXTURES {
        let end = PtdIndex::from_bytes(original)
            .unwrap()
            .header()
            .flatbuffer_end();
        let (mut accepted, mut refused) = (0, 0);
        for _ in 0..3000 {
            let mut bytes = original.to_vec();
            for _ in 0..=rng.below(3) {
                let at = rng.below(end) as usize;
                match rng.below(4) {
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
                    2 => {
                        let value = INTERESTING[rng.below(12) as usize].to_le_bytes();
                        let width = if rng.below(2) == 0 { 4 } else { 8 };
                        for (i, byte) in value.iter().take(width).enumerate() {
                            if let Some(slot) = bytes.get_mut(at + i) {
                                *slot = *byte;
                            }
                        }
                    }
                    _ => bytes.truncate(rng.below(original.len() as u64 + 1) as usize),
                }
            }
            match parse_checked(Format::Ptd, &bytes) {
                Ok(index) => {
                    accepted += 1;
                    // Whatever it accepts, every key lies inside the file.
                    for entry in index.entries() {
                        let EntryStorage::Data { offset } = entry.storage else {
                            panic!("splat")
                        };
                        assert!(offset + entry.length <= bytes.len() as u64);
                    }
                }
                Err(_) => refused += 1,
            }
        }
        eprintln!("{name}: {accepted} mutants accepted, {refused} refused");
        assert!(refused > 300, "{name}: {refused}");
    }
}
