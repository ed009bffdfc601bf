//! Tensor declarations: ids, element types, dims (fixed or symbolic) and the declared tensor.
//! The vocabulary every op definition and every backend speaks; it knows nothing of ops.

use crate::quant::BlockFormat;
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
    /// A ggml weight format (half precision or block-quantized), stored as the file's bytes:
    /// allowed only for parameters, whose last dim (the row) must be a whole number of blocks.
    /// Ops that accept it (matmul weights, gather tables) decode it inside their kernels.
    Block(BlockFormat),
}

impl DType {
    /// Size of one element in bytes; `None` for a block format (whose blocks hold many
    /// elements: see [`DType::tensor_bytes`]). F16 and BF16 are blocks of one, 2 bytes.
    pub const fn size(self) -> Option<usize> {
        match self {
            Self::F32 | Self::I32 => Some(4),
            Self::I64 => Some(8),
            Self::U8 => Some(1),
            Self::Block(format) if format.block_elements() == 1 => Some(format.block_bytes()),
            Self::Block(_) => None,
        }
    }

    /// Bytes of a tensor of `shape`: elements x size, or for a block format rows x row bytes
    /// (the last dim is the row; a scalar is one row of one element). `None` when the last dim
    /// is not a whole number of blocks or the size overflows a `u64`.
    pub fn tensor_bytes(self, shape: &[u64]) -> Option<u64> {
        match self {
            Self::Block(format) => {
                let (row, rows) = shape.split_last().map_or((1, &[][..]), |(r, rs)| (*r, rs));
                let rows = rows.iter().try_fold(1u64, |n, &d| n.checked_mul(d))?;
                format.tensor_bytes(rows, row)
            }
            dense => shape
                .iter()
                .try_fold(dense.size()? as u64, |n, &d| n.checked_mul(d)),
        }
    }

    /// Whether the type is one of ggml's weight formats ([`DType::Block`]).
    pub const fn is_block(self) -> bool {
        matches!(self, Self::Block(_))
    }

    /// Whether the type is an integer type.
    pub const fn is_integer(self) -> bool {
        matches!(self, Self::I32 | Self::I64 | Self::U8)
    }

    /// Lower-case name used in dumps, e.g. `"f32"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::I32 => "i32",
            Self::I64 => "i64",
            Self::U8 => "u8",
            Self::Block(format) => format.lower_name(),
        }
    }

    /// The dtype named `name` in dumps and the JavaScript builder: `"f32"`, `"i32"`, `"i64"`,
    /// `"u8"`, or a block format's lower-case ggml name (`"q8_0"`, `"f16"`, `"bf16"`, ...).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "f32" => Some(Self::F32),
            "i32" => Some(Self::I32),
            "i64" => Some(Self::I64),
            "u8" => Some(Self::U8),
            other => BlockFormat::ALL
                .into_iter()
                .find(|f| f.lower_name() == other)
                .map(Self::Block),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::BlockFormat::*;

    #[test]
    fn sizes_of_dense_and_block_tensors() {
        assert_eq!(DType::F32.tensor_bytes(&[3, 5]), Some(60));
        assert_eq!(DType::I64.tensor_bytes(&[]), Some(8));
        assert_eq!(DType::U8.tensor_bytes(&[0, 7]), Some(0));
        assert_eq!(DType::Block(F16).size(), Some(2));
        assert_eq!(DType::Block(Q8_0).size(), None);
        // The real Gemma 3 tensors (DECODER-FACTS.md): token_embd Q8_0 [262144, 640],
        // attn_q Q5_0 [1024, 640], attn_output Q4_K [640, 1024], ffn_down Q6_K [640, 2048].
        assert_eq!(
            DType::Block(Q8_0).tensor_bytes(&[262_144, 640]),
            Some(178_257_920)
        );
        assert_eq!(DType::Block(Q5_0).tensor_bytes(&[1024, 640]), Some(450_560));
        assert_eq!(DType::Block(Q4_K).tensor_bytes(&[640, 1024]), Some(368_640));
        assert_eq!(
            DType::Block(Q6_K).tensor_bytes(&[640, 2048]),
            Some(1_075_200)
        );
        // Rows that are not whole blocks, scalars of multi-element blocks, overflow.
        assert_eq!(DType::Block(Q4_K).tensor_bytes(&[2, 640]), None);
        assert_eq!(DType::Block(Q8_0).tensor_bytes(&[]), None);
        assert_eq!(DType::Block(BF16).tensor_bytes(&[]), Some(2));
        assert_eq!(DType::Block(Q8_0).tensor_bytes(&[u64::MAX, 32]), None);
        assert_eq!(DType::F32.tensor_bytes(&[u64::MAX, 2]), None);
    }

    #[test]
    fn names_round_trip() {
        let mut all = vec![DType::F32, DType::I32, DType::I64, DType::U8];
        all.extend(BlockFormat::ALL.map(DType::Block));
        for dtype in all {
            assert_eq!(DType::from_name(dtype.name()), Some(dtype), "{dtype:?}");
            assert!(!dtype.is_block() || !dtype.is_integer());
        }
        assert_eq!(DType::Block(Q4_K).name(), "q4_k");
        assert_eq!(DType::from_name("q4_1"), None);
    }

    /// Blobs from before block formats existed keep their bytes: new variants come last.
    #[test]
    fn dtype_wire_tags() {
        assert_eq!(postcard::to_allocvec(&DType::U8).unwrap(), [3]);
        assert_eq!(
            postcard::to_allocvec(&DType::Block(Q8_0)).unwrap(),
            [4, 4],
            "Block, then the format's index in declaration order (F16, BF16, Q4_0, Q5_0, Q8_0...)"
        );
    }
}
