//! [`CpuBackend`]: the registry's `BackendInterface` over the CPU kernels.
//!
//! - `init` reads the compile specs (`precision = "f32"`; `threads`: the most threads this
//!   program's ops run on, 1 up to the installed pool's size; `activations`: `"f32"`, the
//!   default, or `"int8"`, which quantizes the activation rows of Q8_0 / Q5_0 / Q4_K / Q6_K
//!   `linear`s to int8 blocks as llama.cpp does, see `webdelegate_kernels::int8_dots`; any
//!   other key or value is refused), refuses every runtime spec (it has none), decodes and validates the blob
//!   (`program::load`), frees it, fetches every parameter through the context's provider into
//!   typed host vectors, packs weights used only as matmul right operands (dropping their raw
//!   copy), and plans execution (dead ops skipped, intermediates released after their last
//!   use).
//! - `execute` checks and binds the arguments, runs the plan and writes the outputs.
//! - `destroy` drops the handle; [`CpuBackend::live_programs`] counts handles not yet dropped.
//!
//! Options: `get_option` answers `precision` (`"f32"`), `simd128` (whether the build vectorises
//! with wasm SIMD), `threads` (how many threads the pool's ops run on: 1 without a pool, or once
//! a pool's worker failed), `threads_reason` (why), `pool_min_work` and `live_programs`;
//! unknown keys are `InvalidArgument` (as in the WebGPU backend). `set_option` takes `threads`
//! (1 up to the installed pool's size; more than 1 without a pool is `InvalidArgument`, with
//! the reason) and `pool_min_work` (the fewest values, outputs or multiply-adds, an op other
//! than a product with a shared weight needs to go to the pool; default 16384, 0 sends every
//! op with a pool kernel there), and refuses any other key as `InvalidArgument`.
//!
//! Threads: a program initialised while a worker pool is installed keeps its matmul and
//! block-format `linear` weights in the pool's shared memory, runs those products and its
//! large activation ops on the pool's threads, and keeps their results in the shared memory
//! (`threaded`). If a worker dies or hangs, the op (and its execute) fails with
//! `Internal` naming the worker, and the pool runs every later op on this thread alone (the
//! weights stay where they are; `threads` reads 1 and `threads_reason` says why). Lifecycle:
//! `Suspend` parks the pool (its workers sleep in `Atomics.wait`; ops run on this thread) and
//! `Resume` wakes it; `LowMemory` ends the workers (their threads and JS heaps; the shared
//! memory and the weights in it stay), and the next op or `Resume` starts them again (ops run
//! on this thread until they are up).

use crate::backends::compile_specs::{
    CompileSpecs, PRECISION, Precision, check_runtime_specs, unsupported_precision,
};
use crate::backends::cpu::executor::{self, PreparedProgram};
use crate::backends::cpu::frame::{Scratch, States};
use crate::backends::cpu::gemm::PackedB;
use crate::backends::cpu::plan::Plan;
use crate::backends::cpu::threaded::{self, Threaded};
use crate::backends::cpu::values::Values;
use crate::backends::cpu::weights::Placement;
use crate::backends::parameters::fetch_params;
use crate::browser::cpu_pool::CpuPool;
use crate::error::{Error, ErrorCode, Result};
use crate::evalue::EValue;
use crate::lifecycle::{Released, Signal};
use crate::program;
use crate::registry::{
    BackendExecutionContext, BackendInitContext, BackendInterface, BackendOption,
    BackendOptionContext, CompileSpec, DelegateHandle, FreeableBuffer, LocalBoxFuture, OptionValue,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The option naming how many threads the CPU backend's products run on.
const THREADS: &str = "threads";
/// The option saying why the CPU backend runs on as many threads as it does.
const THREADS_REASON: &str = "threads_reason";
/// The option naming the fewest values an op needs to go to the worker pool.
const POOL_MIN_WORK: &str = "pool_min_work";
/// The compile spec choosing how block-format `linear`s read their activation rows.
const ACTIVATIONS: &str = "activations";

/// The `activations` compile spec: `"f32"` (the default: every product of the f32 activation
/// and a dequantized weight rounded in f32) or `"int8"` (each 32 activation values quantized
/// to int8 with one f32 scale, dotted with the weight's integer quants in integers, as
/// llama.cpp's CPU backend does; faster, within the activations' rounding).
///
/// # Errors
/// `InvalidArgument` for any other value.
fn parse_activations(text: &str) -> Result<bool> {
    match text {
        "f32" => Ok(false),
        "int8" => Ok(true),
        other => Err(Error::invalid_argument(format!(
            "the CPU backend's compile spec \"activations\" is \"f32\" or \"int8\", not {other:?}"
        ))),
    }
}

/// `option`'s integer value as a count, or `InvalidArgument` saying `what` it must be.
fn count_of(option: &BackendOption, what: &'static str) -> Result<usize> {
    match option.value() {
        OptionValue::Int(n) => usize::try_from(*n).ok(),
        _ => None,
    }
    .ok_or_else(|| Error::invalid_argument(what))
}

/// Why there is no thread pool.
fn single_thread_reason() -> &'static str {
    if cfg!(target_arch = "wasm32") {
        "no CPU thread pool is installed (start one with cpu-threads/pool.js on a cross-origin isolated page and pass it to useCpuThreads)"
    } else {
        "native builds run the CPU backend on one thread"
    }
}

