//! What a program keeps on the GPU between executions, the cache of its bound plans, and
//! releasing that state on lifecycle signals.
//!
//! A program's [`Resident`] state — its parameters' GPU storage, its activation arena and its
//! bound plans (bind groups, uniform, status and read-back buffers, cached per tuple of symbol
//! values, at most [`MAX_CACHED_PLANS`]) — lives in a [`ResidencySlot`] that the backend reaches
//! through its [`Residents`] registry, so a signal frees memory at once, not at the next
//! execution. `Suspend` releases the transient part (arena and plans) and keeps it released
//! while the host stays suspended; `LowMemory` also releases the parameters, which the program
//! fetches again from its provider on its next execution. State buffers (a KV cache) cannot be
//! fetched again: they survive `Suspend` and `LowMemory`, unless the backend was told it may
//! drop state under memory pressure; a lost device loses them.
//!
//! An execution checks the state out of its slot and back in when it ends. A release that
//! arrives meanwhile is recorded and applied at check-in, so a signal never pulls a buffer from
//! under commands in flight. The arena counts itself in its device's `arena_bytes` while alive.

use crate::backends::webgpu::buffers::GpuBuffer;
use crate::backends::webgpu::device::{GpuContext, share};
use crate::backends::webgpu::kernels::KernelConfig;
use crate::backends::webgpu::plan::{self, PlanLimits};
use crate::backends::webgpu::program::bound::BoundPlan;
use crate::backends::webgpu::program::params::ParamStorage;
use crate::error::{Error, Result};
use crate::program::{BoundShapes, Dim, Program};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Most plans (distinct symbol tuples) kept per program; the least recently used is dropped.
pub const MAX_CACHED_PLANS: usize = 8;

/// How much of a program's GPU state a signal releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Release {
    /// The activation arena and every bound plan (re-created by the next execution).
    Transients,
    /// Transients and the parameters (fetched again from the provider); states are kept.
    Params,
    /// Everything, states included: a state cannot be fetched again, so the next execution
    /// fails with `InvalidState` until the state is reset (`LowMemory` when the app allows
    /// dropping state, a lost device, the program's end).
    Everything,
}

/// A program's activation arena, counted in its device's `arena_bytes` while alive.
pub(crate) struct ActivationArena {
    ctx: Arc<GpuContext>,
    buffer: GpuBuffer,
}

impl ActivationArena {
    /// An arena of `bytes` on the device of `ctx`.
    ///
    /// # Errors
    /// `MemoryAllocationFailed` when the device cannot hold it.
    fn new(ctx: &Arc<GpuContext>, bytes: u64) -> Result<Self> {
        let buffer = GpuBuffer::new(
            ctx,
            bytes,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            "activation arena",
        )
        .map_err(|s| Error::memory_allocation_failed(s.to_string()))?;
        ctx.arena_bytes
            .fetch_add(buffer.allocated(), Ordering::Relaxed);
        Ok(Self {
            ctx: ctx.clone(),
            buffer,
        })
    }

    /// The arena's buffer.
    pub(crate) fn buffer(&self) -> &GpuBuffer {
        &self.buffer
    }
}

impl Drop for ActivationArena {
    fn drop(&mut self) {
        self.ctx
            .arena_bytes
            .fetch_sub(self.buffer.allocated(), Ordering::Relaxed);
    }
}

/// A program's GPU state between executions.
#[derive(Default)]
pub(crate) struct Resident {
    /// Parameter storage in `program.params` order; `None` once released.
    pub params: Option<Vec<ParamStorage>>,
    /// State buffers in `program.states` order (zero at creation); `None` once dropped.
    pub states: Option<Vec<GpuBuffer>>,
    /// Why the states were dropped, when they were (reported by the next execution).
    pub states_dropped: Option<&'static str>,
    /// The activation arena (the largest plan's size).
    pub arena: Option<ActivationArena>,
    /// Bumped whenever the arena is replaced: plans bound to an older one are rebound.
    pub arena_generation: u64,
    /// Bound plans per tuple of symbol values, most recently used last.
    pub plans: Vec<(Vec<usize>, BoundPlan)>,
    /// Plans bound so far (each binding creates one bind group per dispatch).
    pub plans_built: u64,
    /// Bind groups created so far.
    pub bind_groups_created: u64,
}

