//! [`WebGpuBackend`]: the [`BackendInterface`] implementation, its backend-wide options and the
//! queries tests and tools use (live buffers, per-program stats and profiles).
//!
//! `get_option` keys: the adapter, limit and feature keys of [`ADAPTER_KEYS`] (need a device),
//! plus [`BACKEND_KEYS`]: `available` (bool), `unavailable_reason` (string, empty when
//! available), `power_preference` (string), `device_power_preference` (string: what the current
//! device was acquired with), `profiling` (bool), `live_buffers`, `live_buffer_bytes`,
//! `arena_bytes` (activation arenas of live programs), `programs` and `pipelines` (ints),
//! `suspended` (bool), `device_generation` (int: devices acquired so far, so a replaced
//! device shows), and `max_storage_binding_bytes` / `max_buffer_bytes` (int: the caps set, 0
//! for none), `adapter_limits.max_storage_buffer_binding_size` and
//! `adapter_limits.max_buffer_size` (int: the adapter's own, before caps). The `limits.*` keys are the limits the backend uses on the current device: the
//! adapter's own (requested at device creation, natively and in the browser), lowered to the
//! caps the device was acquired with.
//!
//! `set_option` keys: `power_preference` (`"none"`, `"low-power"`, `"high-performance"`),
//! `max_storage_binding_bytes` and `max_buffer_bytes` (int: cap `maxStorageBufferBindingSize` /
//! `maxBufferSize` at that many bytes, a positive multiple of 4, or 0 for the adapter's own; a
//! cap above the adapter's changes nothing; for tests of what a smaller device must do). All
//! three apply to the device: the next `init` that finds no program alive on the current device
//! acquires one with them (see also [`WebGpuBackend::reacquire`]). And `profiling` (bool). Any
//! other key, or a value of the wrong type or range, is `InvalidArgument`; `set_option` checks
//! every option before applying any.
//!
//! A backend whose device was lost and cannot be replaced is unavailable again
//! (`is_available` false, `init` gives `NotFound` as the registry does for such backends).
//!
//! Lifecycle (`notify`): `Suspend` releases every program's activation arena and bound plans
//! and keeps them released while suspended; `Resume` lets executions keep them again (rebuilt
//! lazily); `LowMemory` also releases parameters, fetched again by the next execution. A lost
//! device is replaced by the next `init` or `execute` that needs one; programs that recover at
//! the same moment share one new device. The backend, not a device, owns the registry of its
//! programs' GPU state (`program::residency::Residents`) that these signals reach.

