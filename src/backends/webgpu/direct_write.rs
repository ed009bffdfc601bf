//! The WebGPU backend's zero-copy path for parameter bytes that live in JavaScript: a GPU
//! buffer's [`DirectWrite`] is its raw `GPUQueue` and `GPUBuffer` (from wgpu's `as_webgpu()`),
//! so a response body's chunk goes to `queue.writeBuffer(buffer, offset, chunk, chunkOffset,
//! size)` (through [`crate::params::JsChunk`]) without passing through wasm memory. The queue is the buffer's own device
//! queue, so chunk writes stay in order with the buffer's other writes (edge words, patches)
//! and with the programs that later read it. Natively there are no JavaScript chunks and a
//! buffer has no direct path.

use crate::params::DirectWrite;

/// The direct path of `buffer`, written through `queue` (its device's): in the browser, their
/// raw JavaScript objects; natively none. Takes the wgpu handles, not the backend's buffer type,
/// so this file is a leaf under the buffers.
pub(super) fn direct_write_of(
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
) -> Option<Box<dyn DirectWrite>> {
    platform::direct_write_of(queue, buffer)
}

#[cfg(web)]
mod platform {
    use crate::error::Status;
    use crate::params::{DirectWrite, JsChunk, StatusResult};

    /// A GPU buffer and the queue that writes it, as JavaScript objects.
    struct RawGpuTarget {
        queue: wgpu::webgpu::GpuQueue,
        buffer: wgpu::webgpu::GpuBuffer,
    }

    pub(super) fn direct_write_of(
        queue: &wgpu::Queue,
        buffer: &wgpu::Buffer,
    ) -> Option<Box<dyn DirectWrite>> {
        Some(Box::new(RawGpuTarget {
            queue: queue.as_webgpu()?.clone(),
            buffer: buffer.as_webgpu()?.clone(),
        }))
    }

    impl DirectWrite for RawGpuTarget {
        fn write_js_chunk(
            &self,
            offset: u64,
            chunk: &JsChunk,
            chunk_offset: usize,
            length: usize,
        ) -> StatusResult<()> {
            chunk
                .write_to_gpu(&self.queue, &self.buffer, offset, chunk_offset, length)
                .map_err(|error| {
                    Status::internal(format!(
                        "GPUQueue.writeBuffer of {length} bytes at {offset} threw: {error}"
                    ))
                })
        }
    }
}

#[cfg(native)]
mod platform {
    use crate::params::DirectWrite;

    pub(super) fn direct_write_of(
        _queue: &wgpu::Queue,
        _buffer: &wgpu::Buffer,
    ) -> Option<Box<dyn DirectWrite>> {
        None
    }
}
