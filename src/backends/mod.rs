//! Delegate backends, and what every backend shares: argument checking and shape binding
//! (`arguments`), strict compile/runtime spec reading (`compile_specs`) and parameter resolution
//! through the provider (`parameters`), so that all backends report the same codes for the same
//! mistakes.
//!
//! [`defaults`] registers the built-in backends: [`webgpu::WebGpuBackend`] as `"webgpu"` and
//! [`cpu::CpuBackend`] as `"cpu"` (the browser build does it when the module starts).

pub mod arguments;
pub mod compile_specs;
pub mod cpu;
pub mod defaults;
pub mod parameters;
pub mod webgpu;
