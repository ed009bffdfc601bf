//! ggml's block-quantized and half-precision weight formats, exactly as ggml lays them out, so
//! that a GGUF tensor is used as its bytes and never converted at load.
//!
//! A tensor in one of these formats is a sequence of rows; each row is a sequence of blocks of
//! [`BlockFormat::block_elements`] values stored in [`BlockFormat::block_bytes`] bytes. A row's
//! length must be a multiple of the block size ([`BlockFormat::row_bytes`] refuses others).
//! Layouts (little-endian, `half` = IEEE binary16), from ggml's `ggml-common.h`:
//!
//! | format | elements | bytes | layout |
//! |---|---|---|---|
//! | F16, BF16 | 1 | 2 | the value |
//! | Q4_0 | 32 | 18 | `d` half; `qs[16]`: low nibbles are elements 0..16, high nibbles 16..32; `(q - 8) * d` |
//! | Q5_0 | 32 | 22 | `d` half; `qh` u32 (bit `j` = 5th bit of element `j`); `qs[16]` as Q4_0; `(q - 16) * d` |
//! | Q8_0 | 32 | 34 | `d` half; `qs[32]` i8; `q * d` |
//! | Q4_K | 256 | 144 | `d`, `dmin` half; 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32; `qs[128]` nibbles; `d*sc*q - dmin*m` |
//! | Q5_K | 256 | 176 | as Q4_K, plus `qh[32]` (bit `k` of byte `j` = 5th bit of element `32k + j`) before `qs` |
//! | Q6_K | 256 | 210 | `ql[128]` low nibbles, `qh[64]` high 2 bits, 16 i8 scales, `d` half last; `d*sc*(q - 32)` |
//!
//! Dequantization here is bit-exact with the `gguf` Python package's `gguf.quants.dequantize`
//! (llama.cpp's reference in Python): each value is computed in f32 with the same operations in
//! the same order (no fused multiply-add), which tests/quant_blocks.rs checks on fixtures that
//! package wrote. Kernels that compute with quantized weights (matmul, row gather) decode blocks
//! with these rules; this module is their reference.

use crate::error::{Error, Result};
use half::f16;
use serde::{Deserialize, Serialize};
use webdelegate_kernels::blocks::{RowFormat, k_scale_min};

/// ggml's super-block size for the k-quants.
const QK_K: usize = 256;

/// A weight storage format: ggml's half-precision and block-quantized types this runtime
/// computes with.
// ggml's own spellings (Q4_K, ...), so names match every GGUF tool and message.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BlockFormat {
    /// IEEE binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    /// 32 values: one f16 scale, 4-bit quants with offset 8.
    Q4_0,
    /// 32 values: one f16 scale, 5-bit quants with offset 16.
    Q5_0,
    /// 32 values: one f16 scale, 8-bit signed quants.
    Q8_0,
    /// 256 values: f16 scale and min, 8 sub-blocks with 6-bit scales and mins, 4-bit quants.
    Q4_K,
    /// 256 values: as Q4_K with 5-bit quants.
    Q5_K,
    /// 256 values: 16 sub-blocks with 8-bit scales, 6-bit quants with offset 32, f16 scale.
    Q6_K,
}

impl BlockFormat {
    /// Every format, in ggml id order.
    pub const ALL: [BlockFormat; 8] = [
        Self::F16,
        Self::Q4_0,
        Self::Q5_0,
        Self::Q8_0,
        Self::Q4_K,
        Self::Q5_K,
        Self::Q6_K,
        Self::BF16,
    ];

