//! ExecuTorch programs: the `.pte` reader and the method runtime around our backend registry.
//!
//! An ExecuTorch user exports a model once (`torch.export` -> `to_edge_transform_and_lower` with
//! the webdelegate partitioner -> `.pte`, weights in a `.ptd`) and hands the files to a
//! runtime. This module is that runtime's core:
//!
//! - `file`: [`PteFile`] parses a `.pte` (flatbuffer `ET12`, extended header `eh00`, segments),
//!   verifying and checking everything before anything runs.
//! - `plan`: [`MethodPlan`], one method as owned, checked values (value table, chains of
//!   instructions, operators, delegate entries).
//! - `sources`: where a plan's bytes lie (segments, constants, inline blobs), built by `file`
//!   and read by `plan`.
//! - `prim_ops`: the scalar prim ops of dynamic shapes that run outside delegates.
//! - `named_data`: [`NamedDataUnion`], the `.pte`'s named data over the `.ptd`'s provider.
//! - `method`: [`Method`], which initialises each delegate through the registry by backend id
//!   and interprets the chains.
//!
//! The `.ptd` itself is a weights file like GGUF or safetensors: its index parser lives with
//! the others in `params::formats`, so every parameter provider (the HTTP one included, by
//! Range) serves its keys. The schema types come from [`crate::executorch_schema`].

mod file;
mod method;
mod named_data;
mod plan;
mod prim_ops;
mod sources;

pub use file::{EXTENDED_HEADER_MAGIC, ExtendedHeader, PteFile};
pub use method::{MAX_INSTRUCTIONS_PER_EXECUTE, Method, MethodLoadOptions};
pub use named_data::{NAMED_DATA_SCOPE, NamedDataUnion};
pub use plan::{
    DelegateSpec, Dynamism, Instruction, MethodPlan, OperatorName, TensorSource, TensorSpec,
    ValueSpec, scalar_type_code, scalar_type_from_code, scalar_type_name,
};
pub use prim_ops::{BinaryScalar, PrimOp, UnaryScalar};

/// The backend id the webdelegate partitioner writes into a `.pte` (its Python
/// `BackendDetails` class name).
pub const WEBDELEGATE_BACKEND_ID: &str = "WebDelegateBackend";
