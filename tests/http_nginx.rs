//! The HTTP provider against a real nginx: every loaded buffer (host memory, and GPU buffers on
//! Mesa lavapipe) read back and compared byte for byte with the file; coalescing and request
//! counts; sub-spans and gathers at unaligned offsets; progress events; the staging bound; the
//! provider interface's error codes.

#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::sync::{Arc, Mutex};
use support::files::{WrittenFile, random_tensors, write_safetensors};
use support::nginx::Nginx;
use support::{Rng, TempDir};
use webdelegate::StatusCode;
use webdelegate::params::http::{
    HttpProvider, HttpProviderOptions, LoadObserver, LoadProgress, NativeTransport, ScopeOptions,
};
use webdelegate::params::{
    BufferAllocator, HostAllocator, HostBuffer, ParameterProvider, Signal, Span, SpanRequest,
};

struct Served {
    _dir: TempDir,
    server: Nginx,
    file: WrittenFile,
}

fn serve(seed: u64, count: usize, max_len: u64) -> Served {
    let dir = TempDir::new("weights");
    let mut rng = Rng(seed);
    let tensors = random_tensors(&mut rng, count, max_len);
    let file = write_safetensors(&dir.path().join("model.safetensors"), &tensors);
    let server = Nginx::start(dir.path());
    Served {
        _dir: dir,
        server,
        file,
    }
}

fn provider(options: HttpProviderOptions) -> HttpProvider {
    HttpProvider::new(Arc::new(NativeTransport::default()), options)
}

fn add(provider: &HttpProvider, served: &Served) {
    let url = format!("{}/model.safetensors", served.server.url);
    pollster::block_on(provider.add_scope_with_index(
        "model",
        &url,
        served.file.index.clone(),
        ScopeOptions::default(),
    ))
    .expect("add scope");
}

fn whole(file: &WrittenFile) -> Vec<SpanRequest> {
    file.index
        .entries()
        .iter()
        .map(|e| SpanRequest::whole(e.key.clone(), e.length))
        .collect()
}

fn load_and_compare(provider: &HttpProvider, allocator: &dyn BufferAllocator, file: &WrittenFile) {
    let requests = whole(file);
    let loaded = pollster::block_on(provider.load(allocator, "model", &requests)).expect("load");
    assert_eq!(loaded.len(), requests.len());
    for (request, span) in requests.iter().zip(&loaded) {
        assert_eq!(span.length, request.span.length);
        let bytes =
            pollster::block_on(span.buffer.read(span.offset, span.length)).expect("read back");
        assert!(
            bytes == file.tensor(&request.key),
            "bytes of {} differ",
            request.key
        );
    }
}

#[test]
fn loads_every_tensor_byte_exact_into_host_and_gpu_buffers() {
    let served = serve(1, 40, 200_000);
    let options = HttpProviderOptions {
        max_request_size: 256 << 10,
        chunk_size: 64 << 10,
        ..HttpProviderOptions::default()
    };
    let provider = provider(options);
    add(&provider, &served);
    assert!(provider.query_support("model"));
    assert!(!provider.query_support("model2"));

    load_and_compare(&provider, &HostAllocator, &served.file);
    let stats = provider.last_stats().expect("stats");
    let data: u64 = served.file.index.entries().iter().map(|e| e.length).sum();
    assert_eq!(stats.bytes_needed, data);
    assert_eq!(
        stats.bytes_planned, data,
        "tensors are contiguous: no gap bytes"
    );
    assert_eq!(stats.bytes_received, data, "nothing fetched twice");
    assert!(
        stats.requests_planned <= 1 + data.div_ceil(256 << 10),
        "{stats:?}"
    );
    assert_eq!(stats.requests_sent, stats.requests_planned);
    assert_eq!(stats.overfetch_fraction(), 0.0);

    // The WebGPU backend's own parameter buffers, counted while alive.
    let backend = support::gpu_backend();
    let gpu = backend.allocator().expect("GPU allocator");
    load_and_compare(&provider, &gpu, &served.file);
    let stats = provider.last_stats().expect("stats");
    // Every byte written once; the last word of a parameter whose length is not a multiple of 4
    // is written whole (its padding included).
    let written = stats.bytes_written_via_host + stats.bytes_written_direct;
    let tensors = served.file.index.entries().len() as u64;
    assert!(
        (data..=data + 3 * tensors).contains(&written),
        "{written} bytes written for {data}"
    );
    assert_eq!(
        stats.bytes_written_direct, 0,
        "natively every body is host memory"
    );
    assert_eq!(
        backend.live_buffers(),
        0,
        "the loaded spans were dropped: their GPU buffers with them"
    );
}

