//! The pure-Rust CPU backend: the fallback runtime where WebGPU is missing and the executable
//! reference of the op semantics in `program::ops`.
//!
//! Each op's kernel is in `ops/` (one file per op or op family, each implementing `CpuOp`);
//! around them: the blocked GEMM (`gemm`), the shared row walker (`walk`), vectorisable math and
//! lane sums (`fast_math`), typed storage (`values`), what a kernel runs with (`frame`), the
//! execution plan (`plan`), weights packed at init (`weights`), the interpreter loop
//! (`executor`) and the `BackendInterface` implementation (`backend`). Kernels are
//! single-threaded and written for LLVM's auto-vectoriser (SSE natively, simd128 in the
//! browser).

mod backend;
mod executor;
mod frame;
mod gemm;
mod ops;
mod plan;
mod threaded;
mod values;
mod walk;
mod weights;

pub use backend::{CPU_COMPILE_SPEC_KEYS, CpuBackend};
