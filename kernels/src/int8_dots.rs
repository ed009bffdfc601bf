//! Block-format weight rows dotted with activation rows quantized to int8, llama.cpp's way of
//! running a quantized product on a CPU. Each activation row is cut into 32-value blocks, each
//! stored as `round(x * (1 / d))` in `-127..=127` with `d = max|x| / 127` (ggml's
//! `quantize_row_q8_0_ref` rounding; the scale stays f32 where ggml keeps an f16) plus the
//! block's sum `d * sum(q)` (for Q4_K's minimums). A weight block's integer quants are
//! multiplied with them in integer arithmetic, exactly, and each block's (or 16-value
//! sub-block's) integer sum is scaled once in f32. Q8_0 rows go two at a time (each
//! activation load serves both; each row's dot is exactly its one-row dot).
//!
//! Every dot is the weight row's dot with the dequantized activations `q * d` (within f32
//! rounding of the per-block scaling), so the only error against the f32 path is the
//! activations' rounding. This trades the f32 path's exactness ([`crate::blocks`]: every product `w * x` rounded in
//! f32, `x` as given) for about half the instructions per weight byte; that rounding is at
//! most `d / 2` per value.

use crate::KernelError;
use crate::blocks::{RowFormat, half_at, half_bits, k_scale_min, q5_0_quants, q6_k_quants};
use crate::math::{F32x4, I32x4, U8x16, floor};

/// Values per activation block.
pub const BLOCK: usize = 32;

/// Q8_0 weight rows dotted together (see [`dot_rows_each`]).
const INTERLEAVED: usize = 2;

/// Activation rows quantized to int8 blocks: `quants[i]` (widened to i16, the width the
/// integer dot takes) is `round(x[i] * (1 / scales[i / 32]))`, `sums[i / 32]` the block's
/// dequantized sum `scale * sum(q)`.
#[derive(Clone, Copy, Debug)]
pub struct Int8Rows<'a> {
    /// One quant per value, in `-127..=127`.
    pub quants: &'a [i16],
    /// One scale per 32 values.
    pub scales: &'a [f32],
    /// One sum of the dequantized values per 32 values.
    pub sums: &'a [f32],
}

/// Where `m` quantized activation rows of `k` values lie in one byte region (the worker pool's
/// layout): the i16 quants at 0, then one f32 scale per 32 values at `scales`, then one f32
/// sum per 32 values at `sums`; `bytes` in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Int8Layout {
    /// Byte offset of the scales.
    pub scales: usize,
    /// Byte offset of the sums.
    pub sums: usize,
    /// Bytes of the whole region.
    pub bytes: usize,
}

impl Int8Layout {
    /// The layout of `m` rows of `k` values, or `None` when `k` is not whole blocks of 32 or
    /// the size overflows.
    pub fn new(m: usize, k: usize) -> Option<Self> {
        if !k.is_multiple_of(BLOCK) {
            return None;
        }
        let values = m.checked_mul(k)?;
        let per_block = (values / BLOCK).checked_mul(4)?;
        let scales = values.checked_mul(2)?;
        let sums = scales.checked_add(per_block)?;
        let bytes = sums.checked_add(per_block)?;
        Some(Self {
            scales,
            sums,
            bytes,
        })
    }
}

impl<'a> Int8Rows<'a> {
    /// Activation row `i` of rows of `k` values (`k` a multiple of 32).
    fn row(&self, i: usize, k: usize) -> Int8Rows<'a> {
        let b = k / BLOCK;
        Int8Rows {
            quants: &self.quants[i * k..(i + 1) * k],
            scales: &self.scales[i * b..(i + 1) * b],
            sums: &self.sums[i * b..(i + 1) * b],
        }
    }
}

