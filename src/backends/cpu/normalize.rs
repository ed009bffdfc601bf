//! Row-wise reductions: layer norm, softmax, L2 normalisation, masked mean pooling.
//!
//! Sums use eight independent lanes (which LLVM vectorises, since float addition is not
//! reassociated on its own) and are therefore also more accurate than one running sum.

use crate::backends::cpu::fast_math;
use crate::backends::cpu::values::ValuesRef;
use crate::error::{Error, Result};

const LANES: usize = 8;

/// `sum f(x)` over `xs`, in eight lanes.
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (slot, &x) in acc.iter_mut().zip(chunk) {
            *slot += f(x);
        }
    }
    let mut total = tail.iter().map(|&x| f(x)).sum::<f32>();
    for value in acc {
        total += value;
    }
    total
}

/// `max xs` in eight lanes (NaN elements are skipped here; they still poison the softmax sum).
#[inline(always)]
fn lane_max(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (slot, &x) in acc.iter_mut().zip(chunk) {
            *slot = slot.max(x);
        }
    }
    tail.iter()
        .chain(acc.iter())
        .fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

fn rows_of(len: usize, width: usize, what: &str) -> Result<()> {
    if width == 0 || len.is_multiple_of(width) {
        Ok(())
    } else {
        Err(Error::internal(format!(
            "{what}: {len} elements are not whole rows of {width}"
        )))
    }
}

/// Layer norm of each `width`-long row of `x` into `out`.
///
/// # Errors
/// `Internal` when lengths disagree (validation rules that out).
pub fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) -> Result<()> {
    let width = gamma.len();
    rows_of(x.len(), width, "layer_norm")?;
    if beta.len() != width || out.len() != x.len() {
        return Err(Error::internal("layer_norm operands disagree in length"));
    }
    if width == 0 {
        return Ok(());
    }
    let inverse_width = 1.0 / width as f32;
    for (row, target) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let mean = lane_sum(row, |v| v) * inverse_width;
        let variance = lane_sum(row, |v| (v - mean) * (v - mean)) * inverse_width;
        let inverse_std = 1.0 / (variance + eps).sqrt();
        for (((o, &v), &g), &b) in target.iter_mut().zip(row).zip(gamma).zip(beta) {
            *o = (v - mean) * inverse_std * g + b;
        }
    }
    Ok(())
}

/// Softmax of each `width`-long row of `values`, in place (a mask, if any, was already added).
///
/// # Errors
/// `Internal` when the length is not whole rows.
pub fn softmax_in_place(values: &mut [f32], width: usize) -> Result<()> {
    rows_of(values.len(), width, "softmax")?;
    if width == 0 {
        return Ok(());
    }
    for row in values.chunks_exact_mut(width) {
        let max = lane_max(row);
        let mut acc = [0.0f32; LANES];
        let mut chunks = row.chunks_exact_mut(LANES);
        for chunk in &mut chunks {
            for (slot, v) in acc.iter_mut().zip(chunk.iter_mut()) {
                *v = fast_math::exp(*v - max);
                *slot += *v;
            }
        }
        let mut sum: f32 = 0.0;
        for v in chunks.into_remainder() {
            *v = fast_math::exp(*v - max);
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

/// `x / max(||x||, eps)` for each row of `width`.
///
/// # Errors
/// `Internal` when lengths disagree.
pub fn l2_normalize(x: &[f32], width: usize, eps: f32, out: &mut [f32]) -> Result<()> {
    rows_of(x.len(), width, "l2_normalize")?;
    if out.len() != x.len() {
        return Err(Error::internal("l2_normalize output has the wrong length"));
    }
    if width == 0 {
        return Ok(());
    }
    for (row, target) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let norm = lane_sum(row, |v| v * v).sqrt();
        let inverse = 1.0 / norm.max(eps);
        for (o, &v) in target.iter_mut().zip(row) {
            *o = v * inverse;
        }
    }
    Ok(())
}

/// Whether each mask element keeps its position (non-zero), as 1.0 or 0.0.
fn mask_weights(mask: ValuesRef<'_>) -> Vec<f32> {
    let keep = |nonzero: bool| if nonzero { 1.0 } else { 0.0 };
    match mask {
        ValuesRef::F32(v) => v.iter().map(|&m| keep(m != 0.0)).collect(),
        ValuesRef::I32(v) => v.iter().map(|&m| keep(m != 0)).collect(),
        ValuesRef::I64(v) => v.iter().map(|&m| keep(m != 0)).collect(),
        ValuesRef::U8(v) => v.iter().map(|&m| keep(m != 0)).collect(),
    }
}

/// Masked mean over the sequence: `x` `[batch, seq, hidden]`, `mask` `[batch, seq]` -> `out`
/// `[batch, hidden]` = `sum_s x * m / max(sum_s m, 1e-9)`, `m` = 1 where the mask is non-zero.
///
/// # Errors
/// `Internal` when lengths disagree with `[batch, seq, hidden]`.
pub fn mean_pool(
    x: &[f32],
    mask: ValuesRef<'_>,
    [batch, seq, hidden]: [usize; 3],
    out: &mut [f32],
) -> Result<()> {
    if x.len() != batch * seq * hidden || mask.len() != batch * seq || out.len() != batch * hidden {
        return Err(Error::internal(
            "mean_pool operands disagree with their shape",
        ));
    }
    out.fill(0.0);
    if hidden == 0 {
        return Ok(());
    }
    let weights = mask_weights(mask);
    for b in 0..batch {
        let target = &mut out[b * hidden..(b + 1) * hidden];
        let mut count = 0.0f32;
        for s in 0..seq {
            let weight = weights[b * seq + s];
            if weight == 0.0 {
                continue;
            }
            count += weight;
            let row = &x[(b * seq + s) * hidden..(b * seq + s + 1) * hidden];
            for (o, &v) in target.iter_mut().zip(row) {
                *o += v * weight;
            }
        }
        let inverse = 1.0 / count.max(1e-9);
        for o in target.iter_mut() {
            *o *= inverse;
        }
    }
    Ok(())
}
