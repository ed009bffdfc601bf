//! Delegate backends, and what every backend shares: argument checking and shape binding
//! (`arguments`), strict compile/runtime spec reading (`compile_specs`) and parameter resolution
//! through the provider (`parameters`), so that all backends report the same codes for the same
//! mistakes.
//!
//! Nothing here registers itself: callers (or the crate's default registration) put
//! [`cpu::CpuBackend`] into the registry under [`cpu::CpuBackend::NAME`], and
//! [`webgpu::WebGpuBackend`] (created asynchronously: it acquires a device) under `"webgpu"`.

pub mod arguments;
pub mod compile_specs;
pub mod cpu;
pub mod parameters;
pub mod webgpu;
