//! The delegate's program ("processed blob"): a versioned binary format, the IR it encodes,
//! validation, symbolic shape inference, execute-time shape binding, a builder and a text dump.
//!
//! Untrusted bytes go through [`load`] (`decode` -> `validate`) before anything else touches
//! them: decoding never panics and allocates in proportion to the blob (a claimed length is
//! never pre-allocated); validation rejects every bad index, role conflict, dtype or shape
//! mismatch, overflowing size and cycle with `InvalidProgram` and a message naming the op or
//! tensor.
//!
//! - `tensor`: tensor ids, dtypes, dims and declarations (the vocabulary of every op).
//! - [`ops`]: one file per op with its semantics, dtype and shape rules and text form (the
//!   spec every backend implements), the `Op` enum and the one list of the op set.
//! - `ir`: the program itself (tensors, inputs, outputs, parameters, ops).
//! - [`infer`]: per-op symbolic shape inference, shared by validation, the builder and backends.
//! - `validate`: whole-program checks ([`validate`], [`Limits`]).
//! - `bind`: symbols -> concrete shapes from the inputs at execute time ([`bind_shapes`]).
//! - [`geometry`]: concrete strides/offsets of broadcasting, matmul, permute, slice and concat.
//! - `builder` / `builder_ops`: [`ProgramBuilder`]; [`ProgramBuilder::push`] appends any op
//!   with its output inferred.
//! - `dump`: the stable text form ([`dump`]).
//! - [`samples`]: ready-made programs (single matmul, MiniLM-shaped encoder) for benches.

mod bind;
mod builder;
mod builder_ops;
mod dump;
mod format;
pub mod geometry;
pub mod infer;
mod ir;
pub mod ops;
pub mod samples;
mod tensor;
mod validate;

pub use crate::quant::BlockFormat;
pub use bind::{BoundShapes, bind_shapes};
pub use builder::ProgramBuilder;
pub use dump::dump;
pub use format::{FORMAT_VERSION, HEADER_LEN, MAGIC, decode, encode};
pub use ir::{ParamRef, Program};
pub use ops::{BinaryOp, Op, OpDef, UnaryOp};
pub use tensor::{DType, Dim, TensorDecl, TensorId};
pub use validate::{Limits, validate};

use crate::error::Result;

/// Decodes and validates an untrusted blob: what a backend's `init` does first.
///
/// # Errors
/// `DelegateInvalidCompatibility` for a foreign magic or another format version;
/// `InvalidProgram` for anything malformed (see [`decode`] and [`validate`]).
pub fn load(blob: &[u8]) -> Result<Program> {
    let program = decode(blob)?;
    validate(&program)?;
    Ok(program)
}