/// Zeroed state buffers of `program` on the device of `ctx`, in `program.states` order
/// (WebGPU zero-fills new buffers): under `config.kv_f16`, attention's caches
/// (`plan::f16_cache_states`) at 2 bytes per element, the rest at their dtype's size.
///
/// # Errors
/// `MemoryAllocationFailed` when the device cannot hold one; `InvalidProgram` for a state that
/// is not a declared fixed-shape tensor (validation rules it out).
pub(crate) fn allocate_states(
    ctx: &Arc<GpuContext>,
    program: &Program,
    config: KernelConfig,
) -> Result<Vec<GpuBuffer>> {
    let f16_caches = if config.kv_f16 {
        plan::f16_cache_states(program).unwrap_or_default()
    } else {
        Vec::new()
    };
    program
        .states
        .iter()
        .map(|&id| {
            let decl = program
                .tensors
                .get(id as usize)
                .ok_or_else(|| Error::invalid_program(format!("state names tensor {id}")))?;
            let shape = decl
                .shape
                .iter()
                .map(|dim| match *dim {
                    Dim::Fixed(n) => usize::try_from(n).ok(),
                    Dim::Symbol(_) => None,
                })
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| Error::invalid_program(format!("state {id} is not fixed")))?;
            let mut bytes = plan::gpu_bytes(decl.dtype, &shape)?;
            if f16_caches.contains(&id) {
                // f32 words halved: 2 bytes per element, padded to a word.
                bytes = (bytes / 2).next_multiple_of(4);
            }
            if bytes > ctx.limits.max_storage_buffer_binding_size {
                return Err(Error::out_of_resources(format!(
                    "state {id} ({}) needs {bytes} bytes; this device binds at most {}",
                    decl.name, ctx.limits.max_storage_buffer_binding_size
                )));
            }
            GpuBuffer::new(
                ctx,
                bytes.max(4),
                wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_DST
                    | wgpu::BufferUsages::COPY_SRC,
                &decl.name,
            )
            .map_err(|s| Error::memory_allocation_failed(s.to_string()))
        })
        .collect()
}

/// The planning limits of the device of `ctx`.
fn plan_limits(ctx: &GpuContext) -> PlanLimits {
    let l = &ctx.limits;
    PlanLimits {
        storage_alignment: ctx.storage_alignment(),
        max_binding: l.max_storage_buffer_binding_size,
        max_buffer: l.max_buffer_size,
        max_workgroups: l.max_compute_workgroups_per_dimension,
    }
}

impl Resident {
    /// Drops what `level` names (the arena uncounts itself).
    fn release(&mut self, level: Release) {
        self.plans.clear();
        if self.arena.take().is_some() {
            self.arena_generation += 1;
        }
        if level >= Release::Params {
            self.params = None;
        }
        if level == Release::Everything && self.states.take().is_some() {
            self.states_dropped = Some("its memory was released (LowMemory, or a lost device)");
        }
    }

    /// Bytes of the arena (0 without one).
    pub(crate) fn arena_bytes(&self) -> u64 {
        self.arena.as_ref().map_or(0, |a| a.buffer().allocated())
    }

    /// Grows the arena to at least `bytes`; bound plans of an older arena are rebound on use.
    ///
    /// # Errors
    /// `MemoryAllocationFailed` when the device cannot hold it.
    fn ensure_arena(&mut self, ctx: &Arc<GpuContext>, bytes: u64) -> Result<()> {
        if bytes == 0 || bytes <= self.arena_bytes() {
            return Ok(());
        }
        self.arena = Some(ActivationArena::new(ctx, bytes)?);
        self.arena_generation += 1;
        Ok(())
    }

    /// The bound plan of `program` for `bound`, from the cache or newly planned and bound on
    /// the device of `ctx`; moved to the end of the cache (most recently used).
    ///
    /// # Errors
    /// Planning errors (`OutOfResources` for shapes the device cannot hold), allocation
    /// failures, and `Internal` for a kernel that was not compiled.
    pub(crate) fn plan_for(
        &mut self,
        ctx: &Arc<GpuContext>,
        program: &Program,
        config: KernelConfig,
        bound: BoundShapes,
    ) -> Result<&mut BoundPlan> {
        let key = bound.symbols.clone();
        let cached = self.plans.iter().position(|(k, _)| *k == key);
        let shape_plan = match cached {
            Some(index) => {
                let (key, entry) = self.plans.remove(index);
                if entry.generation == self.arena_generation {
                    self.plans.push((key, entry));
                    return self.most_recent();
                }
                entry.plan
            }
            None => plan::plan(program, bound.shapes, config, plan_limits(ctx))?,
        };
        self.ensure_arena(ctx, shape_plan.arena_bytes)?;
        let entry = BoundPlan::bind(
            ctx,
            program,
            shape_plan,
            self.arena.as_ref().map(ActivationArena::buffer),
            self.params.as_deref(),
            self.states.as_deref(),
            self.arena_generation,
        )?;
        self.plans_built += 1;
        self.bind_groups_created += entry.ops.iter().map(Vec::len).sum::<usize>() as u64;
        if self.plans.len() >= MAX_CACHED_PLANS {
            self.plans.remove(0);
        }
        self.plans.push((key, entry));
        self.most_recent()
    }

