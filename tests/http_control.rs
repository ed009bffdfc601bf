//! Load control against our fault-injecting server (a slow body, so requests are in flight):
//! cancelling a load returns CANCELLED and leaves no request running; Suspend stops every
//! request and releases the staging pool, Resume continues from the first byte not consumed.

#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::faulty::FaultyServer;
use support::files::{WrittenFile, random_tensors, write_safetensors};
use support::{Rng, TempDir};
use webdelegate::StatusCode;
use webdelegate::params::http::{
    AbortHandle, HttpProvider, HttpProviderOptions, LoadControl, LoadObserver, LoadProgress,
    NativeTransport, NativeTransportOptions, RetryPolicy, ScopeOptions,
};
use webdelegate::params::{HostAllocator, ParameterProvider, Signal, SpanRequest};

struct Fixture {
    _dir: TempDir,
    server: FaultyServer,
    file: WrittenFile,
}

fn fixture(seed: u64, count: usize, max_len: u64) -> Fixture {
    let dir = TempDir::new("control");
    let mut rng = Rng(seed);
    let file = write_safetensors(
        &dir.path().join("m.safetensors"),
        &random_tensors(&mut rng, count, max_len),
    );
    let server = FaultyServer::start(dir.path());
    Fixture {
        _dir: dir,
        server,
        file,
    }
}

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<LoadProgress>>,
}

impl LoadObserver for Recorder {
    fn progress(&self, progress: &LoadProgress) {
        self.events.lock().unwrap().push(progress.clone());
    }
    fn warning(&self, _message: &str) {}
}

fn options() -> HttpProviderOptions {
    HttpProviderOptions {
        concurrency: 2,
        chunk_size: 16 << 10,
        max_request_size: 256 << 10,
        retry: RetryPolicy {
            retries: 3,
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_millis(40),
        },
        ..HttpProviderOptions::default()
    }
}

fn provider(options: HttpProviderOptions, recorder: &Arc<Recorder>) -> HttpProvider {
    let transport = NativeTransport::new(NativeTransportOptions {
        connect_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_millis(400),
    });
    HttpProvider::new(Arc::new(transport), options).with_observer(recorder.clone())
}

fn whole(file: &WrittenFile) -> Vec<SpanRequest> {
    file.index
        .entries()
        .iter()
        .map(|e| SpanRequest::whole(e.key.clone(), e.length))
        .collect()
}

fn range_start(range: &Option<String>) -> u64 {
    range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split('-').next())
        .and_then(|s| s.parse().ok())
        .expect("a Range header")
}

#[test]
fn cancelling_a_load_returns_cancelled_and_leaves_no_request_running() {
    let f = fixture(18, 12, 300_000);
    let recorder = Arc::new(Recorder::default());
    let p = Arc::new(provider(options(), &recorder));
    let url = f.server.file_url("slow=5", "m.safetensors");
    pollster::block_on(p.add_scope_with_index(
        "m",
        &url,
        f.file.index.clone(),
        ScopeOptions::default(),
    ))
    .unwrap();
    let abort = AbortHandle::new();
    let trigger = abort.clone();
    let watcher = recorder.clone();
    let aborter = std::thread::spawn(move || {
        while watcher.events.lock().unwrap().is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        trigger.abort();
    });
    let requests = whole(&f.file);
    let control = LoadControl { abort: Some(abort) };
    let started = Instant::now();
    let err =
        pollster::block_on(p.load_with(&HostAllocator, "m", &requests, &control)).unwrap_err();
    aborter.join().unwrap();
    assert_eq!(err.code(), StatusCode::Cancelled, "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // The cancelled load is recorded, with what it had received and how it ended.
    let record = p.last_load().expect("a record of the cancelled load");
    assert_eq!(
        record.outcome.as_ref().unwrap_err().code(),
        StatusCode::Cancelled
    );
    assert!(record.stats.requests_sent >= 1, "{:?}", record.stats);
    assert!(record.stats.bytes_received > 0, "{:?}", record.stats);
    assert!(record.stats.bytes_received < record.stats.bytes_needed);
    assert_eq!(p.total_stats(), record.stats, "the totals count it too");
    assert_eq!(
        f.server.wait_idle(Duration::from_secs(3)),
        0,
        "a request is still being answered"
    );
    // An already-aborted handle sends nothing. (A native transport thread of the cancelled load
    // may still be connecting: let the server's log settle first.)
    let mut before = f.server.log().len();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = f.server.log().len();
        if now == before {
            break;
        }
        before = now;
    }
    let err =
        pollster::block_on(p.load_with(&HostAllocator, "m", &requests, &control)).unwrap_err();
    assert_eq!(err.code(), StatusCode::Cancelled);
    assert_eq!(f.server.log().len(), before);
    let record = p.last_load().unwrap();
    assert_eq!(record.outcome.unwrap_err().code(), StatusCode::Cancelled);
    assert_eq!(record.stats.requests_sent, 0, "{:?}", record.stats);
}

#[test]
fn suspend_stops_requests_and_resume_continues_from_the_first_uncommitted_byte() {
    let f = fixture(19, 8, 600_000);
    let recorder = Arc::new(Recorder::default());
    let p = Arc::new(provider(
        HttpProviderOptions {
            concurrency: 1,
            max_request_size: 4 << 20,
            ..options()
        },
        &recorder,
    ));
    let url = f.server.file_url("slow=5", "m.safetensors");
    pollster::block_on(p.add_scope_with_index(
        "m",
        &url,
        f.file.index.clone(),
        ScopeOptions::default(),
    ))
    .unwrap();
    let controller = {
        let p = p.clone();
        let f_url = f.server.url.clone();
        std::thread::spawn(move || {
            // Let some bytes arrive, suspend, check nothing is being sent, resume.
            std::thread::sleep(Duration::from_millis(150));
            p.notify(Signal::Suspend).unwrap();
            std::thread::sleep(Duration::from_millis(400));
            let active: u32 = ureq::get(format!("{f_url}/__active"))
                .call()
                .unwrap()
                .body_mut()
                .read_to_string()
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let idle_staging = p.staging_pool().idle_bytes();
            p.notify(Signal::Resume).unwrap();
            (active, idle_staging)
        })
    };
    let requests = whole(&f.file);
    let loaded =
        pollster::block_on(p.load(&HostAllocator, "m", &requests)).expect("load after resume");
    let (active_while_suspended, idle_staging) = controller.join().unwrap();
    assert_eq!(active_while_suspended, 0, "no request runs while suspended");
    assert_eq!(idle_staging, 0, "suspend releases the staging pool");
    for (request, span) in requests.iter().zip(&loaded) {
        let bytes = pollster::block_on(span.buffer.read(0, span.length)).unwrap();
        assert!(bytes == f.file.tensor(&request.key));
    }
    let log = f.server.log();
    let data: Vec<_> = log[1..].iter().collect();
    assert_eq!(data.len(), 2, "one request, resumed once: {log:#?}");
    let first = range_start(&data[0].range);
    let resumed = range_start(&data[1].range);
    assert!(resumed > first, "resumed at {resumed}, started at {first}");
    assert!(data[1].if_range.is_some());
    let stats = p.last_stats().unwrap();
    assert_eq!(
        stats.bytes_received, stats.bytes_planned,
        "resumed from the first byte not consumed"
    );
}