/// Quantizes `x` (whole blocks of 32) into `quants` (as many values), `scales` and `sums` (one
/// per block). Rounds half away from zero exactly as the `gguf` package's `np_roundf` (C's
/// `roundf`); a block of zeros gets scale 0; a block holding a NaN or an infinity gets a NaN
/// scale, so every dot that reads it is NaN, as the f32 path's would be.
///
/// # Errors
/// A [`KernelError`] when `x` is not whole blocks or the outputs do not match it.
pub fn quantize_rows(
    x: &[f32],
    quants: &mut [i16],
    scales: &mut [f32],
    sums: &mut [f32],
) -> Result<(), KernelError> {
    let blocks = x.len() / BLOCK;
    if !x.len().is_multiple_of(BLOCK)
        || quants.len() != x.len()
        || scales.len() != blocks
        || sums.len() != blocks
    {
        return Err(KernelError(
            "quantized activations do not match their values",
        ));
    }
    for (((block, q), d), sum) in x
        .chunks_exact(BLOCK)
        .zip(quants.chunks_exact_mut(BLOCK))
        .zip(scales.iter_mut())
        .zip(sums.iter_mut())
    {
        let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let finite = block.iter().all(|v| v.is_finite());
        let scale = amax / 127.0;
        let inverse = if scale == 0.0 || !finite {
            0.0
        } else {
            1.0 / scale
        };
        for (q, &v) in q.iter_mut().zip(block) {
            *q = round_half_away(v * inverse) as i16;
        }
        *d = if finite { scale } else { f32::NAN };
        let integer: i32 = q.iter().map(|&q| i32::from(q)).sum();
        *sum = *d * integer as f32;
    }
    Ok(())
}

/// `np_roundf`: `floor(a) + floor(2 * (a - floor(a)))` with the sign of `v` (exact in f32:
/// `a - floor(a)` and its double are). The quantizer gives it `|v| <= 127`, or NaN when a
/// block's scale is subnormal (`1 / d` overflows): that block's quants are then 0.
#[inline(always)]
fn round_half_away(v: f32) -> f32 {
    let a = v.abs();
    let floored = floor(a);
    let r = floored + floor(2.0 * (a - floored));
    if v < 0.0 { -r } else { r }
}

/// `store(i, r, rows[r] . xs[i] (+ bias[r]))` for every weight row `r` of `format` in `rows`
/// (of `k` values) and every quantized activation row `i` of `xs`, weight row by weight row.
///
/// # Errors
/// A [`KernelError`] when `k` is 0 or not whole blocks of the format and of 32, `rows` is not whole
/// rows, `xs` is not whole rows of `k`, or `bias` does not hold one value per weight row.
pub fn dot_rows_each(
    format: RowFormat,
    rows: &[u8],
    k: usize,
    xs: &Int8Rows<'_>,
    bias: Option<&[f32]>,
    mut store: impl FnMut(usize, usize, f32),
) -> Result<(), KernelError> {
    let (bytes, elements) = (format.block_bytes(), format.block_elements());
    if k == 0 || !k.is_multiple_of(elements) || !k.is_multiple_of(BLOCK) {
        return Err(KernelError("a block-format row is not whole blocks"));
    }
    let row_bytes = k / elements * bytes;
    let m = xs.quants.len() / k;
    let blocks = m * (k / BLOCK);
    if !rows.len().is_multiple_of(row_bytes)
        || xs.quants.len() != m * k
        || xs.scales.len() != blocks
        || xs.sums.len() != blocks
    {
        return Err(KernelError(
            "quantized activations or weights are not whole rows",
        ));
    }
    let count = rows.len() / row_bytes;
    if bias.is_some_and(|bias| bias.len() != count) {
        return Err(KernelError("a bias does not match the block-format rows"));
    }
    let b = |r: usize| bias.map_or(0.0, |b| b[r]);
    // Q8_0 rows [`INTERLEAVED`] at a time: the rows' dots share each activation load, and
    // their independent chains keep more of the CPU busy (each row's sums are the one-row
    // ones). Measured in Chromium (2 Intel cores, 2026-12-04): two rows +40-55% on Gemma's
    // Q8_0 lm_head, four rows less; Q5_0 rows, whose decoding needs more registers, were
    // slower two at a time.
    let grouped = if format == RowFormat::Q8_0 {
        count / INTERLEAVED
    } else {
        0
    };
    for (g, group) in rows
        .chunks_exact(INTERLEAVED * row_bytes)
        .take(grouped)
        .enumerate()
    {
        let group: [&[u8]; INTERLEAVED] =
            core::array::from_fn(|j| &group[j * row_bytes..(j + 1) * row_bytes]);
        for i in 0..m {
            let dots = scaled_blocks(group, bytes, &xs.row(i, k), q8_0_isum);
            for (j, dot) in dots.into_iter().enumerate() {
                let r = INTERLEAVED * g + j;
                store(i, r, dot + b(r));
            }
        }
    }
    for (r, row) in rows
        .chunks_exact(row_bytes)
        .enumerate()
        .skip(INTERLEAVED * grouped)
    {
        for i in 0..m {
            store(i, r, dot_row(format, row, &xs.row(i, k)) + b(r));
        }
    }
    Ok(())
}

