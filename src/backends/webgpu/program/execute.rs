//! One execution of a program on its current device: bind shapes from the inputs, find (or
//! build and bind) the plan for those shapes, upload the inputs, encode every op into one
//! command buffer (one compute pass, or one pass per op when profiling with timestamps), copy
//! only the outputs (and the status word) to a mappable buffer, submit once, map, and write the
//! output tensors into `args`.
//!
//! It runs on state checked out of the program's residency slot, with its kernels compiled and
//! its parameters resident (the program sees to both, and to moving to a new device when its
//! own is lost: `program`).

use crate::backends::arguments::{bind_arguments, store_output};
use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::kernels::KernelConfig;
use crate::backends::webgpu::plan::{ShapePlan, Storage};
use crate::backends::webgpu::program::bound::BoundDispatch;
use crate::backends::webgpu::program::io::{first_bad_id, from_gpu_bytes, to_gpu_bytes};
use crate::backends::webgpu::program::profiling::{OpTiming, Profile, Timer};
use crate::backends::webgpu::program::residency::Resident;
use crate::backends::webgpu::readback::read_mapped;
use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::program::{BoundShapes, Op, Program, TensorId, ops};
use std::sync::Arc;

/// Attention positions that are a program input must lie in the cache, without repeats,
/// before anything runs (so a bad position never touches the cache).
fn check_input_positions(
    args: &[EValue],
    shapes: &BoundShapes,
    input_position: &[Option<usize>],
    index: usize,
    op: &ops::Attention,
) -> Result<()> {
    let Some(position) = input_position.get(op.positions as usize).copied().flatten() else {
        return Ok(());
    };
    let cache = shapes
        .shapes
        .get(op.k_cache as usize)
        .and_then(|s| s.first())
        .copied()
        .unwrap_or(0);
    if let Some(crate::evalue::TensorData::Int32(values)) = args
        .get(position)
        .and_then(EValue::as_tensor)
        .map(|t| t.data())
    {
        op.check_positions(index, values, cache)?;
    }
    Ok(())
}

/// Gather ids that are program inputs must lie in the table before anything runs.
fn check_input_ids(program: &Program, args: &[EValue], shapes: &BoundShapes) -> Result<()> {
    let mut input_position = vec![None; program.tensors.len()];
    for (position, &input) in program.inputs.iter().enumerate() {
        if let Some(slot @ None) = input_position.get_mut(input as usize) {
            *slot = Some(position);
        }
    }
    for (index, op) in program.ops.iter().enumerate() {
        if let Op::Attention(attention) = op {
            check_input_positions(args, shapes, &input_position, index, attention)?;
            continue;
        }
        let Op::Gather(ops::Gather { table, ids, .. }) = op else {
            continue;
        };
        let Some(position) = input_position.get(*ids as usize).copied().flatten() else {
            continue;
        };
        let vocab = shapes
            .shapes
            .get(*table as usize)
            .and_then(|s| s.first())
            .copied()
            .unwrap_or(0);
        let Some(tensor) = args.get(position).and_then(EValue::as_tensor) else {
            continue;
        };
        if let Some((at, value)) = first_bad_id(tensor.data(), vocab) {
            return Err(Error::invalid_argument(format!(
                "op {index} (gather): input {position} holds id {value} at element {at}, outside 0..{vocab}"
            )));
        }
    }
    Ok(())
}

