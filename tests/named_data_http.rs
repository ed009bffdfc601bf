//! ExecuTorch's `NamedDataMap` over the HTTP provider: every format fixture (written by the
//! peers' own tools, scripts/make-format-fixtures.py) served by nginx is read through the map
//! an init context hands a backend. Oracle: the fixtures' manifest (keys, dtypes, shapes in
//! the file's own order, bytes); the layout expected for each dtype is written out here
//! independently of the map's code (upstream's `LayoutScalarType` codes; ggml's block formats we
//! support; everything else `NotSupported`). Bytes compare exactly.

#![cfg(not(target_arch = "wasm32"))]

mod support;

use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::TempDir;
use support::nginx::Nginx;
use webdelegate::ErrorCode;
use webdelegate::params::http::{HttpProvider, HttpProviderOptions, NativeTransport, ScopeOptions};
use webdelegate::params::{BufferAllocator, MemoryProvider, ProviderList, SharedProvider};
use webdelegate::registry::{BackendInitContext, NamedDataMap};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats")
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn entry_bytes(entry: &Value) -> Vec<u8> {
    let length = entry["length"].as_u64().expect("length") as usize;
    match entry["bytes_hex"].as_str() {
        Some(text) => hex(text),
        None => {
            let pattern = hex(entry["splat_pattern_hex"].as_str().expect("splat pattern"));
            pattern.iter().copied().cycle().take(length).collect()
        }
    }
}

/// What the layout of a `dtype` tensor must be: `Ok(Some(scalar code))`, `Ok(None)` for a
/// supported block format, `Err(code)` otherwise.
fn expected_kind(dtype: &str) -> Result<Option<u8>, ErrorCode> {
    Ok(Some(match dtype {
        "U8" => 0,
        "I8" => 1,
        "I16" => 2,
        "I32" => 3,
        "I64" => 4,
        "F16" => 5,
        "F32" => 6,
        "F64" => 7,
        "BOOL" => 11,
        "BF16" => 15,
        "F8_E5M2" => 23,
        "F8_E4M3" => 24,
        "U16" => 27,
        "U32" => 28,
        "U64" => 29,
        "Q4_0" | "Q5_0" | "Q8_0" | "Q4_K" | "Q5_K" | "Q6_K" => return Ok(None),
        _ => return Err(ErrorCode::NotSupported),
    }))
}

fn http_provider() -> Arc<HttpProvider> {
    Arc::new(HttpProvider::new(
        Arc::new(NativeTransport::default()),
        HttpProviderOptions::default(),
    ))
}

/// Checks every method of `map` against the manifest's `file`.
fn check_map(name: &str, map: &NamedDataMap, file: &Value) {
    let format = file["format"].as_str().expect("format");
    let entries = file["entries"].as_array().expect("entries");
    let mut seen = HashSet::new();
    let unique: Vec<&Value> = entries
        .iter()
        .filter(|e| seen.insert(e["key"].as_str().expect("key")))
        .collect();
    let count = map.get_num_keys().expect("num keys");
    assert_eq!(count as usize, unique.len(), "{name}");
    let listed: HashSet<&str> = (0..count).map(|i| map.get_key(i).expect("key")).collect();
    assert_eq!(listed, seen, "{name}: listed keys");
    let error = map.get_key(count).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{name}: {error}");

    for entry in unique {
        let key = entry["key"].as_str().expect("key");
        let bytes = entry_bytes(entry);
        let data = pollster::block_on(map.get_data(key)).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(data.data() == bytes, "{name}: bytes of {key}");
        let mut into = vec![0xA5; bytes.len() + 3];
        pollster::block_on(map.load_data_into(key, &mut into)).expect("load into");
        assert!(
            into[..bytes.len()] == bytes,
            "{name}: loaded bytes of {key}"
        );
        assert_eq!(
            &into[bytes.len()..],
            [0xA5; 3],
            "{name}: {key}: tail untouched"
        );
        if !bytes.is_empty() {
            let mut small = vec![0; bytes.len() - 1];
            let error = pollster::block_on(map.load_data_into(key, &mut small)).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidArgument, "{name}: {key}");
        }

        let layout = map.get_tensor_layout(key);
        let Some(dtype) = entry["dtype"].as_str() else {
            // IRPA records no dtype or shape: opaque bytes, as upstream's PteDataMap.
            assert_eq!(
                layout.unwrap_err().code(),
                ErrorCode::NotImplemented,
                "{name}: {key}"
            );
            continue;
        };
        let mut sizes: Vec<i32> = entry["shape"]
            .as_array()
            .expect("shape")
            .iter()
            .map(|d| d.as_i64().expect("dim") as i32)
            .collect();
        if format == "gguf" {
            sizes.reverse();
        }
        match expected_kind(dtype) {
            Err(code) => {
                assert_eq!(layout.unwrap_err().code(), code, "{name}: {key} ({dtype})");
            }
            Ok(kind) => {
                let layout = layout.unwrap_or_else(|e| panic!("{name}: {key}: {e}"));
                assert_eq!(layout.sizes(), sizes, "{name}: {key}");
                let order: Vec<u8> = (0..sizes.len() as u8).collect();
                assert_eq!(layout.dim_order(), order, "{name}: {key}");
                assert_eq!(
                    layout.scalar_type().map(|s| s.code()),
                    kind,
                    "{name}: {key}"
                );
                assert_eq!(
                    layout.block_format().map(|f| f.name()),
                    kind.is_none().then_some(dtype),
                    "{name}: {key}"
                );
                assert_eq!(layout.file_dtype(), dtype);
                assert_eq!(layout.nbytes(), bytes.len() as u64, "{name}: {key}");
            }
        }
    }
    for error in [
        map.get_tensor_layout("no such key").unwrap_err(),
        pollster::block_on(map.get_data("no such key")).unwrap_err(),
        pollster::block_on(map.load_data_into("no such key", &mut [0; 8])).unwrap_err(),
    ] {
        assert_eq!(error.code(), ErrorCode::NotFound, "{name}: {error}");
    }
}

