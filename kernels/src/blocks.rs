//! ggml block-format weight rows dotted with an f32 activation row in vector registers
//! ([`U8x16`] / [`F32x4`]: simd128 in the browser, arrays natively): each block is decoded to
//! exactly the values the reference dequantizer gives (int8 -> i16x8 -> i32x4 -> f32x4, then
//! the format's scale and min in f32; Q8_0 and Q5_0 apply their one scale per block to the
//! block's dot instead, reduced to one four-lane vector first) and multiplied into four-lane
//! accumulators held in registers, so each weight byte is read once and nothing is written. [`dot_rows`] is the decode step's matrix-vector product
//! over a run of rows (a worker's share is a run of rows); [`dot_rows_each`] the same for
//! several activation rows, each weight row read once for all of them. Q8_0 rows go two at a
//! time (each activation load serves both; each row's dot is exactly its one-row dot): +20%
//! with f32 and +40-55% with int8 activations on Gemma's Q8_0 lm_head in Chromium; the other
//! formats go one row at a time.

use crate::KernelError;
use crate::math::{F32x4, U8x16, half_to_f32};

/// The block formats with a register row dot (the decode step's weights in the GGUF files
/// the runtime serves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)] // ggml's names
pub enum RowFormat {
    /// 32 values in 34 bytes: an f16 scale and 32 int8 quants.
    Q8_0,
    /// 32 values in 22 bytes: an f16 scale, 32 fifth bits, 16 bytes of nibbles.
    Q5_0,
    /// 256 values in 144 bytes: f16 scale and min, 6-bit sub-block scales and mins, nibbles.
    Q4_K,
    /// 256 values in 210 bytes: low nibbles, 2-bit highs, int8 sub-block scales, f16 scale.
    Q6_K,
}

impl RowFormat {
    /// The format's code at the kernel module's boundary (`wd_dot_rows`, the pool's JS).
    pub fn code(self) -> u32 {
        match self {
            Self::Q8_0 => 0,
            Self::Q5_0 => 1,
            Self::Q4_K => 2,
            Self::Q6_K => 3,
        }
    }

    /// The format of `code` (see [`RowFormat::code`]).
    pub fn from_code(code: u32) -> Option<Self> {
        [Self::Q8_0, Self::Q5_0, Self::Q4_K, Self::Q6_K]
            .into_iter()
            .find(|format| format.code() == code)
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            Self::Q8_0 => 34,
            Self::Q5_0 => 22,
            Self::Q4_K => 144,
            Self::Q6_K => 210,
        }
    }

    /// Values per block.
    pub fn block_elements(self) -> usize {
        match self {
            Self::Q8_0 | Self::Q5_0 => 32,
            Self::Q4_K | Self::Q6_K => 256,
        }
    }
}

/// `out[r] = rows[r] . x (+ bias[r])` for `out.len()` rows of `format` in `rows`, each
/// holding `x.len()` values.
///
/// # Errors
/// A [`KernelError`] when `x` is not whole blocks, or `rows` or `bias` do not hold
/// `out.len()` rows.
pub fn dot_rows(
    format: RowFormat,
    rows: &[u8],
    x: &[f32],
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let count = out.len();
    if row_count(format, rows, x.len())? != count {
        return Err(KernelError("block-format rows do not match the output"));
    }
    dot_rows_each(format, rows, x.len(), x, bias, |_, r, value| {
        if let Some(o) = out.get_mut(r) {
            *o = value;
        }
    })
}