#[test]
fn sub_spans_and_gathers_at_unaligned_offsets_are_exact() {
    let served = serve(2, 12, 50_000);
    let provider = provider(HttpProviderOptions {
        max_request_size: 16 << 10,
        gap_threshold: 4 << 10,
        ..HttpProviderOptions::default()
    });
    add(&provider, &served);
    let mut rng = Rng(99);
    let keys = served.file.keys();
    let backend = support::gpu_backend();
    let allocator = backend.allocator().expect("GPU allocator");
    for round in 0..6 {
        // Random sub-spans of random keys, packed at odd offsets into one target.
        let mut requests = Vec::new();
        let mut cursor = rng.below(7);
        for _ in 0..10 {
            let key = &keys[rng.below(keys.len() as u64) as usize];
            let length_all = served.file.tensor(key).len() as u64;
            let start = rng.below(length_all);
            let length = rng.below(length_all - start + 1);
            requests.push(SpanRequest {
                key: key.clone(),
                span: Span {
                    parameter_offset: start,
                    buffer_offset: cursor,
                    length,
                },
            });
            cursor += length + rng.below(5);
        }
        let size = cursor.next_multiple_of(4) + 8;
        let background = rng.bytes(size as usize);
        let mut expected = background.clone();
        for r in &requests {
            let source = served.file.tensor(&r.key);
            let (p, b, n) = (
                r.span.parameter_offset as usize,
                r.span.buffer_offset as usize,
                r.span.length as usize,
            );
            expected[b..b + n].copy_from_slice(&source[p..p + n]);
        }
        // Host target.
        let host = HostBuffer::from_bytes(background.clone());
        pollster::block_on(provider.gather("model", &host, &requests)).expect("gather");
        assert!(
            host.to_vec() == expected,
            "round {round}: host gather differs"
        );
        // GPU target: unaligned edges are read back and merged, never clobbering neighbours.
        let gpu = allocator.allocate(size, "target").expect("alloc");
        gpu.write(0, &background).expect("fill");
        pollster::block_on(provider.gather("model", &*gpu, &requests)).expect("gpu gather");
        let back = pollster::block_on(gpu.read(0, size)).expect("read back");
        assert!(back == expected, "round {round}: GPU gather differs");
        // `read` (a gather of one span) at an odd offset.
        let first = &requests[0];
        let target = HostBuffer::from_bytes(background.clone());
        let (p, b, n) = (
            first.span.parameter_offset,
            first.span.buffer_offset,
            first.span.length,
        );
        pollster::block_on(provider.read("model", &first.key, p, &target, b, n)).expect("read");
        let source = served.file.tensor(&first.key);
        let mut want = background.clone();
        want[b as usize..(b + n) as usize].copy_from_slice(&source[p as usize..(p + n) as usize]);
        assert!(target.to_vec() == want, "round {round}: read differs");
        // Sub-span loads: each span in a buffer of its own.
        let loaded =
            pollster::block_on(provider.load(&HostAllocator, "model", &requests)).expect("load");
        for (r, span) in requests.iter().zip(&loaded) {
            let source = served.file.tensor(&r.key);
            let (p, n) = (r.span.parameter_offset as usize, r.span.length as usize);
            let bytes = pollster::block_on(span.buffer.read(0, span.length)).expect("read");
            assert_eq!(bytes, &source[p..p + n]);
        }
    }
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<LoadProgress>>,
    warnings: Mutex<Vec<String>>,
}

impl LoadObserver for Recorder {
    fn progress(&self, progress: &LoadProgress) {
        self.events.lock().unwrap().push(progress.clone());
    }
    fn warning(&self, message: &str) {
        self.warnings.lock().unwrap().push(message.to_owned());
    }
}

