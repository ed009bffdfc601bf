//! ExecuTorch `.ptd` files through the HTTP parameter provider, served by nginx: the fixtures
//! ExecuTorch 1.5.1 wrote (scripts/make-ptd-fixtures.py; oracle: the manifest, i.e. what
//! ExecuTorch's own deserializer reads back) are indexed with one small ranged read (by
//! extension and, with no extension, by the `FT01` identifier), every key loads byte-exact into
//! host and GPU (lavapipe) buffers in one coalesced request, and two keys that ExecuTorch stored
//! as one segment are fetched once: every request sent is recorded at the transport seam.
//! Also the `NamedDataMap` an ExecuTorch backend's `init` gets over such a scope: layouts for
//! every dtype ExecuTorch wrote, bytes, and the coded refusals.

#![cfg(not(target_arch = "wasm32"))]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use support::TempDir;
use support::nginx::Nginx;
use webdelegate::ErrorCode;
use webdelegate::params::formats::INITIAL_READ_BYTES;
use webdelegate::params::http::{
    HttpProvider, HttpProviderOptions, HttpRequest, NativeTransport, ResponseBody, ScopeOptions,
    StagingPool, Transport,
};
use webdelegate::params::{
    BufferAllocator, EntryStorage, HostAllocator, ParameterProvider, SpanRequest, StatusResult,
};
use webdelegate::registry::{LocalBoxFuture, NamedDataMap};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ptd")
}

fn manifest() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixtures().join("manifest.json")).unwrap())
        .expect("manifest JSON")
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2)
        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// `(key, bytes)` of every key of a manifest file, in table order.
fn expected(file: &Value) -> Vec<(String, Vec<u8>)> {
    file["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let key = e["key"].as_str().unwrap().to_owned();
            (key, hex(e["bytes_hex"].as_str().unwrap()))
        })
        .collect()
}

/// The native transport, recording the range of every request it sends.
#[derive(Default)]
struct Recording {
    inner: NativeTransport,
    sent: Mutex<Vec<Option<(u64, u64)>>>,
}

impl Recording {
    fn take(&self) -> Vec<Option<(u64, u64)>> {
        std::mem::take(&mut self.sent.lock().unwrap())
    }
}

impl Transport for Recording {
    fn get(
        &self,
        request: HttpRequest,
        pool: &StagingPool,
    ) -> LocalBoxFuture<'_, StatusResult<Box<dyn ResponseBody>>> {
        self.sent.lock().unwrap().push(request.range);
        self.inner.get(request, pool)
    }
}

fn provider(transport: &Arc<Recording>) -> Arc<HttpProvider> {
    Arc::new(HttpProvider::new(
        transport.clone(),
        HttpProviderOptions::default(),
    ))
}

fn load(
    provider: &HttpProvider,
    allocator: &dyn BufferAllocator,
    scope: &str,
    entries: &[(String, Vec<u8>)],
) {
    let requests: Vec<_> = entries
        .iter()
        .map(|(key, bytes)| SpanRequest::whole(key.clone(), bytes.len() as u64))
        .collect();
    let loaded = pollster::block_on(provider.load(allocator, scope, &requests))
        .unwrap_or_else(|e| panic!("{scope}: {e}"));
    for ((key, bytes), span) in entries.iter().zip(&loaded) {
        let back = pollster::block_on(span.buffer.read(span.offset, span.length)).expect("read");
        assert!(&back == bytes, "{scope}: bytes of {key} differ");
    }
}

#[test]
fn every_key_loads_byte_exact_after_one_header_read() {
    let manifest = manifest();
    let server = Nginx::start(&fixtures());
    let bare = TempDir::new("bare-ptd");
    let bare_server = Nginx::start(bare.path());
    let transport = Arc::new(Recording::default());
    let provider = provider(&transport);
    let backend = support::gpu_backend();
    let gpu = backend.allocator().expect("GPU allocator");
    let files = manifest["files"].as_object().expect("files");
    assert_eq!(files.len(), 4);
    for (name, file) in files {
        let size = file["size"].as_u64().unwrap();
        let entries = expected(file);
        for (scope, url) in [
            (name.clone(), format!("{}/{name}", server.url)),
            (format!("bare/{name}"), {
                let stem = name.trim_end_matches(".ptd").to_owned() + "_weights";
                std::fs::copy(fixtures().join(name), bare.path().join(&stem)).unwrap();
                format!("{}/{stem}", bare_server.url)
            }),
        ] {
            transport.take();
            pollster::block_on(provider.add_scope(&scope, &url, ScopeOptions::default()))
                .unwrap_or_else(|e| panic!("{scope}: {e}"));
            // The index: one ranged read of the first 64 KiB (the size is not known before it;
            // the server answers with what there is), never a second one.
            assert_eq!(
                transport.take(),
                vec![Some((0, INITIAL_READ_BYTES))],
                "{scope}"
            );
            assert_eq!(provider.index(&scope).unwrap().file_size(), Some(size));
            let index = provider.index(&scope).expect("index");
            let keys: Vec<_> = index.entries().iter().map(|e| e.key.clone()).collect();
            let wanted: Vec<_> = entries.iter().map(|(k, _)| k.clone()).collect();
            assert_eq!(keys, wanted, "{scope}");
            if entries.is_empty() {
                continue;
            }
            load(&provider, &HostAllocator, &scope, &entries);
            // Every key in one request: the segments are contiguous up to ExecuTorch's
            // alignment padding, which the planner's gap threshold covers.
            let sent = transport.take();
            assert_eq!(sent.len(), 1, "{scope}: {sent:?}");
            let stats = provider.last_stats().unwrap();
            let distinct: u64 = {
                let mut ranges: Vec<_> = index
                    .entries()
                    .iter()
                    .filter(|e| e.length > 0)
                    .map(|e| match e.storage {
                        EntryStorage::Data { offset } => (offset, e.length),
                        EntryStorage::Splat { .. } => unreachable!(),
                    })
                    .collect();
                ranges.sort_unstable();
                ranges.dedup();
                ranges.iter().map(|(_, length)| length).sum()
            };
            assert_eq!(stats.bytes_needed, distinct, "{scope}");
            assert_eq!(stats.bytes_received, stats.bytes_planned, "{scope}");
            load(&provider, &gpu, &scope, &entries);
        }
    }
}

