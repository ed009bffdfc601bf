//! Programs built from JavaScript: [`program_builder`] (`ProgramBuilder`, the Rust builder with
//! checked JS arguments), [`bert_program`] (`bertProgram`: the Embedder's BERT program from a
//! provider's tensors) and [`bench`] (`MatmulBench`, the matmul program the benchmark page
//! times); [`qmatvec_bench`] (`QmatvecBench`, `BandwidthBench`: the quantized GEMV and the CPU
//! bandwidth baseline of the qmatvec suite).

pub mod bench;
pub mod bert_program;
pub mod program_builder;
pub mod qmatvec_bench;
