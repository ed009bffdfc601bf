//! The program a delegate runs: tensor declarations, inputs, outputs, parameter references and
//! a list of ops in execution order.
//!
//! Every op's semantics are defined here, once; the CPU backend is the executable reference of
//! these definitions and the WebGPU backend must agree with it within stated tolerances.
//!
//! Conventions for all ops:
//! - Tensors are dense, row-major. An op's output shape is the *declared* shape of its `out`
//!   tensor; validation proves it equals what the op computes from its inputs.
//! - "Broadcast" means NumPy broadcasting: shapes are right-aligned and each pair of dims must be
//!   equal or one of them 1 (with symbols, equal means the same symbol).
//! - Float ops compute in f32.

use serde::{Deserialize, Serialize};

/// Index of a tensor in [`Program::tensors`].
pub type TensorId = u32;

/// Element type of a program tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer (token ids as PyTorch produces them).
    I64,
    /// 8-bit unsigned integer (masks).
    U8,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            Self::F32 | Self::I32 => 4,
            Self::I64 => 8,
            Self::U8 => 1,
        }
    }

    /// Whether the type is an integer type.
    pub const fn is_integer(self) -> bool {
        !matches!(self, Self::F32)
    }

    /// Lower-case name used in dumps, e.g. `"f32"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::I32 => "i32",
            Self::I64 => "i64",
            Self::U8 => "u8",
        }
    }
}

/// One dimension of a declared shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dim {
    /// A fixed extent.
    Fixed(u64),
    /// A symbolic extent (index into [`Program::symbols`]) bound at execute time from the
    /// inputs' shapes, e.g. batch or sequence length.
    Symbol(u32),
}

/// A declared tensor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorDecl {
    /// Name, for messages and dumps (not required to be unique).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape; may contain symbols.
    pub shape: Vec<Dim>,
}

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

/// Element-wise one-input float functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// `x * 0.5 * (1 + erf(x / sqrt(2)))` (the exact, erf form).
    Gelu,
    /// Hyperbolic tangent.
    Tanh,
    /// `max(x, 0)`.
    Relu,
}

/// Element-wise two-input float functions, with broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (IEEE: division by zero gives ±inf or NaN).
    Div,
}

