//! The staging pool: the few host buffers that response bytes pass through on their way to a
//! destination buffer. Buffers are reused, so host memory held at once is bounded by the number
//! in use (a small multiple of the request concurrency) times the chunk size, whatever the model
//! size. [`StagingPool::release`] drops the idle ones (on `Suspend` / `LowMemory`).
//!
//! The pool counts the bytes it has handed out and its peak, so tests can check the bound.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

struct PoolState {
    chunk_size: usize,
    max_idle: usize,
    idle: Mutex<Vec<Vec<u8>>>,
    /// Bytes of the buffers handed out and not yet back (or dropped).
    in_use: AtomicUsize,
    peak: AtomicUsize,
    /// Bumped by `release`: buffers taken before it are dropped, not kept, when they return.
    epoch: AtomicUsize,
    /// Whether returned buffers are kept for reuse (not while the host is suspended).
    retaining: AtomicBool,
}

/// A pool of `chunk_size`-byte host buffers. Cheap to clone (shared).
#[derive(Clone)]
pub struct StagingPool {
    state: Arc<PoolState>,
}

impl std::fmt::Debug for StagingPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagingPool")
            .field("chunk_size", &self.state.chunk_size)
            .field("in_use", &self.in_use_bytes())
            .finish_non_exhaustive()
    }
}

impl StagingPool {
    /// A pool of buffers of `chunk_size` bytes (at least 4) keeping at most `max_idle` idle.
    pub fn new(chunk_size: usize, max_idle: usize) -> Self {
        Self {
            state: Arc::new(PoolState {
                chunk_size: chunk_size.max(4),
                max_idle,
                idle: Mutex::new(Vec::new()),
                in_use: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                epoch: AtomicUsize::new(0),
                retaining: AtomicBool::new(true),
            }),
        }
    }

    /// Size of each buffer.
    pub fn chunk_size(&self) -> usize {
        self.state.chunk_size
    }

    /// An empty buffer with room for `chunk_size` bytes (reused when one is idle).
    pub fn take(&self) -> StagingBuffer {
        let reused = self.lock_idle().pop();
        let bytes = reused.unwrap_or_else(|| vec![0; self.state.chunk_size]);
        let now = self.state.in_use.fetch_add(bytes.len(), Ordering::Relaxed) + bytes.len();
        self.state.peak.fetch_max(now, Ordering::Relaxed);
        StagingBuffer {
            bytes,
            len: 0,
            pool: Some(self.state.clone()),
            epoch: self.state.epoch.load(Ordering::Relaxed),
        }
    }

    /// Drops every idle buffer, and every buffer now in use once it comes back.
    pub fn release(&self) {
        self.state.epoch.fetch_add(1, Ordering::Relaxed);
        self.lock_idle().clear();
    }

    /// Whether buffers coming back are kept for reuse (`false` while suspended: they are
    /// dropped, so a suspended provider holds no idle staging memory).
    pub fn set_retaining(&self, retaining: bool) {
        self.state.retaining.store(retaining, Ordering::Relaxed);
        if !retaining {
            self.release();
        }
    }

    /// Bytes handed out and not yet returned.
    pub fn in_use_bytes(&self) -> usize {
        self.state.in_use.load(Ordering::Relaxed)
    }

    /// Most bytes handed out at once since the pool was made.
    pub fn peak_bytes(&self) -> usize {
        self.state.peak.load(Ordering::Relaxed)
    }

    /// Bytes held idle.
    pub fn idle_bytes(&self) -> usize {
        self.lock_idle().iter().map(Vec::len).sum()
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        lock(&self.state.idle)
    }
}

fn lock(idle: &Mutex<Vec<Vec<u8>>>) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
    // The vector only ever gains or loses whole buffers: a poisoned lock is still consistent.
    idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A buffer from a [`StagingPool`] (or a free-standing one); returns to its pool on drop.
/// Derefs to its valid bytes.
pub struct StagingBuffer {
    bytes: Vec<u8>,
    len: usize,
    pool: Option<Arc<PoolState>>,
    epoch: usize,
}

impl StagingBuffer {
    /// A buffer outside any pool holding `bytes` (for small reads and tests).
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Self {
            bytes,
            len,
            pool: None,
            epoch: 0,
        }
    }

    /// The whole buffer, to fill (then call [`StagingBuffer::set_len`]).
    pub fn space(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Room in bytes.
    pub fn capacity(&self) -> usize {
        self.bytes.len()
    }

    /// Marks the first `len` bytes valid (clamped to the capacity).
    pub fn set_len(&mut self, len: usize) {
        self.len = len.min(self.bytes.len());
    }
}

impl Deref for StagingBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

impl Drop for StagingBuffer {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            let bytes = std::mem::take(&mut self.bytes);
            pool.in_use.fetch_sub(bytes.len(), Ordering::Relaxed);
            let mut idle = lock(&pool.idle);
            let current = pool.epoch.load(Ordering::Relaxed) == self.epoch
                && pool.retaining.load(Ordering::Relaxed);
            if current && idle.len() < pool.max_idle && bytes.len() == pool.chunk_size {
                idle.push(bytes);
            }
        }
    }
}
