//! Elementwise and per-row kernels over contiguous f32 values: the activations, same-length
//! binaries, the affine `scale`, the per-row softmax (with an optional broadcast additive mask)
//! and layer norm. They are the CPU backend's `unary` (for the activations `core` can compute),
//! `binary` (its unbroadcast rows), `scale`, `softmax` and `layer_norm` kernels, called
//! directly on one thread and, through [`crate::exports`], on a share of the elements or rows
//! per worker. An element's result never depends on how the values are split, so every split
//! gives the same bits.

use crate::KernelError;
use crate::math::{self, LANES, lane_max};

/// An elementwise activation the kernels compute (`tanh` is not here: `core` has none, so the
/// main crate computes it with `std`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// GELU, the exact (erf) form.
    Gelu,
    /// GELU, the tanh approximation.
    GeluTanh,
    /// SiLU, `x * sigmoid(x)`.
    Silu,
    /// ReLU (NaN stays NaN, as in PyTorch).
    Relu,
}

impl Activation {
    /// The code the pool passes across the module boundary.
    pub const fn code(self) -> u32 {
        match self {
            Self::Gelu => 0,
            Self::GeluTanh => 1,
            Self::Silu => 2,
            Self::Relu => 3,
        }
    }

    /// The activation of `code`, if it is one.
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(Self::Gelu),
            1 => Some(Self::GeluTanh),
            2 => Some(Self::Silu),
            3 => Some(Self::Relu),
            _ => None,
        }
    }

    /// `out[i] = f(x[i])`.
    ///
    /// # Errors
    /// A [`KernelError`] when the lengths differ.
    pub fn apply(self, x: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
        if x.len() != out.len() {
            return Err(KernelError("activation output has the wrong length"));
        }
        let pairs = out.iter_mut().zip(x);
        match self {
            Self::Gelu => pairs.for_each(|(o, &v)| *o = math::gelu(v)),
            Self::GeluTanh => pairs.for_each(|(o, &v)| *o = math::gelu_tanh(v)),
            Self::Silu => pairs.for_each(|(o, &v)| *o = math::silu(v)),
            Self::Relu => pairs.for_each(|(o, &v)| *o = if v < 0.0 { 0.0 } else { v }),
        }
        Ok(())
    }
}

/// Softmax of each `width`-long row of `values`, in place, stable (the row's maximum is
/// subtracted first).
///
/// # Errors
/// A [`KernelError`] when `values` is not whole rows.
pub fn softmax_rows(values: &mut [f32], width: usize) -> Result<(), KernelError> {
    if width == 0 {
        return if values.is_empty() {
            Ok(())
        } else {
            Err(KernelError("softmax rows of width 0 hold values"))
        };
    }
    if !values.len().is_multiple_of(width) {
        return Err(KernelError("softmax values are not whole rows"));
    }
    for row in values.chunks_exact_mut(width) {
        let max = lane_max(row);
        let mut acc = [0.0f32; LANES];
        let mut chunks = row.chunks_exact_mut(LANES);
        for chunk in &mut chunks {
            for (slot, v) in acc.iter_mut().zip(chunk.iter_mut()) {
                *v = math::exp(*v - max);
                *slot += *v;
            }
        }
        let mut sum: f32 = 0.0;
        for v in chunks.into_remainder() {
            *v = math::exp(*v - max);
            sum += *v;
        }
        sum += acc.iter().sum::<f32>();
        let inverse = 1.0 / sum;
        for v in row.iter_mut() {
            *v *= inverse;
        }
    }
    Ok(())
}

/// Which additive mask row each softmax row adds: row `r` of the op (counted from the op's
/// first row) adds mask row `(r / period) % count`. This covers every mask that broadcasts to
/// the scores over leading and trailing row dims only: an attention mask `[b, 1, 1, s]` over
/// scores `[b, h, s, s]` is period `h * s`, count `b`; a causal `[s, s]` is period 1, count `s`.
#[derive(Clone, Copy, Debug)]
pub struct MaskRows<'a> {
    /// `count` rows of the softmax's width.
    pub values: &'a [f32],
    /// Consecutive softmax rows that add the same mask row.
    pub period: usize,
    /// Mask rows before the pattern repeats.
    pub count: usize,
}

