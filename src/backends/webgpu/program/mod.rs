//! One initialised program (the state behind a delegate handle): the decoded program, its
//! kernel choices, its parameters on the GPU, its activation arena, and its plans cached per
//! tuple of bound symbol values.
//!
//! `load` does everything that does not depend on the inputs' shapes, once: structural checks,
//! device-limit checks for every fixed-shape tensor, compiling every kernel the program can
//! dispatch, and loading parameters. A program without symbols is also planned and bound at
//! init, so its arena size is known (and reported) before the first execution.
//!
//! In the browser the kernels compile in the GPU process's background
//! (`browser::gpu::compile_in_background`) while the parameters download; a program with
//! symbols returns from `init` once its parameters are in, and its first execution waits for
//! the compiles to finish (a failure is reported there, as `NotSupported`). Natively (where
//! nothing compiles in the background), and for programs without symbols, `init` waits for them.
//!
//! What depends on the GPU (parameters, arena, bound plans) lives in a
//! [`ResidencySlot`](residency::ResidencySlot) registered with the backend's
//! [`Residents`](residency::Residents), which lifecycle signals release; an execution
//! ([`LoadedProgram::execute`], one run: `execute`) re-creates what is missing. When the device is
//! lost, the backend moves the program to a new one ([`LoadedProgram::recover`]): kernels
//! compiled again, parameters fetched again.
//!
//! Layout: `params` (parameter resolution), `bound` (a plan's GPU resources), `residency`
//! (what stays on the GPU, the plan cache, what signals release), `execute` (one run), `io`
//! (tensors in and out of the GPU layout), `profiling` (per-op timestamps).

pub(crate) mod bound;
mod execute;
mod io;
pub(crate) mod params;
pub(crate) mod profiling;
pub(crate) mod residency;

use crate::backends::parameters;
use crate::backends::webgpu::buffers::GpuBuffer;
use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::kernels::source::{invocations, source, workgroup_storage_bytes};
use crate::backends::webgpu::kernels::{KernelConfig, KernelKey};
use crate::backends::webgpu::plan::{self, gpu_bytes};
use crate::backends::webgpu::program::params::resolve_params;
use crate::backends::webgpu::program::profiling::Profile;
use crate::backends::webgpu::program::residency::{
    Release, ResidencySlot, Resident, Residents, allocate_states,
};
use crate::browser::gpu::{self, BackgroundCompile};
use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::params::SharedProvider;
use crate::program::{Dim, Program, bind_shapes};
use crate::registry::BackendInitContext;
use std::sync::Arc;

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
    /// Whether the parameters are on the GPU now (false after a `LowMemory` release, until the
    /// next execution fetches them again).
    pub params_resident: bool,
    /// Times the parameters were loaded (1 after init; +1 per reload after a release or a
    /// device loss).
    pub param_loads: u64,
    /// Times the program moved to a new device after losing one.
    pub device_recoveries: u64,
    /// State tensors of the program.
    pub states: usize,
    /// Bytes of state on the GPU (0 while dropped).
    pub state_bytes: u64,
    /// Whether the states are on the GPU (false after a device loss or a `LowMemory` that
    /// was allowed to drop them, until `reset_state`).
    pub states_resident: bool,
    /// Times the state was reset.
    pub state_resets: u64,
    /// Plans bound so far (a new symbol tuple, or a rebind after the arena grew or a release):
    /// a decode loop planned once adds none after its first step.
    pub plans_built: u64,
    /// Bind groups created so far (one per dispatch of each bound plan).
    pub bind_groups_created: u64,
    /// Pipelines compiled on the device (shared by every program on it).
    pub pipelines: usize,
    /// The precision the program runs in: `"f16"` when the spec `precision` chose f16 (matmul
    /// tiles staged in f16, and the KV cache in f16 where [`Self::kv_cache_f16`]), else `"f32"`.
    pub precision: &'static str,
    /// Whether attention's KV cache is stored in f16 (half the state bytes of f32).
    pub kv_cache_f16: bool,
    /// Whether activations are stored in f16 (the arena's float intermediates that f16-ready
    /// kernels alone touch, accumulated in f32; program inputs, outputs, weights and states
    /// stay f32): `precision` chose f16 and the program has such intermediates.
    pub activations_f16: bool,
    /// How many of the program's tensors are stored in f16 activations (0 unless
    /// [`Self::activations_f16`]).
    pub f16_activation_tensors: usize,
}

