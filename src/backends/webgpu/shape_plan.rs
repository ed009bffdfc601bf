//! The types of a WebGPU execution plan, GPU-free: where each tensor lives ([`Storage`],
//! [`Placement`]), the dispatches of each op ([`OpDispatches`]), the device limits a plan
//! respects ([`PlanLimits`]) and the plan for one tuple of symbol values ([`ShapePlan`]).
//! `plan.rs` computes them; `alias.rs` rewrites dispatches; `bound.rs` binds them.

use crate::backends::webgpu::kernels::Dispatch;
use crate::error::{Error, Result};
use crate::program::TensorId;

/// Where a tensor's bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Storage {
    /// At this byte offset of the activation arena.
    Arena(u64),
    /// In parameter slot `n` (see `Program::params`).
    Param(usize),
    /// In state buffer `n` (see `Program::states`), alive across executions.
    State(usize),
}

/// A tensor's storage and its size on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// Where it lives.
    pub storage: Storage,
    /// Bytes it occupies on the GPU (u8 widened to words, see `kernels`).
    pub bytes: u64,
}

/// The dispatches of one op.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpDispatches {
    /// Index of the op in the program.
    pub op_index: usize,
    /// The op's name, for profiles.
    pub name: &'static str,
    /// Its dispatches (none for reshape and empty tensors).
    pub dispatches: Vec<Dispatch>,
}

/// The device limits a plan must respect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PlanLimits {
    /// `minStorageBufferOffsetAlignment`.
    pub storage_alignment: u64,
    /// `maxStorageBufferBindingSize`.
    pub max_binding: u64,
    /// `maxBufferSize`.
    pub max_buffer: u64,
    /// `maxComputeWorkgroupsPerDimension`.
    pub max_workgroups: u32,
}

/// Everything needed to run the program for one tuple of symbol values.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ShapePlan {
    /// The concrete shape of every tensor.
    pub shapes: Vec<Vec<usize>>,
    /// Where each tensor lives; `None` for tensors nothing defines. Past the program's tensors:
    /// the shadows of repeated operands (see `alias.rs`).
    pub placements: Vec<Option<Placement>>,
    /// Bytes of activation arena this plan needs.
    pub arena_bytes: u64,
    /// Bytes the activations would take without reuse (each aligned).
    pub activation_bytes: u64,
    /// Per op, in program order.
    pub ops: Vec<OpDispatches>,
    /// Whether a dispatch reports into the status word.
    pub uses_status: bool,
    /// Bytes of the plan's scratch buffer: the largest `Binding::Scratch` (0: none).
    pub scratch_bytes: u64,
}

impl ShapePlan {
    /// The placement of `id`.
    ///
    /// # Errors
    /// `Internal` when the tensor has none (the planner proved every bound tensor has one).
    pub(crate) fn placement(&self, id: TensorId) -> Result<Placement> {
        self.placements
            .get(id as usize)
            .copied()
            .flatten()
            .ok_or_else(|| Error::internal(format!("tensor {id} has no storage in the plan")))
    }
}