/// `out = softmax(x + mask)` per `width`-long row, the mask (if any) added in f32 first, as a
/// separate broadcast add would; `first_row` is the index of `x`'s first row in the whole op
/// (a worker's share starts past 0), which picks the mask rows.
///
/// # Errors
/// A [`KernelError`] when `x` and `out` differ in length or are not whole rows, or the mask is
/// not `count` rows with a nonzero period and count.
pub fn masked_softmax_rows(
    x: &[f32],
    mask: Option<MaskRows<'_>>,
    first_row: usize,
    width: usize,
    out: &mut [f32],
) -> Result<(), KernelError> {
    if x.len() != out.len() {
        return Err(KernelError("softmax output has the wrong length"));
    }
    if x.is_empty() {
        return Ok(());
    }
    if width == 0 || !x.len().is_multiple_of(width) {
        return softmax_rows(out, width);
    }
    if let Some(mask) = mask
        && (mask.period == 0
            || mask.count == 0
            || mask.count.checked_mul(width) != Some(mask.values.len()))
    {
        return Err(KernelError("a softmax mask is not whole rows of its count"));
    }
    for (r, (row, target)) in x
        .chunks_exact(width)
        .zip(out.chunks_exact_mut(width))
        .enumerate()
    {
        match mask {
            Some(mask) => {
                let m = (first_row.wrapping_add(r) / mask.period) % mask.count;
                let mask_row = &mask.values[m * width..(m + 1) * width];
                for ((o, &v), &add) in target.iter_mut().zip(row).zip(mask_row) {
                    *o = v + add;
                }
            }
            None => target.copy_from_slice(row),
        }
        softmax_rows(target, width)?;
    }
    Ok(())
}

/// An elementwise operation on two operands of the same length (the CPU backend's `binary`
/// where neither side broadcasts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
}

impl Binary {
    /// The code the pool passes across the module boundary.
    pub const fn code(self) -> u32 {
        match self {
            Self::Add => 0,
            Self::Sub => 1,
            Self::Mul => 2,
            Self::Div => 3,
        }
    }

    /// The operation of `code`, if it is one.
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(Self::Add),
            1 => Some(Self::Sub),
            2 => Some(Self::Mul),
            3 => Some(Self::Div),
            _ => None,
        }
    }

    /// `out[i] = a[i] (op) b[i]`.
    ///
    /// # Errors
    /// A [`KernelError`] when the lengths differ.
    pub fn apply(self, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<(), KernelError> {
        if a.len() != out.len() || b.len() != out.len() {
            return Err(KernelError("binary operands have different lengths"));
        }
        let triples = out.iter_mut().zip(a).zip(b);
        match self {
            Self::Add => triples.for_each(|((o, &x), &y)| *o = x + y),
            Self::Sub => triples.for_each(|((o, &x), &y)| *o = x - y),
            Self::Mul => triples.for_each(|((o, &x), &y)| *o = x * y),
            Self::Div => triples.for_each(|((o, &x), &y)| *o = x / y),
        }
        Ok(())
    }
}

/// `out[i] = x[i] * scale + bias`.
///
/// # Errors
/// A [`KernelError`] when the lengths differ.
pub fn scale(x: &[f32], scale: f32, bias: f32, out: &mut [f32]) -> Result<(), KernelError> {
    if x.len() != out.len() {
        return Err(KernelError("scale output has the wrong length"));
    }
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * scale + bias;
    }
    Ok(())
}