/// Runs `program` once on the device of `ctx` with the `resident` state, writing its outputs
/// after its inputs in `args`. Returns the execution's profile when `profiling` is on.
///
/// # Errors
/// `InvalidArgument` for bad arguments or gather ids out of range; `OutOfResources` when the
/// bound shapes exceed the device; `Internal` for device errors; mapping failures as
/// `read_mapped`.
pub(crate) async fn run(
    ctx: &Arc<GpuContext>,
    program: &Program,
    config: KernelConfig,
    resident: &mut Resident,
    args: &mut [EValue],
    profiling: bool,
) -> Result<Option<Profile>> {
    let shapes = bind_arguments(program, args)?;
    check_input_ids(program, args, &shapes)?;
    let n_in = program.inputs.len();
    let inputs: Vec<(TensorId, Vec<u8>)> = program
        .inputs
        .iter()
        .zip(args.iter())
        .filter_map(|(&id, arg)| arg.as_tensor().map(|t| (id, to_gpu_bytes(t))))
        .collect();
    let timing = profiling && ctx.has_timestamps();
    let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
    resident.plan_for(ctx, program, config, shapes)?;
    let arena_buffer = resident.arena.as_ref().map(|a| a.buffer().raw().clone());
    let params: Vec<(wgpu::Buffer, u64)> = resident
        .params
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|p| p.gpu().map(|g| (g.raw().clone(), p.offset)))
        .collect::<Result<_>>()?;
    let output_ids = program.outputs.clone();
    let output_dtypes: Vec<_> = output_ids
        .iter()
        .map(|&id| program.tensors.get(id as usize).map(|t| t.dtype))
        .collect();
    let bound = resident.most_recent()?;
    for (id, bytes) in &inputs {
        if bytes.is_empty() {
            continue;
        }
        if let Storage::Arena(offset) = bound.plan.placement(*id)?.storage
            && let Some(arena) = &arena_buffer
        {
            ctx.queue.write_buffer(arena, offset, bytes);
        }
    }
    if timing && bound.timer.is_none() {
        let passes = bound.ops.iter().filter(|o| !o.is_empty()).count();
        bound.timer = Some(Timer::new(ctx, passes)?);
    }
    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("execute"),
        });
    if let Some(status) = &bound.status {
        encoder.clear_buffer(status.raw(), 0, None);
    }
    let mut passes = 0usize;
    if timing {
        for (op, dispatches) in bound.plan.ops.iter().zip(&bound.ops) {
            if dispatches.is_empty() {
                continue;
            }
            let writes = bound.timer.as_ref().and_then(|t| t.writes(passes));
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(op.name),
                timestamp_writes: writes,
            });
            record(&mut pass, dispatches);
            passes += 1;
        }
    } else {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("program"),
            timestamp_writes: None,
        });
        for dispatches in &bound.ops {
            record(&mut pass, dispatches);
        }
    }
    for (&id, &(offset, bytes)) in output_ids.iter().zip(&bound.outputs) {
        if bytes == 0 {
            continue;
        }
        let (source, source_offset) = match bound.plan.placement(id)?.storage {
            Storage::Arena(o) => (
                arena_buffer
                    .as_ref()
                    .ok_or_else(|| Error::internal("no arena"))?,
                o,
            ),
            Storage::Param(slot) => params
                .get(slot)
                .map(|(b, o)| (b, *o))
                .ok_or_else(|| Error::internal("no parameter slot"))?,
            Storage::State(_) => {
                return Err(Error::internal(
                    "a state is an output (validation refuses that)",
                ));
            }
        };
        encoder.copy_buffer_to_buffer(source, source_offset, bound.readback.raw(), offset, bytes);
    }
    if let Some(status) = &bound.status {
        encoder.copy_buffer_to_buffer(
            status.raw(),
            0,
            bound.readback.raw(),
            bound.status_offset,
            4,
        );
    }
    if let Some(timer) = &bound.timer
        && timing
    {
        timer.resolve(&mut encoder, passes);
    }
    ctx.queue.submit([encoder.finish()]);
    if let Some(error) = scope.pop().await {
        return Err(Error::internal(format!(
            "the GPU refused the program's commands: {error}"
        )));
    }
    let bytes = read_mapped(ctx, bound.readback.raw(), bound.readback_bytes).await?;
    let times = match (&bound.timer, timing) {
        (Some(timer), true) => Some(timer.read(ctx, passes).await?),
        _ => None,
    };
    ctx.check_events("while executing")?;
    if bound.plan.uses_status {
        let word = bytes
            .get(bound.status_offset as usize..bound.status_offset as usize + 4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .unwrap_or(0);
        if word != 0 {
            let index = word as usize - 1;
            let what = match program.ops.get(index) {
                Some(Op::Attention(_)) => {
                    "(attention): a position computed on the GPU lies outside the cache \
                     (nothing was stored for it)"
                }
                _ => "(gather): an id computed on the GPU lies outside the table",
            };
            return Err(Error::invalid_argument(format!("op {index} {what}")));
        }
    }
    let mut outputs = Vec::with_capacity(output_ids.len());
    for ((&id, &(offset, size)), dtype) in output_ids.iter().zip(&bound.outputs).zip(&output_dtypes)
    {
        let dtype = dtype.ok_or_else(|| Error::internal(format!("output {id} is not declared")))?;
        let shape = bound
            .plan
            .shapes
            .get(id as usize)
            .cloned()
            .unwrap_or_default();
        let slice = bytes
            .get(offset as usize..(offset + size) as usize)
            .ok_or_else(|| Error::internal("read-back is shorter than the outputs"))?;
        outputs.push(from_gpu_bytes(dtype, shape, slice)?);
    }
    let profile = times.map(|times| profile_of(&bound.plan, &bound.ops, &times));
    for (slot, tensor) in args[n_in..].iter_mut().zip(outputs) {
        let (shape, data) = tensor.into_parts();
        store_output(slot, shape, data)?;
    }
    if !profiling {
        return Ok(None);
    }
    Ok(Some(match profile {
        Some(profile) => profile,
        None => untimed_profile(&resident.most_recent()?.plan),
    }))
}

fn record(pass: &mut wgpu::ComputePass<'_>, dispatches: &[BoundDispatch]) {
    for d in dispatches {
        pass.set_pipeline(&d.pipeline.pipeline);
        pass.set_bind_group(0, &d.bind_group, &[]);
        let [x, y, z] = d.workgroups;
        pass.dispatch_workgroups(x, y, z);
    }
}

fn profile_of(plan: &ShapePlan, ops: &[Vec<BoundDispatch>], times: &[u64]) -> Profile {
    let mut pass = 0usize;
    let ops = plan
        .ops
        .iter()
        .zip(ops)
        .map(|(op, bound)| {
            let gpu_ns = if bound.is_empty() {
                None
            } else {
                pass += 1;
                times.get(pass - 1).copied()
            };
            OpTiming {
                op_index: op.op_index,
                name: op.name,
                dispatches: bound.len(),
                gpu_ns,
            }
        })
        .collect();
    Profile {
        ops,
        timestamps: true,
    }
}

fn untimed_profile(plan: &ShapePlan) -> Profile {
    Profile {
        ops: plan
            .ops
            .iter()
            .map(|op| OpTiming {
                op_index: op.op_index,
                name: op.name,
                dispatches: op.dispatches.len(),
                gpu_ns: None,
            })
            .collect(),
        timestamps: false,
    }
}
