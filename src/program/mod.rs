//! The delegate's program ("processed blob"): a versioned binary format, the IR it encodes,
//! execute-time shape binding and a builder.
//!
//! Untrusted bytes go `decode` -> `validate` before anything else touches them: decoding never
//! panics and never allocates more than the blob justifies; validation rejects every bad index,
//! shape mismatch, overflowing size and cycle with `InvalidProgram` and a message naming the op
//! or tensor.

mod bind;
mod builder;
mod format;
mod ir;

pub use bind::{BoundShapes, bind_shapes};
pub use builder::ProgramBuilder;
pub use format::{FORMAT_VERSION, HEADER_LEN, MAGIC, decode, encode};
pub use ir::{BinaryOp, DType, Dim, Op, ParamRef, Program, TensorDecl, TensorId, UnaryOp};
