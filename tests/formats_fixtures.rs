//! The index parsers against files written by the real peers' tools (the `safetensors` and
//! `gguf` Python packages, IREE's archive writer): every entry's offset, length, dtype and shape
//! must match what the writer was given (the bytes at the offset must be the bytes it wrote),
//! and IREE's own index of the same file where IREE can read it. Also: how few reads it takes.

#![cfg(not(target_arch = "wasm32"))]

mod formats_support;

use formats_support::{
    CountingReader, FIXTURES, check_against_manifest, check_offsets_past_4_gib, fixture, format_of,
    manifest,
};
use serde_json::Value;
use webdelegate::params::formats::gguf::{GgufArray, GgufIndex, GgufValue, ggml_type_by_name};
use webdelegate::params::formats::irpa::IrpaIndex;
use webdelegate::params::formats::safetensors::SafetensorsIndex;
use webdelegate::params::formats::{
    INITIAL_READ_BYTES, detect_and_parse_index, parse_index, parse_index_in_memory,
};
use webdelegate::params::{EntryStorage, IndexEntry, ParameterIndex, ShapeOrder};

fn parse(name: &str) -> ParameterIndex {
    let reader = CountingReader::new(fixture(name));
    pollster::block_on(parse_index(format_of(name), &reader))
        .unwrap_or_else(|error| panic!("{name}: {error}"))
}

fn data_offset(entry: &IndexEntry) -> Option<u64> {
    match entry.storage {
        EntryStorage::Data { offset } => Some(offset),
        EntryStorage::Splat { .. } => None,
    }
}

#[test]
fn every_entry_matches_what_the_writer_wrote() {
    let manifest = manifest();
    assert_eq!(
        manifest["files"].as_object().expect("files").len(),
        FIXTURES.len()
    );
    for (name, bytes) in FIXTURES {
        check_against_manifest(&manifest, name, bytes, &parse(name));
    }
}

/// GGUF lists dims innermost first (ggml's `ne`), the other formats row-major; `describe`
/// keeps the file's order and says which, and `row_major_shape` is what programs declare.
/// Oracle: the writers' own shapes in the manifest.
#[test]
fn each_format_says_the_order_of_its_shapes() {
    let manifest = manifest();
    for (name, _) in FIXTURES {
        let index = parse(name);
        let gguf = name.ends_with(".gguf");
        let expected = if gguf {
            ShapeOrder::InnermostFirst
        } else {
            ShapeOrder::RowMajor
        };
        assert_eq!(index.shape_order(), expected, "{name}");
        for entry in index.entries() {
            let info = index.info(&entry.key).unwrap();
            assert_eq!(info.shape_order, expected, "{name} {}", entry.key);
            let Some(mut shape) = entry.shape.clone() else {
                assert_eq!(info.row_major_shape(), None);
                continue;
            };
            if gguf {
                shape.reverse();
            }
            assert_eq!(info.row_major_shape(), Some(shape), "{name} {}", entry.key);
        }
    }
    // One hand-checked case: mixed_v3.gguf writes a [rows, cols] numpy array; gguf-py records
    // ne = [cols, rows].
    let gguf = parse("mixed_v3.gguf");
    let wide = gguf
        .entries()
        .iter()
        .find(|e| {
            e.shape
                .as_ref()
                .is_some_and(|s| s.len() == 2 && s[0] != s[1])
        })
        .expect("a non-square matrix in mixed_v3.gguf");
    let recorded = manifest["files"]["mixed_v3.gguf"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == wide.key.as_str())
        .unwrap()["shape"]
        .clone();
    let ne: Vec<u64> = wide.shape.clone().unwrap();
    assert_eq!(
        recorded,
        serde_json::json!(ne),
        "the manifest records ggml's ne order"
    );
    assert_eq!(
        gguf.info(&wide.key).unwrap().row_major_shape().unwrap(),
        vec![ne[1], ne[0]]
    );
}

#[test]
fn offsets_past_4_gib_are_kept_exactly() {
    check_offsets_past_4_gib();
}

