//! No dispatch binds the same bytes twice.
//!
//! WebGPU refuses a dispatch in which two storage bindings cover overlapping bytes of one buffer
//! when either binding is writable, and every storage binding of our kernels is writable (see
//! `kernels`). An op may still read one storage through two operands: `add(h, h)`,
//! `matmul(x, x, transposeB)`, a tensor next to a reshape of itself, or one parameter passed as
//! both gamma and beta. Native Vulkan accepts such a dispatch; a browser rejects the whole
//! command buffer.
//!
//! The planner therefore gives every repeated operand a *shadow*: a scratch tensor in the
//! activation arena, live only at that op's step, filled by a word copy dispatched just before
//! the op's own dispatches (one shadow per operand and op, shared by the op's dispatches).
//! Shadows get tensor ids past the program's, so placements and bind groups treat them as any
//! other arena tensor.

use crate::backends::webgpu::kernels::layout::{CopyKey, copy_words};
use crate::backends::webgpu::kernels::{Binding, KernelKey, PlanContext};
use crate::backends::webgpu::shape_plan::OpDispatches;
use crate::error::{Error, Result};
use crate::program::{Op, Program, TensorId};

/// Where a tensor's bytes live, before placement: a parameter slot or an activation root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StorageKey {
    /// Parameter slot `n`.
    Param(usize),
    /// The storage of this root tensor (itself, or what a reshape chain views).
    Root(TensorId),
}

/// A scratch copy of `source` that one op reads instead of `source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shadow {
    /// The shadow's tensor id (past the program's tensors).
    pub id: TensorId,
    /// The tensor it copies.
    pub source: TensorId,
    /// The step at which it lives (the op's: op index + 1).
    pub step: usize,
}

/// The storage of every tensor, from the parameter slots and the storage roots.
pub(crate) fn storage_keys(slots: &[Option<usize>], roots: &[TensorId]) -> Vec<StorageKey> {
    roots
        .iter()
        .map(|&root| match slots.get(root as usize).copied().flatten() {
            Some(slot) => StorageKey::Param(slot),
            None => StorageKey::Root(root),
        })
        .collect()
}

/// Whether any op of `program` reads one storage through two operands (so `init` also
/// compiles the copy kernel that fills shadows). `keys` as from [`storage_keys`].
pub(crate) fn any_repeated_operand(program: &Program, keys: &[StorageKey]) -> bool {
    // Concat copies one input per dispatch, so its inputs never share a dispatch; every other op
    // reads at most three tensors.
    program
        .ops
        .iter()
        .filter(|op| !matches!(op, Op::Concat(_)))
        .any(|op| {
            let operands: Vec<Option<StorageKey>> = op
                .inputs()
                .into_iter()
                .map(|id| keys.get(id as usize).copied())
                .collect();
            operands
                .iter()
                .enumerate()
                .any(|(i, key)| key.is_some() && operands[..i].contains(key))
        })
}

/// The copy kernel shadows need, when `program` has a repeated operand.
pub(crate) fn shadow_kernel(
    program: &Program,
    keys: &[StorageKey],
    workgroup_size: u32,
) -> Option<KernelKey> {
    any_repeated_operand(program, keys).then(|| KernelKey::new(CopyKey { wg: workgroup_size }))
}

/// Rewrites `ops` so that no dispatch binds one storage twice: every later binding of a storage
/// already bound by the same dispatch reads a shadow instead, and the op's dispatches start with
/// the copies that fill its shadows. Returns the shadows (ids from `first_id` on) to place.
///
/// # Errors
/// `Internal` for a binding of a tensor without a storage key; `InvalidArgument` when a copy
/// exceeds what a dispatch can address.
pub(crate) fn shadow_repeated_operands(
    ctx: &PlanContext<'_>,
    ops: &mut [OpDispatches],
    keys: &[StorageKey],
    first_id: usize,
) -> Result<Vec<Shadow>> {
    let mut shadows: Vec<Shadow> = Vec::new();
    for op in ops.iter_mut() {
        let step = op.op_index + 1;
        let mut mine: Vec<Shadow> = Vec::new();
        for dispatch in &mut op.dispatches {
            let mut bound: Vec<StorageKey> = Vec::with_capacity(dispatch.bindings.len());
            for binding in &mut dispatch.bindings {
                let Binding::Tensor(id) = *binding else {
                    continue;
                };
                let key = keys
                    .get(id as usize)
                    .copied()
                    .ok_or_else(|| Error::internal(format!("tensor {id} has no storage key")))?;
                if !bound.contains(&key) {
                    bound.push(key);
                    continue;
                }
                let shadow = match mine.iter().find(|s| s.source == id) {
                    Some(shadow) => *shadow,
                    None => {
                        let index = first_id
                            .checked_add(shadows.len() + mine.len())
                            .and_then(|n| TensorId::try_from(n).ok())
                            .ok_or_else(|| Error::internal("shadow tensor ids overflow"))?;
                        let shadow = Shadow {
                            id: index,
                            source: id,
                            step,
                        };
                        mine.push(shadow);
                        shadow
                    }
                };
                *binding = Binding::Tensor(shadow.id);
            }
        }
        if mine.is_empty() {
            continue;
        }
        let mut copies = Vec::with_capacity(mine.len());
        for shadow in &mine {
            let words = ctx.words(shadow.source)?;
            copies.extend(copy_words(ctx, shadow.source, shadow.id, words)?);
        }
        op.dispatches.splice(0..0, copies);
        shadows.extend(mine);
    }
    Ok(shadows)
}