/// One operation. All inputs are read before `out` is written; `out` is never an input of the
/// same op and is produced by exactly one op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Embedding lookup: `table` f32 `[V, H]`, `ids` i32/i64 of any shape `S` -> `out` f32
    /// `S + [H]`, `out[s, :] = table[ids[s], :]`. An id outside `0..V` is an execute-time
    /// `InvalidArgument`, never an out-of-bounds read.
    Gather {
        /// The embedding table, `[V, H]`.
        table: TensorId,
        /// The ids of the rows to pick.
        ids: TensorId,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// `out = a (op) b`, f32, broadcast.
    Binary {
        /// Which function.
        op: BinaryOp,
        /// The left operand.
        a: TensorId,
        /// The right operand.
        b: TensorId,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// `out = x * scale + bias`, f32, element-wise (`scale`, `bias` finite).
    Scale {
        /// The input.
        x: TensorId,
        /// The factor.
        scale: f32,
        /// The term added after scaling.
        bias: f32,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// `out = f(x)`, f32, element-wise.
    Unary {
        /// Which function.
        op: UnaryOp,
        /// The input.
        x: TensorId,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Batched matrix product. `a` is `[..., M, K]` (`[..., K, M]` when `transpose_a`), `b` is
    /// `[..., K, N]` (`[..., N, K]` when `transpose_b`); batch dims broadcast; optional `bias`
    /// `[N]` is added to every row. `out` is `batch + [M, N]`. f32.
    MatMul {
        /// The left operand.
        a: TensorId,
        /// The right operand.
        b: TensorId,
        /// An optional `[N]` term added to every row.
        bias: Option<TensorId>,
        /// Whether `a` is stored transposed.
        transpose_a: bool,
        /// Whether `b` is stored transposed.
        transpose_b: bool,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Layer normalisation over the last dim `H`: `(x - mean) / sqrt(var + eps) * gamma + beta`
    /// with the biased variance; `gamma`, `beta` are `[H]`; `eps` finite and >= 0. f32.
    LayerNorm {
        /// The input.
        x: TensorId,
        /// The per-feature scale, `[H]`.
        gamma: TensorId,
        /// The per-feature shift, `[H]`.
        beta: TensorId,
        /// The stabiliser.
        eps: f32,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Softmax over the last dim of `x + mask` (when a mask is given; it broadcasts to `x`),
    /// computed stably (max subtracted). f32.
    Softmax {
        /// The input.
        x: TensorId,
        /// An optional additive mask, broadcast to `x`.
        mask: Option<TensorId>,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Same elements, new shape (`out`'s declared shape; element counts must match).
    Reshape {
        /// The input.
        x: TensorId,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// `out` dim `i` is `x` dim `perm[i]`; `perm` is a permutation of `0..rank`.
    Permute {
        /// The input.
        x: TensorId,
        /// For each output dim, the input dim it takes.
        perm: Vec<u32>,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Elements `start..end` (end `None` = the dim's extent) along `axis`, step 1. Along a
    /// symbolic dim an explicit `end` gives a fixed extent and execute-time binding requires the
    /// symbol to be at least `end` (else `InvalidArgument`); an open end needs `start` 0.
    Slice {
        /// The input.
        x: TensorId,
        /// The dim the op works along.
        axis: u32,
        /// The first index taken.
        start: u64,
        /// One past the last index taken (`None`: the extent).
        end: Option<u64>,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Concatenation along `axis`; all other dims equal; same dtype. The result's extent along
    /// `axis` must be one dim: all inputs fixed there, or one symbolic and the others 0.
    Concat {
        /// The tensors joined, in order.
        inputs: Vec<TensorId>,
        /// The dim the op works along.
        axis: u32,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Element-wise type conversion to `out`'s dtype: float -> int truncates toward zero and
    /// saturates (NaN becomes 0); int -> int saturates; int -> f32 rounds to nearest.
    Cast {
        /// The input.
        x: TensorId,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// `out` (1-D i32, i64 or f32 tensor of extent `n`) = `0, 1, ..., n-1` (position ids).
    Range {
        /// The tensor the op writes.
        out: TensorId,
    },
    /// Masked mean over the sequence: `x` f32 `[B, S, H]`, `mask` u8/i32/i64/f32 `[B, S]` ->
    /// `out` `[B, H]` = `sum_s x * m / max(sum_s m, 1e-9)` with `m` = 1 where the mask is
    /// non-zero and 0 elsewhere (sentence-transformers' pooling; masked positions contribute
    /// nothing, whatever their values).
    MeanPool {
        /// The input.
        x: TensorId,
        /// The `[B, S]` mask: non-zero where a position counts.
        mask: TensorId,
        /// The tensor the op writes.
        out: TensorId,
    },
    /// `x / max(||x||_2, eps)` over the last dim (PyTorch's `F.normalize`); `eps` finite and
    /// >= 0. f32.
    L2Normalize {
        /// The input.
        x: TensorId,
        /// The stabiliser.
        eps: f32,
        /// The tensor the op writes.
        out: TensorId,
    },
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
}

impl Op {
    /// The tensors this op reads, in a fixed order.
    pub fn inputs(&self) -> Vec<TensorId> {
        match self {
            Self::Gather { table, ids, .. } => vec![*table, *ids],
            Self::Binary { a, b, .. } => vec![*a, *b],
            Self::Scale { x, .. }
            | Self::Unary { x, .. }
            | Self::Reshape { x, .. }
            | Self::Permute { x, .. }
            | Self::Slice { x, .. }
            | Self::Cast { x, .. }
            | Self::L2Normalize { x, .. } => vec![*x],
            Self::MatMul { a, b, bias, .. } => {
                let mut ids = vec![*a, *b];
                ids.extend(bias);
                ids
            }
            Self::LayerNorm { x, gamma, beta, .. } => vec![*x, *gamma, *beta],
            Self::Softmax { x, mask, .. } => {
                let mut ids = vec![*x];
                ids.extend(mask);
                ids
            }
            Self::Concat { inputs, .. } => inputs.clone(),
            Self::Range { .. } => vec![],
            Self::MeanPool { x, mask, .. } => vec![*x, *mask],
        }
    }

    /// The tensor this op writes.
    pub fn output(&self) -> TensorId {
        match self {
            Self::Gather { out, .. }
            | Self::Binary { out, .. }
            | Self::Scale { out, .. }
            | Self::Unary { out, .. }
            | Self::MatMul { out, .. }
            | Self::LayerNorm { out, .. }
            | Self::Softmax { out, .. }
            | Self::Reshape { out, .. }
            | Self::Permute { out, .. }
            | Self::Slice { out, .. }
            | Self::Concat { out, .. }
            | Self::Cast { out, .. }
            | Self::Range { out }
            | Self::MeanPool { out, .. }
            | Self::L2Normalize { out, .. } => *out,
        }
    }

    /// The op's name in dumps and messages, e.g. `"matmul"`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Gather { .. } => "gather",
            Self::Binary {
                op: BinaryOp::Add, ..
            } => "add",
            Self::Binary {
                op: BinaryOp::Sub, ..
            } => "sub",
            Self::Binary {
                op: BinaryOp::Mul, ..
            } => "mul",
            Self::Binary {
                op: BinaryOp::Div, ..
            } => "div",
            Self::Scale { .. } => "scale",
            Self::Unary {
                op: UnaryOp::Gelu, ..
            } => "gelu",
            Self::Unary {
                op: UnaryOp::Tanh, ..
            } => "tanh",
            Self::Unary {
                op: UnaryOp::Relu, ..
            } => "relu",
            Self::MatMul { .. } => "matmul",
            Self::LayerNorm { .. } => "layer_norm",
            Self::Softmax { .. } => "softmax",
            Self::Reshape { .. } => "reshape",
            Self::Permute { .. } => "permute",
            Self::Slice { .. } => "slice",
            Self::Concat { .. } => "concat",
            Self::Cast { .. } => "cast",
            Self::Range { .. } => "range",
            Self::MeanPool { .. } => "mean_pool",
            Self::L2Normalize { .. } => "l2_normalize",
        }
    }
}