#[test]
fn keys_sharing_a_segment_are_fetched_once() {
    let manifest = manifest();
    let file = &manifest["files"]["shared.ptd"];
    let base = file["header"]["segment_base_offset"].as_u64().unwrap();
    let server = Nginx::start(&fixtures());
    let transport = Arc::new(Recording::default());
    let provider = provider(&transport);
    let url = format!("{}/shared.ptd", server.url);
    pollster::block_on(provider.add_scope("shared", &url, ScopeOptions::default())).unwrap();
    let all = expected(file);
    let tied: Vec<_> = all
        .iter()
        .filter(|(key, _)| key.ends_with(".weight"))
        .cloned()
        .collect();
    assert_eq!(tied.len(), 2);
    assert_eq!(tied[0].1, tied[1].1, "ExecuTorch deduplicated equal bytes");
    let length = tied[0].1.len() as u64;
    transport.take();
    // Both keys, each into its own buffer: one request for the one segment's bytes.
    load(&provider, &HostAllocator, "shared", &tied);
    assert_eq!(transport.take(), vec![Some((base, base + length))]);
    let stats = provider.last_stats().unwrap();
    assert_eq!(
        (
            stats.requests_sent,
            stats.bytes_needed,
            stats.bytes_received
        ),
        (1, length, length),
        "{stats:?}"
    );
    // The same through the GPU path (lavapipe): fetched once, written to both buffers.
    let backend = support::gpu_backend();
    let gpu = backend.allocator().expect("GPU allocator");
    load(&provider, &gpu, "shared", &tied);
    assert_eq!(transport.take(), vec![Some((base, base + length))]);
    // One key asked twice in one load (e.g. a tied embedding bound twice): still once.
    let twice = vec![tied[0].clone(), tied[0].clone()];
    load(&provider, &HostAllocator, "shared", &twice);
    assert_eq!(transport.take(), vec![Some((base, base + length))]);
    assert_eq!(provider.last_stats().unwrap().bytes_received, length);
}

#[test]
fn the_named_data_map_over_a_ptd_scope() {
    let manifest = manifest();
    let server = Nginx::start(&fixtures());
    let transport = Arc::new(Recording::default());
    let http = provider(&transport);
    let url = format!("{}/mixed.ptd", server.url);
    pollster::block_on(http.add_scope("mixed", &url, ScopeOptions::default())).unwrap();
    let map = NamedDataMap::new(http.clone(), "mixed").expect("map");
    let entries = manifest["files"]["mixed.ptd"]["entries"]
        .as_array()
        .unwrap();
    assert_eq!(map.get_num_keys().unwrap() as usize, entries.len());
    for entry in entries {
        let key = entry["key"].as_str().unwrap();
        let bytes = hex(entry["bytes_hex"].as_str().unwrap());
        let data = pollster::block_on(map.get_data(key)).unwrap_or_else(|e| panic!("{key}: {e}"));
        assert!(data.data() == bytes, "bytes of {key}");
        let layout = map.get_tensor_layout(key);
        let written = &entry["layout"];
        // ExecuTorch's codes that our map binds (LayoutScalarType), written out here.
        let bindable = [0, 1, 2, 3, 4, 5, 6, 7, 11, 15, 23, 24, 27, 28, 29];
        match written["scalar_type"].as_i64() {
            None => {
                // Raw bytes with no layout: opaque, as upstream's PteDataMap.
                assert_eq!(
                    layout.unwrap_err().code(),
                    ErrorCode::NotImplemented,
                    "{key}"
                );
            }
            Some(_)
                if written["dim_order"]
                    != serde_json::json!(
                        (0..written["sizes"].as_array().unwrap().len()).collect::<Vec<_>>()
                    ) =>
            {
                // Channels-last: the provider states only row-major shapes.
                assert_eq!(
                    layout.unwrap_err().code(),
                    ErrorCode::NotImplemented,
                    "{key}"
                );
            }
            Some(code) if !bindable.contains(&code) => {
                assert_eq!(layout.unwrap_err().code(), ErrorCode::NotSupported, "{key}");
            }
            Some(code) => {
                let layout = layout.unwrap_or_else(|e| panic!("{key}: {e}"));
                assert_eq!(
                    layout.scalar_type().map(|s| i64::from(s.code())),
                    Some(code)
                );
                let sizes: Vec<i64> = layout.sizes().iter().map(|&d| i64::from(d)).collect();
                let want: Vec<i64> = written["sizes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_i64().unwrap())
                    .collect();
                assert_eq!(sizes, want, "{key}");
                assert_eq!(layout.nbytes(), bytes.len() as u64, "{key}");
            }
        }
    }
}
