//! GPU buffers that count themselves, and the [`BufferAllocator`] a parameter provider loads
//! weights through, so bytes go from the provider straight into GPU buffers.
//!
//! Every buffer the backend creates is a [`GpuBuffer`]: creating one increments the device's
//! live count, dropping one calls `GPUBuffer.destroy()` (the browser frees GPU memory promptly,
//! not at garbage collection; WebGPU defers the free until submitted work is done) and
//! decrements it. Tests use the count to prove that `destroy` frees everything.
//!
//! Host writes (`ParameterBuffer::write`) go through `queue.writeBuffer`, which only takes
//! 4-byte-aligned offsets and lengths. A provider streams HTTP bodies in arbitrary chunks, so a
//! write whose ends fall inside a 32-bit word writes the whole words in between and merges the
//! edge bytes on the GPU with a one-thread patch kernel, in queue order: no read-back, and
//! bytes already in the buffer are kept, whatever order the chunks arrive in.

use crate::backends::webgpu::device::{GpuContext, share};
use crate::backends::webgpu::kernels::patch::{PATCH_PARAMS, PatchKey};
use crate::backends::webgpu::kernels::{KernelKey, Uniforms};
use crate::backends::webgpu::readback::{read_mapped, submitted_work_done};
use crate::error::Status;
use crate::params::{
    BufferAllocator, DirectWrite, ParameterBuffer, SharedBuffer, StatusResult, check_span,
};
use crate::send_sync::LocalBoxFuture;
use std::any::Any;
use std::sync::Arc;

/// A GPU buffer of the WebGPU backend: counted while alive, destroyed when dropped.
pub struct GpuBuffer {
    ctx: Arc<GpuContext>,
    buffer: wgpu::Buffer,
    size: u64,
}