/// Layer norm of each `gamma.len()`-long row of `x` into `out`: mean, biased variance (both
/// eight-lane sums), then `(v - mean) / sqrt(variance + eps) * gamma + beta`.
///
/// # Errors
/// A [`KernelError`] when `x` is not whole rows or the lengths disagree.
pub fn layer_norm_rows(
    x: &[f32],
    (gamma, beta): (&[f32], &[f32]),
    eps: f32,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let width = gamma.len();
    if beta.len() != width || out.len() != x.len() {
        return Err(KernelError("layer_norm operands disagree in length"));
    }
    if width == 0 {
        return if x.is_empty() {
            Ok(())
        } else {
            Err(KernelError("layer_norm rows of width 0 hold values"))
        };
    }
    if !x.len().is_multiple_of(width) {
        return Err(KernelError("layer_norm values are not whole rows"));
    }
    let inverse_width = 1.0 / width as f32;
    for (row, target) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let mean = math::lane_sum(row, |v| v) * inverse_width;
        let variance = math::lane_sum(row, |v| (v - mean) * (v - mean)) * inverse_width;
        let inverse_std = 1.0 / math::sqrt(variance + eps);
        for (((o, &v), &g), &b) in target.iter_mut().zip(row).zip(gamma).zip(beta) {
            *o = (v - mean) * inverse_std * g + b;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn codes_round_trip() {
        for a in [
            Activation::Gelu,
            Activation::GeluTanh,
            Activation::Silu,
            Activation::Relu,
        ] {
            assert_eq!(Activation::from_code(a.code()), Some(a));
        }
        assert_eq!(Activation::from_code(4), None);
    }

    /// Any split of the elements or rows gives the whole call's bits.
    #[test]
    fn splits_give_the_same_bits() {
        let x: Vec<f32> = (0..531).map(|i| ((i as f32) * 0.37).sin() * 6.0).collect();
        for a in [Activation::Gelu, Activation::Silu, Activation::Relu] {
            let mut whole = std::vec![0.0; x.len()];
            a.apply(&x, &mut whole).unwrap();
            let mut parts = std::vec![0.0; x.len()];
            let (left, right) = parts.split_at_mut(208);
            a.apply(&x[..208], left).unwrap();
            a.apply(&x[208..], right).unwrap();
            assert_eq!(whole, parts, "{a:?}");
        }
        let (width, rows) = (59, 9);
        let mut whole: Vec<f32> = x[..width * rows].to_vec();
        let mut parts = whole.clone();
        softmax_rows(&mut whole, width).unwrap();
        let (top, bottom) = parts.split_at_mut(width * 4);
        softmax_rows(top, width).unwrap();
        softmax_rows(bottom, width).unwrap();
        assert_eq!(whole, parts);
        for row in whole.chunks(width) {
            let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
            assert!((sum - 1.0).abs() < 1e-5, "{sum}");
        }
    }

    /// The masked kernel equals a broadcast add then `softmax_rows`, whatever the split.
    #[test]
    fn masked_rows_equal_add_then_softmax() {
        let (width, rows, period, count) = (7, 12, 3, 2);
        let x: Vec<f32> = (0..width * rows)
            .map(|i| ((i as f32) * 0.61).cos() * 4.0)
            .collect();
        let mask: Vec<f32> = (0..width * count)
            .map(|i| if i % 5 == 0 { -1e4 } else { 0.25 })
            .collect();
        let mut want = x.clone();
        for (r, row) in want.chunks_mut(width).enumerate() {
            let m = (r / period) % count;
            for (v, add) in row.iter_mut().zip(&mask[m * width..]) {
                *v += add;
            }
        }
        softmax_rows(&mut want, width).unwrap();
        let rows_mask = MaskRows {
            values: &mask,
            period,
            count,
        };
        let mut whole = std::vec![0.0; x.len()];
        masked_softmax_rows(&x, Some(rows_mask), 0, width, &mut whole).unwrap();
        assert_eq!(whole, want);
        let mut parts = std::vec![0.0; x.len()];
        let (top, bottom) = parts.split_at_mut(width * 5);
        masked_softmax_rows(&x[..width * 5], Some(rows_mask), 0, width, top).unwrap();
        masked_softmax_rows(&x[width * 5..], Some(rows_mask), 5, width, bottom).unwrap();
        assert_eq!(parts, want);
        let bad = MaskRows {
            values: &mask[1..],
            period,
            count,
        };
        assert!(masked_softmax_rows(&x, Some(bad), 0, width, &mut whole).is_err());
        let zero = MaskRows {
            values: &mask,
            period: 0,
            count,
        };
        assert!(masked_softmax_rows(&x, Some(zero), 0, width, &mut whole).is_err());
    }

    #[test]
    fn empty_scores_need_no_mask_rows() {
        let mask = MaskRows {
            values: &[],
            period: 0,
            count: 0,
        };
        assert!(masked_softmax_rows(&[], Some(mask), 0, 5, &mut []).is_ok());
        assert!(masked_softmax_rows(&[0.0; 5], Some(mask), 0, 5, &mut [0.0; 5]).is_err());
    }

    #[test]
    fn lengths_are_checked() {
        assert!(Activation::Gelu.apply(&[1.0; 3], &mut [0.0; 2]).is_err());
        assert!(softmax_rows(&mut [0.0; 5], 2).is_err());
        assert!(softmax_rows(&mut [0.0; 2], 0).is_err());
        assert!(softmax_rows(&mut [], 0).is_ok());
    }
}