use crate::backends::webgpu::adapter::{ADAPTER_KEYS, AdapterReport, adapter_option, clip};
use crate::backends::webgpu::buffers::GpuAllocator;
use crate::backends::webgpu::device::{GpuContext, LimitCaps, share, unavailable};
use crate::backends::webgpu::program::profiling::Profile;
use crate::backends::webgpu::program::residency::{Release, Residents};
use crate::backends::webgpu::program::{LoadedProgram, ProgramStats};
use crate::backends::webgpu::spec::{kernel_config, parse_specs};
use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::lifecycle::{Released, Signal};
use crate::program;
use crate::registry::{
    BackendExecutionContext, BackendInitContext, BackendInterface, BackendOption,
    BackendOptionContext, CompileSpec, DelegateHandle, FreeableBuffer, LocalBoxFuture, OptionValue,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Backend-wide `get_option` keys (besides [`ADAPTER_KEYS`]).
pub const BACKEND_KEYS: [&str; 16] = [
    "available",
    "unavailable_reason",
    "power_preference",
    "device_power_preference",
    "profiling",
    "live_buffers",
    "live_buffer_bytes",
    "arena_bytes",
    "programs",
    "pipelines",
    "suspended",
    "device_generation",
    "max_storage_binding_bytes",
    "max_buffer_bytes",
    "adapter_limits.max_storage_buffer_binding_size",
    "adapter_limits.max_buffer_size",
];

struct State {
    ctx: Option<Arc<GpuContext>>,
    failure: Option<String>,
    /// The preference the next acquisition asks for (`set_option`).
    power: wgpu::PowerPreference,
    /// The preference the current device was acquired with.
    device_power: wgpu::PowerPreference,
    /// The limit caps the next acquisition applies (`set_option`); the current device's are
    /// `GpuContext::caps`.
    caps: LimitCaps,
    /// Devices acquired so far.
    generation: u64,
}

/// The WebGPU delegate backend (wgpu: WebGPU in the browser, Vulkan/Metal/DX12 natively).
pub struct WebGpuBackend {
    state: Mutex<State>,
    profiling: AtomicBool,
    /// Whether `LowMemory` may drop programs' state tensors too (off: states survive it).
    drop_state_on_low_memory: AtomicBool,
    /// The GPU state of every live program (on whatever device), which lifecycle signals
    /// release, and whether the host is suspended.
    residents: Residents,
    /// Held while a device is being acquired, so that programs recovering at the same moment
    /// share one new device instead of each acquiring their own.
    acquiring: futures_util::lock::Mutex<()>,
}

impl std::fmt::Debug for WebGpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebGpuBackend")
            .field("available", &self.is_available())
            .field("adapter", &self.adapter())
            .finish_non_exhaustive()
    }
}

fn power_name(power: wgpu::PowerPreference) -> &'static str {
    match power {
        wgpu::PowerPreference::LowPower => "low-power",
        wgpu::PowerPreference::HighPerformance => "high-performance",
        wgpu::PowerPreference::None => "none",
    }
}

fn power_from(name: &str) -> Option<wgpu::PowerPreference> {
    Some(match name {
        "none" => wgpu::PowerPreference::None,
        "low-power" => wgpu::PowerPreference::LowPower,
        "high-performance" => wgpu::PowerPreference::HighPerformance,
        _ => return None,
    })
}

/// A limit cap from option `key`: `None` for 0, else a positive multiple of 4.
///
/// # Errors
/// `InvalidArgument` for a negative value or one that is not a multiple of 4 (WebGPU's
/// alignment of these limits).
fn limit_cap(key: &str, bytes: i64) -> Result<Option<u64>> {
    match u64::try_from(bytes) {
        Ok(0) => Ok(None),
        Ok(bytes) if bytes % 4 == 0 => Ok(Some(bytes)),
        _ => Err(Error::invalid_argument(format!(
            "{key} {bytes}: expected 0 (the adapter's limit) or a positive multiple of 4"
        ))),
    }
}

/// The message for a handle another backend made.
const NOT_OURS: &str = "the handle was not made by the webgpu backend";

fn program_of(handle: &DelegateHandle) -> Result<&LoadedProgram> {
    handle
        .downcast_ref::<LoadedProgram>()
        .ok_or_else(|| Error::delegate_invalid_handle(NOT_OURS))
}

impl WebGpuBackend {
    /// The name the backend is registered under by default.
    pub const NAME: &'static str = "webgpu";

    /// A backend with a device from the default adapter. It is created even when no device can
    /// be had; [`is_available`](BackendInterface::is_available) is then false and
    /// [`unavailable_reason`](Self::unavailable_reason) says why.
    pub async fn new() -> Self {
        Self::with_power_preference(wgpu::PowerPreference::None).await
    }

    /// As [`new`](Self::new), asking for an adapter with the given power preference.
    pub async fn with_power_preference(power: wgpu::PowerPreference) -> Self {
        let (ctx, failure) = match GpuContext::acquire(power, LimitCaps::default()).await {
            Ok(ctx) => (Some(share(ctx)), None),
            Err(reason) => (None, Some(reason)),
        };
        Self {
            state: Mutex::new(State {
                generation: u64::from(ctx.is_some()),
                ctx,
                failure,
                power,
                device_power: power,
                caps: LimitCaps::default(),
            }),
            profiling: AtomicBool::new(false),
            drop_state_on_low_memory: AtomicBool::new(false),
            residents: Residents::default(),
            acquiring: futures_util::lock::Mutex::new(()),
        }
    }