    /// ggml's name, e.g. `"Q8_0"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::F16 => "F16",
            Self::BF16 => "BF16",
            Self::Q4_0 => "Q4_0",
            Self::Q5_0 => "Q5_0",
            Self::Q8_0 => "Q8_0",
            Self::Q4_K => "Q4_K",
            Self::Q5_K => "Q5_K",
            Self::Q6_K => "Q6_K",
        }
    }

    /// The name in lower case, as program dumps and the JavaScript builder spell dtypes,
    /// e.g. `"q8_0"`.
    pub const fn lower_name(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::BF16 => "bf16",
            Self::Q4_0 => "q4_0",
            Self::Q5_0 => "q5_0",
            Self::Q8_0 => "q8_0",
            Self::Q4_K => "q4_k",
            Self::Q5_K => "q5_k",
            Self::Q6_K => "q6_k",
        }
    }

    /// ggml's numeric type id, as GGUF tensor infos store it.
    pub const fn ggml_id(self) -> u32 {
        match self {
            Self::F16 => 1,
            Self::Q4_0 => 2,
            Self::Q5_0 => 6,
            Self::Q8_0 => 8,
            Self::Q4_K => 12,
            Self::Q5_K => 13,
            Self::Q6_K => 14,
            Self::BF16 => 30,
        }
    }

    /// The format with ggml id `id`, if this runtime computes with it.
    pub fn from_ggml_id(id: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.ggml_id() == id)
    }

    /// The format named `name` (ggml's spelling, e.g. `"Q4_K"`), if this runtime computes with it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.name() == name)
    }

    /// Values per block.
    pub const fn block_elements(self) -> usize {
        match self {
            Self::F16 | Self::BF16 => 1,
            Self::Q4_0 | Self::Q5_0 | Self::Q8_0 => 32,
            Self::Q4_K | Self::Q5_K | Self::Q6_K => QK_K,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            Self::F16 | Self::BF16 => 2,
            Self::Q4_0 => 2 + 16,
            Self::Q5_0 => 2 + 4 + 16,
            Self::Q8_0 => 2 + 32,
            Self::Q4_K => 2 + 2 + 12 + QK_K / 2,
            Self::Q5_K => 2 + 2 + 12 + QK_K / 8 + QK_K / 2,
            Self::Q6_K => QK_K / 2 + QK_K / 4 + QK_K / 16 + 2,
        }
    }

    /// Bytes of `rows` rows of `row_len` values, or `None` when `row_len` is not a multiple of
    /// the block size or the size overflows a `u64`.
    pub fn tensor_bytes(self, rows: u64, row_len: u64) -> Option<u64> {
        self.row_bytes(row_len)?.checked_mul(rows)
    }

    /// Bytes of one row of `row_len` values, or `None` when `row_len` is not a multiple of the
    /// block size or the size overflows a `u64`.
    pub fn row_bytes(self, row_len: u64) -> Option<u64> {
        let elements = self.block_elements() as u64;
        if !row_len.is_multiple_of(elements) {
            return None;
        }
        (row_len / elements).checked_mul(self.block_bytes() as u64)
    }

    /// The kernels' register row-dot format for this one, where they have one (the formats
    /// of the decode step's weights: Q8_0, Q5_0, Q4_K, Q6_K).
    pub fn row_format(self) -> Option<RowFormat> {
        match self {
            Self::Q8_0 => Some(RowFormat::Q8_0),
            Self::Q5_0 => Some(RowFormat::Q5_0),
            Self::Q4_K => Some(RowFormat::Q4_K),
            Self::Q6_K => Some(RowFormat::Q6_K),
            _ => None,
        }
    }

    /// Decodes whole blocks: `blocks` holds `n` blocks and `out` receives their `n *
    /// block_elements()` values.
    ///
    /// # Errors
    /// `InvalidArgument` when `blocks` is not a whole number of blocks or `out` has the wrong
    /// length (nothing is written then).
    pub fn dequantize(self, blocks: &[u8], out: &mut [f32]) -> Result<()> {
        let (bytes, elements) = (self.block_bytes(), self.block_elements());
        let count = blocks.len() / bytes;
        if !blocks.len().is_multiple_of(bytes) || count.checked_mul(elements) != Some(out.len()) {
            return Err(Error::invalid_argument(format!(
                "{}: {} bytes do not decode into {} values (blocks of {bytes} bytes hold {elements} values)",
                self.name(),
                blocks.len(),
                out.len()
            )));
        }
        for (block, values) in blocks
            .chunks_exact(bytes)
            .zip(out.chunks_exact_mut(elements))
        {
            self.decode_block(block, values);
        }
        Ok(())
    }

    /// Decodes one block (`block.len() == block_bytes()`, `out.len() == block_elements()`,
    /// guaranteed by the callers in this module).
    fn decode_block(self, block: &[u8], out: &mut [f32]) {
        match self {
            Self::F16 => out[0] = half_at(block, 0),
            Self::BF16 => {
                out[0] = f32::from_bits(u32::from(u16::from_le_bytes([block[0], block[1]])) << 16)
            }
            Self::Q4_0 => {
                let d = half_at(block, 0);
                for (j, &q) in block[2..18].iter().enumerate() {
                    out[j] = d * f32::from(i16::from(q & 0x0f) - 8);
                    out[j + 16] = d * f32::from(i16::from(q >> 4) - 8);
                }
            }
            Self::Q5_0 => {
                let d = half_at(block, 0);
                let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
                for (j, &q) in block[6..22].iter().enumerate() {
                    let low = u32::from(q & 0x0f) | ((qh >> j) & 1) << 4;
                    let high = u32::from(q >> 4) | ((qh >> (j + 16)) & 1) << 4;
                    out[j] = d * (low as f32 - 16.0);
                    out[j + 16] = d * (high as f32 - 16.0);
                }
            }
            Self::Q8_0 => {
                let d = half_at(block, 0);
                for (value, &q) in out.iter_mut().zip(&block[2..34]) {
                    *value = f32::from(q as i8) * d;
                }
            }
            Self::Q4_K | Self::Q5_K => {
                let d = half_at(block, 0);
                let dmin = half_at(block, 2);
                let scales = &block[4..16];
                let (qh, qs) = if self == Self::Q5_K {
                    (Some(&block[16..48]), &block[48..176])
                } else {
                    (None, &block[16..144])
                };
                for sub in 0..8 {
                    let (sc, m) = k_scale_min(scales, sub);
                    let scale = d * f32::from(sc);
                    let min = dmin * f32::from(m);
                    // Sub-blocks 2c and 2c+1 share the 32 bytes qs[32c..32c+32]: low, then high nibbles.
                    let (chunk, shift) = (sub / 2, 4 * (sub % 2));
                    for j in 0..32 {
                        let mut q = (qs[32 * chunk + j] >> shift) & 0x0f;
                        if let Some(qh) = qh {
                            q |= ((qh[j] >> sub) & 1) << 4;
                        }
                        out[32 * sub + j] = scale * f32::from(q) - min;
                    }
                }
            }
            Self::Q6_K => {
                let (ql, qh, scales) = (&block[0..128], &block[128..192], &block[192..208]);
                let d = half_at(block, 208);
                for (e, value) in out.iter_mut().enumerate() {
                    // Two halves of 128 values; in each, ql byte j gives values j (low nibble) and
                    // j + 64 (high nibble), qh byte j gives values j, j+32, j+64, j+96 (2 bits each).
                    let (half, i) = (e / 128, e % 128);
                    let low = (ql[64 * half + i % 64] >> (4 * (i / 64))) & 0x0f;
                    let high = (qh[32 * half + i % 32] >> (2 * (i / 32))) & 0x03;
                    let q = ((low | high << 4) as i8).wrapping_sub(32);
                    let scale = d * f32::from(scales[e / 16] as i8);
                    *value = scale * f32::from(q);
                }
            }
        }
    }
}