/// The state behind a WebGPU delegate handle.
pub struct LoadedProgram {
    pub(crate) ctx: Arc<GpuContext>,
    pub(crate) program: Program,
    pub(crate) config: KernelConfig,
    /// The provider the parameters came from (and come from again after a release).
    pub(crate) provider: Option<SharedProvider>,
    pub(crate) slot: Arc<ResidencySlot>,
    pub(crate) last_profile: Option<Profile>,
    pub(crate) param_loads: u64,
    pub(crate) device_recoveries: u64,
    /// Times the state was reset.
    pub(crate) state_resets: u64,
    /// Whether every kernel is compiled and checked on the current device.
    pub(crate) compiled: bool,
    /// Background compiles still running (only ever in the browser).
    pub(crate) compiling: Option<BackgroundCompile>,
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
                return Err(Error::invalid_program(format!(
                    "tensor {id} ({}) uses undeclared symbol {symbol}",
                    decl.name
                )));
            }
        }
    }
    plan::check_structure(program)
}

/// Every tensor with a fixed shape must fit one binding (a weight its ops bind by row ranges:
/// one buffer); every kernel the device's limits.
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
        let is_param = program.params.iter().any(|p| p.tensor as usize == id);
        let cap = if is_param && plan::bound_by_rows(program, id as u32) {
            limits.max_buffer_size
        } else {
            limits
                .max_storage_buffer_binding_size
                .min(limits.max_buffer_size)
        };
        if bytes > cap {
            return Err(Error::out_of_resources(format!(
                "tensor {id} ({}) needs {bytes} bytes on the GPU; this device binds at most {cap}",
                decl.name
            )));
        }
    }
    for key in plan::kernel_keys(program, config) {
        let needs = key.storage_bindings();
        let fits = needs <= limits.max_storage_buffers_per_shader_stage
            && invocations(&key) <= limits.max_compute_invocations_per_workgroup
            && workgroup_storage_bytes(&key) <= limits.max_compute_workgroup_storage_size;
        if !fits {
            return Err(Error::not_supported(format!(
                "kernel {} exceeds this device's limits",
                key.label()
            )));
        }
    }
    Ok(())
}

/// Starts compiling in the background the kernels of `keys` not compiled on `ctx` yet
/// (`None` where nothing compiles in the background: natively).
fn compile_in_background(ctx: &GpuContext, keys: &[KernelKey]) -> Option<BackgroundCompile> {
    gpu::compile_in_background(
        &ctx.device,
        keys.iter()
            .filter(|key| ctx.pipelines.get(key).is_none())
            // A malformed module fails again, with its error, when `compile` builds it.
            .filter_map(|key| Some((source(key).ok()?, key.storage_bindings()))),
    )
}

