//! The HTTP provider's browser paths inside headless Chromium (wasm32): body chunks as
//! JavaScript `Uint8Array`s streamed into host buffers (copied through a bounded staging buffer,
//! hashed on the way) and into WebGPU buffers (straight to `GPUQueue.writeBuffer`), and the
//! whole provider over `fetch` from a `blob:` URL, with the peers' fixture files; a server that
//! sends no CORS headers fails at once (`PERMISSION_DENIED` naming CORS), not after retries.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::sync::Arc;
use wasm_bindgen_test::*;
use webdelegate::StatusCode;
use webdelegate::backends::WebGpuBackend;
use webdelegate::params::formats::{Format, parse_index_in_memory};
use webdelegate::params::http::internal::{
    Destination, EdgeStore, ExpectedDigest, LoadTargets, PlannerConfig, RangeDigest, RequestSink,
    Wanted, WriteCounts, plan,
};
use webdelegate::params::http::{
    BodyChunk, CacheMode, FetchOptions, FetchTransport, HttpProvider, HttpProviderOptions,
    RetryPolicy, ScopeOptions, StagingPool,
};
use webdelegate::params::{
    BufferAllocator, EntryStorage, HostAllocator, HostBuffer, ParameterProvider, SharedBuffer,
    SpanRequest,
};

wasm_bindgen_test_configure!(run_in_browser);

