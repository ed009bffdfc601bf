//! The pure-Rust CPU backend: the fallback runtime where WebGPU is missing and the executable
//! reference of the op semantics in `program::ir`.
//!
//! One module per op family (`elementwise`, `matmul`, `normalize`, `layout`, `convert`), the
//! shared row walker (`walk`), vectorisable math (`fast_math`), typed storage (`values`), the
//! execution plan (`plan`), the interpreter loop (`executor`) and the `BackendInterface`
//! implementation (`backend`). Kernels are single-threaded and written for LLVM's
//! auto-vectoriser (SSE natively, simd128 in the browser).

mod backend;
mod convert;
mod elementwise;
mod executor;
mod fast_math;
mod layout;
pub mod matmul;
mod normalize;
mod plan;
mod values;
mod walk;
mod weights;

pub use backend::{CPU_COMPILE_SPEC_KEYS, CpuBackend};
