//! `Linear` on the CPU: the weight stays in its file format (no f32 copy of the tensor). Weight
//! rows are decoded four at a time into a small reused scratch buffer (with `crate::quant`'s
//! rules, so values are bit-identical to the reference dequantizer) and each decoded group is
//! dotted with every activation row, so `M > 1` pays the decode once per weight row. The dots
//! run four weight rows against one activation row in eight-lane accumulators (simd128 in the
//! browser, SSE natively: LLVM vectorises the fixed-size lane arrays).
//!
//! One activation row (the decode step: every layer's projections and the lm_head) over Q8_0,
//! Q5_0, Q4_K or Q6_K skips the decode buffer: `webdelegate_kernels::blocks::dot_rows` dots
//! each block in vector registers, decoded to exactly the values `crate::quant` gives, so each
//! weight byte is read once and nothing is written. Activations stay f32 unless the program
//! was initialised with the `activations = "int8"` compile spec: then every activation row of
//! a Q8_0 / Q5_0 / Q4_K / Q6_K `linear` (any `M`) is quantized to int8 blocks and dotted with
//! the weight's integer quants (`webdelegate_kernels::int8_dots`), on the pool too.
//!
//! A 2-D f32 weight that only `linear`s (and transposed matmuls) read is packed at init
//! (`weights.rs`) and runs through the blocked GEMM instead, as a matmul with its `b`
//! transposed: the path of encoder-shaped work (`M` in the hundreds), e.g. the `linear`s of a
//! model exported from PyTorch.

use crate::backends::cpu::frame::{CpuOp, Frame, RunContext, Slot};
use crate::backends::cpu::gemm::{self, RightOperand, kernel_error};
use crate::backends::cpu::values::{Values, ValuesRef};
use crate::error::{Error, Result};
use crate::program::TensorId;
use crate::program::geometry::MatMulGeometry;
use crate::program::ops::Linear;
use crate::quant::BlockFormat;
use webdelegate_kernels::blocks::{self, RowFormat};
use webdelegate_kernels::int8_dots;
use webdelegate_kernels::math::{LANES, lane_dot};

/// Weight rows decoded together (each decoded group is reused by every activation row).
const ROW_GROUP: usize = 4;

/// A weight matrix `[N, K]` as the kernels read it: f32 values, or a block format's bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WeightRows<'a> {
    /// Dense f32, `N * K` values.
    F32(&'a [f32]),
    /// ggml blocks, `N` rows of `format.row_bytes(K)` bytes.
    Blocks(BlockFormat, &'a [u8]),
}

impl WeightRows<'_> {
    /// Checks that the storage holds `n` rows of `k` values.
    ///
    /// # Errors
    /// `Internal` when it does not (validation and loading rule that out).
    pub(crate) fn check(&self, n: usize, k: usize) -> Result<()> {
        let (have, want) = match self {
            Self::F32(values) => (values.len(), n.checked_mul(k)),
            Self::Blocks(format, bytes) => (
                bytes.len(),
                format
                    .tensor_bytes(n as u64, k as u64)
                    .and_then(|b| usize::try_from(b).ok()),
            ),
        };
        if want != Some(have) {
            return Err(Error::internal(format!(
                "a [{n}, {k}] weight is stored in {have} elements or bytes"
            )));
        }
        Ok(())
    }

    /// Row `row` (of `k` values) written into `out` (`k` long): copied, or decoded.
    ///
    /// # Errors
    /// `Internal` for a row out of range or an `out` of the wrong length.
    pub(crate) fn decode_row_into(&self, row: usize, k: usize, out: &mut [f32]) -> Result<()> {
        match self {
            Self::F32(values) => {
                let values = values
                    .get(row * k..(row + 1) * k)
                    .filter(|v| v.len() == out.len())
                    .ok_or_else(|| Error::internal("table row out of range"))?;
                out.copy_from_slice(values);
                Ok(())
            }
            Self::Blocks(..) => self.row(row, k, out).map(|_| ()),
        }
    }

    /// Row `row` (of `k` values) decoded into `out` (`k` long), or borrowed when it is f32.
    ///
    /// # Errors
    /// `Internal` for a row out of range or an `out` of the wrong length.
    pub(crate) fn row<'s>(&'s self, row: usize, k: usize, out: &'s mut [f32]) -> Result<&'s [f32]> {
        match self {
            Self::F32(values) => values
                .get(row * k..(row + 1) * k)
                .ok_or_else(|| Error::internal("weight row out of range")),
            Self::Blocks(format, bytes) => {
                let row_bytes = format.block_bytes() * (k / format.block_elements());
                let blocks = bytes
                    .get(row * row_bytes..(row + 1) * row_bytes)
                    .ok_or_else(|| Error::internal("weight row out of range"))?;
                format.dequantize(blocks, out)?;
                Ok(out)
            }
        }
    }
}