impl LoadedProgram {
    /// Checks, compiles and loads `program` on the device of `ctx`, its GPU state registered
    /// with `residents`.
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
        residents: &Residents,
    ) -> Result<Self> {
        check_structure(&program)?;
        // An f16 cache only where attention alone reads and writes it; f16 activations only
        // where some intermediate can take them (`plan::f16_activations`).
        let kv_f16 = config.kv_f16 && plan::f16_cache_states(&program).is_some();
        let config = KernelConfig {
            kv_f16,
            act_f16: config.act_f16 && plan::f16_activations(&program, kv_f16).any(),
            ..config
        };
        check_limits(&ctx, &program, config)?;
        let keys = plan::kernel_keys(&program, config);
        let background = compile_in_background(&ctx, &keys);
        if background.is_none() {
            ctx.pipelines.compile(&ctx.device, &keys).await?;
        }
        let provider = parameters::provider(context, &program)?.cloned();
        let params = resolve_params(&ctx, &program, provider.as_ref()).await?;
        let compiling = match background {
            Some(background) if program.symbols.is_empty() => {
                background.finish().await;
                ctx.pipelines.compile(&ctx.device, &keys).await?;
                None
            }
            other => other,
        };
        ctx.program_started();
        let states = match allocate_states(&ctx, &program, config) {
            Ok(states) => states,
            Err(error) => {
                ctx.program_ended();
                return Err(error);
            }
        };
        let mut resident = Resident {
            params: Some(params),
            states: Some(states),
            ..Resident::default()
        };
        if program.symbols.is_empty() {
            let shapes = declared_input_shapes(&program);
            let views: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
            let bound = bind_shapes(&program, &views)
                .map_err(|e| Error::invalid_program(e.message().to_owned()))?;
            if let Err(error) = resident.plan_for(&ctx, &program, config, bound) {
                ctx.program_ended();
                return Err(error);
            }
        }
        let loaded = Self {
            ctx: ctx.clone(),
            program,
            config,
            provider,
            slot: residents.admit(resident),
            last_profile: None,
            param_loads: 1,
            device_recoveries: 0,
            state_resets: 0,
            compiled: compiling.is_none(),
            compiling,
            kernels: keys.len(),
        };
        ctx.check_events("while initialising the program")?;
        Ok(loaded)
    }

    /// Moves the program to a working device after its own was lost: a device from `acquire`
    /// (the backend's current one, or a new one), every kernel compiled there, and everything
    /// that lived on the old device released; parameters are fetched again by the next
    /// execution.
    ///
    /// # Errors
    /// `InvalidState` naming the loss when no device can be had; `NotSupported` /
    /// `OutOfResources` when the new device cannot run the program; compile errors.
    pub(crate) async fn recover(&mut self, new: Result<Arc<GpuContext>>) -> Result<()> {
        let reason = self
            .ctx
            .lost()
            .unwrap_or_else(|| "unknown reason".to_owned());
        let ctx = new.map_err(|e| {
            Error::invalid_state(format!(
                "the WebGPU device was lost ({reason}) and no new one could be had: {}",
                e.message()
            ))
        })?;
        check_limits(&ctx, &self.program, self.config)?;
        let keys = plan::kernel_keys(&self.program, self.config);
        ctx.pipelines.compile(&ctx.device, &keys).await?;
        self.slot.release(Release::Everything);
        self.ctx.program_ended();
        ctx.program_started();
        self.ctx = ctx;
        self.device_recoveries += 1;
        self.compiled = true;
        Ok(())
    }

    /// Makes sure every kernel is compiled on the current device: waits for the background
    /// compiles `load` started, then runs the checked compile (cache hits by then).
    ///
    /// # Errors
    /// `NotSupported` naming a kernel the device refused.
    pub(crate) async fn ensure_compiled(&mut self) -> Result<()> {
        if self.compiled {
            return Ok(());
        }
        if let Some(pending) = self.compiling.take() {
            pending.finish().await;
        }
        let keys = plan::kernel_keys(&self.program, self.config);
        self.ctx.pipelines.compile(&self.ctx.device, &keys).await?;
        self.compiled = true;
        Ok(())
    }

    /// Makes sure the parameters are on the GPU, fetching them again when they were released.
    ///
    /// # Errors
    /// As [`resolve_params`].
    pub(crate) async fn ensure_params(&mut self, resident: &mut Resident) -> Result<()> {
        if resident.params.is_none() {
            let params = resolve_params(&self.ctx, &self.program, self.provider.as_ref()).await?;
            resident.params = Some(params);
            self.param_loads += 1;
        }
        Ok(())
    }

    /// Sets every state tensor back to zero, re-creating states that were dropped (see
    /// [`Release::Everything`]).
    ///
    /// # Errors
    /// `InvalidState` when the device is lost; `MemoryAllocationFailed` when a state cannot be
    /// re-created.
    pub(crate) fn reset_state(&mut self) -> Result<()> {
        self.ctx.check_events("before resetting state")?;
        let mut resident = self.slot.checkout();
        let result = match resident.states.as_ref() {
            Some(states) => {
                let mut encoder =
                    self.ctx
                        .device
                        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                            label: Some("reset state"),
                        });
                for state in states {
                    encoder.clear_buffer(state.raw(), 0, None);
                }
                self.ctx.queue.submit([encoder.finish()]);
                Ok(())
            }
            None => allocate_states(&self.ctx, &self.program, self.config).map(|states| {
                // Plans bound to the dropped buffers are stale.
                resident.plans.clear();
                resident.states = Some(states);
            }),
        };
        if result.is_ok() {
            resident.states_dropped = None;
            self.state_resets += 1;
        }
        self.slot.checkin(resident);
        result
    }

    /// Why the current device was lost, if it was.
    pub(crate) fn device_lost(&self) -> Option<String> {
        self.ctx.lost()
    }

    /// Runs the program once on its current device, writing its outputs after its inputs:
    /// the GPU state is checked out of the residency slot for the run (kernels compiled and
    /// parameters fetched again first where needed) and checked back in after, applying any
    /// release that arrived meanwhile. The backend moves the program to a new device when this
    /// fails on a lost one (see [`recover`](Self::recover)).
    ///
    /// # Errors
    /// As `execute::run`; `InvalidState` when the device was lost; compile and parameter errors
    /// as [`ensure_compiled`](Self::ensure_compiled) and [`ensure_params`](Self::ensure_params).
    pub(crate) async fn execute(&mut self, args: &mut [EValue], profiling: bool) -> Result<()> {
        let mut resident = self.slot.checkout();
        let result = self.run(&mut resident, args, profiling).await;
        self.slot.checkin(resident);
        let profile = result?;
        if profile.is_some() {
            self.last_profile = profile;
        }
        Ok(())
    }

    /// One run on checked-out state.
    async fn run(
        &mut self,
        resident: &mut Resident,
        args: &mut [EValue],
        profiling: bool,
    ) -> Result<Option<Profile>> {
        let ctx = self.ctx.clone();
        ctx.check_events("before executing")?;
        if !self.program.states.is_empty() && resident.states.is_none() {
            return Err(Error::invalid_state(format!(
                "the program's state (its KV cache) was dropped: {}; reset it (reset_state) and \
                 run the sequence again from its first position",
                resident.states_dropped.unwrap_or("reason unknown")
            )));
        }
        self.ensure_compiled().await?;
        self.ensure_params(resident).await?;
        execute::run(&ctx, &self.program, self.config, resident, args, profiling).await
    }

    /// Sizes and counts of this program.
    pub fn stats(&self) -> ProgramStats {
        let base = ProgramStats {
            kernels: self.kernels,
            param_loads: self.param_loads,
            device_recoveries: self.device_recoveries,
            states: self.program.states.len(),
            state_resets: self.state_resets,
            pipelines: self.ctx.pipelines.len(),
            precision: if self.config.f16 { "f16" } else { "f32" },
            kv_cache_f16: self.config.kv_f16,
            activations_f16: self.config.act_f16,
            f16_activation_tensors: if self.config.act_f16 {
                plan::tensor_floats(&self.program, self.config).count()
            } else {
                0
            },
            ..ProgramStats::default()
        };
        self.slot
            .inspect(|resident| {
                let recent = resident.plans.last().map(|(_, p)| &p.plan);
                let params = resident.params.as_deref().unwrap_or_default();
                ProgramStats {
                    arena_bytes: resident.arena_bytes(),
                    arena_bytes_without_reuse: recent.map_or(0, |p| p.activation_bytes),
                    params: params.len(),
                    param_bytes: params.iter().map(|p| p.bytes).sum(),
                    params_in_place: params.iter().filter(|p| p.in_place).count(),
                    cached_plans: resident.plans.len(),
                    dispatches: recent
                        .map_or(0, |p| p.ops.iter().map(|o| o.dispatches.len()).sum()),
                    params_resident: resident.params.is_some(),
                    state_bytes: resident
                        .states
                        .as_deref()
                        .map_or(0, |s| s.iter().map(GpuBuffer::allocated).sum()),
                    states_resident: resident.states.is_some(),
                    plans_built: resident.plans_built,
                    bind_groups_created: resident.bind_groups_created,
                    ..base.clone()
                }
            })
            .unwrap_or(base)
    }

    /// The profile of the last execution that ran with profiling on.
    pub fn last_profile(&self) -> Option<&Profile> {
        self.last_profile.as_ref()
    }
}

impl Drop for LoadedProgram {
    fn drop(&mut self) {
        self.slot.release(Release::Everything);
        self.ctx.program_ended();
    }
}

/// Declared input shapes of a program without symbols.
fn declared_input_shapes(program: &Program) -> Vec<Vec<usize>> {
    program
        .inputs
        .iter()
        .map(|&id| {
            program
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
