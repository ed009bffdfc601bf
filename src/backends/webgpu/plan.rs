//! Planning orchestration: from a program and concrete shapes to a [`ShapePlan`] (where every
//! tensor lives, the activation arena or a parameter buffer, and the dispatches of every op, in
//! order, each op planned by its own `GpuOp`, a run of neighbouring ops that `fusion.rs` fuses
//! planned as one dispatch at the last op's place), and [`kernel_keys`], the kernels `init`
//! compiles.
//! The plan's types are in `shape_plan.rs` (re-exported here).
//!
//! Plain Rust with no GPU objects, so it is unit-tested at full speed; `execute.rs` turns a plan
//! into bind groups once and reuses it for every execution with the same bound symbols.
//! Reshape is a view: its output shares its input's storage, and the shared storage lives as
//! long as either name is used. Every index the program holds is checked here, so a program
//! that was not validated still cannot make the planner panic.

use crate::backends::webgpu::alias;
use crate::backends::webgpu::arena::{Lifetime, plan_arena};
use crate::backends::webgpu::dispatch::gpu_op;
use crate::backends::webgpu::fusion;
use crate::backends::webgpu::kernels::{
    self, KernelConfig, KernelKey, PlanContext, TensorFloats, words_per_element,
};
pub(crate) use crate::backends::webgpu::shape_plan::{
    OpDispatches, Placement, PlanLimits, ShapePlan, Storage,
};
use crate::error::{Error, ErrorCode, Result};
use crate::program::{BinaryOp, DType, Op, Program, TensorId};

/// Bytes of a tensor of `dtype` and `shape` on the GPU (a block format: its packed bytes,
/// padded to a word).
pub(crate) fn gpu_bytes(dtype: DType, shape: &[usize]) -> Result<u64> {
    if dtype.is_block() {
        let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        return dtype
            .tensor_bytes(&dims)
            .and_then(|bytes| bytes.checked_next_multiple_of(4))
            .ok_or_else(|| {
                Error::out_of_resources(format!(
                    "a {} tensor of shape {shape:?} overflows or is not whole blocks",
                    dtype.name()
                ))
            });
    }
    shape
        .iter()
        .try_fold(words_per_element(dtype) as u64 * 4, |acc, &d| {
            acc.checked_mul(d as u64)
        })
        .ok_or_else(|| {
            Error::new(
                ErrorCode::OutOfResources,
                format!("a {} tensor of shape {shape:?} overflows", dtype.name()),
            )
        })
}

/// Bytes of an f16 tensor of `shape` (2 per element, padded to a word).
fn f16_bytes(shape: &[usize]) -> Result<u64> {
    shape
        .iter()
        .try_fold(2u64, |acc, &d| acc.checked_mul(d as u64))
        .and_then(|bytes| bytes.checked_next_multiple_of(4))
        .ok_or_else(|| {
            Error::out_of_resources(format!("an f16 tensor of shape {shape:?} overflows"))
        })
}

/// How an op's float operands may be stored under f16 activations ([`f16_activations`]):
/// `groups` must share one element type (one kernel reads them all as `Act`), `fixed` stay
/// f32 (bound as f32 whatever the precision: weights, masks, positions), and every other
/// operand may be either (its kernel names that binding's type in its key). `None`: the op
/// has no f16 kernel yet, so every operand stays f32.
struct ActRoles {
    groups: Vec<Vec<TensorId>>,
    fixed: Vec<TensorId>,
}

