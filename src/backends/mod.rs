//! Delegate backends: implementations of [`crate::registry::BackendInterface`] that run
//! [`crate::program`] programs.

pub mod webgpu;
