//! What a loaded program tells JavaScript about itself: where its bytes are, by purpose
//! (`memoryStats()`, both built-in backends), the WebGPU backend's program stats (arena,
//! parameters, kernels, reloads) and its per-op GPU profile.
//!
//! The last two are backend-specific: for a delegate of any other backend they are `null`. Times cross
//! the edge as milliseconds (`performance.now()`'s unit) and byte counts as numbers (exact up to
//! 2^53, far above any buffer a browser allows).

use crate::backends::cpu::{CpuBackend, CpuMemory};
use crate::backends::webgpu::{Profile, ProgramStats, WebGpuBackend};
use crate::browser::cpu_pool::CpuPool;
use crate::registry::LoadedDelegate;
use serde::Serialize;
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TYPES: &'static str = r#"
/** Sizes and counts of a program loaded on the WebGPU backend. */
export interface WebGpuProgramStats {
  /** Bytes of the activation arena (the largest plan so far). */
  arenaBytes: number;
  /** Bytes the activations would take without reuse by liveness. */
  arenaBytesWithoutReuse: number;
  /** Parameters on the GPU, and their bytes. */
  params: number;
  paramBytes: number;
  /** Parameters bound in the very buffer the provider streamed them into. */
  paramsInPlace: number;
  /** Distinct kernels, cached plans, and dispatches of the last plan. */
  kernels: number;
  cachedPlans: number;
  dispatches: number;
  /** False after a `lowMemory` release until the next execute fetches them again. */
  paramsResident: boolean;
  /** Parameter loads (1 after init) and moves to a new device after a loss. */
  paramLoads: number;
  deviceRecoveries: number;
  /** State tensors (a KV cache), their bytes on the GPU, whether they are resident (false
   * after a device loss, or a `lowMemory` allowed to drop them, until `resetState()`), and
   * how often they were reset. */
  states: number;
  stateBytes: number;
  statesResident: boolean;
  stateResets: number;
  /** Plans bound and bind groups created so far, and pipelines compiled on the device: a
   * decode loop planned once adds none of them after its first step. */
  plansBuilt: number;
  bindGroupsCreated: number;
  pipelines: number;
  /** The precision the program runs in (compile spec `precision`, `auto` by default: f16 only
   * on a real GPU with shader-f16): `'f16'` stages matmul tiles in f16 and, where
   * `kvCacheF16`, stores attention's KV cache in f16 (half the `stateBytes`); `'f32'` is the
   * reference. */
  precision: 'f32' | 'f16';
  kvCacheF16: boolean;
  /** Whether activations are stored in f16 with f32 accumulation (under `precision` `'f16'`,
   * for the arena's float intermediates that f16-ready kernels alone touch; program inputs,
   * outputs, weights and states stay f32), and how many tensors are. */
  activationsF16: boolean;
  f16ActivationTensors: number;
}

/** Where a loaded program's bytes are, by purpose. "wasm" is this module's memory, which never
 * shrinks (`wasmMemoryBytes` is its size now: its high-water mark); "shared" is the CPU worker
 * pool's shared memory; "gpu" is GPU buffers. The CPU backend keeps weights once (on the
 * host, or in the pool's memory for the weights the pool reads); the WebGPU backend keeps
 * weights, state and activations on the GPU, none in wasm memory. */
export interface MemoryStats {
  /** `'cpu'` or `'webgpu'`. */
  backend: string;
  /** This module's wasm memory now, and the worker pool's shared memory (0 without a pool). */
  wasmMemoryBytes: number;
  sharedMemoryBytes: number;
  /** In wasm memory: weights; state (a KV cache); buffers kept for intermediates; the
   * largest staging buffer the load used (freed after it). */
  weights: number;
  state: number;
  activations: number;
  staging: number;
  /** In the pool's shared memory: weights, and its region for staged operands. */
  sharedWeights: number;
  sharedActivations: number;
  /** On the GPU: weights, state and the activation arena. */
  gpuWeights: number;
  gpuState: number;
  gpuActivations: number;
}

/** One op of a profiled execution. */
export interface OpProfile {
  /** Index of the op in the program, and its name (e.g. `'matmul'`). */
  opIndex: number;
  name: string;
  /** Compute dispatches the op recorded. */
  dispatches: number;
  /** GPU milliseconds of the op's pass; `null` without timestamps or past the timed ops. */
  gpuMs: number | null;
}

/** Per-op GPU timings of the last execution that ran with the `profiling` option on. */
export interface WebGpuProfile {
  /** Whether the device wrote GPU timestamps (the `timestamp-query` feature). */
  timestamps: boolean;
  /** Sum of the timed ops, `null` without timestamps. */
  totalGpuMs: number | null;
  ops: OpProfile[];
}
"#;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatsJs {
    arena_bytes: f64,
    arena_bytes_without_reuse: f64,
    params: f64,
    param_bytes: f64,
    params_in_place: f64,
    kernels: f64,
    cached_plans: f64,
    dispatches: f64,
    params_resident: bool,
    param_loads: f64,
    device_recoveries: f64,
    states: f64,
    state_bytes: f64,
    states_resident: bool,
    state_resets: f64,
    plans_built: f64,
    bind_groups_created: f64,
    pipelines: f64,
    precision: &'static str,
    kv_cache_f16: bool,
    activations_f16: bool,
    f16_activation_tensors: f64,
}

