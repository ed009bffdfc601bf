//! What a load reports while it runs: progress events for the caller's callback, warnings, and
//! the wire statistics (requests sent, bytes received) that tests and benchmarks check.

use crate::send_sync::MaybeSendSync;
use std::cell::Cell;

/// One progress event of a load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadProgress {
    /// The scope being loaded.
    pub scope: String,
    /// Bytes of the planned requests consumed so far (each byte once, retries not counted twice).
    pub bytes_done: u64,
    /// Bytes the planned requests cover.
    pub bytes_total: u64,
    /// Planned requests completed.
    pub requests_done: u64,
    /// Planned requests.
    pub requests_total: u64,
}

/// Receives a provider's progress events and warnings.
pub trait LoadObserver: MaybeSendSync {
    /// Called after each chunk and each completed request.
    fn progress(&self, progress: &LoadProgress);

    /// Called for conditions that do not fail the load but deserve attention (a server without
    /// Range support, a file without validators).
    fn warning(&self, message: &str);
}

/// Counts of one load, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadStats {
    /// Requests the planner made.
    pub requests_planned: u64,
    /// HTTP requests actually sent (planned ones plus retries and resumptions).
    pub requests_sent: u64,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Distinct bytes the spans needed.
    pub bytes_needed: u64,
    /// Bytes the planned requests cover (needed plus merged gaps).
    pub bytes_planned: u64,
    /// Body bytes received over the wire (including bytes skipped or received twice).
    pub bytes_received: u64,
    /// Bytes written to destinations straight from JavaScript response chunks with
    /// `GPUQueue.writeBuffer`, never passing through wasm memory (browser, WebGPU backend
    /// buffers only).
    pub bytes_written_direct: u64,
    /// Bytes written to destinations from host memory: every byte natively and into host
    /// buffers; in the browser the few bytes carried across chunk boundaries or at unaligned
    /// edges, and splats.
    pub bytes_written_via_host: u64,
}

/// One finished load or gather: its counts (what went over the wire until it ended) and how it
/// ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadRecord {
    /// Its counts.
    pub stats: LoadStats,
    /// `Ok`, or the status it failed with (`CANCELLED` when aborted).
    pub outcome: Result<(), crate::error::Status>,
}

impl LoadStats {
    /// The counts of `self` and `other` together (saturating).
    pub fn plus(&self, other: &LoadStats) -> LoadStats {
        LoadStats {
            requests_planned: self.requests_planned.saturating_add(other.requests_planned),
            requests_sent: self.requests_sent.saturating_add(other.requests_sent),
            retries: self.retries.saturating_add(other.retries),
            bytes_needed: self.bytes_needed.saturating_add(other.bytes_needed),
            bytes_planned: self.bytes_planned.saturating_add(other.bytes_planned),
            bytes_received: self.bytes_received.saturating_add(other.bytes_received),
            bytes_written_direct: self
                .bytes_written_direct
                .saturating_add(other.bytes_written_direct),
            bytes_written_via_host: self
                .bytes_written_via_host
                .saturating_add(other.bytes_written_via_host),
        }
    }

    /// `(bytes received - bytes needed) / bytes needed`; 0 when nothing was needed.
    pub fn overfetch_fraction(&self) -> f64 {
        if self.bytes_needed == 0 {
            return 0.0;
        }
        self.bytes_received.saturating_sub(self.bytes_needed) as f64 / self.bytes_needed as f64
    }
}

/// Progress and statistics of one running load (single-threaded: it lives in the load's task).
pub struct LoadTracker<'a> {
    scope: &'a str,
    observer: Option<&'a dyn LoadObserver>,
    progress: Cell<(u64, u64)>,
    totals: Cell<(u64, u64)>,
    stats: Cell<LoadStats>,
    warned: Cell<bool>,
    /// `bytes_done` at the last report (chunk reports are throttled to one per MiB).
    reported: Cell<u64>,
}

/// Chunks report progress at most once per this many bytes (requests always report).
const REPORT_EVERY: u64 = 1 << 20;

impl<'a> LoadTracker<'a> {
    /// A tracker for a load of `scope` planned as `stats` says.
    pub fn new(scope: &'a str, observer: Option<&'a dyn LoadObserver>, stats: LoadStats) -> Self {
        Self {
            scope,
            observer,
            progress: Cell::new((0, 0)),
            totals: Cell::new((stats.bytes_planned, stats.requests_planned)),
            stats: Cell::new(stats),
            warned: Cell::new(false),
            reported: Cell::new(0),
        }
    }

    fn update(&self, f: impl FnOnce(&mut LoadStats)) {
        let mut stats = self.stats.get();
        f(&mut stats);
        self.stats.set(stats);
    }

    /// The load was planned as `stats` says (its planned counts replace the current ones).
    pub fn planned(&self, stats: LoadStats) {
        self.totals
            .set((stats.bytes_planned, stats.requests_planned));
        self.update(|s| {
            s.requests_planned = stats.requests_planned;
            s.bytes_needed = stats.bytes_needed;
            s.bytes_planned = stats.bytes_planned;
        });
    }

    /// An HTTP request went out.
    pub fn request_sent(&self) {
        self.update(|s| s.requests_sent += 1);
    }

    /// An attempt failed and will be retried.
    pub fn retried(&self) {
        self.update(|s| s.retries += 1);
    }

    /// `received` body bytes arrived, `consumed` of them went into the load.
    pub fn chunk(&self, received: u64, consumed: u64) {
        self.update(|s| s.bytes_received = s.bytes_received.saturating_add(received));
        if consumed > 0 {
            let (bytes, requests) = self.progress.get();
            let bytes = bytes.saturating_add(consumed);
            self.progress.set((bytes, requests));
            if bytes - self.reported.get().min(bytes) >= REPORT_EVERY {
                self.report();
            }
        }
    }

    /// A planned request completed.
    pub fn request_done(&self) {
        let (bytes, requests) = self.progress.get();
        self.progress.set((bytes, requests + 1));
        self.report();
    }

    /// The server answered a Range request with the whole file: reported once per load.
    pub fn ranges_ignored(&self, url: &str) {
        if !self.warned.replace(true)
            && let Some(observer) = self.observer
        {
            observer.warning(&format!(
                "{url} ignores Range requests (HTTP 200): downloading the whole file and \
                 skipping to the wanted bytes"
            ));
        }
    }

    /// The statistics so far.
    pub fn stats(&self) -> LoadStats {
        self.stats.get()
    }

    fn report(&self) {
        let (bytes_done, requests_done) = self.progress.get();
        self.reported.set(bytes_done);
        if let Some(observer) = self.observer {
            observer.progress(&LoadProgress {
                scope: self.scope.to_owned(),
                bytes_done,
                bytes_total: self.totals.get().0,
                requests_done,
                requests_total: self.totals.get().1,
            });
        }
    }
}
