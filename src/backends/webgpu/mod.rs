//! The WebGPU backend: runs programs on a GPU through `wgpu` (the browser's WebGPU in wasm32,
//! Vulkan/Metal/DX12 natively, so every kernel is also tested under `cargo test` on Mesa's
//! lavapipe).
//!
//! What it promises:
//! - [`WebGpuBackend::new`] acquires an adapter and a device with the adapter's limits and the
//!   optional features it uses (`timestamp-query`, `shader-f16`, subgroups); `is_available` is true
//!   only when a device was obtained. Nothing ever assumes a limit: workgroup sizes, tilings,
//!   binding sizes and grids are all checked against the device's.
//! - `init` decodes the program, checks it against the device, compiles every kernel it can
//!   dispatch (cached per device by kernel and specialisation), and loads its parameters through
//!   the init context's provider into GPU buffers ([`GpuAllocator`]). Compile specs are honoured
//!   or refused by name (see [`spec`]).
//! - `execute` binds the symbols from the inputs, plans activations in one arena with reuse by
//!   liveness (plans cached per tuple of symbol values), encodes the whole program into one
//!   command buffer, and reads back only the outputs. Gather ids are never read out of bounds.
//! - `destroy` frees every GPU buffer of the program ([`WebGpuBackend::live_buffers`] counts).
//! - With the `profiling` option on, per-op GPU times from timestamp queries ([`Profile`]).
//! - Lifecycle: `notify(Suspend)` frees activations and plans, `LowMemory` also parameters
//!   (fetched again by the next execution); a lost device is replaced and its programs moved
//!   to the new one on their next execution, with the same results (`residency`).
//!
//! Layout, bottom up: `adapter` and `device` (acquisition, identity, limits, the per-device
//! counters), `readback` (mapping, waiting for the queue), `buffers` (counted GPU buffers, the
//! parameter allocator), `direct_write` (the HTTP provider's writes into them); `kernels` (each
//! op's kernel file: its WGSL, its `Kernel` key and its `GpuOp` planning), `pipelines`, and,
//! GPU-free: `dispatch` (an `Op` to its `GpuOp`), `fusion` (which neighbouring ops run as one
//! dispatch), `shape_plan` (the plan's types), `arena`, `alias` and `plan` (planning
//! orchestration and the kernels `init` compiles); `spec` (compile
//! specs); `program/` (one initialised program: load, parameters, bound plans, residency,
//! execution, profiling); `backend` on top. What speaks to the browser's WebGPU directly is
//! `browser::gpu`, not here.

mod adapter;
mod alias;
mod arena;
mod backend;
mod buffers;
mod device;
mod direct_write;
mod dispatch;
mod fusion;
pub(crate) mod kernels;
mod pipelines;
mod plan;
mod program;
mod readback;
mod shape_plan;
pub mod spec;
#[cfg(all(test, native))]
mod tests;

pub use adapter::{ADAPTER_KEYS, AdapterReport};
pub use backend::{BACKEND_KEYS, WebGpuBackend};
pub use buffers::{GpuAllocator, GpuBuffer};
pub use program::profiling::{MAX_TIMED_OPS, OpTiming, Profile};
pub use program::residency::MAX_CACHED_PLANS;
pub use program::{LoadedProgram, ProgramStats};
pub use wgpu::PowerPreference;