impl From<ProgramStats> for StatsJs {
    fn from(s: ProgramStats) -> Self {
        Self {
            arena_bytes: s.arena_bytes as f64,
            arena_bytes_without_reuse: s.arena_bytes_without_reuse as f64,
            params: s.params as f64,
            param_bytes: s.param_bytes as f64,
            params_in_place: s.params_in_place as f64,
            kernels: s.kernels as f64,
            cached_plans: s.cached_plans as f64,
            dispatches: s.dispatches as f64,
            params_resident: s.params_resident,
            param_loads: s.param_loads as f64,
            device_recoveries: s.device_recoveries as f64,
            states: s.states as f64,
            state_bytes: s.state_bytes as f64,
            states_resident: s.states_resident,
            state_resets: s.state_resets as f64,
            plans_built: s.plans_built as f64,
            bind_groups_created: s.bind_groups_created as f64,
            pipelines: s.pipelines as f64,
            precision: s.precision,
            kv_cache_f16: s.kv_cache_f16,
            activations_f16: s.activations_f16,
            f16_activation_tensors: s.f16_activation_tensors as f64,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OpJs {
    op_index: f64,
    name: &'static str,
    dispatches: f64,
    gpu_ms: Option<f64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProfileJs {
    timestamps: bool,
    total_gpu_ms: Option<f64>,
    ops: Vec<OpJs>,
}

fn nanos_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl From<Profile> for ProfileJs {
    fn from(p: Profile) -> Self {
        Self {
            timestamps: p.timestamps,
            total_gpu_ms: p.total_gpu_ns().map(nanos_to_ms),
            ops: p
                .ops
                .into_iter()
                .map(|op| OpJs {
                    op_index: op.op_index as f64,
                    name: op.name,
                    dispatches: op.dispatches as f64,
                    gpu_ms: op.gpu_ns.map(nanos_to_ms),
                })
                .collect(),
        }
    }
}

fn to_js<T: Serialize>(value: Option<T>) -> JsValue {
    value
        .and_then(|v| serde_wasm_bindgen::to_value(&v).ok())
        .unwrap_or(JsValue::NULL)
}

#[derive(Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct MemoryStatsJs {
    backend: &'static str,
    wasm_memory_bytes: f64,
    shared_memory_bytes: f64,
    weights: f64,
    state: f64,
    activations: f64,
    staging: f64,
    shared_weights: f64,
    shared_activations: f64,
    gpu_weights: f64,
    gpu_state: f64,
    gpu_activations: f64,
}

/// Bytes of this module's wasm memory now.
fn wasm_memory_bytes() -> f64 {
    wasm_bindgen::memory()
        .dyn_into::<js_sys::WebAssembly::Memory>()
        .ok()
        .and_then(|memory| memory.buffer().dyn_into::<js_sys::ArrayBuffer>().ok())
        .map_or(0.0, |buffer| f64::from(buffer.byte_length()))
}

/// Where `delegate`'s bytes are (see the `MemoryStats` type), or `null` when neither built-in
/// backend runs it.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn memory_stats(delegate: Option<&LoadedDelegate>) -> JsValue {
    let Some(handle) = delegate.and_then(LoadedDelegate::handle) else {
        return JsValue::NULL;
    };
    let mut stats = MemoryStatsJs {
        wasm_memory_bytes: wasm_memory_bytes(),
        shared_memory_bytes: CpuPool::current().map_or(0.0, |pool| pool.memory_bytes() as f64),
        ..MemoryStatsJs::default()
    };
    if let Ok(memory) = CpuBackend::memory_of(handle) {
        let CpuMemory {
            weights,
            shared_weights,
            state,
            activations,
            shared_activations,
            staging,
        } = memory;
        stats.backend = "cpu";
        stats.weights = weights as f64;
        stats.state = state as f64;
        stats.activations = activations as f64;
        stats.staging = staging as f64;
        stats.shared_weights = shared_weights as f64;
        stats.shared_activations = shared_activations as f64;
    } else if let Ok(program) = WebGpuBackend::stats_of(handle) {
        stats.backend = "webgpu";
        stats.gpu_weights = program.param_bytes as f64;
        stats.gpu_state = program.state_bytes as f64;
        stats.gpu_activations = program.arena_bytes as f64;
    } else {
        return JsValue::NULL;
    }
    to_js(Some(stats))
}

/// The WebGPU program stats of `delegate`, or `null` when another backend runs it.
pub(crate) fn program_stats(delegate: Option<&LoadedDelegate>) -> JsValue {
    let stats = delegate
        .and_then(LoadedDelegate::handle)
        .and_then(|handle| WebGpuBackend::stats_of(handle).ok());
    to_js(stats.map(StatsJs::from))
}

/// The last per-op profile of `delegate`, or `null` when none was taken (profiling off, no
/// execute yet) or another backend runs it.
pub(crate) fn last_profile(delegate: Option<&LoadedDelegate>) -> JsValue {
    let profile = delegate
        .and_then(LoadedDelegate::handle)
        .and_then(|handle| WebGpuBackend::profile_of(handle).ok().flatten());
    to_js(profile.map(ProfileJs::from))
}