#[test]
fn offsets_agree_with_irees_own_parsers_where_iree_reads_the_file() {
    let manifest = manifest();
    let mut compared = 0;
    for (name, file) in manifest["files"].as_object().expect("files") {
        let Some(iree) = file["iree"].as_array() else {
            continue;
        };
        let index = parse(name);
        assert_eq!(index.entries().len(), iree.len(), "{name}");
        for want in iree {
            let key = want["key"].as_str().expect("key");
            let got = index.get(key).unwrap_or_else(|| panic!("{name}: {key}"));
            assert_eq!(Some(got.length), want["length"].as_u64(), "{name} / {key}");
            match want.get("offset") {
                Some(offset) => assert_eq!(data_offset(got), offset.as_u64(), "{name}/{key}"),
                None => assert!(data_offset(got).is_none(), "{name} / {key}: a splat"),
            }
            compared += 1;
        }
    }
    // IREE reads every safetensors and IRPA fixture but one, and the GGUF files without BF16
    // tensors or nested arrays.
    assert!(compared > 1800, "only {compared} entries compared");
    let mut refused: Vec<&str> = manifest["files"]
        .as_object()
        .expect("files")
        .iter()
        .filter(|(_, file)| file["iree"].is_null())
        .map(|(name, _)| name.as_str())
        .collect();
    refused.sort_unstable();
    assert_eq!(refused, ["chained.irpa", "mixed_v3.gguf"]);
}

#[test]
fn small_files_cost_one_read_and_big_headers_two() {
    for (name, bytes) in FIXTURES {
        let reader = CountingReader::new(bytes);
        let (format, _) = pollster::block_on(detect_and_parse_index(name, &reader)).unwrap();
        assert_eq!(format, format_of(name));
        let reads = reader.reads();
        let expected = if bytes.len() as u64 > INITIAL_READ_BYTES {
            2
        } else {
            1
        };
        assert_eq!(reads.len(), expected, "{name}: {reads:?}");
        assert_eq!(
            reads[0],
            (0, (bytes.len() as u64).min(INITIAL_READ_BYTES)),
            "{name}"
        );
    }
}

#[test]
fn detection_by_magic_reuses_the_first_read() {
    for (name, bytes) in FIXTURES {
        let reader = CountingReader::new(bytes);
        let (format, index) =
            pollster::block_on(detect_and_parse_index("weights?id=7", &reader)).unwrap();
        assert_eq!(format, format_of(name), "{name}");
        assert_eq!(index, parse(name), "{name}");
        let expected = if bytes.len() as u64 > INITIAL_READ_BYTES {
            2
        } else {
            1
        };
        assert_eq!(
            reader.reads().len(),
            expected,
            "{name}: {:?}",
            reader.reads()
        );
    }
}

#[test]
fn a_big_safetensors_file_is_indexed_from_its_first_64_kib() {
    // 1 GiB of (virtual) tensor data behind a real header: only the first read happens.
    struct Virtual {
        head: Vec<u8>,
        size: u64,
        reads: std::cell::RefCell<Vec<(u64, u64)>>,
    }
    impl webdelegate::params::RangeRead for Virtual {
        fn size(&self) -> Option<u64> {
            Some(self.size)
        }
        fn read_range(
            &self,
            offset: u64,
            length: u64,
        ) -> webdelegate::registry::LocalBoxFuture<'_, webdelegate::params::StatusResult<Vec<u8>>>
        {
            self.reads.borrow_mut().push((offset, length));
            Box::pin(async move {
                Ok((offset..offset + length)
                    .map(|i| self.head.get(i as usize).copied().unwrap_or(0))
                    .collect())
            })
        }
    }
    let header = br#"{"big":{"dtype":"F32","shape":[268435456],"data_offsets":[0,1073741824]}}"#;
    let mut head = (header.len() as u64).to_le_bytes().to_vec();
    head.extend_from_slice(header);
    let size = head.len() as u64 + (1 << 30);
    let file = Virtual {
        head,
        size,
        reads: Default::default(),
    };
    let index = pollster::block_on(SafetensorsIndex::parse(&file)).unwrap();
    assert_eq!(index.index().require("big").unwrap().length, 1 << 30);
    assert_eq!(*file.reads.borrow(), vec![(0, INITIAL_READ_BYTES)]);
}

