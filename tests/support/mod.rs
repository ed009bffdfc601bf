//! Shared helpers of the native HTTP provider tests: real servers (nginx, and our fault-injecting
//! node server for what nginx cannot do), weights files with known layouts, and GPU buffers (the
//! WebGPU backend's, on Mesa lavapipe).
#![allow(dead_code)]

pub mod faulty;
pub mod files;
pub mod nginx;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use webdelegate::backends::WebGpuBackend;
use webdelegate::registry::BackendInterface;

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let unique = format!(
            "webdelegate-{label}-{}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        let path = std::env::temp_dir().join(unique);
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// xorshift64: deterministic test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    pub fn bytes(&mut self, length: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(length + 8);
        while out.len() < length {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(length);
        out
    }
}

/// The WebGPU backend on the default adapter (Mesa lavapipe on CI); its `allocator()` makes the
/// GPU buffers parameters load into, and `live_buffers()` counts them.
pub fn gpu_backend() -> WebGpuBackend {
    let backend = pollster::block_on(WebGpuBackend::new());
    assert!(
        backend.is_available(),
        "a GPU adapter (lavapipe): {:?}",
        backend.unavailable_reason()
    );
    backend
}