/// The `threads` compile spec: a count from 1 up to the installed pool's size.
///
/// # Errors
/// `InvalidArgument` for anything else, with the reason when there is no pool to run more.
fn parse_thread_spec(text: &str) -> Result<usize> {
    let count = text
        .parse::<usize>()
        .ok()
        .filter(|&count| count >= 1)
        .ok_or_else(|| {
            Error::invalid_argument(format!(
                "the CPU backend's compile spec \"threads\" is a positive integer, not {text:?}"
            ))
        })?;
    let available = CpuPool::current().map_or(1, |pool| pool.size());
    if count > available {
        return Err(Error::invalid_argument(format!(
            "the CPU backend cannot run a program on {count} threads: {}",
            threads_reason()
        )));
    }
    Ok(count)
}

/// What `threads_reason` answers.
fn threads_reason() -> String {
    match CpuPool::current() {
        None => single_thread_reason().to_string(),
        Some(pool) => match pool.broken_reason().or_else(|| pool.idle_reason()) {
            Some(reason) => format!("{reason}; running on one thread"),
            None => format!(
                "a CPU thread pool of {} threads is installed; {} in use",
                pool.size(),
                pool.threads()
            ),
        },
    }
}

/// The compile spec keys the CPU backend understands.
pub const CPU_COMPILE_SPEC_KEYS: &[&str] = &[PRECISION, THREADS, ACTIVATIONS];

/// The pure-Rust CPU backend (the fallback when WebGPU is missing, and the reference the GPU
/// kernels are compared with).
#[derive(Debug, Default)]
pub struct CpuBackend {
    live: Arc<AtomicUsize>,
}

impl CpuBackend {
    /// The name the backend is registered under by default.
    pub const NAME: &'static str = "cpu";

    /// A backend with no programs.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes the CPU program behind `handle` holds, by purpose.
    ///
    /// # Errors
    /// `DelegateInvalidHandle` for a handle of another backend.
    pub fn memory_of(handle: &DelegateHandle) -> Result<CpuMemory> {
        handle
            .downcast_ref::<CpuHandle>()
            .map(CpuHandle::memory)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::DelegateInvalidHandle,
                    "the handle is not a CPU program",
                )
            })
    }

    /// How many programs this backend initialised that have not been destroyed yet.
    pub fn live_programs(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    async fn prepare(
        &self,
        context: &BackendInitContext,
        processed: FreeableBuffer,
        compile_specs: &[CompileSpec],
    ) -> Result<CpuHandle> {
        let specs = CompileSpecs::new(Self::NAME, compile_specs, CPU_COMPILE_SPEC_KEYS)?;
        match specs.precision()? {
            Precision::Auto | Precision::F32 => {}
            other => return Err(unsupported_precision(Self::NAME, other)),
        }
        check_runtime_specs(Self::NAME, context.runtime_specs(), &[])?;
        let thread_cap = specs.text(THREADS)?.map(parse_thread_spec).transpose()?;
        let int8_activations = specs
            .text(ACTIVATIONS)?
            .map(parse_activations)
            .transpose()?
            .unwrap_or(false);
        let program = program::load(processed.data())?;
        drop(processed);
        let threaded = match thread_cap {
            Some(1) => None,
            cap => Threaded::for_current_pool(&program, cap),
        };
        let mut placement = Placement::new(&program, threaded);
        let staging = fetch_params(context, &program, &mut placement).await?;
        let Placement {
            params,
            packed,
            threaded,
            ..
        } = placement;
        let plan = Plan::new(&program);
        let states = States::new(&program)?;
        Ok(CpuHandle {
            prepared: PreparedProgram {
                program,
                params,
                packed,
                threaded,
                plan,
                int8_activations,
            },
            scratch: Scratch::default(),
            states,
            staging,
            _live: LiveGuard::new(&self.live),
        })
    }
}

/// Counts a handle as live from creation until it drops.
#[derive(Debug)]
struct LiveGuard(Arc<AtomicUsize>);

