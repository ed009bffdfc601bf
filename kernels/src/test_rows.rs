//! Weight rows for the kernels' tests: random block bytes with ordinary f16 scales.

use crate::blocks::RowFormat;
use std::vec::Vec;

/// `n` rows of `k` values of `format`: xorshift bytes from `seed`, each block's f16 scales
/// (Q4_K's d and dmin too) set to ordinary values in `0.001..0.036`.
pub(crate) fn random_rows(format: RowFormat, n: usize, k: usize, seed: u32) -> Vec<u8> {
    let mut state = seed | 1;
    let mut rows: Vec<u8> = (0..n * k / format.block_elements() * format.block_bytes())
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as u8
        })
        .collect();
    let scale_at: &[usize] = match format {
        RowFormat::Q4_K => &[0, 2],
        RowFormat::Q6_K => &[208],
        _ => &[0],
    };
    let bytes = format.block_bytes();
    for block in rows.chunks_exact_mut(bytes) {
        for &at in scale_at {
            let h = half::f16::from_f32(0.001 + f32::from(block[(at + 4) % bytes] % 50) * 0.0007);
            block[at..at + 2].copy_from_slice(&h.to_bits().to_le_bytes());
        }
    }
    rows
}