/// One weight row of `format` (whole blocks) dotted with one quantized activation row of as
/// many values (blocks beyond the shorter of the two are not read).
fn dot_row(format: RowFormat, row: &[u8], x: &Int8Rows<'_>) -> f32 {
    let bytes = format.block_bytes();
    let mut acc = F32x4::splat(0.0);
    match format {
        RowFormat::Q8_0 => scaled_blocks([row], bytes, x, q8_0_isum)[0],
        RowFormat::Q5_0 => scaled_blocks([row], bytes, x, q5_0_isum)[0],
        RowFormat::Q4_K => {
            let mut minimums = 0.0f32;
            let quants = x.quants.chunks_exact(256);
            let parts = x.scales.chunks_exact(8).zip(x.sums.chunks_exact(8));
            for (block, (q, (d, sums))) in row.chunks_exact(bytes).zip(quants.zip(parts)) {
                minimums += block_q4_k(block, q, (d, sums), &mut acc);
            }
            acc.sum() - minimums
        }
        RowFormat::Q6_K => {
            let quants = x.quants.chunks_exact(256).zip(x.scales.chunks_exact(8));
            for (block, (q, d)) in row.chunks_exact(bytes).zip(quants) {
                block_q6_k(block, q, d, &mut acc);
            }
            acc.sum()
        }
    }
}

/// `acc += f32(isum) * scale`.
#[inline(always)]
fn scale_add(acc: &mut F32x4, isum: I32x4, scale: f32) {
    *acc = acc.add(isum.to_f32().mul(F32x4::splat(scale)));
}

/// The dots of `R` rows of one-scale blocks (Q8_0, Q5_0: an f16 scale at 0, then the quants)
/// with `x`: `sum(d_w * d_x * isum(block, q_x))` over each row's blocks. Four blocks at a
/// time, a row's integer sums are gathered into one vector (a block's sum is exact in f32: at
/// most `32 * 127 * 127`) and scaled by their four `d_w * d_x` at once; a tail of fewer than
/// four blocks is scaled one by one. The rows are interleaved (their activation loads shared),
/// each summed exactly as alone.
#[inline(always)]
fn scaled_blocks<const R: usize>(
    rows: [&[u8]; R],
    bytes: usize,
    x: &Int8Rows<'_>,
    isum: impl Fn(&[u8], &[i16]) -> I32x4,
) -> [f32; R] {
    let mut acc = [F32x4::splat(0.0); R];
    let blocks = rows
        .map(|row| row.len() / bytes)
        .into_iter()
        .min()
        .unwrap_or(0);
    let groups = (blocks / 4)
        .min(x.scales.len() / 4)
        .min(x.quants.len() / (4 * BLOCK));
    for g in 0..groups {
        let q = &x.quants[4 * g * BLOCK..4 * (g + 1) * BLOCK];
        let dx = F32x4::load(&x.scales[4 * g..]);
        for (row, acc) in rows.iter().zip(acc.iter_mut()) {
            let w = &row[4 * g * bytes..4 * (g + 1) * bytes];
            let block = |j: usize| &w[j * bytes..];
            let sums = [0, 1, 2, 3].map(|j| isum(block(j), &q[j * BLOCK..]));
            let dw = F32x4::from_halves([0, 1, 2, 3].map(|j| half_bits(block(j), 0)));
            *acc = acc.add(I32x4::lane_sums(sums).to_f32().mul(dw.mul(dx)));
        }
    }
    let done = 4 * groups;
    let mut dots = [0.0f32; R];
    for ((row, acc), dot) in rows.iter().zip(acc.iter_mut()).zip(dots.iter_mut()) {
        let blocks = row
            .chunks_exact(bytes)
            .zip(x.quants.chunks_exact(BLOCK))
            .zip(x.scales);
        for ((w, q), &d) in blocks.skip(done) {
            scale_add(acc, isum(w, q), half_at(w, 0) * d);
        }
        *dot = acc.sum();
    }
    dots
}

