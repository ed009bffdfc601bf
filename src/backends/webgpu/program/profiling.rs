//! Per-op GPU timings (backend option `profiling`, off by default).
//!
//! With profiling on and a device that has `timestamp-query`, `execute` gives every op that
//! dispatches work its own compute pass whose `timestampWrites` record the GPU clock at the
//! pass's beginning and end; the timestamps are resolved into a buffer and read back with the
//! outputs. WebGPU allows timestamps only at pass boundaries (in-pass timestamps are an
//! extension), and at most 4096 queries per query set, so the first 2048 ops are timed.
//! Browsers quantise timestamps (Chromium to 100 microseconds unless its developer features are
//! enabled), so in a browser per-op times are coarse; their sum still tracks the GPU time.
//! Without `timestamp-query` the profile lists the ops with no times.

use crate::backends::webgpu::buffers::GpuBuffer;
use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::readback::read_mapped;
use crate::error::{Error, Result};
use std::sync::Arc;

/// Most ops timed in one execution (two queries each, 4096 per query set).
pub const MAX_TIMED_OPS: usize = 2048;

/// The timing of one op in one execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpTiming {
    /// Index of the op in the program.
    pub op_index: usize,
    /// The op's name, e.g. `"matmul"`.
    pub name: &'static str,
    /// Compute dispatches the op recorded.
    pub dispatches: usize,
    /// GPU nanoseconds between the start and end of the op's pass, when timestamps exist.
    pub gpu_ns: Option<u64>,
}

/// Per-op timings of the last profiled execution of a program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// One entry per op, in program order (ops that dispatch nothing included, untimed).
    pub ops: Vec<OpTiming>,
    /// Whether the device wrote GPU timestamps.
    pub timestamps: bool,
}

impl Profile {
    /// Sum of the timed ops' GPU nanoseconds (`None` without timestamps).
    pub fn total_gpu_ns(&self) -> Option<u64> {
        self.timestamps
            .then(|| self.ops.iter().filter_map(|o| o.gpu_ns).sum())
    }
}

/// The query set and buffers that time one plan's ops.
pub(crate) struct Timer {
    queries: wgpu::QuerySet,
    resolve: GpuBuffer,
    readback: GpuBuffer,
    timed: u32,
}

impl Timer {
    /// A timer for `ops` passes (capped at [`MAX_TIMED_OPS`]).
    ///
    /// # Errors
    /// Buffer allocation failures, as `MemoryAllocationFailed`.
    pub(crate) fn new(ctx: &Arc<GpuContext>, ops: usize) -> Result<Self> {
        let timed = ops.clamp(1, MAX_TIMED_OPS) as u32;
        let bytes = u64::from(timed) * 2 * 8;
        let queries = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("op timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: timed * 2,
        });
        let allocation = |usage, label: &str| {
            GpuBuffer::new(ctx, bytes, usage, label)
                .map_err(|s| Error::memory_allocation_failed(s.to_string()))
        };
        Ok(Self {
            queries,
            resolve: allocation(
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                "timestamp resolve",
            )?,
            readback: allocation(
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                "timestamp read-back",
            )?,
            timed,
        })
    }

    /// The timestamp writes of the `index`-th timed pass, or `None` past the cap.
    pub(crate) fn writes(&self, index: usize) -> Option<wgpu::ComputePassTimestampWrites<'_>> {
        let index = u32::try_from(index).ok().filter(|&i| i < self.timed)?;
        Some(wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(2 * index),
            end_of_pass_write_index: Some(2 * index + 1),
        })
    }

    /// Records resolving the first `passes` passes' queries and copying them for reading.
    pub(crate) fn resolve(&self, encoder: &mut wgpu::CommandEncoder, passes: usize) {
        let count = (passes.min(self.timed as usize) * 2) as u32;
        if count == 0 {
            return;
        }
        encoder.resolve_query_set(&self.queries, 0..count, self.resolve.raw(), 0);
        encoder.copy_buffer_to_buffer(
            self.resolve.raw(),
            0,
            self.readback.raw(),
            0,
            u64::from(count) * 8,
        );
    }

    /// GPU nanoseconds of each of the first `passes` passes (after the submit that resolved them).
    ///
    /// # Errors
    /// As `read_mapped`.
    pub(crate) async fn read(&self, ctx: &GpuContext, passes: usize) -> Result<Vec<u64>> {
        let count = passes.min(self.timed as usize);
        if count == 0 {
            return Ok(Vec::new());
        }
        let bytes = read_mapped(ctx, self.readback.raw(), count as u64 * 16).await?;
        let period = f64::from(ctx.queue.get_timestamp_period());
        let ticks: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| {
                let mut word = [0u8; 8];
                word.copy_from_slice(c);
                u64::from_le_bytes(word)
            })
            .collect();
        Ok(ticks
            .chunks_exact(2)
            .map(|pair| (pair[1].saturating_sub(pair[0]) as f64 * period).round() as u64)
            .collect())
    }
}