impl std::fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBuffer")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl GpuBuffer {
    /// A zero-filled buffer of `size` usable bytes (allocated rounded up to a whole word).
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` when the size exceeds the device's `maxBufferSize`; `UNAVAILABLE`
    /// when the device was lost.
    pub(crate) fn new(
        ctx: &Arc<GpuContext>,
        size: u64,
        usage: wgpu::BufferUsages,
        label: &str,
    ) -> StatusResult<Self> {
        if let Some(reason) = ctx.lost() {
            return Err(Status::unavailable(format!(
                "cannot allocate {label}: the WebGPU device was lost ({reason})"
            )));
        }
        let allocated = size
            .max(4)
            .checked_next_multiple_of(4)
            .filter(|&s| s <= ctx.limits.max_buffer_size)
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "{label}: {size} bytes exceed this device's largest buffer ({} bytes)",
                    ctx.limits.max_buffer_size
                ))
            })?;
        let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: allocated,
            usage,
            mapped_at_creation: false,
        });
        ctx.live.created(allocated);
        Ok(Self {
            ctx: ctx.clone(),
            buffer,
            size,
        })
    }

    /// The wgpu buffer.
    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    /// Bytes allocated (the usable size rounded up to a whole word, at least 4).
    pub(crate) fn allocated(&self) -> u64 {
        self.buffer.size()
    }

    /// Whether this buffer belongs to the device of `ctx`.
    pub(crate) fn same_device(&self, ctx: &Arc<GpuContext>) -> bool {
        Arc::ptr_eq(&self.ctx, ctx)
    }

    /// Merges `bytes` into the word at byte `word_offset` starting at byte `lane` of it.
    fn patch_word(&self, word_offset: u64, lane: usize, bytes: &[u8]) -> StatusResult<()> {
        let mut value = 0u32;
        let mut mask = 0u32;
        for (i, &byte) in bytes.iter().enumerate().take(4 - lane) {
            let shift = 8 * (lane + i) as u32;
            value |= u32::from(byte) << shift;
            mask |= 0xff << shift;
        }
        let align = self.ctx.storage_alignment();
        let window = word_offset / align * align;
        let window_len = (self.allocated() - window).min(align + 4);
        let pipeline = self
            .ctx
            .pipelines
            .get_or_compile_unchecked(&self.ctx.device, &KernelKey::new(PatchKey))
            .map_err(|e| Status::internal(e.message().to_owned()))?;
        let uniforms = GpuBuffer::new(
            &self.ctx,
            16,
            wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            "parameter patch uniforms",
        )?;
        let words = Uniforms::new(&PATCH_PARAMS)
            .vec4(
                "head",
                [((word_offset - window) / 4) as u32, value, mask, 0],
            )
            .finish()
            .map_err(|e| Status::internal(e.message().to_owned()))?;
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        self.ctx.queue.write_buffer(uniforms.raw(), 0, &bytes);
        let bind_group = self
            .ctx
            .device
            .create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("parameter patch"),
                layout: &pipeline.layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: uniforms.raw().as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &self.buffer,
                            offset: window,
                            size: std::num::NonZeroU64::new(window_len),
                        }),
                    },
                ],
            });
        let mut encoder = self
            .ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("parameter patch"),
            });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("parameter patch"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&pipeline.pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        self.ctx.queue.submit([encoder.finish()]);
        Ok(())
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        self.buffer.destroy();
        self.ctx.live.destroyed(self.buffer.size());
    }
}

impl ParameterBuffer for GpuBuffer {
    fn size(&self) -> u64 {
        self.size
    }

    fn write(&self, offset: u64, bytes: &[u8]) -> StatusResult<()> {
        check_span("GPU buffer write", offset, bytes.len() as u64, self.size)?;
        if bytes.is_empty() {
            return Ok(());
        }
        let end = offset + bytes.len() as u64;
        let head_lane = (offset % 4) as usize;
        // Whole words: [first_word, last_word), in bytes.
        let first_word = offset.next_multiple_of(4);
        let last_word = end / 4 * 4;
        if head_lane != 0 {
            self.patch_word(offset - head_lane as u64, head_lane, bytes)?;
        }
        if last_word > first_word {
            let from = (first_word - offset) as usize;
            let to = (last_word - offset) as usize;
            self.ctx
                .queue
                .write_buffer(&self.buffer, first_word, &bytes[from..to]);
        }
        if !end.is_multiple_of(4) && last_word >= first_word {
            let from = (last_word - offset) as usize;
            self.patch_word(last_word, 0, &bytes[from..])?;
        }
        Ok(())
    }

    fn read(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            check_span("GPU buffer read", offset, length, self.size)?;
            if length == 0 {
                return Ok(Vec::new());
            }
            let start = offset / 4 * 4;
            // Within the allocation: it is the usable size rounded up to a whole word.
            let end = (offset + length).next_multiple_of(4);
            let staging = GpuBuffer::new(
                &self.ctx,
                end - start,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                "parameter read-back",
            )?;
            let mut encoder =
                self.ctx
                    .device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("parameter read-back"),
                    });
            encoder.copy_buffer_to_buffer(&self.buffer, start, staging.raw(), 0, end - start);
            self.ctx.queue.submit([encoder.finish()]);
            let words = read_mapped(&self.ctx, staging.raw(), end - start)
                .await
                .map_err(|e| Status::unavailable(e.to_string()))?;
            let from = (offset - start) as usize;
            words
                .get(from..from + length as usize)
                .map(<[u8]>::to_vec)
                .ok_or_else(|| Status::internal("read-back came back short"))
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn direct_write(&self) -> Option<Box<dyn DirectWrite>> {
        super::direct_write::direct_write_of(&self.ctx.queue, &self.buffer)
    }
}

/// Allocates [`GpuBuffer`]s for parameters (storage, copy source and destination).
#[derive(Clone, Debug)]
pub struct GpuAllocator {
    ctx: Arc<GpuContext>,
}

impl GpuAllocator {
    /// An allocator on the device of `ctx`.
    pub(crate) fn new(ctx: Arc<GpuContext>) -> Self {
        Self { ctx }
    }

    /// The largest storage binding the device takes (`maxStorageBufferBindingSize`).
    pub fn max_storage_binding_size(&self) -> u64 {
        self.ctx.limits.max_storage_buffer_binding_size
    }

    /// Resolves once the GPU has finished the work submitted so far, parameter writes included
    /// (`GPUQueue.onSubmittedWorkDone`).
    ///
    /// # Errors
    /// `UNAVAILABLE` when the device was lost or cannot be polled.
    pub async fn submitted_work_done(&self) -> StatusResult<()> {
        submitted_work_done(&self.ctx)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))
    }
}

impl BufferAllocator for GpuAllocator {
    fn allocate(&self, size: u64, label: &str) -> StatusResult<SharedBuffer> {
        let buffer = GpuBuffer::new(
            &self.ctx,
            size,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            label,
        )?;
        Ok(share(buffer))
    }

    fn max_buffer_size(&self) -> u64 {
        self.ctx.limits.max_buffer_size
    }

    /// Creates every buffer inside one out-of-memory error scope, pushed and popped with no
    /// await in between (so no other work interleaves with the scope), and waits for its
    /// verdict: a device that ran out of memory fails the batch with `RESOURCE_EXHAUSTED`, and
    /// the buffers made are dropped (destroyed) at once.
    fn allocate_all<'a>(
        &'a self,
        sizes: &'a [(u64, String)],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<SharedBuffer>>> {
        Box::pin(async move {
            let scope = self
                .ctx
                .device
                .push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let made: StatusResult<Vec<SharedBuffer>> = sizes
                .iter()
                .map(|(size, label)| self.allocate(*size, label))
                .collect();
            let verdict = scope.pop();
            let buffers = made?;
            if let Some(error) = verdict.await {
                drop(buffers);
                let total: u64 = sizes.iter().map(|(size, _)| *size).sum();
                return Err(Status::resource_exhausted(format!(
                    "the GPU ran out of memory allocating {} buffers of {total} bytes in all \
                     ({} bytes in other buffers stay allocated): {error}",
                    sizes.len(),
                    self.ctx.live.bytes()
                )));
            }
            Ok(buffers)
        })
    }
}
