//! Row reductions (layer norm, softmax with and without masks, L2 normalisation) against f64
//! references, on row lengths below, at and above the workgroup size (1, 7, 255, 256, 384, 1000).
//!
//! Tolerances: layer norm 2e-5 * (|gamma| * |normalised| + |beta|) + 1e-6 (plus the input's
//! own rounding for rows offset by 1000, see the test); softmax 1e-5 relative
//! + 1e-7; L2 normalisation 1e-6 relative + 1e-7 (f32 sums of up to 1000 terms in tree order).

use super::{Rng, assert_close, dims, f32_bytes, floats, run};
use crate::evalue::Tensor;
use crate::program::ops;
use crate::program::{DType, Op, ProgramBuilder};
use crate::registry::CompileSpec;

/// Row lengths: both sides of the short-row threshold (1024), odd and power-of-two ones.
const WIDTHS: [usize; 7] = [1, 7, 255, 256, 384, 1000, 1537];

#[test]
fn layer_norm_matches_reference() {
    let mut rng = Rng::new(20);
    for (case, &h) in WIDTHS.iter().enumerate() {
        let rows = [3, 1, 5, 2, 4, 3, 2][case];
        // An offset far from zero checks that the variance is computed around the mean.
        let offset = if case % 2 == 0 { 1000.0 } else { 0.0 };
        let x: Vec<f32> = rng
            .f32s(rows * h, -2.0, 2.0)
            .iter()
            .map(|v| v + offset)
            .collect();
        let gamma = rng.f32s(h, 0.5, 1.5);
        let beta = rng.f32s(h, -1.0, 1.0);
        let eps = 1e-12f32;
        let mut p = ProgramBuilder::new();
        p.input("x", DType::F32, dims(&[rows, h]));
        p.param("gamma", DType::F32, dims(&[h]), super::SCOPE, "gamma");
        p.param("beta", DType::F32, dims(&[h]), super::SCOPE, "beta");
        p.tensor("y", DType::F32, dims(&[rows, h]));
        p.op(Op::LayerNorm(ops::LayerNorm {
            x: 0,
            gamma: 1,
            beta: 2,
            eps,
            out: 3,
        }))
        .output(3);
        let params = [("gamma", f32_bytes(&gamma)), ("beta", f32_bytes(&beta))];
        let specs = if case % 3 == 2 {
            vec![CompileSpec::new("workgroup_size", "32")]
        } else {
            vec![]
        };
        let out = run(
            &p,
            &params,
            vec![Tensor::from_f32(vec![rows, h], x.clone()).unwrap()],
            &specs,
        )
        .unwrap();
        let mut want = Vec::new();
        let mut scale = Vec::new();
        for r in 0..rows {
            let row: Vec<f64> = x[r * h..(r + 1) * h]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            let mean = row.iter().sum::<f64>() / h as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / h as f64;
            for (j, v) in row.iter().enumerate() {
                let normalised = (v - mean) / (var + f64::from(eps)).sqrt();
                want.push(normalised * f64::from(gamma[j]) + f64::from(beta[j]));
                scale.push(normalised.abs() * f64::from(gamma[j]) + f64::from(beta[j]).abs());
            }
        }
        // Near 1000, f32 arithmetic on x - mean carries about ulp(1000) = 6e-5 of absolute
        // error, about 5e-5 after dividing by the standard deviation (~1.15): allow 4e-4 * |gamma|.
        let absolute = if offset > 0.0 { 4e-4 } else { 0.0 };
        assert_close(
            &format!("layer_norm [{rows}, {h}]"),
            floats(&out[0]),
            &want,
            |i| 2e-5 * scale[i] + absolute * f64::from(gamma[i % h]) + 1e-6,
        );
    }
}

fn softmax_reference(x: &[f32], mask: impl Fn(usize) -> f64, h: usize) -> Vec<f64> {
    let mut want = Vec::with_capacity(x.len());
    for (r, row) in x.chunks(h).enumerate() {
        let v: Vec<f64> = row
            .iter()
            .enumerate()
            .map(|(j, &a)| f64::from(a) + mask(r * h + j))
            .collect();
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = v.iter().map(|a| (a - max).exp()).sum();
        want.extend(v.iter().map(|a| (a - max).exp() / sum));
    }
    want
}

