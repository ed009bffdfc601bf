//! Unary functions, scale and broadcasting binary ops against f64 references.

use super::{Rng, assert_close, dims, floats, run};
use crate::evalue::Tensor;
use crate::program::ops;
use crate::program::{BinaryOp, DType, Op, ProgramBuilder, UnaryOp};

/// erf in f64: Taylor series below 2.5 (terms shrink fast enough that cancellation costs < 1e-13),
/// the continued fraction of erfc above (Lentz), accurate to ~1e-14 either way.
pub(super) fn erf(x: f64) -> f64 {
    let a = x.abs();
    let value = if a < 2.5 {
        let mut term = a;
        let mut sum = a;
        for n in 1..200 {
            term *= -a * a / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(a) = exp(-a^2) / sqrt(pi) * 1 / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...))))
        let mut f = a;
        for k in (1..60).rev() {
            f = a + (k as f64 / 2.0) / f;
        }
        1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / f
    };
    value.copysign(x)
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

fn unary_program(n: usize, op: Op) -> ProgramBuilder {
    let mut b = ProgramBuilder::new();
    b.input("x", DType::F32, dims(&[n]));
    b.tensor("y", DType::F32, dims(&[n]));
    b.op(op).output(1);
    b
}

#[test]
fn erf_reference_matches_known_values() {
    assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-14);
    assert!((erf(1.0) - 0.842_700_792_949_714_9).abs() < 1e-14);
    assert!((erf(-2.0) + 0.995_322_265_018_952_7).abs() < 1e-14);
    assert!((erf(3.0) - 0.999_977_909_503_001_4).abs() < 1e-14);
    assert!((erf(2.5) - 0.999_593_047_982_555).abs() < 1e-14);
}

/// GELU (erf form): |error| <= 1e-6 * max(1, |x|) — the kernel's erfc approximation is within
/// 1.5e-7 absolute (Abramowitz & Stegun 7.1.26), scaled by x/2, plus f32 rounding.
/// tanh: <= 1e-6 absolute + 2 ulp relative. ReLU: exact.
#[test]
fn unary_functions_match_references() {
    let mut rng = Rng::new(1);
    let mut xs = rng.f32s(4093, -9.0, 9.0);
    xs.extend([
        0.0, -0.0, 1e-7, -1e-7, 0.03, -0.06, 0.0625, 20.0, -20.0, 88.0, -88.0,
    ]);
    let n = xs.len();
    type Reference = fn(f64) -> f64;
    let cases: [(UnaryOp, Reference, Reference); 3] = [
        (UnaryOp::Gelu, gelu, |x| 1e-6 * x.abs().max(1.0)),
        (UnaryOp::Tanh, f64::tanh, |y| 1e-6 + 2.4e-7 * y.abs()),
        (UnaryOp::Relu, |x| x.max(0.0), |_| 0.0),
    ];
    for (op, reference, tolerance) in cases {
        let b = unary_program(n, Op::Unary(ops::Unary { op, x: 0, out: 1 }));
        let out = run(
            &b,
            &[],
            vec![Tensor::from_f32(vec![n], xs.clone()).unwrap()],
            &[],
        )
        .unwrap();
        let want: Vec<f64> = xs.iter().map(|&x| reference(f64::from(x))).collect();
        assert_close(&format!("{op:?}"), floats(&out[0]), &want, |i| {
            tolerance(f64::from(xs[i]))
        });
    }
}

/// Scale: one rounding of x * s, one of + b (fused or not): 2 ulp of the magnitudes.
#[test]
fn scale_matches_reference() {
    let mut rng = Rng::new(2);
    let n = 1000;
    let xs = rng.f32s(n, -100.0, 100.0);
    let (scale, bias) = (0.125f32, -3.5f32);
    let b = unary_program(
        n,
        Op::Scale(ops::Scale {
            x: 0,
            scale,
            bias,
            out: 1,
        }),
    );
    let out = run(
        &b,
        &[],
        vec![Tensor::from_f32(vec![n], xs.clone()).unwrap()],
        &[],
    )
    .unwrap();
    let want: Vec<f64> = xs.iter().map(|&x| f64::from(x) * 0.125 - 3.5).collect();
    assert_close("scale", floats(&out[0]), &want, |i| {
        2.4e-7 * (f64::from(xs[i]).abs() * 0.125 + 3.5)
    });
}

