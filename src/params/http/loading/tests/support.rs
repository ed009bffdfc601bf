//! Test doubles shared by the unit tests: a seeded generator and a host buffer that enforces
//! the GPU queue's alignment rule.

use crate::error::{Status, StatusCode};
use crate::params::{HostBuffer, ParameterBuffer, StatusResult};
use crate::send_sync::LocalBoxFuture;
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};

/// xorshift64: deterministic, so failures reproduce.
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
}

pub fn random_bytes(rng: &mut Rng, length: usize) -> Vec<u8> {
    (0..length).map(|_| rng.next() as u8).collect()
}

/// A host buffer that, like `GPUQueue.writeBuffer`, refuses writes whose offset or size is not a
/// multiple of 4 (counting them), and counts read-backs.
pub struct AlignedBuffer {
    inner: HostBuffer,
    unaligned: AtomicUsize,
    reads: AtomicUsize,
}

impl AlignedBuffer {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self {
            inner: HostBuffer::from_bytes(bytes),
            unaligned: AtomicUsize::new(0),
            reads: AtomicUsize::new(0),
        }
    }
    pub fn bytes(&self) -> Vec<u8> {
        self.inner.to_vec()
    }
    pub fn unaligned_writes(&self) -> usize {
        self.unaligned.load(Ordering::Relaxed)
    }
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::Relaxed)
    }
}

impl ParameterBuffer for AlignedBuffer {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write(&self, offset: u64, bytes: &[u8]) -> StatusResult<()> {
        if !offset.is_multiple_of(4) || !bytes.len().is_multiple_of(4) {
            self.unaligned.fetch_add(1, Ordering::Relaxed);
            return Err(Status::new(
                StatusCode::InvalidArgument,
                format!("unaligned write of {} bytes at {offset}", bytes.len()),
            ));
        }
        self.inner.write(offset, bytes)
    }
    fn read(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read(offset, length)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
