//! One initialised program (the state behind a delegate handle): the decoded program, its
//! kernel choices, its parameters on the GPU, its activation arena, and its plans cached per
//! tuple of bound symbol values.
//!
//! `load` does everything that does not depend on the inputs' shapes, once: structural checks,
//! device-limit checks for every fixed-shape tensor, compiling every kernel the program can
//! dispatch, and loading parameters. A program without symbols is also planned and bound at
//! init, so its arena size is known (and reported) before the first execution.

use crate::backends::webgpu::bound::BoundPlan;
use crate::backends::webgpu::buffers::GpuBuffer;
use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::dispatch;
use crate::backends::webgpu::kernels::KernelConfig;
use crate::backends::webgpu::kernels::source::{invocations, workgroup_storage_bytes};
use crate::backends::webgpu::params::{ParamStorage, resolve_params};
use crate::backends::webgpu::plan::{self, gpu_bytes};
use crate::backends::webgpu::profiling::Profile;
use crate::error::{Error, ErrorCode, Result};
use crate::program::{Dim, Program, bind_shapes};
use crate::registry::BackendInitContext;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Most plans (distinct symbol tuples) kept per program; the least recently used is dropped.
pub const MAX_CACHED_PLANS: usize = 8;

/// Sizes and counts of one initialised program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramStats {
    /// Bytes of the activation arena (the largest plan so far; 0 before the first plan).
    pub arena_bytes: u64,
    /// Bytes the arena would take without reuse (sum of all activations of that plan).
    pub arena_bytes_without_reuse: u64,
    /// Parameters on the GPU.
    pub params: usize,
    /// Bytes of parameters on the GPU.
    pub param_bytes: u64,
    /// Parameters bound in the very GPU buffer the provider loaded them into (the rest were
    /// copied: realigned on the GPU, or widened / uploaded through the host).
    pub params_in_place: usize,
    /// Distinct kernels the program uses.
    pub kernels: usize,
    /// Plans cached (one per tuple of bound symbol values).
    pub cached_plans: usize,
    /// Compute dispatches of the most recently used plan.
    pub dispatches: usize,
}

/// The state behind a WebGPU delegate handle.
pub struct LoadedProgram {
    pub(crate) ctx: Arc<GpuContext>,
    pub(crate) program: Program,
    pub(crate) config: KernelConfig,
    pub(crate) params: Vec<ParamStorage>,
    pub(crate) arena: Option<GpuBuffer>,
    pub(crate) arena_generation: u64,
    /// Most recently used last.
    pub(crate) plans: Vec<(Vec<usize>, BoundPlan)>,
    pub(crate) last_profile: Option<Profile>,
    kernels: usize,
}

impl std::fmt::Debug for LoadedProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedProgram")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Structural checks that planning relies on, for programs with any shapes.
fn check_structure(program: &Program) -> Result<()> {
    for (id, decl) in program.tensors.iter().enumerate() {
        for dim in &decl.shape {
            if let Dim::Symbol(symbol) = dim
                && *symbol as usize >= program.symbols.len()
            {
                return Err(Error::new(
                    ErrorCode::InvalidProgram,
                    format!(
                        "tensor {id} ({}) uses undeclared symbol {symbol}",
                        decl.name
                    ),
                ));
            }
        }
    }
    plan::check_structure(program)
}

/// Every tensor with a fixed shape must fit one binding; every kernel the device's limits.
fn check_limits(ctx: &GpuContext, program: &Program, config: KernelConfig) -> Result<()> {
    let limits = &ctx.limits;
    for (id, decl) in program.tensors.iter().enumerate() {
        let fixed: Option<Vec<usize>> = decl
            .shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => usize::try_from(*n).ok(),
                Dim::Symbol(_) => None,
            })
            .collect();
        let Some(shape) = fixed else { continue };
        let bytes = gpu_bytes(decl.dtype, &shape)?;
        let cap = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        if bytes > cap {
            return Err(Error::new(
                ErrorCode::OutOfResources,
                format!(
                    "tensor {id} ({}) needs {bytes} bytes on the GPU; this device binds at most {cap}",
                    decl.name
                ),
            ));
        }
    }
    for key in dispatch::kernel_keys(program, config) {
        let needs = key.storage_bindings();
        let fits = needs <= limits.max_storage_buffers_per_shader_stage
            && invocations(&key) <= limits.max_compute_invocations_per_workgroup
            && workgroup_storage_bytes(&key) <= limits.max_compute_workgroup_storage_size;
        if !fits {
            return Err(Error::new(
                ErrorCode::NotSupported,
                format!("kernel {} exceeds this device's limits", key.label()),
            ));
        }
    }
    Ok(())
}