#[test]
fn parsing_in_memory_matches_parsing_through_a_reader() {
    for (name, bytes) in FIXTURES {
        assert_eq!(
            parse_index_in_memory(format_of(name), bytes).unwrap(),
            parse(name)
        );
    }
}

#[test]
fn safetensors_metadata_and_header_are_kept() {
    let manifest = manifest();
    for name in [
        "mixed.safetensors",
        "large_header.safetensors",
        "empty.safetensors",
    ] {
        let bytes = fixture(name);
        let index = SafetensorsIndex::from_header(
            &bytes[8..8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize],
            bytes.len() as u64,
        )
        .unwrap();
        let want = manifest["files"][name]["metadata"].as_object().unwrap();
        assert_eq!(index.metadata().len(), want.len(), "{name}");
        for (key, value) in want {
            assert_eq!(
                index.metadata().get(key).map(String::as_str),
                value.as_str()
            );
        }
        assert_eq!(index.data_start(), 8 + index.header_length());
        // Entries are in file order and tile the data.
        let mut next = index.data_start();
        for entry in index.index().entries() {
            assert_eq!(data_offset(entry), Some(next), "{name}: {}", entry.key);
            next += entry.length;
        }
        assert_eq!(next, bytes.len() as u64, "{name}");
    }
}

#[test]
fn safetensors_agrees_with_the_reference_reader() {
    for name in [
        "mixed.safetensors",
        "single.safetensors",
        "large_header.safetensors",
    ] {
        let bytes = fixture(name);
        let (header_length, metadata) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
        let index = parse(name);
        let keys = metadata.offset_keys();
        assert_eq!(keys.len(), index.entries().len());
        for (key, entry) in keys.iter().zip(index.entries()) {
            let info = metadata.info(key).unwrap();
            assert_eq!(&entry.key, key, "{name}: order");
            let (begin, end) = info.data_offsets;
            assert_eq!(data_offset(entry), Some((8 + header_length + begin) as u64));
            assert_eq!(entry.length, (end - begin) as u64);
            assert_eq!(
                entry.dtype.as_deref(),
                Some(format!("{:?}", info.dtype).as_str())
            );
        }
    }
}

fn json_of(value: &GgufValue) -> Value {
    match value {
        GgufValue::U8(v) => Value::from(*v),
        GgufValue::I8(v) => Value::from(*v),
        GgufValue::U16(v) => Value::from(*v),
        GgufValue::I16(v) => Value::from(*v),
        GgufValue::U32(v) => Value::from(*v),
        GgufValue::I32(v) => Value::from(*v),
        GgufValue::F32(v) => Value::from(*v),
        GgufValue::Bool(v) => Value::from(*v),
        GgufValue::String(_) => Value::from(value.as_str().expect("UTF-8 in fixtures")),
        GgufValue::Array(array) => json_of_array(array),
        GgufValue::U64(v) => Value::from(*v),
        GgufValue::I64(v) => Value::from(*v),
        GgufValue::F64(v) => Value::from(*v),
    }
}

fn json_of_array(array: &GgufArray) -> Value {
    fn all<T: Copy + Into<Value>>(values: &[T]) -> Value {
        Value::Array(values.iter().map(|&v| v.into()).collect())
    }
    match array {
        GgufArray::U8(v) => all(v),
        GgufArray::I8(v) => all(v),
        GgufArray::U16(v) => all(v),
        GgufArray::I16(v) => all(v),
        GgufArray::U32(v) => all(v),
        GgufArray::I32(v) => all(v),
        GgufArray::F32(v) => all(v),
        GgufArray::Bool(v) => all(v),
        GgufArray::String(v) => Value::Array(
            v.iter()
                .map(|s| Value::from(std::str::from_utf8(s).unwrap()))
                .collect(),
        ),
        GgufArray::Array(v) => Value::Array(v.iter().map(json_of_array).collect()),
        GgufArray::U64(v) => all(v),
        GgufArray::I64(v) => all(v),
        GgufArray::F64(v) => all(v),
    }
}

