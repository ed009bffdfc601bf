//! The browser's zero-copy path: the raw `GPUQueue` and `GPUBuffer` behind a destination, so a
//! `Uint8Array` chunk of a response body goes to `queue.writeBuffer(buffer, offset, chunk,
//! chunkOffset, size)` without passing through wasm memory. wgpu (webgpu backend) exposes the
//! JS handles through `Buffer::as_webgpu` / `Queue::as_webgpu`.
//!
//! The destinations recognised are the WebGPU backend's own buffers
//! ([`crate::backends::webgpu::GpuBuffer`], what its [`crate::backends::webgpu::GpuAllocator`]
//! makes and its `init` loads parameters into); any other buffer is written from host memory.
//! The queue is the buffer's own device queue, so chunk writes stay in order with the buffer's
//! other writes (edge words, patches) and with the programs that later read it.

use crate::backends::webgpu::GpuBuffer;
use crate::error::{Status, StatusCode};
use crate::params::{ParameterBuffer, StatusResult};

/// A GPU buffer and the queue that writes it, as JavaScript objects.
pub struct RawGpuTarget {
    queue: wgpu::webgpu::GpuQueue,
    buffer: wgpu::webgpu::GpuBuffer,
}

/// The raw target behind `buffer`, when it is a [`GpuBuffer`] of the WebGPU backend (and wgpu
/// runs on the browser's WebGPU, which it always does in wasm32 here).
pub fn raw_gpu_target(buffer: &dyn ParameterBuffer) -> Option<RawGpuTarget> {
    let gpu = buffer.as_any().downcast_ref::<GpuBuffer>()?;
    Some(RawGpuTarget {
        queue: gpu.queue().as_webgpu()?.clone(),
        buffer: gpu.raw().as_webgpu()?.clone(),
    })
}

impl RawGpuTarget {
    /// `queue.writeBuffer(buffer, offset, array, chunk_offset, length)`; the caller keeps
    /// `offset` and `length` multiples of 4 and the range inside the buffer.
    ///
    /// # Errors
    /// `INTERNAL` when the browser throws.
    pub fn write(
        &self,
        offset: u64,
        array: &js_sys::Uint8Array,
        chunk_offset: usize,
        length: usize,
    ) -> StatusResult<()> {
        self.queue
            .write_buffer_with_f64_and_u8_array_and_f64_and_f64(
                &self.buffer,
                offset as f64,
                array,
                chunk_offset as f64,
                length as f64,
            )
            .map_err(|error| {
                Status::new(
                    StatusCode::Internal,
                    format!("GPUQueue.writeBuffer of {length} bytes at {offset} threw: {error:?}"),
                )
            })
    }
}
