//! The program a delegate runs: tensor declarations, inputs, outputs, parameter references and
//! a list of ops in execution order.
//!
//! Every op's semantics are defined once, in its own file under `program/ops/`; the CPU
//! backend is the executable reference of these definitions and the WebGPU backend must agree
//! with it within stated tolerances.
//!
//! Conventions for all ops:
//! - Tensors are dense, row-major. An op's output shape is the *declared* shape of its `out`
//!   tensor; validation proves it equals what the op computes from its inputs.
//! - "Broadcast" means NumPy broadcasting: shapes are right-aligned and each pair of dims must be
//!   equal or one of them 1 (with symbols, equal means the same symbol).
//! - Float ops compute in f32.

use crate::program::ops::Op;
use crate::program::tensor::{TensorDecl, TensorId};
use serde::{Deserialize, Serialize};

/// A tensor whose bytes come from the parameter provider: `key` in `scope`. Weights are never
/// embedded in a program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamRef {
    /// The tensor it fills (must have a fully fixed shape).
    pub tensor: TensorId,
    /// Provider scope, e.g. a weights file's name.
    pub scope: String,
    /// Key within the scope, e.g. `"encoder.layer.0.attention.self.query.weight"`.
    pub key: String,
}

/// A complete program.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Program {
    /// Names of the symbolic dims, e.g. `["batch", "seq"]`.
    pub symbols: Vec<String>,
    /// Every tensor.
    pub tensors: Vec<TensorDecl>,
    /// Tensors the caller provides, in argument order.
    pub inputs: Vec<TensorId>,
    /// Tensors returned to the caller, in argument order after the inputs.
    pub outputs: Vec<TensorId>,
    /// Tensors filled from the parameter provider.
    pub params: Vec<ParamRef>,
    /// Operations, in execution order.
    pub ops: Vec<Op>,
    /// State tensors (ExecuTorch's mutable buffers, e.g. a KV cache): fixed shape, dense,
    /// zero at `init`, alive across executions until `destroy`, written in place only by the
    /// ops that declare it (`OpDef::state_writes`), read by any op as it stands when the op
    /// runs, reset to zero on request. Last in the blob (format version 2).
    pub states: Vec<TensorId>,
}
