//! Tensor declarations: ids, element types, dims (fixed or symbolic) and the declared tensor.
//! The vocabulary every op definition and every backend speaks; it knows nothing of ops.

use serde::{Deserialize, Serialize};

/// Index of a tensor in the program's tensor list (`Program::tensors`).
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
    /// A symbolic extent (index into `Program::symbols`) bound at execute time from the
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
