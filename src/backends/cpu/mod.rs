//! The pure-Rust CPU backend: the fallback runtime where WebGPU is missing and the executable
//! reference of the op semantics in `program::ops`.
//!
//! Each op's kernel is in `ops/` (one file per op or op family, each implementing `CpuOp`);
//! around them: a program's matmul batches over the kernels crate's blocked GEMM (`gemm`), the
//! shared row walker (`walk`), typed storage (`values`), what a kernel runs with (`frame`), the
//! execution plan (`plan`), weights packed at init (`weights`), the ops split across the worker
//! pool's threads when one is installed (`threaded`), the interpreter loop (`executor`) and the
//! `BackendInterface` implementation (`backend`).
//!
//! The hot loops (the GEMM, block-format row dots, int8 dots, the row kernels, and the
//! branch-free math and lane sums) live in the `webdelegate-kernels` crate (`kernels/`),
//! written for LLVM's auto-vectoriser and simd128 / SSE lanes. Ops run on the calling thread;
//! with a worker pool installed (`useCpuThreads`), the products, activations, same-shape
//! binaries, `scale`, softmax, layer norm and permutes of a program initialised afterwards are
//! split across the pool's threads (`threaded`), the rest stay on the calling thread.

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

pub use backend::{CPU_COMPILE_SPEC_KEYS, CpuBackend, CpuMemory};
