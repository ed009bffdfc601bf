//! The GPU side of a plan ([`BoundPlan`]): one uniform buffer holding every dispatch's
//! parameters (written once), a bind group per dispatch, the status word, the ops' scratch
//! buffer and the read-back buffer. A bound plan stays valid while the arena it was bound to
//! does (its `generation`); when a larger plan grows the arena, older plans are rebound on
//! their next use (the cache of bound plans is the program's resident state: `residency`).

use crate::backends::webgpu::buffers::GpuBuffer;
use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::kernels::Binding;
use crate::backends::webgpu::pipelines::Pipeline;
use crate::backends::webgpu::plan::{ShapePlan, Storage};
use crate::backends::webgpu::program::params::ParamStorage;
use crate::backends::webgpu::program::profiling::Timer;
use crate::error::{Error, Result, Status};
use crate::program::Program;
use std::num::NonZeroU64;
use std::sync::Arc;

/// One recorded dispatch, ready to encode.
pub(crate) struct BoundDispatch {
    pub(crate) pipeline: Arc<Pipeline>,
    pub(crate) bind_group: wgpu::BindGroup,
    pub(crate) workgroups: [u32; 3],
}

/// A plan with its GPU resources.
pub(crate) struct BoundPlan {
    pub(crate) plan: ShapePlan,
    pub(crate) generation: u64,
    pub(crate) ops: Vec<Vec<BoundDispatch>>,
    _uniforms: Option<GpuBuffer>,
    _scratch: Option<GpuBuffer>,
    pub(crate) status: Option<GpuBuffer>,
    pub(crate) readback: GpuBuffer,
    /// (offset in `readback`, bytes) of each output.
    pub(crate) outputs: Vec<(u64, u64)>,
    pub(crate) status_offset: u64,
    pub(crate) readback_bytes: u64,
    pub(crate) timer: Option<Timer>,
}

fn allocation_error(status: &Status) -> Error {
    Error::memory_allocation_failed(status.to_string())
}

/// Where a plan's tensors live: the arena and the parameters it is bound against.
struct Placements<'a> {
    arena: Option<&'a GpuBuffer>,
    params: Option<&'a [ParamStorage]>,
    states: Option<&'a [GpuBuffer]>,
    status: Option<&'a GpuBuffer>,
    scratch: Option<&'a GpuBuffer>,
}

impl Placements<'_> {
    /// The buffer, offset and binding size of `binding`.
    fn resolve(&self, plan: &ShapePlan, binding: Binding) -> Result<(&wgpu::Buffer, u64, u64)> {
        let (buffer, offset, bytes) = match binding {
            Binding::Status => {
                let status = self
                    .status
                    .ok_or_else(|| Error::internal("plan has no status word"))?;
                (status, 0, 4)
            }
            Binding::Scratch { bytes } => {
                let scratch = self
                    .scratch
                    .filter(|s| s.allocated() >= bytes)
                    .ok_or_else(|| Error::internal("plan has no scratch buffer that large"))?;
                (scratch, 0, bytes)
            }
            Binding::Slice {
                tensor,
                offset,
                bytes,
            } => {
                let (buffer, base, _) = self.resolve(plan, Binding::Tensor(tensor))?;
                let whole = plan.placement(tensor)?.bytes;
                let start = base.checked_add(offset);
                let size = bytes.max(4).next_multiple_of(4);
                match start {
                    Some(start)
                        if offset.saturating_add(bytes) <= whole
                            && start.saturating_add(size) <= buffer.size() =>
                    {
                        return Ok((buffer, start, size));
                    }
                    _ => {
                        return Err(Error::internal(format!(
                            "cannot bind bytes {offset}..+{bytes} of tensor {tensor} ({whole} bytes)"
                        )));
                    }
                }
            }
            Binding::Tensor(id) => {
                let placement = plan.placement(id)?;
                match placement.storage {
                    Storage::Arena(offset) => (
                        self.arena
                            .ok_or_else(|| Error::internal("plan uses an arena that is missing"))?,
                        offset,
                        placement.bytes,
                    ),
                    Storage::Param(slot) => {
                        let param = self
                            .params
                            .and_then(|params| params.get(slot))
                            .ok_or_else(|| Error::internal(format!("no parameter slot {slot}")))?;
                        (param.gpu()?, param.offset, param.bytes)
                    }
                    Storage::State(slot) => {
                        let state = self
                            .states
                            .and_then(|states| states.get(slot))
                            .ok_or_else(|| Error::internal(format!("no state slot {slot}")))?;
                        (state, 0, placement.bytes)
                    }
                }
            }
        };
        // Empty tensors still bind one word (never read: their kernels have no elements).
        let size = bytes
            .max(4)
            .next_multiple_of(4)
            .min(buffer.allocated().saturating_sub(offset));
        if size < 4 {
            return Err(Error::internal(format!(
                "cannot bind {binding:?}: no bytes at its offset"
            )));
        }
        Ok((buffer.raw(), offset, size))
    }
}