impl LiveGuard {
    fn new(counter: &Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(counter))
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What `init` returns inside the `DelegateHandle`.
#[derive(Debug)]
struct CpuHandle {
    prepared: PreparedProgram,
    scratch: Scratch,
    states: States,
    /// Host staging bytes the load used (see [`CpuMemory::staging`]).
    staging: u64,
    _live: LiveGuard,
}

impl CpuHandle {
    fn memory(&self) -> CpuMemory {
        let p = &self.prepared;
        let host_values: usize = p.params.iter().flatten().map(Values::byte_len).sum();
        let packed: usize = p.packed.iter().flatten().map(PackedB::bytes).sum();
        CpuMemory {
            weights: (host_values + packed) as u64,
            shared_weights: p.threaded.as_ref().map_or(0, Threaded::weight_bytes) as u64,
            state: self.states.bytes() as u64,
            activations: (self.scratch.pool.bytes() + self.scratch.gemm.bytes()) as u64,
            shared_activations: self.scratch.shared.bytes() as u64,
            staging: self.staging,
        }
    }
}

/// The bytes one CPU program holds, by purpose ([`CpuBackend::memory_of`]). "Host" is this
/// module's memory (wasm memory in the browser, which never shrinks: what a load staged stays
/// allocated, to be reused); "shared" is the worker pool's shared memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMemory {
    /// Weights on the host: parameter values and packed right operands.
    pub weights: u64,
    /// Weights in the worker pool's shared memory.
    pub shared_weights: u64,
    /// State tensors (a decoder's KV cache), sized from the program at init.
    pub state: u64,
    /// Host buffers kept between executions for intermediates (recycled f32 buffers, GEMM
    /// packing), as large as the largest execution so far needed.
    pub activations: u64,
    /// The pool's region for operands it stages, in its shared memory.
    pub shared_activations: u64,
    /// The largest host staging buffer the load used for small parameters (freed after init).
    pub staging: u64,
}

impl BackendInterface for CpuBackend {
    fn is_available(&self) -> bool {
        true
    }

    fn init<'a>(
        &'a self,
        context: &'a BackendInitContext,
        processed: FreeableBuffer,
        compile_specs: &'a [CompileSpec],
    ) -> LocalBoxFuture<'a, Result<DelegateHandle>> {
        Box::pin(async move {
            let handle = self.prepare(context, processed, compile_specs).await?;
            Ok(DelegateHandle::new(handle))
        })
    }

    fn execute<'a>(
        &'a self,
        _context: &'a BackendExecutionContext,
        handle: &'a mut DelegateHandle,
        args: &'a mut [EValue],
    ) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let handle = handle.downcast_mut::<CpuHandle>().ok_or_else(|| {
                Error::new(
                    ErrorCode::DelegateInvalidHandle,
                    "the handle was not made by the CPU backend",
                )
            })?;
            executor::execute(
                &handle.prepared,
                &mut handle.scratch,
                &mut handle.states,
                args,
            )
        })
    }

    fn set_option(
        &self,
        _context: &mut BackendOptionContext,
        options: &[BackendOption],
    ) -> Result<()> {
        for option in options {
            match option.key() {
                THREADS => {
                    let count = count_of(
                        option,
                        "the CPU backend's \"threads\" is a positive integer",
                    )?;
                    match CpuPool::current() {
                        Some(pool) => pool.set_threads(count)?,
                        None if count == 1 => {}
                        None => {
                            return Err(Error::invalid_argument(format!(
                                "the CPU backend cannot use {count} threads: {}",
                                single_thread_reason()
                            )));
                        }
                    }
                }
                POOL_MIN_WORK => {
                    let values = count_of(
                        option,
                        "the CPU backend's \"pool_min_work\" is a count of values (0 or more)",
                    )?;
                    threaded::set_min_pool_work(values);
                }
                other => {
                    return Err(Error::invalid_argument(format!(
                        "the CPU backend has no settable option {other:?} (it has \"threads\", \"pool_min_work\")"
                    )));
                }
            }
        }
        Ok(())
    }

    fn get_option(
        &self,
        _context: &mut BackendOptionContext,
        options: &mut [BackendOption],
    ) -> Result<()> {
        for option in options.iter_mut() {
            let value = match option.key() {
                PRECISION => OptionValue::from("f32"),
                "simd128" => OptionValue::from(cfg!(target_feature = "simd128")),
                THREADS => OptionValue::from(
                    CpuPool::current().map_or(1, |pool| i64::try_from(pool.threads()).unwrap_or(1)),
                ),
                THREADS_REASON => OptionValue::from(threads_reason()),
                POOL_MIN_WORK => {
                    OptionValue::from(i64::try_from(threaded::min_pool_work()).unwrap_or(i64::MAX))
                }
                "live_programs" => {
                    OptionValue::from(i64::try_from(self.live_programs()).unwrap_or(i64::MAX))
                }
                other => {
                    return Err(Error::invalid_argument(format!(
                        "the CPU backend has no option {other:?} (it has \"precision\", \"simd128\", \"threads\", \"threads_reason\", \"pool_min_work\", \"live_programs\")"
                    )));
                }
            };
            option.set_value(value)?;
        }
        Ok(())
    }

    fn notify(&self, signal: Signal) -> Released {
        if let Some(pool) = CpuPool::current() {
            match signal {
                Signal::Suspend => pool.set_parked(true),
                Signal::LowMemory => pool.release(),
                Signal::Resume => {
                    pool.set_parked(false);
                    pool.restore();
                }
            }
        }
        Released::default()
    }

    fn destroy(&self, handle: DelegateHandle) {
        drop(handle);
    }

    fn reset_state(&self, handle: &mut DelegateHandle) -> Result<()> {
        let handle = handle.downcast_mut::<CpuHandle>().ok_or_else(|| {
            Error::new(
                ErrorCode::DelegateInvalidHandle,
                "the handle was not made by the CPU backend",
            )
        })?;
        handle.states.reset(&handle.prepared.program)
    }
}