/// Q8_0's integer dot `sum(q_w * q_x)` (lanes to be summed).
#[inline(always)]
fn q8_0_isum(block: &[u8], q: &[i16]) -> I32x4 {
    let lo = U8x16::load(&block[2..]).dot_i16(&q[..16]);
    let hi = U8x16::load(&block[18..]).dot_i16(&q[16..]);
    lo.add(hi)
}

/// Q5_0's integer dot `sum((q_w - 16) * q_x)` (lanes to be summed).
#[inline(always)]
fn q5_0_isum(block: &[u8], q: &[i16]) -> I32x4 {
    let [low, high] = q5_0_quants(block);
    let lo = low.sub(16).dot_i16(&q[..16]);
    let hi = high.sub(16).dot_i16(&q[16..]);
    lo.add(hi)
}

/// Q4_K: per 32-value sub-block `d * sc * d_x * sum(q * q_x)` into `acc`; returns the
/// minimums' part, `sum(dmin * m * sum(x))`, to subtract.
#[inline(always)]
fn block_q4_k(block: &[u8], quants: &[i16], (dx, sums): (&[f32], &[f32]), acc: &mut F32x4) -> f32 {
    let (d, dmin) = (half_at(block, 0), half_at(block, 2));
    let (scales, qs) = (&block[4..16], &block[16..144]);
    let mut minimums = 0.0f32;
    for c in 0..4 {
        // 32 bytes: low nibbles are sub-block 2c, high nibbles 2c + 1.
        let bytes = [U8x16::load(&qs[32 * c..]), U8x16::load(&qs[32 * c + 16..])];
        for (nibble, sub) in [(0, 2 * c), (1, 2 * c + 1)] {
            let (sc, m) = k_scale_min(scales, sub);
            let q = bytes.map(|b| {
                if nibble == 0 {
                    b.and(U8x16::splat(0x0f))
                } else {
                    b.shr(4)
                }
            });
            let xq = &quants[32 * sub..32 * sub + 32];
            let isum = q[0].dot_i16(&xq[..16]).add(q[1].dot_i16(&xq[16..]));
            scale_add(acc, isum, d * f32::from(sc) * dx[sub]);
            minimums += dmin * f32::from(m) * sums[sub];
        }
    }
    minimums
}

