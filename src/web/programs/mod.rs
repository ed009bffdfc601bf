//! Programs built from JavaScript: [`program_builder`] (`ProgramBuilder`, the Rust builder with
//! checked JS arguments) and [`bert_program`] (`bertProgram`: the Embedder's BERT program from a
//! provider's tensors). With the `bench` feature (the bench's own build of the package, never
//! the published one), the benchmark fixtures too: `bench` (`MatmulBench`, the matmul program
//! the benchmark page times) and `qmatvec_bench` (`QmatvecBench`, `BandwidthBench`: the
//! quantized GEMV and the CPU bandwidth baseline of the qmatvec suite).

#[cfg(feature = "bench")]
pub mod bench;
pub mod bert_program;
pub mod program_builder;
#[cfg(feature = "bench")]
pub mod qmatvec_bench;
