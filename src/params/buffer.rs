//! The buffers parameters land in (IREE's HAL buffers, abstracted): host memory here, GPU
//! buffers in the WebGPU backend.

use crate::browser::chunk::JsChunk;
use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::span::check_span;
use crate::send_sync::{LocalBoxFuture, MaybeSendSync};
use std::any::Any;
use std::sync::{Arc, Mutex};

/// A buffer a provider can write parameter bytes into and read them back from.
pub trait ParameterBuffer: MaybeSendSync {
    /// Size in bytes.
    fn size(&self) -> u64;

    /// Copies `bytes` into the buffer at `offset`. Bytes written are visible to later reads and
    /// to work submitted after this call.
    ///
    /// # Errors
    /// `OUT_OF_RANGE` when the bytes would run past the end; device errors as statuses.
    fn write(&self, offset: u64, bytes: &[u8]) -> StatusResult<()>;

    /// Reads `length` bytes from `offset` (asynchronous: a GPU buffer must be mapped first).
    ///
    /// # Errors
    /// `OUT_OF_RANGE` when the span runs past the end; device errors as statuses.
    fn read(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>>;

    /// The concrete buffer, so a backend can recover its own type (e.g. a `wgpu::Buffer`).
    fn as_any(&self) -> &dyn Any;

    /// Where bytes that live in JavaScript can be written into this buffer without passing
    /// through wasm memory (a WebGPU buffer and its queue, in the browser), if anywhere. The
    /// default: nowhere (a host buffer is written from host memory).
    fn direct_write(&self) -> Option<Box<dyn DirectWrite>> {
        None
    }
}

/// A buffer's zero-copy write path for JavaScript chunks ([`ParameterBuffer::direct_write`]):
/// the HTTP provider hands it a response body's [`JsChunk`] as it arrives. Writes go in order
/// with the buffer's other writes. Implemented by the WebGPU backend (its `GPUQueue.writeBuffer`);
/// natively no [`JsChunk`] exists, so nothing ever calls it there.
pub trait DirectWrite: MaybeSendSync {
    /// Writes `length` bytes of `chunk` from `chunk_offset` at buffer `offset`. The caller keeps
    /// `offset` and `length` multiples of 4 and both ranges in bounds.
    ///
    /// # Errors
    /// `INTERNAL` when the platform refuses the write.
    fn write_js_chunk(
        &self,
        offset: u64,
        chunk: &JsChunk,
        chunk_offset: usize,
        length: usize,
    ) -> StatusResult<()>;
}

/// A buffer shared by the spans that live in it and the program that uses them.
pub type SharedBuffer = Arc<dyn ParameterBuffer>;

/// Makes buffers for `load` (IREE's device allocator).
pub trait BufferAllocator: MaybeSendSync {
    /// A zero-filled buffer of `size` bytes.
    ///
    /// # Errors
    /// `RESOURCE_EXHAUSTED` when it cannot be had; `INVALID_ARGUMENT` for sizes the device refuses.
    fn allocate(&self, size: u64, label: &str) -> StatusResult<SharedBuffer>;

    /// The largest buffer it makes, in bytes (a GPU device's `maxBufferSize`). The default: no
    /// limit but the address space.
    fn max_buffer_size(&self) -> u64 {
        u64::MAX
    }

    /// Zero-filled buffers of `sizes` (with their labels), all or none: the first failure
    /// drops what was made. Asynchronous, because a GPU reports running out of memory after
    /// the call that ran out ( a `GPUDevice` error scope). The default allocates one by one.
    ///
    /// # Errors
    /// As [`BufferAllocator::allocate`]; `RESOURCE_EXHAUSTED` when the device ran out of memory.
    fn allocate_all<'a>(
        &'a self,
        sizes: &'a [(u64, String)],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<SharedBuffer>>> {
        Box::pin(async move {
            sizes
                .iter()
                .map(|(size, label)| self.allocate(*size, label))
                .collect()
        })
    }
}

/// A buffer in host memory.
#[derive(Debug, Default)]
pub struct HostBuffer {
    bytes: Mutex<Vec<u8>>,
}

impl HostBuffer {
    /// A zero-filled buffer of `size` bytes. The allocation is fallible: a size that cannot be
    /// had (sizes come from weights files and JavaScript) is an error, never an abort.
    ///
    /// # Errors
    /// `RESOURCE_EXHAUSTED` when `size` does not fit in this platform's address space or the
    /// allocator refuses it.
    pub fn zeroed(size: u64) -> StatusResult<Self> {
        Ok(Self::from_bytes(zeroed_bytes(size, "a host buffer")?))
    }

    /// A buffer holding `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self {
            bytes: Mutex::new(bytes),
        }
    }

    /// A copy of the contents.
    pub fn to_vec(&self) -> Vec<u8> {
        self.lock().clone()
    }

    /// The contents, without a copy.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // Every mutation is one `copy_from_slice`, so a poisoned lock holds consistent bytes.
        self.bytes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `size` zero bytes, allocated fallibly (`what` names them in the error).
///
/// # Errors
/// `RESOURCE_EXHAUSTED` when `size` does not fit in the address space or cannot be allocated.
pub fn zeroed_bytes(size: u64, what: &str) -> StatusResult<Vec<u8>> {
    let exhausted = |reason: String| {
        Status::new(
            StatusCode::ResourceExhausted,
            format!("cannot allocate {size} bytes of host memory for {what}: {reason}"),
        )
    };
    let length = usize::try_from(size)
        .map_err(|_| exhausted("more than this platform's address space".to_owned()))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(length)
        .map_err(|error| exhausted(error.to_string()))?;
    bytes.resize(length, 0);
    Ok(bytes)
}

/// `offset..offset + length` as a `usize` range, already checked against the buffer size.
fn host_range(offset: u64, length: u64) -> std::ops::Range<usize> {
    // check_span proved offset + length <= size, and size is a usize.
    let start = offset as usize;
    start..start + length as usize
}

impl ParameterBuffer for HostBuffer {
    fn size(&self) -> u64 {
        self.lock().len() as u64
    }

    fn write(&self, offset: u64, bytes: &[u8]) -> StatusResult<()> {
        let mut target = self.lock();
        check_span(
            "host buffer write",
            offset,
            bytes.len() as u64,
            target.len() as u64,
        )?;
        target[host_range(offset, bytes.len() as u64)].copy_from_slice(bytes);
        Ok(())
    }

    fn read(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            let source = self.lock();
            check_span("host buffer read", offset, length, source.len() as u64)?;
            Ok(source[host_range(offset, length)].to_vec())
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Allocates [`HostBuffer`]s.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostAllocator;

impl BufferAllocator for HostAllocator {
    fn allocate(&self, size: u64, _label: &str) -> StatusResult<SharedBuffer> {
        Ok(Arc::new(HostBuffer::zeroed(size)?))
    }
}