/// Q6_K: per 16 values `d * sc * d_x * sum((q - 32) * q_x)`.
#[inline(always)]
fn block_q6_k(block: &[u8], quants: &[i16], dx: &[f32], acc: &mut F32x4) {
    let (scales, d) = (&block[192..208], half_at(block, 208));
    for half in 0..2 {
        for l in [0, 16] {
            for (g, q) in q6_k_quants(block, half, l).into_iter().enumerate() {
                let e = 128 * half + 32 * g + l;
                let isum = q.sub(32).dot_i16(&quants[e..e + 16]);
                let scale = d * f32::from(scales[e / 16] as i8) * dx[e / BLOCK];
                scale_add(acc, isum, scale);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rows::random_rows;
    use std::vec::Vec;

    #[test]
    fn rounding_is_half_away_from_zero_and_never_carries_a_near_half_up() {
        assert_eq!(round_half_away(2.5), 3.0);
        assert_eq!(round_half_away(-2.5), -3.0);
        assert_eq!(round_half_away(0.499_999_97), 0.0);
        assert_eq!(round_half_away(-0.0), 0.0);
        assert_eq!(round_half_away(127.0), 127.0);
    }

    #[test]
    fn zero_and_non_finite_blocks() {
        let mut x = std::vec![0.0f32; 64];
        x[40] = f32::INFINITY;
        let (mut q, mut d, mut s) = (std::vec![1i16; 64], [1.0f32; 2], [0.0f32; 2]);
        quantize_rows(&x, &mut q, &mut d, &mut s).unwrap();
        assert_eq!(d[0], 0.0);
        assert!(q[..32].iter().all(|&q| q == 0));
        assert!(d[1].is_nan());
        assert!(quantize_rows(&x[..40], &mut q[..40], &mut d, &mut s).is_err());
    }

    /// `x` (rows of `k` values) quantized (quants, scales, sums) and every dot of the `format`
    /// `rows` with its rows, as `out[i * n + r]` for activation row `i` and weight row `r`.
    fn quantized_dots(
        format: RowFormat,
        rows: &[u8],
        k: usize,
        x: &[f32],
    ) -> (Vec<i16>, Vec<f32>, Vec<f32>, Vec<f32>) {
        let (m, n) = (
            x.len() / k,
            rows.len() / (k / format.block_elements() * format.block_bytes()),
        );
        let (mut q, mut d, mut s) = (
            std::vec![0i16; m * k],
            std::vec![0f32; m * k / 32],
            std::vec![0f32; m * k / 32],
        );
        quantize_rows(x, &mut q, &mut d, &mut s).unwrap();
        let xs = Int8Rows {
            quants: &q,
            scales: &d,
            sums: &s,
        };
        let mut out = std::vec![f32::NAN; m * n];
        dot_rows_each(format, rows, k, &xs, None, |i, r, v| out[i * n + r] = v).unwrap();
        (q, d, s, out)
    }

    #[test]
    fn interleaved_rows_are_each_the_one_row_dot() {
        // Q8_0 rows go INTERLEAVED at a time: 5 rows of 5 blocks (one group of four and a
        // tail of one), two activation rows, each dot bit for bit the one-row dot.
        let (k, n, m) = (160, 5, 2);
        let rows = random_rows(RowFormat::Q8_0, n, k, 0x1234_5678);
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i as f32) * 0.31).cos() * 3.0)
            .collect();
        let (q, d, s, out) = quantized_dots(RowFormat::Q8_0, &rows, k, &x);
        let xs = Int8Rows {
            quants: &q,
            scales: &d,
            sums: &s,
        };
        for (r, row) in rows.chunks_exact(rows.len() / n).enumerate() {
            for i in 0..m {
                let alone = dot_row(RowFormat::Q8_0, row, &xs.row(i, k));
                assert_eq!(out[i * n + r].to_bits(), alone.to_bits(), "[{i}, {r}]");
            }
        }
    }

    #[test]
    fn dots_are_the_integer_dots_times_the_scales() {
        // Every format against dequantized weights dotted (in f64) with the dequantized
        // activations: the integer sums are exact, so only f32 scaling rounds.
        for format in [
            RowFormat::Q8_0,
            RowFormat::Q5_0,
            RowFormat::Q4_K,
            RowFormat::Q6_K,
        ] {
            let (k, n, m) = (512, 3, 2);
            let rows = random_rows(format, n, k, 0x9e37_79b9 + format.code());
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i as f32) * 0.77).sin() * 2.5)
                .collect();
            let (q, d, _, out) = quantized_dots(format, &rows, k, &x);
            let mut dense = std::vec![0f32; k];
            for r in 0..n {
                let row = &rows[r * rows.len() / n..(r + 1) * rows.len() / n];
                for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
                    let e = format.block_elements();
                    // The f32 path dequantizes exactly: read each value back as a one-hot dot.
                    for j in 0..e {
                        let mut onehot = std::vec![0f32; e];
                        onehot[j] = 1.0;
                        let mut v = [0f32];
                        crate::blocks::dot_rows(format, block, &onehot, None, &mut v).unwrap();
                        dense[b * e + j] = v[0];
                    }
                }
                for i in 0..m {
                    let (mut want, mut magnitude) = (0f64, 0f64);
                    for j in 0..k {
                        let xv = f64::from(q[i * k + j]) * f64::from(d[(i * k + j) / 32]);
                        want += f64::from(dense[j]) * xv;
                        magnitude += (f64::from(dense[j]) * xv).abs();
                    }
                    let got = f64::from(out[i * n + r]);
                    assert!(
                        (got - want).abs() <= 1e-5 * magnitude + 1e-6,
                        "{format:?} [{i}, {r}]: {got} vs {want}"
                    );
                }
            }
        }
    }
}