impl LoadedProgram {
    /// Checks, compiles and loads `program` on the device of `ctx`.
    ///
    /// # Errors
    /// `InvalidProgram` for structural faults; `OutOfResources` / `NotSupported` when the
    /// program cannot fit the device; parameter errors as `params::resolve_params`; `Internal`
    /// for errors the device reported meanwhile.
    pub(crate) async fn load(
        ctx: Arc<GpuContext>,
        program: Program,
        config: KernelConfig,
        context: &BackendInitContext,
    ) -> Result<Self> {
        check_structure(&program)?;
        check_limits(&ctx, &program, config)?;
        let keys = dispatch::kernel_keys(&program, config);
        ctx.pipelines.compile(&ctx.device, &keys).await?;
        let params = resolve_params(&ctx, &program, context).await?;
        ctx.program_started();
        let mut loaded = Self {
            ctx: ctx.clone(),
            program,
            config,
            params,
            arena: None,
            arena_generation: 0,
            plans: Vec::new(),
            last_profile: None,
            kernels: keys.len(),
        };
        if loaded.program.symbols.is_empty() {
            let shapes = loaded.declared_input_shapes();
            let views: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
            let bound = bind_shapes(&loaded.program, &views)
                .map_err(|e| Error::new(ErrorCode::InvalidProgram, e.message().to_owned()))?;
            loaded.plan_for(bound)?;
        }
        ctx.check_events("while initialising the program")?;
        Ok(loaded)
    }

    /// Declared input shapes of a program without symbols.
    fn declared_input_shapes(&self) -> Vec<Vec<usize>> {
        self.program
            .inputs
            .iter()
            .map(|&id| {
                self.program
                    .tensors
                    .get(id as usize)
                    .map(|t| {
                        t.shape
                            .iter()
                            .map(|d| match d {
                                Dim::Fixed(n) => usize::try_from(*n).unwrap_or(usize::MAX),
                                Dim::Symbol(_) => 0,
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Grows the arena to at least `bytes`; bound plans of an older arena are rebound on use.
    pub(crate) fn ensure_arena(&mut self, bytes: u64) -> Result<()> {
        let current = self.arena.as_ref().map_or(0, GpuBuffer::allocated);
        if bytes == 0 || bytes <= current {
            return Ok(());
        }
        let arena = GpuBuffer::new(
            &self.ctx,
            bytes,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            "activation arena",
        )
        .map_err(|s| Error::new(ErrorCode::MemoryAllocationFailed, s.to_string()))?;
        self.ctx
            .arena_bytes
            .fetch_add(arena.allocated(), Ordering::Relaxed);
        self.ctx.arena_bytes.fetch_sub(current, Ordering::Relaxed);
        self.arena = Some(arena);
        self.arena_generation += 1;
        Ok(())
    }

    /// Sizes and counts of this program.
    pub fn stats(&self) -> ProgramStats {
        let recent = self.plans.last().map(|(_, p)| &p.plan);
        ProgramStats {
            arena_bytes: self.arena.as_ref().map_or(0, GpuBuffer::allocated),
            arena_bytes_without_reuse: recent.map_or(0, |p| p.activation_bytes),
            params: self.params.len(),
            param_bytes: self.params.iter().map(|p| p.bytes).sum(),
            params_in_place: self.params.iter().filter(|p| p.in_place).count(),
            kernels: self.kernels,
            cached_plans: self.plans.len(),
            dispatches: recent.map_or(0, |p| p.ops.iter().map(|o| o.dispatches.len()).sum()),
        }
    }

    /// The profile of the last execution that ran with profiling on.
    pub fn last_profile(&self) -> Option<&Profile> {
        self.last_profile.as_ref()
    }
}

impl Drop for LoadedProgram {
    fn drop(&mut self) {
        let arena = self.arena.as_ref().map_or(0, GpuBuffer::allocated);
        self.ctx.program_ended(arena);
    }
}