/// `store(i, r, rows[r] . xs[i] (+ bias[r]))` for every weight row `r` of `format` in `rows`
/// (of `k` values) and every activation row `i` of `xs` (`k` values each), weight row by weight
/// row: each weight row is read from memory once, for all activation rows, and each value is
/// summed exactly as [`dot_rows`] sums it.
///
/// # Errors
/// A [`KernelError`] when `k` is not whole blocks, `rows` is not whole rows, `xs` is not whole
/// rows of `k`, or `bias` does not hold one value per weight row.
pub fn dot_rows_each(
    format: RowFormat,
    rows: &[u8],
    k: usize,
    xs: &[f32],
    bias: Option<&[f32]>,
    mut store: impl FnMut(usize, usize, f32),
) -> Result<(), KernelError> {
    let count = row_count(format, rows, k)?;
    if k == 0 || !xs.len().is_multiple_of(k) {
        if k == 0 && xs.is_empty() {
            return Ok(());
        }
        return Err(KernelError("activations are not whole rows"));
    }
    if bias.is_some_and(|bias| bias.len() != count) {
        return Err(KernelError("a bias does not match the block-format rows"));
    }
    let row_bytes = rows.len() / count.max(1);
    let b = |r: usize| bias.map_or(0.0, |b| b[r]);
    // Q8_0 rows two at a time: both rows' dots share each activation load, and their
    // independent chains keep more of the CPU busy (each row is summed exactly as alone).
    // Measured in Chromium (2 Intel cores, 2026-12-04): +20% on Gemma's Q8_0 lm_head; no
    // change for Q5_0, Q4_K or Q6_K rows, which stay one at a time. Since each row's
    // accumulator is one named vector (not an array walked by a loop, which LLVM left in the
    // wasm stack: a load and a store per block) and each block's dot is reduced before its
    // scale: 3.1-3.2 -> 3.8-4.1 GB/s (Q5_0 2.0 -> 2.1-2.2).
    let pairs = if format == RowFormat::Q8_0 {
        count / 2
    } else {
        0
    };
    for (p, two) in rows
        .chunks_exact(2 * row_bytes.max(1))
        .take(pairs)
        .enumerate()
    {
        let (first, second) = two.split_at(row_bytes);
        for (i, x) in xs.chunks_exact(k).enumerate() {
            let [d0, d1] = dot_rows_q8_0([first, second], x);
            store(i, 2 * p, d0 + b(2 * p));
            store(i, 2 * p + 1, d1 + b(2 * p + 1));
        }
    }
    for (r, row) in rows
        .chunks_exact(row_bytes.max(1))
        .take(count)
        .enumerate()
        .skip(2 * pairs)
    {
        for (i, x) in xs.chunks_exact(k).enumerate() {
            store(i, r, dot_row(format, row, x) + b(r));
        }
    }
    Ok(())
}

/// Two Q8_0 rows (whole blocks) each dotted with `x`, interleaved block by block; each row's
/// dot is exactly [`dot_row`]'s. The accumulators are two named locals, not an array walked by
/// a loop: so they stay in registers (indexed through a loop over the rows, LLVM kept them in
/// the wasm stack, a load and a store of each per block).
#[inline(always)]
fn dot_rows_q8_0(rows: [&[u8]; 2], x: &[f32]) -> [f32; 2] {
    let (bytes, elements) = (
        RowFormat::Q8_0.block_bytes(),
        RowFormat::Q8_0.block_elements(),
    );
    let [first, second] = rows;
    let blocks = (first.len() / bytes)
        .min(second.len() / bytes)
        .min(x.len() / elements);
    let mut acc0 = F32x4::splat(0.0);
    let mut acc1 = F32x4::splat(0.0);
    for b in 0..blocks {
        let x = &x[b * elements..(b + 1) * elements];
        let span = b * bytes..(b + 1) * bytes;
        block_q8_0(&first[span.clone()], x, &mut acc0);
        block_q8_0(&second[span], x, &mut acc1);
    }
    [acc0.sum(), acc1.sum()]
}

/// How many rows of `k` values `rows` holds in `format`.
fn row_count(format: RowFormat, rows: &[u8], k: usize) -> Result<usize, KernelError> {
    let (bytes, elements) = (format.block_bytes(), format.block_elements());
    if !k.is_multiple_of(elements) {
        return Err(KernelError("a block-format row is not whole blocks"));
    }
    let row_bytes = k / elements * bytes;
    match (row_bytes, rows.len()) {
        (0, 0) => Ok(0),
        (0, _) => Err(KernelError("block-format rows of no values hold bytes")),
        (row_bytes, len) if len.is_multiple_of(row_bytes) => Ok(len / row_bytes),
        _ => Err(KernelError("block-format bytes are not whole rows")),
    }
}

/// One weight row of `format` (`row`: its whole blocks) dotted with `x` (as many values),
/// block by block in registers (blocks beyond the shorter of the two are not read).
pub fn dot_row(format: RowFormat, row: &[u8], x: &[f32]) -> f32 {
    let (bytes, elements) = (format.block_bytes(), format.block_elements());
    let blocks = row.chunks_exact(bytes).zip(x.chunks_exact(elements));
    // One-scale blocks: one accumulator (each block's dot is reduced to four lanes first).
    let mut one = F32x4::splat(0.0);
    // Blocks with sub-block scales: four.
    let mut acc = [F32x4::splat(0.0); 4];
    match format {
        RowFormat::Q8_0 => blocks.for_each(|(b, x)| block_q8_0(b, x, &mut one)),
        RowFormat::Q5_0 => blocks.for_each(|(b, x)| block_q5_0(b, x, &mut one)),
        RowFormat::Q4_K => blocks.for_each(|(b, x)| block_q4_k(b, x, &mut acc)),
        RowFormat::Q6_K => blocks.for_each(|(b, x)| block_q6_k(b, x, &mut acc)),
    }
    match format {
        RowFormat::Q8_0 | RowFormat::Q5_0 => one.sum(),
        RowFormat::Q4_K | RowFormat::Q6_K => acc[0].add(acc[1]).add(acc[2].add(acc[3])).sum(),
    }
}

