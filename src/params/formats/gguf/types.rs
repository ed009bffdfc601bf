//! ggml tensor element types: the block size (elements per block) and type size (bytes per
//! block) that GGUF leaves out of its tensor infos, so that a reader must know them to size a
//! tensor.
//!
//! The table is ggml's `type_traits` (`ggml/src/ggml.c`, block layouts in
//! `ggml/src/ggml-common.h`), as also published in `gguf-py`'s `GGML_QUANT_SIZES` (0.19). One
//! difference from `gguf-py`: `Q8_1` blocks are 36 bytes (two f16 scales + 32 quants) in ggml,
//! which is what llama.cpp's reader uses; `gguf-py` still lists the old 40-byte float layout.
//! Ids ggml has retired (4, 5: `Q4_2`/`Q4_3`; 31-33: `Q4_0_4_4`...; 36-38: `IQ4_NL_4_4`...) and
//! ids past the table are unknown: llama.cpp rejects them too.

/// The size rules of one ggml element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// ggml's numeric id, as stored in tensor infos.
    pub id: u32,
    /// ggml's name, e.g. `"Q8_0"`.
    pub name: &'static str,
    /// Elements per block; a row's length must be a multiple of it.
    pub block_size: u64,
    /// Bytes per block.
    pub type_size: u64,
}

const fn t(id: u32, name: &'static str, block_size: u64, type_size: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block_size,
        type_size,
    }
}

/// ggml's super-block size for the k-quants and i-quants.
const QK_K: u64 = 256;

/// Every element type this reader knows, by id.
pub const GGML_TYPES: [GgmlType; 34] = [
    t(0, "F32", 1, 4),
    t(1, "F16", 1, 2),
    t(2, "Q4_0", 32, 2 + 16),
    t(3, "Q4_1", 32, 2 + 2 + 16),
    t(6, "Q5_0", 32, 2 + 4 + 16),
    t(7, "Q5_1", 32, 2 + 2 + 4 + 16),
    t(8, "Q8_0", 32, 2 + 32),
    t(9, "Q8_1", 32, 2 + 2 + 32),
    t(10, "Q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2),
    t(11, "Q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2),
    t(12, "Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2),
    t(13, "Q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2),
    t(14, "Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2),
    t(15, "Q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2),
    t(16, "IQ2_XXS", QK_K, 2 + QK_K / 8 * 2),
    t(17, "IQ2_XS", QK_K, 2 + QK_K / 8 * 2 + QK_K / 32),
    t(18, "IQ3_XXS", QK_K, 2 + 3 * QK_K / 8),
    t(19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 32 * 2),
    t(20, "IQ4_NL", 32, 2 + 16),
    t(21, "IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + 4),
    t(22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 32 + QK_K / 32),
    t(23, "IQ4_XS", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2),
    t(24, "I8", 1, 1),
    t(25, "I16", 1, 2),
    t(26, "I32", 1, 4),
    t(27, "I64", 1, 8),
    t(28, "F64", 1, 8),
    t(29, "IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32),
    t(30, "BF16", 1, 2),
    t(
        34,
        "TQ1_0",
        QK_K,
        (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2,
    ),
    t(35, "TQ2_0", QK_K, QK_K / 4 + 2),
    t(39, "MXFP4", 32, 1 + 16),
    t(40, "NVFP4", 64, 64 / 16 + 32),
    t(41, "Q1_0", 128, 2 + 128 / 8),
];

/// The element type with ggml id `id`, if known.
pub fn ggml_type(id: u32) -> Option<GgmlType> {
    GGML_TYPES.iter().copied().find(|kind| kind.id == id)
}

/// The element type named `name` (e.g. `"Q4_K"`), if known.
pub fn ggml_type_by_name(name: &str) -> Option<GgmlType> {
    GGML_TYPES.iter().copied().find(|kind| kind.name == name)
}