#[test]
fn progress_is_monotonic_and_complete_and_staging_stays_bounded() {
    let served = serve(3, 30, 600_000);
    let recorder = Arc::new(Recorder::default());
    let options = HttpProviderOptions {
        concurrency: 3,
        chunk_size: 32 << 10,
        max_request_size: 1 << 20,
        ..HttpProviderOptions::default()
    };
    let provider = provider(options).with_observer(recorder.clone());
    add(&provider, &served);
    load_and_compare(&provider, &HostAllocator, &served.file);
    let events = recorder.events.lock().unwrap().clone();
    let last = events.last().expect("progress events");
    assert_eq!(last.scope, "model");
    assert_eq!(last.bytes_done, last.bytes_total);
    assert_eq!(last.requests_done, last.requests_total);
    assert!(last.requests_total >= 2);
    for pair in events.windows(2) {
        assert!(
            pair[1].bytes_done >= pair[0].bytes_done
                && pair[1].requests_done >= pair[0].requests_done
        );
    }
    assert!(
        recorder.warnings.lock().unwrap().is_empty(),
        "nginx honours Range and sends ETags"
    );
    // Host memory: at most 3 chunks per request in flight (filling, queued, being written).
    let pool = provider.staging_pool();
    let bound = options.concurrency * 3 * options.chunk_size;
    assert!(
        pool.peak_bytes() <= bound,
        "peak {} > bound {bound}",
        pool.peak_bytes()
    );
    let data: usize = served
        .file
        .index
        .entries()
        .iter()
        .map(|e| e.length as usize)
        .sum();
    assert!(
        pool.peak_bytes() * 4 < data,
        "staging must not scale with the file"
    );
    provider.notify(Signal::LowMemory).expect("notify");
    assert_eq!(pool.idle_bytes(), 0, "low memory releases the staging pool");
}

#[test]
fn interface_errors_carry_iree_codes() {
    let served = serve(4, 5, 1000);
    let provider = provider(HttpProviderOptions::default());
    add(&provider, &served);
    let key = served.file.keys()[1].clone();
    let length = served.file.tensor(&key).len() as u64;
    let code = |result: webdelegate::params::StatusResult<Vec<webdelegate::params::LoadedSpan>>| {
        result.err().map(|e| e.code())
    };
    let load = |scope: &str, requests: &[SpanRequest]| {
        pollster::block_on(provider.load(&HostAllocator, scope, requests))
    };
    assert_eq!(
        code(load("nope", &[SpanRequest::whole(&key, 1)])),
        Some(StatusCode::NotFound)
    );
    assert_eq!(
        code(load("model", &[SpanRequest::whole("nope", 1)])),
        Some(StatusCode::NotFound)
    );
    assert_eq!(
        code(load("model", &[SpanRequest::whole(&key, length + 1)])),
        Some(StatusCode::OutOfRange)
    );
    let overflow = SpanRequest {
        key: key.clone(),
        span: Span {
            parameter_offset: u64::MAX,
            buffer_offset: 0,
            length: 2,
        },
    };
    assert_eq!(
        code(load("model", &[overflow])),
        Some(StatusCode::OutOfRange)
    );
    assert!(load("model", &[]).expect("count 0 is a no-op").is_empty());
    let target = HostBuffer::zeroed(8).expect("buffer");
    let past_target = SpanRequest {
        key: key.clone(),
        span: Span {
            parameter_offset: 0,
            buffer_offset: 4,
            length: 5,
        },
    };
    let err = pollster::block_on(provider.gather("model", &target, &[past_target])).unwrap_err();
    assert_eq!(err.code(), StatusCode::OutOfRange);
    let err = pollster::block_on(provider.write(&target, 0, "model", &key, 0, 4)).unwrap_err();
    assert_eq!(err.code(), StatusCode::PermissionDenied);
    let err = pollster::block_on(provider.write(&target, 0, "model", "nope", 0, 4)).unwrap_err();
    assert_eq!(
        err.code(),
        StatusCode::NotFound,
        "key is checked before access, as upstream"
    );
    pollster::block_on(provider.scatter(&target, "model", &[])).expect("count 0 is a no-op");
    let info = provider.describe("model", &key).expect("describe");
    assert_eq!(info.length, length);
    assert!(info.dtype.is_some() && info.shape.is_some());
    assert!(provider.describe("model", "nope").is_none());
    // A missing file: the status says so.
    let url = format!("{}/missing.safetensors", served.server.url);
    let err = pollster::block_on(provider.add_scope_with_index(
        "x",
        &url,
        Default::default(),
        Default::default(),
    ))
    .unwrap_err();
    assert_eq!(err.code(), StatusCode::NotFound);
    assert!(err.message().contains("404"), "{err}");
    // Nothing listens: UNAVAILABLE after the retries.
    let quick = HttpProvider::new(
        Arc::new(NativeTransport::default()),
        HttpProviderOptions {
            retry: webdelegate::params::http::RetryPolicy {
                retries: 1,
                backoff_base: std::time::Duration::from_millis(1),
                backoff_max: std::time::Duration::from_millis(1),
            },
            ..HttpProviderOptions::default()
        },
    );
    let err = pollster::block_on(quick.add_scope_with_index(
        "x",
        "http://127.0.0.1:9/x",
        Default::default(),
        Default::default(),
    ))
    .unwrap_err();
    assert_eq!(err.code(), StatusCode::Unavailable, "{err}");
}