/// The f16 at `offset` (little-endian), widened exactly.
fn half_at(block: &[u8], offset: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([block[offset], block[offset + 1]])).to_f32()
}

/// `len` pseudo-random bytes from `seed` (a 64-bit xorshift): the same bytes on every machine,
/// so benchmark runs are comparable.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// `len` bytes of random `format` blocks (from `seed`, see [`random_bytes`]) whose f16 scale
/// fields hold ordinary values (about 0.008 .. 0.11 in magnitude; F16 / BF16 values about
/// 0.1 .. 2), so every decoded value is finite: weights for benchmarks, which time the bytes
/// and not what they mean.
pub fn random_blocks(format: BlockFormat, len: usize, seed: u64) -> Vec<u8> {
    let mut bytes = random_bytes(len, seed);
    let scales: &[usize] = match format {
        BlockFormat::F16 | BlockFormat::BF16 => &[],
        BlockFormat::Q4_0 | BlockFormat::Q5_0 | BlockFormat::Q8_0 => &[0],
        BlockFormat::Q4_K | BlockFormat::Q5_K => &[0, 2],
        BlockFormat::Q6_K => &[208],
    };
    for block in bytes.chunks_exact_mut(format.block_bytes()) {
        for &at in scales {
            block[at + 1] = 0x20 | (block[at + 1] & 0x8f);
        }
        match format {
            BlockFormat::F16 => block[1] = 0x30 | (block[1] & 0x8b),
            BlockFormat::BF16 => block[1] = 0x3e | (block[1] & 0x81),
            _ => {}
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_ggml() {
        let expected = [
            (BlockFormat::F16, 1, 2),
            (BlockFormat::BF16, 1, 2),
            (BlockFormat::Q4_0, 32, 18),
            (BlockFormat::Q5_0, 32, 22),
            (BlockFormat::Q8_0, 32, 34),
            (BlockFormat::Q4_K, 256, 144),
            (BlockFormat::Q5_K, 256, 176),
            (BlockFormat::Q6_K, 256, 210),
        ];
        for (format, elements, bytes) in expected {
            assert_eq!(
                (format.block_elements(), format.block_bytes()),
                (elements, bytes)
            );
            assert_eq!(BlockFormat::from_ggml_id(format.ggml_id()), Some(format));
            assert_eq!(BlockFormat::from_name(format.name()), Some(format));
        }
    }

    #[test]
    fn row_sizes_refuse_partial_blocks_and_overflow() {
        // The real Gemma 3 file: 640-wide rows hold 20 Q8_0 blocks but no whole Q4_K block.
        assert_eq!(BlockFormat::Q8_0.row_bytes(640), Some(680));
        assert_eq!(BlockFormat::Q4_K.row_bytes(640), None);
        assert_eq!(BlockFormat::Q4_K.row_bytes(2048), Some(1152));
        assert_eq!(
            BlockFormat::Q8_0.tensor_bytes(262_144, 640),
            Some(178_257_920)
        );
        assert_eq!(BlockFormat::Q6_K.tensor_bytes(u64::MAX, 256), None);
        assert_eq!(BlockFormat::F16.row_bytes(u64::MAX), None);
    }

    #[test]
    fn dequantize_refuses_partial_blocks_and_wrong_outputs() {
        let mut out = [0.0f32; 32];
        for (bytes, len) in [(33, 32), (34, 31), (68, 32)] {
            let blocks = vec![0u8; bytes];
            let error = BlockFormat::Q8_0
                .dequantize(&blocks, &mut out[..len])
                .unwrap_err();
            assert_eq!(error.code(), crate::error::ErrorCode::InvalidArgument);
        }
        assert!(BlockFormat::Q8_0.dequantize(&[0; 34], &mut out).is_ok());
    }

    #[test]
    fn q8_0_by_hand() {
        // d = 0.5 (f16 0x3800), quants 0, 1, -1, 127, -128, then zeros.
        let mut block = vec![0x00, 0x38, 0, 1, 0xff, 127, 0x80];
        block.resize(34, 0);
        let mut out = [f32::NAN; 32];
        BlockFormat::Q8_0.dequantize(&block, &mut out).unwrap();
        assert_eq!(&out[..5], &[0.0, 0.5, -0.5, 63.5, -64.0]);
        assert!(out[5..].iter().all(|&v| v == 0.0));
    }

    #[test]
    fn q4_k_scales_unpack_as_ggml() {
        // Sub-block 5: low bits from byte 9, high bits from the tops of bytes 1 (scale) and 5 (min).
        let mut scales = [0u8; 12];
        scales[9] = 0xa7; // scale low 7, min low 0xa
        scales[1] = 0b1100_0000; // scale high bits 3 -> 0x30
        scales[5] = 0b0100_0000; // min high bits 1 -> 0x10
        assert_eq!(k_scale_min(&scales, 5), (0x37, 0x1a));
        scales[0] = 0x3f | 0x80;
        scales[4] = 0x15;
        assert_eq!(k_scale_min(&scales, 0), (0x3f, 0x15));
    }
}