impl BoundPlan {
    /// Creates the GPU resources of `program`'s `plan` on the device of `ctx`, against `arena`
    /// (of `generation`), `params` and `states`.
    ///
    /// # Errors
    /// `MemoryAllocationFailed` for buffers the device refuses; `Internal` for a kernel that was
    /// not compiled or a tensor without storage.
    pub(crate) fn bind(
        ctx: &Arc<GpuContext>,
        program: &Program,
        plan: ShapePlan,
        arena: Option<&GpuBuffer>,
        params: Option<&[ParamStorage]>,
        states: Option<&[GpuBuffer]>,
        generation: u64,
    ) -> Result<Self> {
        let align = ctx.uniform_alignment();
        let mut uniform_bytes: Vec<u8> = Vec::new();
        let mut uniform_offsets = Vec::new();
        for dispatch in plan.ops.iter().flat_map(|o| &o.dispatches) {
            let start = (uniform_bytes.len() as u64).next_multiple_of(align);
            uniform_bytes.resize(start as usize, 0);
            uniform_offsets.push(start);
            uniform_bytes.extend(dispatch.uniforms.iter().flat_map(|w| w.to_le_bytes()));
        }
        let uniforms = if uniform_bytes.is_empty() {
            None
        } else {
            let buffer = GpuBuffer::new(
                ctx,
                uniform_bytes.len() as u64,
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                "dispatch parameters",
            )
            .map_err(|s| allocation_error(&s))?;
            ctx.queue.write_buffer(buffer.raw(), 0, &uniform_bytes);
            Some(buffer)
        };
        let status = if plan.uses_status {
            Some(
                GpuBuffer::new(
                    ctx,
                    4,
                    wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    "status word",
                )
                .map_err(|s| allocation_error(&s))?,
            )
        } else {
            None
        };
        let scratch = if plan.scratch_bytes > 0 {
            Some(
                GpuBuffer::new(
                    ctx,
                    plan.scratch_bytes,
                    wgpu::BufferUsages::STORAGE,
                    "op scratch",
                )
                .map_err(|s| allocation_error(&s))?,
            )
        } else {
            None
        };
        let placements = Placements {
            arena,
            params,
            states,
            status: status.as_ref(),
            scratch: scratch.as_ref(),
        };
        let mut ops = Vec::with_capacity(plan.ops.len());
        let mut offsets = uniform_offsets.into_iter();
        for op in &plan.ops {
            let mut bound = Vec::with_capacity(op.dispatches.len());
            for dispatch in &op.dispatches {
                let pipeline = ctx.pipelines.get(&dispatch.key).ok_or_else(|| {
                    Error::internal(format!(
                        "kernel {} was not compiled at init",
                        dispatch.key.label()
                    ))
                })?;
                let (uniforms, offset) = match (&uniforms, offsets.next()) {
                    (Some(u), Some(o)) => (u, o),
                    _ => return Err(Error::internal("dispatch without uniform block")),
                };
                let mut entries = vec![wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: uniforms.raw(),
                        offset,
                        size: NonZeroU64::new(dispatch.uniforms.len() as u64 * 4),
                    }),
                }];
                for (index, &binding) in dispatch.bindings.iter().enumerate() {
                    let (buffer, offset, size) = placements.resolve(&plan, binding)?;
                    entries.push(wgpu::BindGroupEntry {
                        binding: index as u32 + 1,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer,
                            offset,
                            size: NonZeroU64::new(size),
                        }),
                    });
                }
                let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(op.name),
                    layout: &pipeline.layout,
                    entries: &entries,
                });
                bound.push(BoundDispatch {
                    pipeline,
                    bind_group,
                    workgroups: dispatch.workgroups,
                });
            }
            ops.push(bound);
        }
        let mut outputs = Vec::with_capacity(program.outputs.len());
        let mut end = 0u64;
        for &id in &program.outputs {
            let bytes = plan.placement(id)?.bytes;
            outputs.push((end, bytes));
            end = end
                .checked_add(bytes)
                .ok_or_else(|| Error::out_of_resources("outputs overflow"))?;
        }
        let status_offset = end;
        let readback_bytes = end + if plan.uses_status { 4 } else { 0 };
        let readback = GpuBuffer::new(
            ctx,
            readback_bytes,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            "output read-back",
        )
        .map_err(|s| allocation_error(&s))?;
        Ok(BoundPlan {
            plan,
            generation,
            ops,
            _uniforms: uniforms,
            _scratch: scratch,
            status,
            readback,
            outputs,
            status_offset,
            readback_bytes,
            timer: None,
        })
    }
}
