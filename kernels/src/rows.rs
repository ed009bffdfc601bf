//! Elementwise activations and the per-row softmax over contiguous f32 values: the CPU
//! backend's `unary` (for the activations `core` can compute) and `softmax` kernels, called
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

    #[test]
    fn lengths_are_checked() {
        assert!(Activation::Gelu.apply(&[1.0; 3], &mut [0.0; 2]).is_err());
        assert!(softmax_rows(&mut [0.0; 5], 2).is_err());
        assert!(softmax_rows(&mut [0.0; 2], 0).is_err());
        assert!(softmax_rows(&mut [], 0).is_ok());
    }
}