#[test]
fn sha256_of_the_file_and_of_parameters_is_checked() {
    use sha2::{Digest, Sha256};
    let served = serve(5, 10, 30_000);
    let url = format!("{}/model.safetensors", served.server.url);
    let keys = served.file.keys();
    let digest = |bytes: &[u8]| -> [u8; 32] { Sha256::digest(bytes).into() };
    let file_sha = digest(&served.file.bytes);
    let load = |options: ScopeOptions| {
        let provider = provider(HttpProviderOptions {
            max_request_size: 8 << 10,
            ..HttpProviderOptions::default()
        });
        pollster::block_on(provider.add_scope_with_index(
            "m",
            &url,
            served.file.index.clone(),
            options,
        ))
        .expect("add");
        let result = pollster::block_on(provider.load(&HostAllocator, "m", &whole(&served.file)));
        (result, provider.last_stats())
    };
    // The whole file streams through the digest, in one request, whatever the request cap.
    let (result, stats) = load(ScopeOptions {
        sha256: Some(file_sha),
        ..ScopeOptions::default()
    });
    let loaded = result.expect("matching file digest");
    assert_eq!(loaded.len(), keys.len());
    let stats = stats.expect("stats");
    assert_eq!(
        (stats.requests_planned, stats.bytes_received),
        (1, served.file.bytes.len() as u64)
    );
    let mut wrong = file_sha;
    wrong[0] ^= 1;
    let (result, _) = load(ScopeOptions {
        sha256: Some(wrong),
        ..ScopeOptions::default()
    });
    let error = result.unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    assert!(error.message().contains("file "), "{error}");
    // Per parameter: a long parameter is not split even though it exceeds the request cap.
    let long = keys
        .iter()
        .max_by_key(|k| served.file.tensor(k).len())
        .expect("a key")
        .clone();
    let good = vec![(long.clone(), digest(served.file.tensor(&long)))];
    let (result, _) = load(ScopeOptions {
        parameter_sha256: good,
        ..ScopeOptions::default()
    });
    result.expect("matching parameter digest");
    let bad = vec![(long.clone(), digest(served.file.tensor(&keys[0])))];
    let (result, _) = load(ScopeOptions {
        parameter_sha256: bad,
        ..ScopeOptions::default()
    });
    let error = result.unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    assert!(error.message().contains(&long), "{error}");
}