/// The shape of one linear product: `m` activation rows of `k`, `n` outputs per row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    /// Activation rows.
    pub m: usize,
    /// Row length (the reduction).
    pub k: usize,
    /// Outputs per row (weight rows).
    pub n: usize,
}

/// `out[m, n] = x[m, :] . w[n, :] (+ bias[n])`.
///
/// # Errors
/// `Internal` when lengths disagree (validation rules that out).
pub(crate) fn linear(
    x: &[f32],
    weight: WeightRows<'_>,
    bias: Option<&[f32]>,
    Dims { m, k, n }: Dims,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) -> Result<()> {
    weight.check(n, k)?;
    if m.checked_mul(k) != Some(x.len())
        || m.checked_mul(n) != Some(out.len())
        || bias.is_some_and(|b| b.len() != n)
    {
        return Err(Error::internal("linear operands have the wrong lengths"));
    }
    if n == 0 {
        return Ok(());
    }
    if let (1, true, WeightRows::Blocks(format, bytes)) = (m, k > 0, weight)
        && let Some(format) = format.row_format()
    {
        // Decode (one activation row): no row to reuse, so dot the blocks in registers.
        return blocks::dot_rows(format, bytes, x, bias, out).map_err(kernel_error);
    }
    if k == 0 {
        for row in out.chunks_exact_mut(n) {
            for (c, o) in row.iter_mut().enumerate() {
                *o = bias.map_or(0.0, |bias| bias[c]);
            }
        }
        return Ok(());
    }
    scratch.clear();
    scratch.resize(ROW_GROUP * k, 0.0);
    let mut n0 = 0;
    while n0 < n {
        let rows = ROW_GROUP.min(n - n0);
        let mut decoded: [&[f32]; ROW_GROUP] = [&[]; ROW_GROUP];
        for (r, chunk) in scratch.chunks_exact_mut(k).take(rows).enumerate() {
            decoded[r] = weight.row(n0 + r, k, chunk)?;
        }
        for (xm, target) in x.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
            if rows == ROW_GROUP {
                let sums = dot4(&decoded, xm);
                for (r, sum) in sums.into_iter().enumerate() {
                    target[n0 + r] = sum + bias.map_or(0.0, |b| b[n0 + r]);
                }
            } else {
                for (r, w) in decoded.iter().take(rows).enumerate() {
                    target[n0 + r] = lane_dot(w, xm) + bias.map_or(0.0, |b| b[n0 + r]);
                }
            }
        }
        n0 += rows;
    }
    Ok(())
}

/// `out[m, n] = x[m, :] . w[n, :] (+ bias[n])` with each activation row quantized to int8
/// first (`webdelegate_kernels::int8_dots`), every weight row read once for all of them.
///
/// # Errors
/// `Internal` when lengths disagree (validation rules that out).
fn int8_linear(
    x: &[f32],
    (format, rows): (RowFormat, &[u8]),
    bias: Option<&[f32]>,
    Dims { m, k, n }: Dims,
    out: &mut [f32],
) -> Result<()> {
    if m.checked_mul(k) != Some(x.len()) || m.checked_mul(n) != Some(out.len()) {
        return Err(Error::internal("linear operands have the wrong lengths"));
    }
    let blocks = x.len() / int8_dots::BLOCK;
    let (mut quants, mut scales, mut sums) =
        (vec![0i16; x.len()], vec![0f32; blocks], vec![0f32; blocks]);
    int8_dots::quantize_rows(x, &mut quants, &mut scales, &mut sums).map_err(kernel_error)?;
    let xs = int8_dots::Int8Rows {
        quants: &quants,
        scales: &scales,
        sums: &sums,
    };
    int8_dots::dot_rows_each(format, rows, k, &xs, bias, |i, r, value| {
        if let Some(o) = out.get_mut(i * n + r) {
            *o = value;
        }
    })
    .map_err(kernel_error)
}