/// `acc[g] += w[g] * x[4g..4g + 4]` for sixteen decoded weights and their activations.
#[inline(always)]
fn mul_add16(acc: &mut [F32x4; 4], w: [F32x4; 4], x: &[f32]) {
    for (g, (a, w)) in acc.iter_mut().zip(w).enumerate() {
        *a = a.add(w.mul(F32x4::load(&x[4 * g..])));
    }
}

/// The f16 bit pattern at `at` of a block.
#[inline(always)]
pub(crate) fn half_bits(block: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([block[at], block[at + 1]])
}

/// The f16 at `at` of a block, widened exactly ([`half_to_f32`]).
#[inline(always)]
pub(crate) fn half_at(block: &[u8], at: usize) -> f32 {
    half_to_f32(half_bits(block, at))
}

/// Q8_0 (34 bytes: d, 32 int8 quants): value `q * d`, taken as `d * sum(q * x)` per block (the
/// same products, associated differently: the integer quants are exact in f32).
#[inline(always)]
fn block_q8_0(block: &[u8], x: &[f32], acc: &mut F32x4) {
    let low = U8x16::load(&block[2..]).to_f32_signed();
    let high = U8x16::load(&block[18..]).to_f32_signed();
    scale_add_block(acc, block_sum(low, high, x), half_at(block, 0));
}

/// Q5_0 (22 bytes: d, 32 fifth bits, 16 bytes of nibbles): value `d * (q - 16)`, taken as
/// `d * sum((q - 16) * x)` per block.
#[inline(always)]
fn block_q5_0(block: &[u8], x: &[f32], acc: &mut F32x4) {
    let [low, high] = q5_0_quants(block).map(|q| q.sub(16).to_f32_signed());
    scale_add_block(acc, block_sum(low, high, x), half_at(block, 0));
}

/// A 32-value block's dot with `x` (32 values) in four lanes: its values `0..16` (`low`) and
/// `16..32` (`high`) times theirs, the two products of each lane added, then the four groups.
#[inline(always)]
fn block_sum(low: [F32x4; 4], high: [F32x4; 4], x: &[f32]) -> F32x4 {
    let pair = |g: usize| {
        let lo = low[g].mul(F32x4::load(&x[4 * g..]));
        lo.add(high[g].mul(F32x4::load(&x[16 + 4 * g..])))
    };
    pair(0).add(pair(1)).add(pair(2).add(pair(3)))
}

/// `acc += d * sum` (a one-scale block's dot, `sum`, scaled once).
#[inline(always)]
fn scale_add_block(acc: &mut F32x4, sum: F32x4, d: f32) {
    *acc = acc.add(sum.mul(F32x4::splat(d)));
}

/// A Q5_0 block's 32 quants (`0..32`, before the `- 16`): values `0..16` and `16..32`.
#[inline(always)]
pub(crate) fn q5_0_quants(block: &[u8]) -> [U8x16; 2] {
    let qh = u32::from_le_bytes([block[2], block[3], block[4], block[5]]);
    let qs = U8x16::load(&block[6..]);
    let low = qs
        .and(U8x16::splat(0x0f))
        .or(U8x16::from_bits(qh as u16, 0x10));
    let high = qs.shr(4).or(U8x16::from_bits((qh >> 16) as u16, 0x10));
    [low, high]
}

/// Four 16-value groups of a Q6_K block's quants (`0..64`, before the `- 32`): values
/// `128 half + 32 g + l .. + 16` for `g = 0..4` (`half` 0 or 1, `l` 0 or 16).
#[inline(always)]
pub(crate) fn q6_k_quants(block: &[u8], half: usize, l: usize) -> [U8x16; 4] {
    let (ql, qh) = (&block[..128], &block[128..192]);
    let (low, three) = (U8x16::splat(0x0f), U8x16::splat(0x03));
    let a = U8x16::load(&ql[64 * half + l..]);
    let b = U8x16::load(&ql[64 * half + 32 + l..]);
    let h = U8x16::load(&qh[32 * half + l..]);
    [
        a.and(low).or(h.and(three).shl(4)),
        b.and(low).or(h.shr(2).and(three).shl(4)),
        a.shr(4).or(h.shr(4).and(three).shl(4)),
        b.shr(4).or(h.shr(6).shl(4)),
    ]
}

