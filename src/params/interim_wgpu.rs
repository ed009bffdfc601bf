//! INTERIM — a minimal wgpu-backed [`ParameterBuffer`] and [`BufferAllocator`], so the HTTP
//! provider can be tested loading into real GPU buffers (lavapipe natively, WebGPU in the
//! browser) before the WebGPU backend's own buffers exist. To be deleted once that backend
//! lands; nothing outside the HTTP provider's tests, JS test API and benchmarks uses it.
//!
//! Buffers are `STORAGE | COPY_DST | COPY_SRC`, sized up to a multiple of 4; writes must be
//! 4-byte aligned (as `GPUQueue.writeBuffer` requires) and are refused otherwise.

use crate::error::{Status, StatusCode};
use crate::params::{BufferAllocator, ParameterBuffer, SharedBuffer, StatusResult, check_span};
use crate::registry::LocalBoxFuture;
use std::any::Any;
use std::sync::Arc;

/// A device and its queue.
#[derive(Clone, Debug)]
pub struct WgpuContext {
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
}

fn unavailable(what: &str, error: impl std::fmt::Display) -> Status {
    Status::new(StatusCode::Unavailable, format!("{what}: {error}"))
}

impl WgpuContext {
    /// The default adapter's device, with the adapter's own limits (so large buffers fit).
    ///
    /// # Errors
    /// `UNAVAILABLE` when there is no adapter or device.
    pub async fn new() -> StatusResult<Self> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions::default())
            .await
            .map_err(|e| unavailable("no GPU adapter", e))?;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("webdelegate parameters (interim)"),
                required_limits: adapter.limits(),
                ..Default::default()
            })
            .await
            .map_err(|e| unavailable("no GPU device", e))?;
        Ok(Self { device, queue })
    }

    /// Resolves once the GPU has finished the work submitted so far (writes included).
    pub async fn submitted_work_done(&self) {
        let (done, wait) = futures_channel::oneshot::channel();
        self.queue.on_submitted_work_done(move || {
            let _ = done.send(());
        });
        // An empty submit flushes pending writeBuffer calls natively.
        self.queue.submit(std::iter::empty());
        #[cfg(native)]
        let _ = self.device.poll(wgpu::PollType::wait_indefinitely());
        let _ = wait.await;
    }
}

/// A GPU buffer holding parameters.
#[derive(Debug)]
pub struct WgpuParameterBuffer {
    /// The buffer.
    pub buffer: wgpu::Buffer,
    /// Where it lives.
    pub context: WgpuContext,
}

impl ParameterBuffer for WgpuParameterBuffer {
    fn size(&self) -> u64 {
        self.buffer.size()
    }

    fn write(&self, offset: u64, bytes: &[u8]) -> StatusResult<()> {
        check_span("GPU buffer write", offset, bytes.len() as u64, self.size())?;
        if !offset.is_multiple_of(4) || !bytes.len().is_multiple_of(4) {
            return Err(Status::new(
                StatusCode::InvalidArgument,
                format!(
                    "GPU buffer writes must be 4-byte aligned: {} bytes at {offset}",
                    bytes.len()
                ),
            ));
        }
        self.context.queue.write_buffer(&self.buffer, offset, bytes);
        Ok(())
    }

    fn read(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            check_span("GPU buffer read", offset, length, self.size())?;
            if length == 0 {
                return Ok(Vec::new());
            }
            let start = offset - offset % 4;
            // Sizes are multiples of 4, so the rounded end stays inside the buffer.
            let end = (offset + length).next_multiple_of(4).min(self.size());
            let device = &self.context.device;
            let staging = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("parameter read-back"),
                size: end - start,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = device.create_command_encoder(&Default::default());
            encoder.copy_buffer_to_buffer(&self.buffer, start, &staging, 0, end - start);
            self.context.queue.submit([encoder.finish()]);
            let (done, mapped) = futures_channel::oneshot::channel();
            staging
                .slice(..)
                .map_async(wgpu::MapMode::Read, move |result| {
                    let _ = done.send(result);
                });
            #[cfg(native)]
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .map_err(|e| unavailable("GPU poll failed", e))?;
            mapped
                .await
                .map_err(|_| unavailable("read-back", "map callback dropped"))?
                .map_err(|e| unavailable("mapping the read-back buffer failed", e))?;
            let bytes = {
                let view = staging
                    .slice(..)
                    .get_mapped_range()
                    .map_err(|e| unavailable("mapped range", e))?;
                let first = (offset - start) as usize;
                view.get(first..first + length as usize)
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default()
            };
            staging.unmap();
            staging.destroy();
            Ok(bytes)
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Drop for WgpuParameterBuffer {
    fn drop(&mut self) {
        // The webgpu backend leaves a dropped buffer to the JS garbage collector: free the GPU
        // memory now.
        self.buffer.destroy();
    }
}

/// Allocates [`WgpuParameterBuffer`]s on one device.
#[derive(Clone, Debug)]
pub struct WgpuAllocator {
    context: WgpuContext,
}

impl WgpuAllocator {
    /// An allocator on `context`'s device.
    pub fn new(context: WgpuContext) -> Self {
        Self { context }
    }

    /// The device and queue.
    pub fn context(&self) -> &WgpuContext {
        &self.context
    }
}

impl BufferAllocator for WgpuAllocator {
    fn allocate(&self, size: u64, label: &str) -> StatusResult<SharedBuffer> {
        let rounded = size.checked_next_multiple_of(4).ok_or_else(|| {
            Status::new(
                StatusCode::ResourceExhausted,
                format!("{size} bytes overflow"),
            )
        })?;
        let limit = self.context.device.limits().max_buffer_size;
        if rounded > limit {
            return Err(Status::new(
                StatusCode::ResourceExhausted,
                format!("{label}: {size} bytes exceed the device's largest buffer ({limit})"),
            ));
        }
        let buffer = self.context.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: rounded,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        #[allow(clippy::arc_with_non_send_sync)]
        Ok(Arc::new(WgpuParameterBuffer {
            buffer,
            context: self.context.clone(),
        }))
    }
}