#[test]
fn gguf_metadata_of_every_type_reads_back() {
    let manifest = manifest();
    for name in [
        "mixed_v3.gguf",
        "mixed_v2.gguf",
        "align64_v3.gguf",
        "no_tensors.gguf",
        "vocab.gguf",
    ] {
        let file = &manifest["files"][name];
        let reader = CountingReader::new(fixture(name));
        let index = pollster::block_on(GgufIndex::parse(&reader)).unwrap();
        assert_eq!(
            Some(u64::from(index.version())),
            file["version"].as_u64(),
            "{name}"
        );
        assert_eq!(
            Some(u64::from(index.alignment())),
            file["alignment"].as_u64(),
            "{name}"
        );
        if !index.index().entries().is_empty() {
            assert_eq!(
                index.data_start() % u64::from(index.alignment()),
                0,
                "{name}"
            );
        }
        let want = file["gguf_metadata"].as_array().unwrap();
        assert_eq!(index.metadata().len(), want.len(), "{name}");
        for (pair, want) in index.metadata().iter().zip(want) {
            assert_eq!(pair.0, want["key"].as_str().unwrap(), "{name}: order");
            if let Some(summary) = want.get("summary") {
                // The script's vocabulary rule: tokens `tok_NNNNN`, scores `i % 7`.
                let length = summary["len"].as_u64().unwrap() as usize;
                match &pair.1 {
                    GgufValue::Array(GgufArray::String(tokens)) => {
                        let expected: Vec<Vec<u8>> = (0..length)
                            .map(|i| format!("tok_{i:05}").into_bytes())
                            .collect();
                        assert_eq!(tokens, &expected, "{name}");
                    }
                    GgufValue::Array(GgufArray::F32(scores)) => {
                        let expected: Vec<f32> = (0..length).map(|i| (i % 7) as f32).collect();
                        assert_eq!(scores, &expected, "{name}");
                    }
                    other => panic!("{name}: {} is {other:?}", pair.0),
                }
                continue;
            }
            assert_eq!(json_of(&pair.1), want["value"], "{name}: {}", pair.0);
        }
        assert_eq!(
            index.into_index(),
            parse(name),
            "{name}: with and without metadata"
        );
    }
}

#[test]
fn ggml_type_table_matches_gguf_py() {
    let manifest = manifest();
    let sizes = manifest["ggml_quant_sizes"].as_object().unwrap();
    let ids = manifest["ggml_type_ids"].as_object().unwrap();
    assert_eq!(
        sizes.len(),
        webdelegate::params::formats::gguf::GGML_TYPES.len()
    );
    for (name, pair) in sizes {
        let kind = ggml_type_by_name(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(Some(u64::from(kind.id)), ids[name].as_u64(), "{name}");
        let (block, size) = (pair[0].as_u64().unwrap(), pair[1].as_u64().unwrap());
        assert_eq!(kind.block_size, block, "{name}");
        // gguf-py keeps Q8_1's pre-2024 float layout; ggml (and llama.cpp's reader) use 36.
        let expected = if name == "Q8_1" { 36 } else { size };
        assert_eq!(kind.type_size, expected, "{name}");
    }
}

#[test]
fn irpa_metadata_blobs_and_chained_archives() {
    let manifest = manifest();
    for name in ["mixed.irpa", "chained.irpa"] {
        let reader = CountingReader::new(fixture(name));
        let index = pollster::block_on(IrpaIndex::parse(&reader)).unwrap();
        let want = manifest["files"][name]["entries"].as_array().unwrap();
        for (position, want) in want.iter().enumerate() {
            let metadata = index.entry_metadata(position).unwrap();
            assert_eq!(
                metadata,
                want["metadata"].as_str().unwrap().as_bytes(),
                "{name}"
            );
            assert_eq!(
                index.index().entries()[position].key,
                want["key"].as_str().unwrap()
            );
        }
        let archives = if name == "chained.irpa" { 2 } else { 1 };
        assert_eq!(index.archives(), archives, "{name}");
    }
}