/// Four rows of `w` dotted with `x` at once (`x` is loaded once for all four), eight lanes each.
fn dot4(w: &[&[f32]; ROW_GROUP], x: &[f32]) -> [f32; ROW_GROUP] {
    let len = x.len();
    let whole = len - len % LANES;
    let mut acc = [[0.0f32; LANES]; ROW_GROUP];
    let rows = [
        &w[0][..whole],
        &w[1][..whole],
        &w[2][..whole],
        &w[3][..whole],
    ];
    for (i, xl) in x[..whole].chunks_exact(LANES).enumerate() {
        let at = i * LANES;
        for (r, lanes) in acc.iter_mut().enumerate() {
            let wl = &rows[r][at..at + LANES];
            for l in 0..LANES {
                lanes[l] += wl[l] * xl[l];
            }
        }
    }
    let mut sums = [0.0f32; ROW_GROUP];
    for (r, sum) in sums.iter_mut().enumerate() {
        let tail: f32 = w[r][whole..]
            .iter()
            .zip(&x[whole..])
            .map(|(a, b)| a * b)
            .sum();
        *sum = acc[r].iter().sum::<f32>() + tail;
    }
    sums
}

impl CpuOp for Linear {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        let k = f.last_dim(self.x)?;
        let n = f.last_dim(self.out)?;
        let numel = f.numel(self.out)?;
        let m = numel.checked_div(n).unwrap_or(0);
        let bias = self.bias.map(|id| f.f32(id)).transpose()?;
        // int8 activations need a kernel for the format (every `RowFormat`) and whole blocks.
        let int8 = cx.int8_activations && k > 0 && k.is_multiple_of(int8_dots::BLOCK);
        if let Some(threaded) = cx.threaded.filter(|t| t.has_blocks(self.weight)) {
            let (x, shared) = (f.operand(self.x)?, &mut cx.scratch.shared);
            let out = threaded.linear(shared, self.weight, (x, bias), (m, k, n), int8)?;
            return Ok(Slot::Shared(out));
        }
        // An f32 weight packed at init (see `weights.rs`): the blocked GEMM, `x [m, k]` times
        // the weight's rows transposed, on the pool when the weight lives there.
        let packed = cx.packed.get(self.weight as usize).and_then(Option::as_ref);
        if packed.is_some() || cx.threaded.is_some_and(|t| t.has_packed(self.weight)) {
            let geometry = MatMulGeometry::new(&[m, k], &[n, k], false, true)?;
            if let Some(threaded) = cx.threaded.filter(|t| t.has_packed(self.weight)) {
                let (x, shared) = (f.operand(self.x)?, &mut cx.scratch.shared);
                let out = threaded.matmul(shared, self.weight, (x, bias), &geometry, numel)?;
                return Ok(Slot::Shared(out));
            }
            if let Some(packed) = packed {
                let mut out = cx.scratch.pool.take(numel)?;
                let right = RightOperand::Packed(packed);
                gemm::matmul(
                    f.f32(self.x)?,
                    right,
                    bias,
                    &geometry,
                    &mut out,
                    &mut cx.scratch.gemm,
                )?;
                return Ok(Slot::Owned(Values::F32(out)));
            }
        }
        let mut out = cx.scratch.pool.take(numel)?;
        let weight = weight_rows(f, self.weight)?;
        if let (true, WeightRows::Blocks(format, bytes)) = (int8, weight)
            && let Some(format) = format.row_format()
        {
            let dims = Dims { m, k, n };
            int8_linear(f.f32(self.x)?, (format, bytes), bias, dims, &mut out)?;
            return Ok(Slot::Owned(Values::F32(out)));
        }
        let mut scratch = cx.scratch.pool.take(ROW_GROUP * k)?;
        let dims = Dims { m, k, n };
        let result = linear(f.f32(self.x)?, weight, bias, dims, &mut out, &mut scratch);
        cx.scratch.pool.recycle(Values::F32(scratch));
        result?;
        Ok(Slot::Owned(Values::F32(out)))
    }
}