#[test]
fn a_span_larger_than_a_buffer_is_split_at_rows_or_refused_before_any_fetch() {
    use sha2::{Digest, Sha256};
    use webdelegate::params::BufferPlacement;
    use webdelegate::params::http::LoadControl;
    let dir = TempDir::new("split");
    let mut rng = Rng(21);
    // 37 rows of 44 bytes (11 F32), then a shapeless-looking neighbour to stay untouched.
    let tensors = vec![
        support::files::Tensor {
            name: "big".into(),
            dtype: "F32",
            shape: vec![37, 11],
            bytes: rng.bytes(37 * 44),
        },
        support::files::Tensor {
            name: "small".into(),
            dtype: "U8",
            shape: vec![13],
            bytes: rng.bytes(13),
        },
    ];
    let file = write_safetensors(&dir.path().join("model.safetensors"), &tensors);
    let server = Nginx::start(dir.path());
    let url = format!("{}/model.safetensors", server.url);
    let big = file.tensor("big").to_vec();
    let make = |parameter_sha256: Vec<(String, [u8; 32])>| {
        let provider = provider(HttpProviderOptions {
            max_request_size: 256,
            ..HttpProviderOptions::default()
        });
        pollster::block_on(provider.add_scope_with_index(
            "m",
            &url,
            file.index.clone(),
            ScopeOptions {
                parameter_sha256,
                ..ScopeOptions::default()
            },
        ))
        .expect("add");
        provider
    };
    let at_most = |max: u64| BufferPlacement {
        max_buffer_bytes: Some(max),
        split_rows: true,
    };
    let backend = support::gpu_backend();
    let gpu = backend.allocator().expect("GPU allocator");
    let allocators: [&dyn BufferAllocator; 2] = [&HostAllocator, &gpu];
    for allocator in allocators {
        // Whole and partial spans (starting and ending inside rows), 5 rows (220 B) per buffer.
        let provider = make(Vec::new());
        let requests = vec![
            SpanRequest::whole("big".to_owned(), big.len() as u64),
            SpanRequest {
                key: "big".into(),
                span: Span {
                    parameter_offset: 201,
                    buffer_offset: 0,
                    length: 999,
                },
            },
            SpanRequest::whole("small".to_owned(), 13),
        ];
        let loaded = pollster::block_on(provider.load_pieces_with(
            allocator,
            "m",
            &requests,
            at_most(222),
            &LoadControl::default(),
        ))
        .expect("split load");
        // The whole big tensor alone, under `placement`.
        let load_big = |provider: &HttpProvider, placement| {
            pollster::block_on(provider.load_pieces_with(
                allocator,
                "m",
                &requests[..1],
                placement,
                &LoadControl::default(),
            ))
        };
        let whole = &loaded[0];
        assert_eq!(whole.len(), 8, "37 rows, 5 per buffer");
        for (i, piece) in whole.iter().enumerate() {
            let first = 5 * i as u64;
            assert_eq!(piece.rows, Some((first, (first + 5).min(37))));
            assert_eq!(piece.parameter_offset, first * 44);
            assert!(piece.span.buffer.size() <= 222);
        }
        let partial = &loaded[1];
        assert_eq!(partial[0].parameter_offset, 201);
        // Rows 4..28 in 6 pieces (5 rows at most): 4 rows each, cut at multiples of 176 bytes.
        assert_eq!(partial.len(), 6);
        assert_eq!(partial[0].rows, Some((4, 8)), "starts inside row 4");
        assert_eq!(partial[1].parameter_offset, 352);
        for (request, pieces) in requests.iter().zip(&loaded) {
            let mut bytes = Vec::new();
            for piece in pieces {
                bytes.extend(
                    pollster::block_on(
                        piece.span.buffer.read(piece.span.offset, piece.span.length),
                    )
                    .expect("read back"),
                );
            }
            let start = request.span.parameter_offset as usize;
            let source = file.tensor(&request.key);
            assert!(
                bytes == source[start..start + request.span.length as usize],
                "{} differs",
                request.key
            );
        }
        assert_eq!(loaded[2].len(), 1, "what fits stays whole");
        // One buffer asked for: refused before any request, naming the size and the limit.
        let provider = make(Vec::new());
        let refused = load_big(
            &provider,
            BufferPlacement {
                max_buffer_bytes: Some(222),
                split_rows: false,
            },
        )
        .unwrap_err();
        assert_eq!(refused.code(), StatusCode::ResourceExhausted, "{refused}");
        assert!(
            refused.message().contains("1628 bytes") && refused.message().contains("222"),
            "{refused}"
        );
        assert_eq!(provider.last_stats().expect("stats").requests_sent, 0);
        // A row larger than the limit cannot be split.
        let row = load_big(&provider, at_most(40)).unwrap_err();
        assert_eq!(row.code(), StatusCode::ResourceExhausted, "{row}");
        // The per-parameter SHA-256 covers every piece of a split parameter.
        let sha: [u8; 32] = Sha256::digest(&big).into();
        let provider = make(vec![("big".into(), sha)]);
        load_big(&provider, at_most(222)).expect("matching digest over the pieces");
        let mut wrong = sha;
        wrong[31] ^= 0x80;
        let provider = make(vec![("big".into(), wrong)]);
        let error = load_big(&provider, at_most(222)).unwrap_err();
        assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
    }
    // The device's own limit applies: IREE's `load` of a span above it is RESOURCE_EXHAUSTED.
    assert!(
        gpu.max_buffer_size() >= 256 << 20,
        "the adapter's limit was requested"
    );
    assert_eq!(backend.live_buffers(), 0, "every piece was dropped");
}
