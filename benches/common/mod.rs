//! Shared by the native WebGPU benchmarks (`matmul`, `qmatvec`, `decode_step`): the backend on
//! the adapter wgpu picks, named on stdout; run timings (median, min, max); and `--json FILE`,
//! every measured number written as one flat JSON object (rewritten after each number, so a
//! run stopped by a time limit keeps what it measured), which `scripts/device-bench.sh` reads;
//! `--require-gpu` (refuse a CPU adapter) and `--adapter-only` (report the adapter and stop).
#![allow(dead_code)]

use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use webdelegate::backends::webgpu::{ADAPTER_KEYS, AdapterReport, WebGpuBackend};
use webdelegate::registry::{BackendInterface, BackendOption, BackendOptionContext};

/// The command line, without the `--bench` cargo passes.
pub struct Args(Vec<String>);

impl Args {
    pub fn from_env() -> Self {
        Self(
            std::env::args()
                .skip(1)
                .filter(|a| a != "--bench")
                .collect(),
        )
    }

    /// Whether `flag` (e.g. `--quick`) was passed.
    pub fn flag(&self, flag: &str) -> bool {
        self.0.iter().any(|a| a == flag)
    }

    /// Every value given as `name VALUE`.
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.0
            .windows(2)
            .filter(|w| w[0] == name)
            .map(|w| w[1].as_str())
            .collect()
    }

    /// The last value given as `name VALUE`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values(name).pop()
    }

    /// The words that are neither options nor their values (filters).
    pub fn words(&self, options_with_values: &[&str]) -> Vec<&str> {
        let mut words = Vec::new();
        let mut skip = false;
        for a in &self.0 {
            if std::mem::take(&mut skip) {
                continue;
            }
            if options_with_values.contains(&a.as_str()) {
                skip = true;
            } else if !a.starts_with('-') {
                words.push(a.as_str());
            }
        }
        words
    }
}

/// The measured numbers of one run, flat `{key: value}`, mirrored to `--json FILE` if given.
pub struct Record {
    path: Option<PathBuf>,
    values: Map<String, Value>,
}

impl Record {
    /// A record for the bench `name`, written to the file of `--json FILE` if any.
    pub fn new(name: &str, args: &Args) -> Self {
        let mut record = Self {
            path: args.value("--json").map(PathBuf::from),
            values: Map::new(),
        };
        record.set("bench", name);
        record
    }

    /// Sets `key` and rewrites the file.
    pub fn set(&mut self, key: &str, value: impl Into<Value>) {
        let value = match value.into() {
            // JSON has no NaN or infinity.
            Value::Number(n) if n.as_f64().is_some_and(|f| !f.is_finite()) => Value::Null,
            v => v,
        };
        self.values.insert(key.to_owned(), value);
        if let Some(path) = &self.path {
            let text = serde_json::to_string_pretty(&self.values).expect("json");
            if let Err(e) = std::fs::write(path, text + "\n") {
                eprintln!("cannot write {}: {e}", path.display());
            }
        }
    }

    /// The value recorded under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// Records a timing under `{key}_ms`, `{key}_spread` and `{key}_runs`.
    pub fn timing(&mut self, key: &str, t: &Timing) {
        self.set(&format!("{key}_ms"), t.median * 1e3);
        self.set(&format!("{key}_spread"), t.spread());
        self.set(&format!("{key}_runs"), t.runs as u64);
    }
}

/// The WebGPU backend on the adapter wgpu picks (no flags: Vulkan natively, lavapipe where the
/// machine has no GPU), its adapter printed as `{bench} on adapter: ...` and recorded under
/// `adapter.*`, with the device's `limits.*` and `features.*`. Exits with status 2, saying why,
/// when no adapter or device can be had; with 3 when `--require-gpu` was passed and the adapter
/// is a CPU (fallback) one such as lavapipe; with 0 after the report under `--adapter-only`.
pub fn webgpu_backend(bench: &str, args: &Args, record: &mut Record) -> WebGpuBackend {
    let backend = pollster::block_on(WebGpuBackend::new());
    if !backend.is_available() {
        let reason = backend.unavailable_reason().unwrap_or_default();
        record.set("adapter.error", reason.as_str());
        eprintln!("{bench}: no WebGPU (Vulkan) adapter: {reason}");
        std::process::exit(2);
    }
    let a: AdapterReport = backend.adapter().unwrap_or_default();
    println!(
        "{bench} on adapter: {} (backend {}, driver {}, vendor {}, device {}, fallback {})",
        a.description, a.backend, a.architecture, a.vendor, a.device, a.fallback
    );
    for key in ADAPTER_KEYS {
        let mut option = [BackendOption::new(key, false).expect("key")];
        if backend
            .get_option(&mut BackendOptionContext::default(), &mut option)
            .is_ok()
        {
            record.set(key, serde_json::to_value(option[0].value()).expect("json"));
        }
    }
    if a.fallback && args.flag("--require-gpu") {
        eprintln!(
            "{bench}: the adapter is {:?} ({}), a CPU (fallback) adapter, not a GPU: \
             refused under --require-gpu",
            a.description, a.architecture
        );
        std::process::exit(3);
    }
    if args.flag("--adapter-only") {
        std::process::exit(0);
    }
    backend
}

/// Median, fastest and slowest of timed runs, in seconds.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
}

impl Timing {
    /// `(max - min) / median`.
    pub fn spread(&self) -> f64 {
        (self.max - self.min) / self.median
    }
}

/// Times `once` after `warmups` untimed calls: at least `min_runs` runs, then more until
/// `max_runs` or until `budget` has passed since the first timed run.
pub fn measure(
    warmups: usize,
    min_runs: usize,
    max_runs: usize,
    budget: Duration,
    mut once: impl FnMut(),
) -> Timing {
    for _ in 0..warmups {
        once();
    }
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < min_runs.max(1) || (times.len() < max_runs && start.elapsed() < budget) {
        let t0 = Instant::now();
        once();
        times.push(t0.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Timing {
        median: times[times.len() / 2],
        min: times[0],
        max: *times.last().expect("runs"),
        runs: times.len(),
    }
}
