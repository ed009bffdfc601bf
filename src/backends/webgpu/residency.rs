//! What a program keeps on the GPU between executions, and releasing it on lifecycle signals.
//!
//! A program's [`Resident`] state — its parameters' GPU storage, its activation arena and its
//! bound plans (bind groups, uniform, status and read-back buffers) — lives in a
//! [`ResidencySlot`] that the device context can reach through [`Residents`], so a signal frees
//! memory at once, not at the next execution. `Suspend` releases the transient part (arena and
//! plans) and keeps it released while the host stays suspended; `LowMemory` also releases the
//! parameters, which the program fetches again from its provider on its next execution.
//!
//! An execution checks the state out of its slot and back in when it ends. A release that
//! arrives meanwhile is recorded and applied at check-in, so a signal never pulls a buffer from
//! under commands in flight.

use crate::backends::webgpu::bound::BoundPlan;
use crate::backends::webgpu::buffers::GpuBuffer;
use crate::backends::webgpu::device::GpuContext;
use crate::backends::webgpu::params::ParamStorage;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// How much of a program's GPU state a signal releases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Release {
    /// The activation arena and every bound plan (re-created by the next execution).
    Transients,
    /// Transients and the parameters (fetched again from the provider).
    Everything,
}

/// A program's GPU state between executions.
#[derive(Default)]
pub(crate) struct Resident {
    /// Parameter storage in `program.params` order; `None` once released.
    pub params: Option<Vec<ParamStorage>>,
    /// The activation arena (the largest plan's size).
    pub arena: Option<GpuBuffer>,
    /// Bumped whenever the arena is replaced: plans bound to an older one are rebound.
    pub arena_generation: u64,
    /// Bound plans per tuple of symbol values, most recently used last.
    pub plans: Vec<(Vec<usize>, BoundPlan)>,
}

impl Resident {
    /// Drops what `level` names, keeping the context's arena accounting true.
    fn release(&mut self, level: Release, ctx: &GpuContext) {
        self.plans.clear();
        if let Some(arena) = self.arena.take() {
            ctx.arena_bytes
                .fetch_sub(arena.allocated(), Ordering::Relaxed);
            self.arena_generation += 1;
        }
        if level == Release::Everything {
            self.params = None;
        }
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
}

impl ResidencySlot {
    /// A slot holding `resident`.
    pub(crate) fn new(resident: Resident) -> Arc<Self> {
        crate::backends::webgpu::device::share(Self {
            state: Mutex::new(SlotState {
                resident: Some(resident),
                pending: None,
            }),
        })
    }

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
    pub(crate) fn checkin(&self, mut resident: Resident, ctx: &GpuContext) {
        let mut state = self.lock();
        let suspended = ctx.residents.is_suspended().then_some(Release::Transients);
        if let Some(level) = state.pending.take().max(suspended) {
            resident.release(level, ctx);
        }
        state.resident = Some(resident);
    }

    /// Releases `level` now, or at check-in when an execution has the state.
    pub(crate) fn release(&self, level: Release, ctx: &GpuContext) {
        let mut state = self.lock();
        match state.resident.as_mut() {
            Some(resident) => resident.release(level, ctx),
            None => state.pending = state.pending.max(Some(level)),
        }
    }

    /// Reads the resident state (`None` while an execution has it).
    pub(crate) fn inspect<R>(&self, f: impl FnOnce(&Resident) -> R) -> Option<R> {
        self.lock().resident.as_ref().map(f)
    }
}

/// The slots of every live program on one device, and whether the host is suspended.
#[derive(Default)]
pub(crate) struct Residents {
    slots: Mutex<Vec<Weak<ResidencySlot>>>,
    suspended: std::sync::atomic::AtomicBool,
}

impl Residents {
    fn live(&self) -> Vec<Arc<ResidencySlot>> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.retain(|w| w.strong_count() > 0);
        slots.iter().filter_map(Weak::upgrade).collect()
    }

    /// Adds a program's slot; while suspended its transients are released at once.
    pub(crate) fn register(&self, slot: &Arc<ResidencySlot>, ctx: &GpuContext) {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(slot));
        if self.is_suspended() {
            slot.release(Release::Transients, ctx);
        }
    }

    /// Whether the host is suspended (transients stay released).
    pub(crate) fn is_suspended(&self) -> bool {
        self.suspended.load(Ordering::Relaxed)
    }

    /// Marks the host suspended or running.
    pub(crate) fn set_suspended(&self, suspended: bool) {
        self.suspended.store(suspended, Ordering::Relaxed);
    }

    /// Releases `level` in every live program of the device.
    pub(crate) fn release_all(&self, level: Release, ctx: &GpuContext) {
        for slot in self.live() {
            slot.release(level, ctx);
        }
    }
}