fn broadcast_index(out_index: &[usize], shape: &[usize]) -> usize {
    let lead = out_index.len() - shape.len();
    shape.iter().enumerate().fold(0, |acc, (d, &extent)| {
        acc * extent + if extent == 1 { 0 } else { out_index[lead + d] }
    })
}

/// Binary ops with NumPy broadcasting on random shapes (ranks 1-5, random extents 1-9 with
/// random dims broadcast): one f32 rounding, so 1 ulp relative.
#[test]
fn binary_ops_broadcast_like_numpy() {
    let mut rng = Rng::new(3);
    for case in 0..24 {
        let rank = rng.range(1, 5);
        let out_shape: Vec<usize> = (0..rank).map(|_| rng.range(1, 9)).collect();
        let operand = |rng: &mut Rng| -> Vec<usize> {
            let drop = rng.range(0, rank - 1);
            out_shape[drop..]
                .iter()
                .map(|&d| if rng.range(0, 3) == 0 { 1 } else { d })
                .collect()
        };
        let a_shape = operand(&mut rng);
        let b_shape = operand(&mut rng);
        let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div][case % 4];
        // The output is the NumPy broadcast of both: rank of the longer, extents the larger.
        let out_rank = a_shape.len().max(b_shape.len());
        let full: Vec<usize> = (0..out_rank)
            .map(|d| {
                let pick = |s: &[usize]| {
                    let lead = out_rank - s.len();
                    if d >= lead { s[d - lead] } else { 1 }
                };
                pick(&a_shape).max(pick(&b_shape))
            })
            .collect();
        let mut b = ProgramBuilder::new();
        b.input("a", DType::F32, dims(&a_shape));
        b.input("b", DType::F32, dims(&b_shape));
        b.tensor("out", DType::F32, dims(&full));
        b.op(Op::Binary(ops::Binary {
            op,
            a: 0,
            b: 1,
            out: 2,
        }))
        .output(2);
        let a_vals = rng.f32s(a_shape.iter().product(), -4.0, 4.0);
        let b_vals: Vec<f32> = rng
            .f32s(b_shape.iter().product(), 0.5, 4.0)
            .into_iter()
            .map(|v| if rng.range(0, 1) == 0 { v } else { -v })
            .collect();
        let inputs = vec![
            Tensor::from_f32(a_shape.clone(), a_vals.clone()).unwrap(),
            Tensor::from_f32(b_shape.clone(), b_vals.clone()).unwrap(),
        ];
        let out = run(&b, &[], inputs, &[]).unwrap();
        let n: usize = full.iter().product();
        let mut want = Vec::with_capacity(n);
        let mut index = vec![0usize; out_rank];
        for _ in 0..n {
            let x = f64::from(a_vals[broadcast_index(&index, &a_shape)]);
            let y = f64::from(b_vals[broadcast_index(&index, &b_shape)]);
            want.push(match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => x / y,
            });
            for d in (0..out_rank).rev() {
                index[d] += 1;
                if index[d] < full[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        assert_close(
            &format!("{op:?} {a_shape:?} with {b_shape:?}"),
            floats(&out[0]),
            &want,
            |i| want[i].abs() * 1.2e-7 + 1e-30,
        );
    }
}

/// A grid larger than maxComputeWorkgroupsPerDimension folds into two dimensions: a 2^24 + 3
/// element add (65 537 workgroups of 256) must still cover every element exactly once.
#[test]
fn grids_past_one_dimension_cover_every_element() {
    let n = (1 << 24) + 3;
    let mut b = ProgramBuilder::new();
    b.input("a", DType::F32, dims(&[n]));
    b.input("b", DType::F32, dims(&[1]));
    b.tensor("out", DType::F32, dims(&[n]));
    b.op(Op::Binary(ops::Binary {
        op: BinaryOp::Add,
        a: 0,
        b: 1,
        out: 2,
    }))
    .output(2);
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let inputs = vec![
        Tensor::from_f32(vec![n], a).unwrap(),
        Tensor::from_f32(vec![1], vec![0.5]).unwrap(),
    ];
    let out = run(&b, &[], inputs, &[]).unwrap();
    let bad = floats(&out[0])
        .iter()
        .enumerate()
        .find(|&(i, &v)| v != (i % 1000) as f32 + 0.5);
    assert_eq!(bad, None);
}