/// The weight `id` as rows (f32 values or a block format's bytes).
///
/// # Errors
/// `Internal` for another dtype (validation rules that out).
pub(crate) fn weight_rows<'f>(f: &'f Frame<'_>, id: TensorId) -> Result<WeightRows<'f>> {
    match f.get(id)? {
        ValuesRef::F32(values) => Ok(WeightRows::F32(values)),
        ValuesRef::Blocks(format, bytes) => Ok(WeightRows::Blocks(format, bytes)),
        other => Err(Error::internal(format!(
            "a weight of {} reached a kernel that decodes f32 or block formats",
            other.dtype().name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic byte stream (xorshift) for random blocks.
    fn bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    /// `rows` random rows of `k` values with ordinary scales.
    fn blocks(format: BlockFormat, rows: usize, k: usize, seed: u64) -> Vec<u8> {
        let len = format.tensor_bytes(rows as u64, k as u64).unwrap() as usize;
        crate::quant::random_blocks(format, len, seed)
    }

    /// Every format against the reference dequantizer plus an f64 dot, for `M` of 1 and 3, `N`
    /// not a multiple of the row group, with a bias: within `1e-5 * sum |w||x|`.
    #[test]
    fn every_format_matches_dequantize_then_dot() {
        for format in BlockFormat::ALL {
            let (n, k) = (
                7,
                if format.block_elements() == 256 {
                    512
                } else {
                    96
                },
            );
            let raw = blocks(format, n, k, format.ggml_id() as u64 + 11);
            let mut dense = vec![0.0f32; n * k];
            format.dequantize(&raw, &mut dense).unwrap();
            for m in [1, 3] {
                let x: Vec<f32> = bytes(m * k, 5)
                    .iter()
                    .map(|&b| f32::from(b) / 64.0 - 2.0)
                    .collect();
                let bias: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
                let mut out = vec![f32::NAN; m * n];
                let mut scratch = Vec::new();
                let weight = WeightRows::Blocks(format, &raw);
                let dims = Dims { m, k, n };
                linear(&x, weight, Some(&bias), dims, &mut out, &mut scratch).unwrap();
                for r in 0..m {
                    for c in 0..n {
                        let (w, xr) = (&dense[c * k..(c + 1) * k], &x[r * k..(r + 1) * k]);
                        let want: f64 = w
                            .iter()
                            .zip(xr)
                            .map(|(&a, &b)| f64::from(a) * f64::from(b))
                            .sum::<f64>()
                            + f64::from(bias[c]);
                        let scale: f64 = w
                            .iter()
                            .zip(xr)
                            .map(|(&a, &b)| f64::from(a.abs()) * f64::from(b.abs()))
                            .sum();
                        let got = f64::from(out[r * n + c]);
                        assert!(
                            (got - want).abs() <= 1e-5 * scale + 1e-6,
                            "{} m={m} [{r}, {c}]: {got} vs {want}",
                            format.name()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn f32_weights_and_empty_rows() {
        // w = [[1, 2], [3, 4], [5, 6]], x = [[1, 1], [2, -1]].
        let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let x = [1.0, 1.0, 2.0, -1.0];
        let mut out = [0.0; 6];
        let dims = Dims { m: 2, k: 2, n: 3 };
        linear(
            &x,
            WeightRows::F32(&w),
            None,
            dims,
            &mut out,
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(out, [3.0, 7.0, 11.0, 0.0, 2.0, 4.0]);
        // K = 0: each of the two rows is the bias alone.
        let mut out = [9.0; 6];
        let bias = [1.0, 2.0, 3.0];
        let empty = Dims { m: 2, k: 0, n: 3 };
        linear(
            &[],
            WeightRows::F32(&[]),
            Some(&bias),
            empty,
            &mut out,
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(out, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let short = WeightRows::F32(&w[..4]);
        assert!(linear(&x, short, None, dims, &mut out, &mut Vec::new()).is_err());
    }
}