fn file_bytes(length: usize) -> Vec<u8> {
    let mut x = 0x2545_F491u32;
    (0..length)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// `(file offset, length)` of each wanted range: odd sizes and offsets, one range split across
/// requests by the small request cap.
const RANGES: [(u64, u64); 5] = [
    (3, 1001),
    (1004, 4096),
    (5200, 7),
    (5207, 20_001),
    (30_001, 333),
];

/// Streams the planned requests of `RANGES` into `buffers` as JS chunks of odd sizes, checking a
/// SHA-256 on the third range (atomic), and returns the bytes read back and the bytes written
/// each way (straight from JS to the GPU queue, through wasm memory).
async fn stream_js_chunks(buffers: Vec<SharedBuffer>, file: &[u8]) -> (Vec<Vec<u8>>, WriteCounts) {
    let wanted: Vec<Wanted> = RANGES
        .iter()
        .enumerate()
        .map(|(target, &(file_offset, length))| Wanted {
            file_offset,
            length,
            target,
            target_offset: 0,
            atomic: target == 2,
        })
        .collect();
    let config = PlannerConfig {
        gap_threshold: 64,
        max_request_size: 8192,
    };
    let planned = plan(&wanted, config, Some(file.len() as u64)).unwrap();
    let targets = LoadTargets {
        destinations: buffers
            .iter()
            .zip(RANGES)
            .map(|(buffer, (_, length))| Destination::shared(buffer.clone(), Some(length)))
            .collect(),
        edges: RefCell::new(EdgeStore::default()),
        pool: StagingPool::new(4096, 2),
    };
    let (start, length) = RANGES[2];
    let digest: [u8; 32] = Sha256::digest(&file[start as usize..(start + length) as usize]).into();
    let digests = [RangeDigest {
        start,
        end: start + length,
        expected: ExpectedDigest {
            sha256: digest,
            what: "range 2".into(),
        },
    }];
    for request in &planned.requests {
        let mut sink = RequestSink::new(request, &digests, None);
        let mut step = 1usize;
        while !sink.is_complete() {
            let at = sink.position() as usize;
            let end = (at + step).min(request.end as usize);
            let chunk = BodyChunk::Js(js_sys::Uint8Array::from(&file[at..end]).into());
            sink.consume(&targets, &chunk, 0, end - at).unwrap();
            step = step * 3 + 1; // 1, 4, 13, 40, ... odd and unaligned
        }
        sink.finish().unwrap();
    }
    let edges = targets.edges.take();
    edges.flush(&targets.destinations).await.unwrap();
    let mut out = Vec::new();
    for (buffer, (_, length)) in buffers.iter().zip(RANGES) {
        out.push(buffer.read(0, length).await.unwrap());
    }
    let counts = targets
        .destinations
        .iter()
        .map(Destination::write_counts)
        .fold(WriteCounts::default(), |a, b| WriteCounts {
            direct: a.direct + b.direct,
            via_host: a.via_host + b.via_host,
        });
    (out, counts)
}

/// Bytes of all `RANGES`.
fn ranges_bytes() -> u64 {
    RANGES.iter().map(|&(_, length)| length).sum()
}

fn check(read: &[Vec<u8>], file: &[u8]) {
    for (bytes, (start, length)) in read.iter().zip(RANGES) {
        assert!(
            bytes[..] == file[start as usize..(start + length) as usize],
            "range at {start}"
        );
    }
}

#[wasm_bindgen_test]
async fn js_chunks_stream_into_host_buffers_through_staging() {
    let file = file_bytes(40_000);
    let buffers: Vec<SharedBuffer> = RANGES
        .iter()
        .map(|&(_, length)| -> SharedBuffer {
            Arc::new(HostBuffer::zeroed(length.next_multiple_of(4)).unwrap())
        })
        .collect();
    let (read, counts) = stream_js_chunks(buffers, &file).await;
    check(&read, &file);
    assert_eq!(counts.direct, 0, "host buffers take copies");
    assert!(counts.via_host >= ranges_bytes(), "{counts:?}");
}

#[wasm_bindgen_test]
async fn js_chunks_go_straight_to_gpu_buffers() {
    let file = file_bytes(40_000);
    let backend = WebGpuBackend::new().await;
    let allocator = backend.allocator().expect("WebGPU in the test browser");
    let buffers: Vec<SharedBuffer> = RANGES
        .iter()
        .map(|&(_, length)| allocator.allocate(length, "range").unwrap())
        .collect();
    assert!(
        Destination::shared(buffers[0].clone(), None).is_direct(),
        "zero-copy path for the WebGPU backend's buffers"
    );
    assert!(
        !Destination::shared(Arc::new(HostBuffer::zeroed(8).unwrap()), None).is_direct(),
        "host buffers are written from wasm memory"
    );
    assert_eq!(backend.live_buffers(), RANGES.len());
    let (read, counts) = stream_js_chunks(buffers, &file).await;
    check(&read, &file);
    // Chunks of 1, 4, 13, 40, ... bytes: the short ones leave a few bytes to carry between
    // chunks (through wasm memory); everything else goes straight to the queue.
    assert!(
        counts.direct >= ranges_bytes() * 9 / 10,
        "{counts:?} of {} bytes",
        ranges_bytes()
    );
    assert_eq!(
        backend.live_buffers(),
        0,
        "dropping the buffers destroys them"
    );
}

#[wasm_bindgen_test]
async fn the_provider_loads_a_fixture_over_fetch_from_a_blob_url() {
    let bytes: &[u8] = include_bytes!("fixtures/formats/mixed.irpa");
    let array = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    let blob = web_sys::Blob::new_with_u8_array_sequence(&array).unwrap();
    let url = web_sys::Url::create_object_url_with_blob(&blob).unwrap();
    #[allow(clippy::arc_with_non_send_sync)] // single-threaded wasm: the provider takes an Arc
    let transport = Arc::new(FetchTransport::new(FetchOptions::default()));
    let provider = HttpProvider::new(transport, HttpProviderOptions::default());
    let options = ScopeOptions {
        format: Some("irpa".into()),
        ..ScopeOptions::default()
    };
    provider.add_scope("m", &url, options).await.unwrap();
    let expected = parse_index_in_memory(Format::Irpa, bytes).unwrap();
    assert_eq!(provider.index("m").unwrap().entries(), expected.entries());
    let requests: Vec<_> = expected
        .entries()
        .iter()
        .map(|e| SpanRequest::whole(e.key.clone(), e.length))
        .collect();
    let loaded = provider.load(&HostAllocator, "m", &requests).await.unwrap();
    for (entry, span) in expected.entries().iter().zip(&loaded) {
        let got = span.buffer.read(0, span.length).await.unwrap();
        let want: Vec<u8> = match &entry.storage {
            EntryStorage::Data { offset } => {
                bytes[*offset as usize..(*offset + entry.length) as usize].to_vec()
            }
            EntryStorage::Splat { pattern } => pattern
                .iter()
                .copied()
                .cycle()
                .take(entry.length as usize)
                .collect(),
        };
        assert_eq!(got, want, "{}", entry.key);
    }
    web_sys::Url::revoke_object_url(&url).unwrap();
}

const FIXTURES_URL: Option<&str> = option_env!("WEBDELEGATE_TEST_FIXTURES_URL");

/// The fixture server (scripts/serve-test-fixtures.mjs) sends CORS headers under `/fixtures/`
/// only; the same file under the repository root comes without them, as from a server a
/// redirect leads to that does not allow this page's origin. The browser refuses to expose
/// either answer with the same `TypeError`; the transport tells it from a network failure and
/// fails at once. The retry policy's first backoff is longer than the test's timeout, so a
/// retry (the old behaviour: four of them, then `UNAVAILABLE`) fails the test.
#[wasm_bindgen_test]
async fn a_server_without_cors_headers_fails_at_once_naming_cors() {
    let base = FIXTURES_URL.expect(
        "WEBDELEGATE_TEST_FIXTURES_URL is unset: run this test through scripts/test-wasm.sh, \
         which serves tests/fixtures with nginx",
    );
    let origin = base.trim_end_matches('/').trim_end_matches("/fixtures");
    let url = format!("{origin}/tests/fixtures/formats/mixed.irpa");
    #[allow(clippy::arc_with_non_send_sync)] // single-threaded wasm: the provider takes an Arc
    let transport = Arc::new(FetchTransport::new(FetchOptions {
        cache: CacheMode::NoStore,
        ..FetchOptions::default()
    }));
    // On a cross-origin-isolated page (wasm-bindgen-test-runner serves COOP/COEP) the no-cors
    // probe is refused too, so CORS cannot be told from the network: one quick retry, then
    // UNAVAILABLE whose message names CORS as a possible cause.
    let isolated = js_sys::Reflect::get(&js_sys::global(), &"crossOriginIsolated".into())
        .is_ok_and(|value| value.is_truthy());
    let options = HttpProviderOptions {
        retry: if isolated {
            RetryPolicy {
                retries: 1,
                backoff_base: std::time::Duration::from_millis(10),
                backoff_max: std::time::Duration::from_millis(10),
            }
        } else {
            RetryPolicy {
                retries: 4,
                backoff_base: std::time::Duration::from_secs(3600),
                backoff_max: std::time::Duration::from_secs(3600),
            }
        },
        ..HttpProviderOptions::default()
    };
    let provider = HttpProvider::new(transport, options);
    let scope = ScopeOptions {
        format: Some("irpa".into()),
        ..ScopeOptions::default()
    };
    let error = provider.add_scope("m", &url, scope).await.unwrap_err();
    let expected = if isolated {
        StatusCode::Unavailable
    } else {
        StatusCode::PermissionDenied
    };
    assert_eq!(error.code(), expected, "isolated: {isolated}: {error}");
    assert!(error.message().contains("CORS"), "{error}");
    assert!(error.message().contains(&url), "{error}");
}
