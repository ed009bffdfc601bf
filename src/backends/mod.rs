//! Delegate backends, and what every backend shares: argument checking and shape binding
//! (`arguments`), strict compile/runtime spec reading (`compile_specs`) and parameter resolution
//! through the provider (`parameters`), so that all backends report the same codes for the same
//! mistakes.
//!
//! This module's surface is what a user of the crate needs: the two backends ([`CpuBackend`],
//! [`WebGpuBackend`]; each module, [`cpu`] and [`webgpu`], curates its own few types) and the
//! registration of the built-in ones under their names ([`register_default_backends`]:
//! [`WebGpuBackend`] as [`WEBGPU`] and [`CpuBackend`] as [`CPU`]; the browser build does it when
//! the module starts). The shared checks are crate-private, reachable for tests through
//! [`internal`] only.

mod arguments;
mod compile_specs;
pub mod cpu;
mod defaults;
mod parameters;
pub mod webgpu;

pub use cpu::CpuBackend;
pub use defaults::{CPU, WEBGPU, register_default_backends, register_if_absent};
pub use webgpu::WebGpuBackend;

/// What the backends share, for tests that check a backend against the same rules (e.g. the
/// scalar type a program dtype travels as). Not part of the API: paths and names here may
/// change with any release.
#[doc(hidden)]
pub mod internal {
    pub use super::arguments::{accepts, bind_arguments, scalar_type, store_output};
}