    /// A backend whose device is not acquired yet: unavailable until [`reacquire`](Self::reacquire)
    /// succeeds. Lets the browser build register `"webgpu"` synchronously at start-up and acquire
    /// the device in the background.
    pub fn pending() -> Self {
        Self {
            state: Mutex::new(State {
                ctx: None,
                failure: Some("the WebGPU device is still being acquired".to_owned()),
                power: wgpu::PowerPreference::None,
                device_power: wgpu::PowerPreference::None,
                caps: LimitCaps::default(),
                generation: 0,
            }),
            profiling: AtomicBool::new(false),
            drop_state_on_low_memory: AtomicBool::new(false),
            residents: Residents::default(),
            acquiring: futures_util::lock::Mutex::new(()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Updates replace whole fields; a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn context(&self) -> Option<Arc<GpuContext>> {
        self.state().ctx.clone()
    }

    /// Acquires a new device with the current power preference and limit caps, replacing the
    /// current one.
    ///
    /// # Errors
    /// `InvalidState` while programs initialised on the current (not lost) device are alive,
    /// or when no device can be had.
    pub async fn reacquire(&self) -> Result<()> {
        let _acquiring = self.acquiring.lock().await;
        self.reacquire_locked().await
    }

    /// [`reacquire`](Self::reacquire) with `acquiring` held by the caller.
    async fn reacquire_locked(&self) -> Result<()> {
        let (power, caps) = {
            let state = self.state();
            if let Some(ctx) = &state.ctx
                && ctx.lost().is_none()
                && ctx.programs.load(Ordering::Relaxed) > 0
            {
                return Err(Error::invalid_state(
                    "programs are still initialised on the current device; destroy them first",
                ));
            }
            (state.power, state.caps)
        };
        let acquired = GpuContext::acquire(power, caps).await;
        let mut state = self.state();
        match acquired {
            Ok(ctx) => {
                state.ctx = Some(share(ctx));
                state.failure = None;
                state.device_power = power;
                state.generation += 1;
                Ok(())
            }
            Err(reason) => {
                // A lost device is no device: the backend is unavailable until one is had.
                if state.ctx.as_ref().is_some_and(|ctx| ctx.lost().is_some()) {
                    state.ctx = None;
                }
                state.failure = Some(reason.clone());
                Err(unavailable(&reason))
            }
        }
    }

    /// Why no device is available (`None` when one is).
    pub fn unavailable_reason(&self) -> Option<String> {
        let state = self.state();
        match &state.ctx {
            Some(ctx) => ctx.lost().map(|r| format!("device lost: {r}")),
            None => state.failure.clone(),
        }
    }

    /// The adapter behind the device, if there is one.
    pub fn adapter(&self) -> Option<AdapterReport> {
        self.context().map(|c| c.adapter.clone())
    }

    /// GPU buffers alive on the device (parameters, arenas, uniforms, read-back).
    pub fn live_buffers(&self) -> usize {
        self.context().map_or(0, |c| c.live.count())
    }

    /// Bytes in live GPU buffers.
    pub fn live_buffer_bytes(&self) -> u64 {
        self.context().map_or(0, |c| c.live.bytes())
    }

    /// Sizes and counts of the program behind `handle`.
    ///
    /// # Errors
    /// `DelegateInvalidHandle` for a handle of another backend.
    pub fn program_stats(&self, handle: &DelegateHandle) -> Result<ProgramStats> {
        Self::stats_of(handle)
    }

    /// The per-op profile of the last execution of `handle` that ran with profiling on.
    ///
    /// # Errors
    /// `DelegateInvalidHandle` for a handle of another backend.
    pub fn last_profile(&self, handle: &DelegateHandle) -> Result<Option<Profile>> {
        Self::profile_of(handle)
    }

    /// The per-op profile of the last profiled execution of `handle`, without the backend at
    /// hand (what the JavaScript edge uses).
    ///
    /// # Errors
    /// `DelegateInvalidHandle` for a handle of another backend.
    pub fn profile_of(handle: &DelegateHandle) -> Result<Option<Profile>> {
        program_of(handle).map(|p| p.last_profile().cloned())
    }

    /// Sizes and counts of the program behind `handle`, without the backend at hand.
    ///
    /// # Errors
    /// `DelegateInvalidHandle` for a handle of another backend.
    pub fn stats_of(handle: &DelegateHandle) -> Result<ProgramStats> {
        program_of(handle).map(LoadedProgram::stats)
    }

    /// An allocator of GPU parameter buffers on this backend's device (what `init` hands the
    /// parameter provider), or `None` without a device.
    pub fn allocator(&self) -> Option<GpuAllocator> {
        self.context().map(GpuAllocator::new)
    }

    /// Whether the device can run f16 arithmetic (so `precision=f16` is accepted).
    pub fn option_f16(&self) -> bool {
        self.context()
            .is_some_and(|c| c.features.contains(wgpu::Features::SHADER_F16))
    }

    /// Destroys the current device, as a driver reset would lose it: every program on it moves
    /// to a new device on its next execution. For testing recovery. Returns whether there was
    /// a device.
    pub fn destroy_device(&self) -> bool {
        self.context().map(|c| c.destroy_device()).is_some()
    }

    /// The current device when a program may use it as it is: not lost, and no new power
    /// preference or limit caps waiting for a moment without live programs.
    fn usable_device(&self) -> Option<Arc<GpuContext>> {
        let state = self.state();
        let ctx = state.ctx.as_ref()?;
        let changed = state.power != state.device_power || state.caps != ctx.caps;
        let switch = changed && ctx.programs.load(Ordering::Relaxed) == 0;
        (ctx.lost().is_none() && !switch).then(|| Arc::clone(ctx))
    }

    /// The device for a program: the current one, or a new one when it was lost, or when
    /// `power_preference` changed and no program is alive on the current device.
    pub(crate) async fn current_device(&self) -> Result<Arc<GpuContext>> {
        if let Some(ctx) = self.usable_device() {
            return Ok(ctx);
        }
        // Whoever held the lock before us may have replaced the device already: check again.
        let _acquiring = self.acquiring.lock().await;
        if let Some(ctx) = self.usable_device() {
            return Ok(ctx);
        }
        match self.context() {
            Some(_) => {
                self.reacquire_locked().await?;
                self.context()
                    .ok_or_else(|| unavailable("re-acquisition failed"))
            }
            None => Err(unavailable(
                self.state()
                    .failure
                    .as_deref()
                    .unwrap_or("none was acquired"),
            )),
        }
    }

    /// Runs `program` on `args`; a device lost before or during the run moves the program to
    /// a new device (the one every program recovering at that moment shares:
    /// [`current_device`](Self::current_device)) and runs it once more, with the same results.
    ///
    /// # Errors
    /// As `LoadedProgram::execute`; `InvalidState` when the device was lost and the program
    /// could not move to a new one, or was lost again right after.
    async fn run(&self, program: &mut LoadedProgram, args: &mut [EValue]) -> Result<()> {
        let profiling = self.profiling.load(Ordering::Relaxed);
        let mut recovered = false;
        loop {
            if let Some(reason) = program.device_lost() {
                if recovered {
                    return Err(Error::invalid_state(format!(
                        "the WebGPU device was lost again right after recovery ({reason})"
                    )));
                }
                let device = self.current_device().await;
                program.recover(device).await?;
                recovered = true;
            }
            match program.execute(args, profiling).await {
                Err(_) if !recovered && program.device_lost().is_some() => continue,
                other => return other,
            }
        }
    }

    fn option_value(&self, key: &str) -> Result<OptionValue> {
        let int = |v: u64| OptionValue::Int(i64::try_from(v).unwrap_or(i64::MAX));
        let ctx = self.context();
        let with_ctx = |f: &dyn Fn(&GpuContext) -> OptionValue| {
            Ok(ctx.as_deref().map_or(OptionValue::Int(0), f))
        };
        match key {
            "available" => Ok(OptionValue::Bool(self.is_available())),
            "unavailable_reason" => Ok(OptionValue::String(
                self.unavailable_reason()
                    .map(|r| clip(&r))
                    .unwrap_or_default(),
            )),
            "power_preference" => Ok(OptionValue::String(
                power_name(self.state().power).to_owned(),
            )),
            "device_power_preference" => Ok(OptionValue::String(
                power_name(self.state().device_power).to_owned(),
            )),
            "profiling" => Ok(OptionValue::Bool(self.profiling.load(Ordering::Relaxed))),
            "drop_state_on_low_memory" => Ok(OptionValue::Bool(
                self.drop_state_on_low_memory.load(Ordering::Relaxed),
            )),
            "live_buffers" => with_ctx(&|c| int(c.live.count() as u64)),
            "live_buffer_bytes" => with_ctx(&|c| int(c.live.bytes())),
            "arena_bytes" => with_ctx(&|c| int(c.arena_bytes.load(Ordering::Relaxed))),
            "programs" => with_ctx(&|c| int(c.programs.load(Ordering::Relaxed) as u64)),
            "pipelines" => with_ctx(&|c| int(c.pipelines.len() as u64)),
            "suspended" => Ok(OptionValue::Bool(self.residents.is_suspended())),
            "device_generation" => Ok(int(self.state().generation)),
            "max_storage_binding_bytes" => {
                Ok(int(self.state().caps.max_storage_binding.unwrap_or(0)))
            }
            "max_buffer_bytes" => Ok(int(self.state().caps.max_buffer.unwrap_or(0))),
            "adapter_limits.max_storage_buffer_binding_size" => {
                with_ctx(&|c| int(c.adapter_limits.max_storage_buffer_binding_size))
            }
            "adapter_limits.max_buffer_size" => {
                with_ctx(&|c| int(c.adapter_limits.max_buffer_size))
            }
            _ if ADAPTER_KEYS.contains(&key) => {
                let ctx = ctx.ok_or_else(|| unavailable(&format!("cannot report {key}")))?;
                adapter_option(key, &ctx.adapter, &ctx.limits, ctx.features)
                    .ok_or_else(|| Error::internal(format!("no value for {key}")))
            }
            _ => Err(Error::invalid_argument(format!(
                "the webgpu backend has no option {key:?}"
            ))),
        }
    }
}

impl BackendInterface for WebGpuBackend {
    fn is_available(&self) -> bool {
        self.state().ctx.is_some()
    }

    fn init<'a>(
        &'a self,
        context: &'a BackendInitContext,
        processed: FreeableBuffer,
        compile_specs: &'a [CompileSpec],
    ) -> LocalBoxFuture<'a, Result<DelegateHandle>> {
        Box::pin(async move {
            // As the registry does for a backend that is not available.
            let ctx = self.current_device().await.map_err(|e| {
                if self.is_available() {
                    e
                } else {
                    Error::not_found(e.message().to_owned())
                }
            })?;
            // Specs before the blob, as the CPU backend does: one mistake, one code everywhere.
            let specs = parse_specs(compile_specs, context.runtime_specs())?;
            let config = kernel_config(&specs, &ctx)?;
            let mut processed = processed;
            let program = program::load(processed.data())?;
            processed.free();
            let loaded =
                LoadedProgram::load(ctx, program, config, context, &self.residents).await?;
            Ok(DelegateHandle::new(loaded))
        })
    }

    fn execute<'a>(
        &'a self,
        _context: &'a BackendExecutionContext,
        handle: &'a mut DelegateHandle,
        args: &'a mut [EValue],
    ) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let program = handle
                .downcast_mut::<LoadedProgram>()
                .ok_or_else(|| Error::delegate_invalid_handle(NOT_OURS))?;
            self.run(program, args).await
        })
    }

    fn set_option(
        &self,
        _context: &mut BackendOptionContext,
        options: &[BackendOption],
    ) -> Result<()> {
        let mut power = None;
        let mut profiling = None;
        let mut drop_state = None;
        let mut caps = self.state().caps;
        for option in options {
            match (option.key(), option.value()) {
                ("max_storage_binding_bytes", OptionValue::Int(bytes)) => {
                    caps.max_storage_binding = limit_cap(option.key(), *bytes)?;
                }
                ("max_buffer_bytes", OptionValue::Int(bytes)) => {
                    caps.max_buffer = limit_cap(option.key(), *bytes)?;
                }
                ("power_preference", OptionValue::String(name)) => {
                    power = Some(power_from(name).ok_or_else(|| {
                        Error::invalid_argument(format!(
                            "power_preference {name:?}: expected none, low-power or high-performance"
                        ))
                    })?);
                }
                ("profiling", OptionValue::Bool(on)) => profiling = Some(*on),
                ("drop_state_on_low_memory", OptionValue::Bool(on)) => drop_state = Some(*on),
                (
                    key @ ("power_preference"
                    | "profiling"
                    | "drop_state_on_low_memory"
                    | "max_storage_binding_bytes"
                    | "max_buffer_bytes"),
                    value,
                ) => {
                    return Err(Error::invalid_argument(format!(
                        "option {key} cannot be a {}",
                        value.type_name()
                    )));
                }
                (key, _) => {
                    return Err(Error::invalid_argument(format!(
                        "the webgpu backend cannot set option {key:?}; it sets power_preference, \
                         max_storage_binding_bytes, max_buffer_bytes, profiling and \
                         drop_state_on_low_memory"
                    )));
                }
            }
        }
        if let Some(power) = power {
            self.state().power = power;
        }
        self.state().caps = caps;
        if let Some(on) = profiling {
            self.profiling.store(on, Ordering::Relaxed);
        }
        if let Some(on) = drop_state {
            self.drop_state_on_low_memory.store(on, Ordering::Relaxed);
        }
        Ok(())
    }

    fn get_option(
        &self,
        _context: &mut BackendOptionContext,
        options: &mut [BackendOption],
    ) -> Result<()> {
        for option in options.iter_mut() {
            let value = self.option_value(option.key())?;
            option.set_value(value)?;
        }
        Ok(())
    }

    fn destroy(&self, handle: DelegateHandle) {
        drop(handle);
    }

    fn reset_state(&self, handle: &mut DelegateHandle) -> Result<()> {
        let program = handle
            .downcast_mut::<LoadedProgram>()
            .ok_or_else(|| Error::delegate_invalid_handle(NOT_OURS))?;
        program.reset_state()
    }

    fn notify(&self, signal: Signal) -> Released {
        let ctx = self.context();
        let before = ctx.as_ref().map_or(0, |c| c.live.bytes());
        match signal {
            Signal::Suspend => {
                self.residents.set_suspended(true);
                self.residents.release_all(Release::Transients);
            }
            Signal::Resume => self.residents.set_suspended(false),
            Signal::LowMemory => {
                let level = if self.drop_state_on_low_memory.load(Ordering::Relaxed) {
                    Release::Everything
                } else {
                    Release::Params
                };
                self.residents.release_all(level);
            }
        }
        Released {
            gpu_bytes: ctx.map_or(0, |c| before.saturating_sub(c.live.bytes())),
            ..Released::default()
        }
    }
}