fn act_roles(op: &Op, kv_f16: bool) -> Option<ActRoles> {
    let roles = |groups: Vec<Vec<TensorId>>, fixed: Vec<TensorId>| Some(ActRoles { groups, fixed });
    match op {
        // Element-wise kernels and the gather name each binding's type in their keys.
        // An add's result stays f32: that is the residual stream of a decoder, whose values
        // outgrow f16's range (65504) in Gemma's layers; its kernels still read f16 operands.
        Op::Binary(b) if b.op == BinaryOp::Add => roles(Vec::new(), vec![b.out]),
        Op::Unary(_) | Op::Scale(_) | Op::Binary(_) => roles(Vec::new(), Vec::new()),
        Op::Gather(g) => roles(Vec::new(), vec![g.ids]),
        Op::Linear(l) => roles(
            vec![vec![l.x]],
            std::iter::once(l.weight).chain(l.bias).collect(),
        ),
        Op::Reshape(r) => roles(vec![vec![r.x, r.out]], Vec::new()),
        Op::RmsNorm(r) => roles(vec![vec![r.x, r.out]], r.weight.into_iter().collect()),
        Op::LayerNorm(l) => roles(vec![vec![l.x, l.out]], vec![l.gamma, l.beta]),
        Op::Softmax(s) => roles(vec![vec![s.x, s.out]], s.mask.into_iter().collect()),
        Op::L2Normalize(l) => roles(vec![vec![l.x, l.out]], Vec::new()),
        Op::Rope(r) => roles(vec![vec![r.x, r.out]], vec![r.positions]),
        // f16 activations in attention only over an f16 cache (one precision per kernel).
        Op::Attention(a) if kv_f16 => roles(
            vec![vec![a.q, a.k, a.v, a.out]],
            vec![a.positions, a.k_cache, a.v_cache],
        ),
        _ => None,
    }
}

