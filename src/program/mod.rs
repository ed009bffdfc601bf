//! The delegate's program ("processed blob"): a versioned binary format, the IR it encodes,
//! execute-time shape binding and a builder.
//!
//! Untrusted bytes go `decode` -> `validate` before anything else touches them: decoding never
//! panics and never allocates more than the blob justifies; validation rejects every bad index,
//! shape mismatch, overflowing size and cycle with `InvalidProgram` and a message naming the op
//! or tensor.

mod bind;
mod builder;
mod builder_ops;
mod dump;
mod format;
pub mod geometry;
pub mod infer;
mod ir;
mod op_check;
pub mod samples;
mod validate;

pub use bind::{BoundShapes, bind_shapes};
pub use builder::ProgramBuilder;
pub use dump::dump;
pub use format::{FORMAT_VERSION, HEADER_LEN, MAGIC, decode, encode};
pub use ir::{BinaryOp, DType, Dim, Op, ParamRef, Program, TensorDecl, TensorId, UnaryOp};
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