/// Q4_K (144 bytes: d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles): value
/// `(d * sc) * q - dmin * m` per 32-value sub-block.
#[inline(always)]
fn block_q4_k(block: &[u8], x: &[f32], acc: &mut [F32x4; 4]) {
    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
    let (scales, qs) = (&block[4..16], &block[16..144]);
    for c in 0..4 {
        // 32 bytes: low nibbles are sub-block 2c, high nibbles 2c + 1.
        for (nibble, sub) in [(0, 2 * c), (1, 2 * c + 1)] {
            let (sc, m) = k_scale_min(scales, sub);
            let scale = F32x4::splat(d * f32::from(sc));
            let min = F32x4::splat(dmin * f32::from(m));
            for h in 0..2 {
                let bytes = U8x16::load(&qs[32 * c + 16 * h..]);
                let q = if nibble == 0 {
                    bytes.and(U8x16::splat(0x0f))
                } else {
                    bytes.shr(4)
                };
                let w = q.to_f32_unsigned().map(|q| scale.mul(q).sub(min));
                mul_add16(acc, w, &x[32 * sub + 16 * h..]);
            }
        }
    }
}

/// Q6_K (210 bytes: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales, d): value
/// `(d * sc) * (q - 32)` per 16 values.
#[inline(always)]
fn block_q6_k(block: &[u8], x: &[f32], acc: &mut [F32x4; 4]) {
    let (scales, d) = (&block[192..208], half_at(block, 208));
    for half in 0..2 {
        for l in [0, 16] {
            for (g, q) in q6_k_quants(block, half, l).into_iter().enumerate() {
                let e = 128 * half + 32 * g + l;
                let scale = F32x4::splat(d * f32::from(scales[e / 16] as i8));
                let w = q.sub(32).to_f32_signed().map(|q| scale.mul(q));
                mul_add16(acc, w, &x[e..]);
            }
        }
    }
}

/// The 6-bit scale and min of sub-block `sub` (0..8) of a Q4_K / Q5_K block, from its 12 packed
/// bytes: sub-blocks 0..4 use the low 6 bits of bytes 0..4 (scales) and 4..8 (mins); 4..8 take
/// their low 4 bits from bytes 8..12 and their top 2 bits from the top of bytes 0..8.
pub fn k_scale_min(scales: &[u8], sub: usize) -> (u8, u8) {
    if sub < 4 {
        (scales[sub] & 0x3f, scales[sub + 4] & 0x3f)
    } else {
        let packed = scales[sub + 4];
        (
            (packed & 0x0f) | ((scales[sub - 4] >> 2) & 0x30),
            (packed >> 4) | ((scales[sub] >> 2) & 0x30),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_codes_round_trip_and_unknown_codes_are_refused() {
        for format in [
            RowFormat::Q8_0,
            RowFormat::Q5_0,
            RowFormat::Q4_K,
            RowFormat::Q6_K,
        ] {
            assert_eq!(RowFormat::from_code(format.code()), Some(format));
        }
        assert_eq!(RowFormat::from_code(4), None);
    }

    #[test]
    fn paired_q8_0_rows_are_each_the_one_row_dot() {
        // 5 rows (two pairs and one alone) of 3 blocks, two activation rows: bit for bit.
        let (k, n, m) = (96, 5, 2);
        let rows = crate::test_rows::random_rows(RowFormat::Q8_0, n, k, 0x0bad_cafe);
        let x: std::vec::Vec<f32> = (0..m * k).map(|i| ((i as f32) * 0.53).sin()).collect();
        let mut out = std::vec![f32::NAN; m * n];
        dot_rows_each(RowFormat::Q8_0, &rows, k, &x, None, |i, r, v| {
            out[i * n + r] = v;
        })
        .unwrap();
        for (r, row) in rows.chunks_exact(rows.len() / n).enumerate() {
            for i in 0..m {
                let alone = dot_row(RowFormat::Q8_0, row, &x[i * k..(i + 1) * k]);
                assert_eq!(out[i * n + r].to_bits(), alone.to_bits(), "[{i}, {r}]");
            }
        }
    }
}