#[test]
fn softmax_without_mask_matches_reference() {
    let mut rng = Rng::new(21);
    for &h in &WIDTHS {
        let rows = 3;
        let x = rng.f32s(rows * h, -20.0, 20.0);
        let mut p = ProgramBuilder::new();
        p.input("x", DType::F32, dims(&[rows, h]));
        p.tensor("y", DType::F32, dims(&[rows, h]));
        p.op(Op::Softmax(ops::Softmax {
            x: 0,
            mask: None,
            out: 1,
        }))
        .output(1);
        let out = run(
            &p,
            &[],
            vec![Tensor::from_f32(vec![rows, h], x.clone()).unwrap()],
            &[],
        )
        .unwrap();
        let want = softmax_reference(&x, |_| 0.0, h);
        assert_close(
            &format!("softmax [{rows}, {h}]"),
            floats(&out[0]),
            &want,
            |i| 1e-5 * want[i] + 1e-7,
        );
    }
}

/// The attention pattern: scores [B, heads, S, S] + an f32 mask [B, 1, 1, S] (0 or -10000), and
/// a mask over [S, S] (broadcast over batch and heads). The IR takes f32 masks only (the kernel
/// can convert others; validation refuses them).
#[test]
fn softmax_with_broadcast_masks_matches_reference() {
    let mut rng = Rng::new(22);
    let (b, heads, s) = (2, 3, 37);
    let x = rng.f32s(b * heads * s * s, -5.0, 5.0);
    let mask_values: Vec<f32> = (0..b * s)
        .map(|i| if i % 7 == 3 { -10000.0 } else { 0.0 })
        .collect();
    let square: Vec<f32> = (0..s * s)
        .map(|i| if i % 5 == 1 { -10000.0 } else { 0.5 })
        .collect();
    let cases: [(Vec<usize>, &Vec<f32>); 2] =
        [(vec![b, 1, 1, s], &mask_values), (vec![s, s], &square)];
    for (mask_shape, mask) in cases {
        let mut p = ProgramBuilder::new();
        p.input("x", DType::F32, dims(&[b, heads, s, s]));
        p.input("mask", DType::F32, dims(&mask_shape));
        p.tensor("y", DType::F32, dims(&[b, heads, s, s]));
        p.op(Op::Softmax(ops::Softmax {
            x: 0,
            mask: Some(1),
            out: 2,
        }))
        .output(2);
        let inputs = vec![
            Tensor::from_f32(vec![b, heads, s, s], x.clone()).unwrap(),
            Tensor::from_f32(mask_shape.clone(), mask.clone()).unwrap(),
        ];
        let out = run(&p, &[], inputs, &[]).unwrap();
        let want = softmax_reference(
            &x,
            |i| {
                if mask_shape.len() == 2 {
                    f64::from(mask[i % (s * s)])
                } else {
                    f64::from(mask[i / (heads * s * s) * s + i % s])
                }
            },
            s,
        );
        assert_close(
            &format!("masked softmax {mask_shape:?}"),
            floats(&out[0]),
            &want,
            |i| 1e-5 * want[i] + 1e-7,
        );
    }
}

#[test]
fn l2_normalize_matches_reference() {
    let mut rng = Rng::new(23);
    for &h in &WIDTHS {
        let rows = 3;
        let mut x = rng.f32s(rows * h, -3.0, 3.0);
        // A zero row: the result is 0 / eps = 0, never NaN.
        x[..h].iter_mut().for_each(|v| *v = 0.0);
        let eps = 1e-12f32;
        let mut p = ProgramBuilder::new();
        p.input("x", DType::F32, dims(&[rows, h]));
        p.tensor("y", DType::F32, dims(&[rows, h]));
        p.op(Op::L2Normalize(ops::L2Normalize { x: 0, eps, out: 1 }))
            .output(1);
        let out = run(
            &p,
            &[],
            vec![Tensor::from_f32(vec![rows, h], x.clone()).unwrap()],
            &[],
        )
        .unwrap();
        let want: Vec<f64> = x
            .chunks(h)
            .flat_map(|row| {
                let norm = row
                    .iter()
                    .map(|&v| f64::from(v).powi(2))
                    .sum::<f64>()
                    .sqrt();
                let denom = norm.max(f64::from(eps));
                row.iter().map(move |&v| f64::from(v) / denom)
            })
            .collect();
        assert_close(
            &format!("l2_normalize [{rows}, {h}]"),
            floats(&out[0]),
            &want,
            |i| 1e-6 * want[i].abs() + 1e-7,
        );
    }
}