/// The tensors stored in f16 under `KernelConfig::act_f16`: the float intermediates of the
/// activation arena (f32 tensors that are no parameter, state, program input or output, nor a
/// view of one) that only kernels with an f16 form touch, where every group of operands one
/// kernel reads as `Act` agrees (a group with any f32 member is f32 throughout, to a fixed
/// point). Program inputs and outputs stay f32 (the host writes and reads f32), and so do
/// weights and states; kernels at the boundary (a linear writing f32 logits from f16
/// activations, an element-wise op between an f32 input and f16 intermediates) name each
/// binding's type. `kv_f16`: whether attention's caches are f16 (attention's activations go
/// f16 only then). All f32 (empty) for a malformed program.
pub(crate) fn f16_activations(program: &Program, kv_f16: bool) -> TensorFloats {
    let Ok(slots) = param_slots(program) else {
        return TensorFloats::f32();
    };
    let (Ok(states), Ok(roots)) = (state_slots(program, &slots), storage_roots(program, &slots))
    else {
        return TensorFloats::f32();
    };
    let count = program.tensors.len();
    let root = |id: TensorId| roots.get(id as usize).map(|&r| r as usize);
    let mut f16: Vec<bool> = (0..count)
        .map(|r| {
            roots[r] as usize == r
                && slots[r].is_none()
                && states[r].is_none()
                && program.tensors[r].dtype == DType::F32
        })
        .collect();
    let clear = |f16: &mut Vec<bool>, id: TensorId| {
        if let Some(slot) = root(id).and_then(|r| f16.get_mut(r)) {
            *slot = false;
        }
    };
    for &id in program.inputs.iter().chain(&program.outputs) {
        clear(&mut f16, id);
    }
    let mut groups: Vec<Vec<TensorId>> = Vec::new();
    for op in &program.ops {
        match act_roles(op, kv_f16) {
            Some(roles) => {
                for id in roles.fixed {
                    clear(&mut f16, id);
                }
                groups.extend(roles.groups);
            }
            None => {
                let mut touched = op.inputs();
                touched.push(op.output());
                touched.extend(op.state_writes());
                for id in touched {
                    clear(&mut f16, id);
                }
            }
        }
    }
    let is_f16 = |f16: &[bool], id: TensorId| root(id).is_some_and(|r| f16.get(r) == Some(&true));
    loop {
        let mut changed = false;
        for group in &groups {
            let mixed = group.iter().any(|&id| is_f16(&f16, id))
                && group.iter().any(|&id| !is_f16(&f16, id));
            if mixed {
                for &id in group {
                    clear(&mut f16, id);
                }
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    TensorFloats::from_flags((0..count).map(|id| is_f16(&f16, id as TensorId)).collect())
}

/// The element types of `program`'s tensors under `config` (all f32 unless `act_f16`).
pub(crate) fn tensor_floats(program: &Program, config: KernelConfig) -> TensorFloats {
    if config.act_f16 {
        f16_activations(program, config.kv_f16)
    } else {
        TensorFloats::f32()
    }
}

/// Tensor ids that are parameters, mapped to their slot in `Program::params`.
///
/// # Errors
/// `InvalidProgram` for a parameter naming an undeclared tensor or a tensor named twice.
pub(crate) fn param_slots(program: &Program) -> Result<Vec<Option<usize>>> {
    let mut slots = vec![None; program.tensors.len()];
    for (slot, param) in program.params.iter().enumerate() {
        match slots.get_mut(param.tensor as usize) {
            Some(entry @ None) => *entry = Some(slot),
            Some(Some(_)) => {
                return Err(Error::invalid_program(format!(
                    "tensor {} is filled by two parameters",
                    param.tensor
                )));
            }
            None => {
                return Err(Error::invalid_program(format!(
                    "parameter {:?} names undeclared tensor {}",
                    param.key, param.tensor
                )));
            }
        }
    }
    Ok(slots)
}

/// Whether every op reading `id` binds it by row ranges when it exceeds one storage binding
/// (a linear layer's weight, a block-format gather table), so a parameter larger than the
/// device's binding limit (up to its buffer limit) still works.
pub(crate) fn bound_by_rows(program: &Program, id: TensorId) -> bool {
    let block = program
        .tensors
        .get(id as usize)
        .is_some_and(|decl| decl.dtype.is_block());
    program
        .ops
        .iter()
        .filter(|op| op.inputs().contains(&id))
        .all(|op| match op {
            Op::Linear(linear) => linear.weight == id && linear.x != id && linear.bias != Some(id),
            Op::Gather(gather) => block && gather.table == id && gather.ids != id,
            _ => false,
        })
}

/// The states attention may store in f16 (`KernelConfig::kv_f16`): every `Attention`'s
/// `k_cache` and `v_cache`, in `program.states` order, provided each is a state of its own (not
/// a view of one, not another op's cache twice as both roles) that nothing but attention touches
/// as a cache: no other operand of any op, no view, no program input or output. `None` when
/// the program has no attention or any cache fails that (it then keeps f32 caches: an f16 cache
/// is an internal layout that only the attention kernels read).
pub(crate) fn f16_cache_states(program: &Program) -> Option<Vec<TensorId>> {
    let mut roles: Vec<(TensorId, bool)> = Vec::new();
    for op in &program.ops {
        if let Op::Attention(attention) = op {
            if attention.k_cache == attention.v_cache {
                return None;
            }
            for (cache, is_key) in [(attention.k_cache, true), (attention.v_cache, false)] {
                match roles.iter().find(|(id, _)| *id == cache) {
                    Some(&(_, role)) if role != is_key => return None,
                    Some(_) => {}
                    None => roles.push((cache, is_key)),
                }
            }
        }
    }
    let f32_state = |id: TensorId| {
        program.states.contains(&id)
            && program
                .tensors
                .get(id as usize)
                .is_some_and(|decl| decl.dtype == DType::F32)
    };
    if roles.is_empty() || roles.iter().any(|&(id, _)| !f32_state(id)) {
        return None;
    }
    let is_cache = |id: TensorId| roles.iter().any(|(cache, _)| *cache == id);
    let foreign_use = program.ops.iter().any(|op| {
        let touched = if let Op::Attention(a) = op {
            vec![a.q, a.k, a.v, a.positions, a.out]
        } else {
            let mut touched = op.inputs();
            touched.push(op.output());
            touched.extend(op.state_writes());
            touched
        };
        touched.into_iter().any(is_cache)
    });
    let boundary = program
        .inputs
        .iter()
        .chain(&program.outputs)
        .any(|&id| is_cache(id));
    if foreign_use || boundary {
        return None;
    }
    Some(
        program
            .states
            .iter()
            .copied()
            .filter(|&id| is_cache(id))
            .collect(),
    )
}

/// Tensor ids that are states, mapped to their slot in `Program::states`.
///
/// # Errors
/// `InvalidProgram` for a state naming an undeclared tensor, or a tensor that is also a
/// parameter or a state twice.
pub(crate) fn state_slots(
    program: &Program,
    params: &[Option<usize>],
) -> Result<Vec<Option<usize>>> {
    let mut slots = vec![None; program.tensors.len()];
    for (slot, &id) in program.states.iter().enumerate() {
        let taken = params.get(id as usize).copied().flatten().is_some();
        match slots.get_mut(id as usize) {
            Some(entry @ None) if !taken => *entry = Some(slot),
            Some(_) => {
                return Err(Error::invalid_program(format!(
                    "tensor {id} is a state twice, or a state and a parameter"
                )));
            }
            None => {
                return Err(Error::invalid_program(format!(
                    "state {slot} names undeclared tensor {id}"
                )));
            }
        }
    }
    Ok(slots)
}

/// Which tensor's storage each tensor uses (itself, or a reshape's source), after checking
/// that every op reads only defined tensors and writes a tensor nothing else defines.
pub(crate) fn storage_roots(program: &Program, slots: &[Option<usize>]) -> Result<Vec<TensorId>> {
    let count = program.tensors.len();
    let mut defined: Vec<bool> = slots.iter().map(Option::is_some).collect();
    for &state in &program.states {
        let slot = defined.get_mut(state as usize).ok_or_else(|| {
            Error::invalid_program(format!("a state names undeclared tensor {state}"))
        })?;
        if *slot {
            return Err(Error::invalid_program(format!(
                "tensor {state} is a state twice, or a state and a parameter"
            )));
        }
        *slot = true;
    }
    for &input in &program.inputs {
        let slot = defined.get_mut(input as usize).ok_or_else(|| {
            Error::invalid_program(format!("input names undeclared tensor {input}"))
        })?;
        if *slot {
            return Err(Error::invalid_program(format!(
                "tensor {input} is an input twice, or an input and a parameter"
            )));
        }
        *slot = true;
    }
    let mut root: Vec<TensorId> = (0..count as TensorId).collect();
    for (index, op) in program.ops.iter().enumerate() {
        for input in op.inputs() {
            if !defined.get(input as usize).copied().unwrap_or(false) {
                return Err(Error::invalid_program(format!(
                    "op {index} ({}) reads tensor {input} before anything writes it",
                    op.name()
                )));
            }
        }
        let out = op.output() as usize;
        match defined.get_mut(out) {
            Some(slot) if !*slot => *slot = true,
            Some(_) => {
                return Err(Error::invalid_program(format!(
                    "op {index} ({}) writes tensor {out}, which is already defined",
                    op.name()
                )));
            }
            None => {
                return Err(Error::invalid_program(format!(
                    "op {index} ({}) writes undeclared tensor {out}",
                    op.name()
                )));
            }
        }
        if let Op::Reshape(reshape) = op {
            root[out] = root[reshape.x as usize];
        }
    }
    for &output in &program.outputs {
        if !defined.get(output as usize).copied().unwrap_or(false) {
            return Err(Error::invalid_program(format!(
                "output tensor {output} is never written"
            )));
        }
    }
    Ok(root)
}

/// The checks planning relies on that do not depend on shapes: parameters name distinct
/// declared tensors, inputs are declared and distinct, every op reads only tensors defined
/// before it and writes a tensor nothing else defines, and every output is written.
///
/// # Errors
/// `InvalidProgram` naming the first fault.
pub(crate) fn check_structure(program: &Program) -> Result<()> {
    let slots = param_slots(program)?;
    state_slots(program, &slots)?;
    storage_roots(program, &slots).map(|_| ())
}

/// Plans `program` for `shapes` (one concrete shape per tensor).
///
/// # Errors
/// `InvalidProgram` for programs that read undefined tensors or whose ops do not fit their
/// shapes; `OutOfResources` when a tensor or the arena exceeds the device's limits;
/// `NotSupported` for views beyond the kernels' dims.
pub(crate) fn plan(
    program: &Program,
    shapes: Vec<Vec<usize>>,
    config: KernelConfig,
    limits: PlanLimits,
) -> Result<ShapePlan> {
    if shapes.len() != program.tensors.len() {
        return Err(Error::internal("shape count differs from tensor count"));
    }
    let slots = param_slots(program)?;
    let states = state_slots(program, &slots)?;
    let roots = storage_roots(program, &slots)?;
    let steps = program.ops.len() + 2;
    let floats = tensor_floats(program, config);
    let bytes = program
        .tensors
        .iter()
        .zip(&shapes)
        .enumerate()
        .map(|(id, (decl, shape))| {
            if floats.is_f16(id as TensorId) {
                f16_bytes(shape)
            } else {
                gpu_bytes(decl.dtype, shape)
            }
        })
        .collect::<Result<Vec<u64>>>()?;
    for (id, (&size, decl)) in bytes.iter().zip(&program.tensors).enumerate() {
        if size > limits.max_binding
            && !(slots[id].is_some() && bound_by_rows(program, id as TensorId))
        {
            return Err(Error::new(
                ErrorCode::OutOfResources,
                format!(
                    "tensor {id} ({}) needs {size} bytes; this device binds at most {} bytes per buffer",
                    decl.name, limits.max_binding
                ),
            ));
        }
    }

    let ctx = PlanContext {
        tensors: &program.tensors,
        shapes: &shapes,
        config,
        max_workgroups: limits.max_workgroups,
        max_binding: limits.max_binding,
        storage_alignment: limits.storage_alignment,
        floats: &floats,
    };
    let keys = alias::storage_keys(&slots, &roots);
    // A fused run dispatches at its last op's place; its earlier ops plan nothing.
    let fused = if config.fusion {
        fusion::fused_runs(program, &keys, &ctx)?
    } else {
        Vec::new()
    };
    let mut ops = program
        .ops
        .iter()
        .enumerate()
        .map(|(index, op)| {
            let run = fused
                .iter()
                .find(|run| (run.first..=run.last).contains(&index));
            let (name, dispatches) = match run {
                Some(run) if run.last != index => (op.name(), Ok(Vec::new())),
                Some(run) => (run.name(), run.dispatches(&ctx)),
                None => (op.name(), gpu_op(op).dispatches(&ctx, index)),
            };
            let dispatches = dispatches.map_err(|e| {
                Error::new(e.code(), format!("op {index} ({name}): {}", e.message()))
            })?;
            Ok(OpDispatches {
                op_index: index,
                name,
                dispatches,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let shadows = alias::shadow_repeated_operands(&ctx, &mut ops, &keys, shapes.len())?;

    // Live ranges of the storage roots held in the arena.
    let mut first: Vec<Option<usize>> = vec![None; shapes.len()];
    let mut last = vec![0usize; shapes.len()];
    let mut touch = |id: TensorId, step: usize, defines: bool| {
        let r = roots[id as usize] as usize;
        if slots[r].is_none() && states[r].is_none() {
            if defines && first[r].is_none() {
                first[r] = Some(step);
            }
            last[r] = last[r].max(step);
        }
    };
    for &input in &program.inputs {
        touch(input, 0, true);
    }
    for (index, op) in program.ops.iter().enumerate() {
        for input in op.inputs() {
            touch(input, index + 1, false);
        }
        touch(op.output(), index + 1, true);
    }
    // A fused run reads its earlier ops' inputs at its last op's step.
    for run in &fused {
        for input in run.earlier_inputs() {
            touch(input, run.last + 1, false);
        }
    }
    for &output in &program.outputs {
        touch(output, steps - 1, false);
    }
    let arena_roots: Vec<usize> = (0..shapes.len()).filter(|&r| first[r].is_some()).collect();
    let lifetimes: Vec<Lifetime> = arena_roots
        .iter()
        .map(|&r| Lifetime {
            size: bytes[r],
            first: first[r].unwrap_or(0),
            last: last[r],
        })
        .chain(shadows.iter().map(|s| Lifetime {
            size: bytes.get(s.source as usize).copied().unwrap_or(0),
            first: s.step,
            last: s.step,
        }))
        .collect();
    let arena = plan_arena(&lifetimes, limits.storage_alignment)?;
    let alignment = limits.storage_alignment.max(4);
    let activation_bytes = lifetimes
        .iter()
        .map(|l| l.size.max(1).div_ceil(alignment).saturating_mul(alignment))
        .fold(0u64, u64::saturating_add);
    if arena.size > limits.max_buffer {
        return Err(Error::new(
            ErrorCode::OutOfResources,
            format!(
                "activations need a {} byte arena; this device's largest buffer is {} bytes",
                arena.size, limits.max_buffer
            ),
        ));
    }
    let mut root_offset = vec![None; shapes.len()];
    for (&r, &offset) in arena_roots.iter().zip(&arena.offsets) {
        root_offset[r] = Some(offset);
    }
    let shadow_offsets = arena.offsets.get(arena_roots.len()..).unwrap_or_default();
    let placements = (0..shapes.len())
        .map(|id| {
            let r = roots[id] as usize;
            let storage = match (slots[r], states[r], root_offset[r]) {
                (Some(slot), _, _) => Some(Storage::Param(slot)),
                (None, Some(slot), _) => Some(Storage::State(slot)),
                (None, None, Some(offset)) => Some(Storage::Arena(offset)),
                (None, None, None) => None,
            };
            storage.map(|storage| Placement {
                storage,
                bytes: bytes[id],
            })
        })
        .chain(shadows.iter().zip(shadow_offsets).map(|(s, &offset)| {
            Some(Placement {
                storage: Storage::Arena(offset),
                bytes: bytes.get(s.source as usize).copied().unwrap_or(0),
            })
        }))
        .collect();

    let uses_status = ops
        .iter()
        .flat_map(|o| &o.dispatches)
        .any(|d| d.bindings.contains(&kernels::Binding::Status));
    let scratch_bytes = ops
        .iter()
        .flat_map(|o| &o.dispatches)
        .flat_map(|d| &d.bindings)
        .filter_map(|b| match b {
            kernels::Binding::Scratch { bytes } => Some(*bytes),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    Ok(ShapePlan {
        shapes,
        placements,
        arena_bytes: arena.size,
        activation_bytes,
        ops,
        uses_status,
        scratch_bytes,
    })
}

/// Every kernel `program` can dispatch under `config`, whatever the shapes: what `init`
/// compiles (each op's own list, e.g. row kernels in both their short-row and configured
/// workgroup sizes, the fused kernels of the runs that may fuse, plus the copy kernel when an
/// op reads one storage twice). A unit test checks that plans never use a kernel outside this
/// set.
pub(crate) fn kernel_keys(program: &Program, config: KernelConfig) -> Vec<KernelKey> {
    let mut keys: Vec<KernelKey> = Vec::new();
    let floats = tensor_floats(program, config);
    let mut add = |key: KernelKey| {
        if !keys.contains(&key) {
            keys.push(key);
        }
    };
    for op in &program.ops {
        gpu_op(op)
            .kernels(&program.tensors, config, &floats)
            .into_iter()
            .for_each(&mut add);
    }
    let storage = param_slots(program).and_then(|slots| {
        let roots = storage_roots(program, &slots)?;
        Ok(alias::storage_keys(&slots, &roots))
    });
    if let Ok(storage) = storage {
        let runs = if config.fusion {
            fusion::candidate_runs(program, &storage, config, &floats)
        } else {
            Vec::new()
        };
        for run in runs {
            run.kernels(&program.tensors, config, &floats)
                .into_iter()
                .for_each(&mut add);
        }
        alias::shadow_kernel(program, &storage, config.workgroup_size)
            .into_iter()
            .for_each(add);
    }
    keys
}