#[test]
fn every_fixture_reads_through_the_named_data_map() {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("manifest.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    let server = Nginx::start(&fixtures());
    let http = http_provider();
    let files = manifest["files"].as_object().expect("files");
    assert!(files.len() >= 10);
    for (name, file) in files {
        let url = format!("{}/{name}", server.url);
        pollster::block_on(http.add_scope(name, &url, ScopeOptions::default()))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let provider: SharedProvider = http.clone();
        let context = BackendInitContext::new()
            .with_parameters(provider)
            .with_named_data_scope(name.clone());
        let map = context.get_named_data_map().expect("map").expect("a scope");
        assert_eq!(map.scope(), name);
        check_map(name, &map, file);
    }

    // Into GPU buffers (lavapipe), which the provider writes without a host copy.
    let backend = support::gpu_backend();
    let gpu = backend.allocator().expect("GPU allocator");
    let map = NamedDataMap::new(http.clone(), "mixed_v3.gguf").expect("map");
    for entry in files["mixed_v3.gguf"]["entries"]
        .as_array()
        .expect("entries")
    {
        let key = entry["key"].as_str().expect("key");
        let bytes = entry_bytes(entry);
        let size = (bytes.len() as u64 + 4).next_multiple_of(4);
        let buffer = gpu.allocate(size, key).expect("GPU buffer");
        let length = pollster::block_on(map.load_data_into_buffer(key, &*buffer, 4))
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(length, bytes.len() as u64);
        let back = pollster::block_on(buffer.read(4, length)).expect("read back");
        assert!(back == bytes, "GPU bytes of {key}");
    }

    // Through a provider list (memory first, then HTTP): keys and the GGUF order forward.
    let memory = Arc::new(MemoryProvider::new());
    memory.insert("scratch", "x", vec![1, 2, 3]);
    let mut list = ProviderList::new();
    list.push(memory);
    list.push(http.clone());
    let list: SharedProvider = Arc::new(list);
    for name in ["mixed_v3.gguf", "mixed.safetensors"] {
        let map = NamedDataMap::new(list.clone(), name).expect("list map");
        check_map(name, &map, &files[name]);
    }
    let scratch = NamedDataMap::new(list, "scratch").expect("scratch");
    assert_eq!(scratch.get_key(0).expect("key"), "x");
    let error = NamedDataMap::new(http, "not served").unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound);
}

#[test]
fn a_file_gone_from_the_server_fails_with_a_code_and_its_name() {
    let dir = TempDir::new("named-data-gone");
    std::fs::copy(
        fixtures().join("single.safetensors"),
        dir.path().join("single.safetensors"),
    )
    .expect("copy");
    let server = Nginx::start(dir.path());
    let http = http_provider();
    let url = format!("{}/single.safetensors", server.url);
    pollster::block_on(http.add_scope("single", &url, ScopeOptions::default())).expect("add");
    let map = NamedDataMap::new(http, "single").expect("map");
    std::fs::remove_file(dir.path().join("single.safetensors")).expect("remove");
    // The index is still known: the layout answers; the bytes are a 404 (IREE NOT_FOUND).
    assert_eq!(
        map.get_tensor_layout("only").expect("layout").sizes(),
        [2, 2]
    );
    let error = pollster::block_on(map.get_data("only")).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound, "{error}");
    assert!(error.message().contains("\"only\""), "{error}");
    let error = pollster::block_on(map.load_data_into("only", &mut [0; 16])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound, "{error}");
}
