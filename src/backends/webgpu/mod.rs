//! The WebGPU backend: runs programs on a GPU through `wgpu` (the browser's WebGPU in wasm32,
//! Vulkan/Metal/DX12 natively, so every kernel is also tested under `cargo test` on Mesa's
//! lavapipe).
//!
//! What it promises:
//! - [`WebGpuBackend::new`] acquires an adapter and a device with the adapter's limits and the
//!   optional features it uses (`timestamp-query`, `shader-f16`); `is_available` is true only
//!   when a device was obtained. Nothing ever assumes a limit: workgroup sizes, tilings, binding
//!   sizes and grids are all checked against the device's.
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
//! Layout: `device` and `adapter` (acquisition, identity, limits), `buffers` (counted GPU
//! buffers, the parameter allocator), `readback`, `pipelines`, `kernels` (each op's kernel
//! file: its WGSL, its `Kernel` key and its `GpuOp` planning), and, GPU-free: `dispatch` (an
//! `Op` to its `GpuOp`), `shape_plan` (the plan's types), `arena`, `alias` and `plan`
//! (planning orchestration and the kernels `init` compiles); then `bound` (a plan's GPU
//! resources), `params` (parameter resolution), `residency` (what signals release), `program`
//! (the handle's state), `execute`, `io`, `profiling`, `spec`, `backend`.

mod adapter;
mod alias;
mod arena;
mod backend;
mod bound;
mod buffers;
mod device;
mod dispatch;
mod execute;
mod io;
pub(crate) mod kernels;
mod params;
mod pipelines;
mod plan;
#[cfg(web)]
mod precompile;
mod profiling;
mod program;
mod readback;
mod residency;
mod shape_plan;
pub mod spec;
#[cfg(all(test, native))]
mod tests;

pub use adapter::{ADAPTER_KEYS, AdapterReport};
pub use backend::{BACKEND_KEYS, WebGpuBackend};
pub use buffers::{GpuAllocator, GpuBuffer};
pub use profiling::{MAX_TIMED_OPS, OpTiming, Profile};
pub use program::{LoadedProgram, MAX_CACHED_PLANS, ProgramStats};
pub use wgpu::PowerPreference;