    /// The most recently used plan.
    ///
    /// # Errors
    /// `Internal` when no plan is cached.
    pub(crate) fn most_recent(&mut self) -> Result<&mut BoundPlan> {
        self.plans
            .last_mut()
            .map(|(_, p)| p)
            .ok_or_else(|| Error::internal("plan cache is empty"))
    }
}

struct SlotState {
    /// `None` while an execution has the state checked out.
    resident: Option<Resident>,
    /// The strongest release asked for while checked out.
    pending: Option<Release>,
}

/// Where a program's [`Resident`] state lives while no execution uses it.
pub(crate) struct ResidencySlot {
    state: Mutex<SlotState>,
    /// The registry's suspended flag (transients stay released while it is set).
    suspended: Arc<AtomicBool>,
}

impl ResidencySlot {
    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // Every update replaces whole fields: a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the state for an execution. An empty state (nothing resident) if it is already
    /// out, which `&mut` access to the program rules out.
    pub(crate) fn checkout(&self) -> Resident {
        self.lock().resident.take().unwrap_or_default()
    }

    /// Puts the state back, applying a release asked for meanwhile, or the transient release
    /// that holds while the host is suspended.
    pub(crate) fn checkin(&self, mut resident: Resident) {
        let mut state = self.lock();
        let suspended = self
            .suspended
            .load(Ordering::Relaxed)
            .then_some(Release::Transients);
        if let Some(level) = state.pending.take().max(suspended) {
            resident.release(level);
        }
        state.resident = Some(resident);
    }

    /// Releases `level` now, or at check-in when an execution has the state.
    pub(crate) fn release(&self, level: Release) {
        let mut state = self.lock();
        match state.resident.as_mut() {
            Some(resident) => resident.release(level),
            None => state.pending = state.pending.max(Some(level)),
        }
    }

    /// Reads the resident state (`None` while an execution has it).
    pub(crate) fn inspect<R>(&self, f: impl FnOnce(&Resident) -> R) -> Option<R> {
        self.lock().resident.as_ref().map(f)
    }
}

/// The slots of every live program of one backend (whatever device each is on), and whether
/// the host is suspended.
#[derive(Default)]
pub(crate) struct Residents {
    slots: Mutex<Vec<Weak<ResidencySlot>>>,
    suspended: Arc<AtomicBool>,
}

impl Residents {
    fn live(&self) -> Vec<Arc<ResidencySlot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|w| w.strong_count() > 0);
        slots.iter().filter_map(Weak::upgrade).collect()
    }

    /// A registered slot holding a new program's `resident` state; while suspended its
    /// transients are released at once.
    pub(crate) fn admit(&self, resident: Resident) -> Arc<ResidencySlot> {
        let slot = share(ResidencySlot {
            state: Mutex::new(SlotState {
                resident: None,
                pending: None,
            }),
            suspended: self.suspended.clone(),
        });
        slot.checkin(resident);
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&slot));
        // A suspension that arrived between the check-in and the registration.
        if self.is_suspended() {
            slot.release(Release::Transients);
        }
        slot
    }

    /// Whether the host is suspended (transients stay released).
    pub(crate) fn is_suspended(&self) -> bool {
        self.suspended.load(Ordering::Relaxed)
    }

    /// Marks the host suspended or running.
    pub(crate) fn set_suspended(&self, suspended: bool) {
        self.suspended.store(suspended, Ordering::Relaxed);
    }

    /// Releases `level` in every live program.
    pub(crate) fn release_all(&self, level: Release) {
        for slot in self.live() {
            slot.release(level);
        }
    }
}
