//! Batched matmul under every `matmul_kernel` (the register-tiled kernel with its tile picked
//! per product and with each tile fixed, the first tiled kernel, naive; and f16-staged tiles)
//! against an f64 reference on shapes that are not multiples of any tile, with every transpose
//! combination, bias, and broadcast batch dims.
//!
//! Tolerance: |got - want| <= 2e-6 * sum_k |a_mk * b_kn| + 1e-6 (f32 accumulation of K terms in
//! a different order than the reference), or 2e-3 * sum_k |a b| for f16 tiles (inputs rounded to
//! 11 significant bits).

use super::{Rng, assert_close, dims, f32_bytes, floats, run};
use crate::evalue::Tensor;
use crate::program::ops;
use crate::program::{DType, Op, ProgramBuilder};
use crate::registry::CompileSpec;

struct Case {
    a_batch: Vec<usize>,
    b_batch: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
    transpose_a: bool,
    transpose_b: bool,
    bias: bool,
}

fn broadcast(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|d| {
            let pick = |s: &[usize]| {
                let lead = rank - s.len();
                if d >= lead { s[d - lead] } else { 1 }
            };
            pick(a).max(pick(b))
        })
        .collect()
}

/// Offset of batch `index` (over `out_batch`) within an operand with batch dims `own`.
fn batch_offset(index: usize, out_batch: &[usize], own: &[usize]) -> usize {
    let mut rem = index;
    let mut coords = vec![0; out_batch.len()];
    for d in (0..out_batch.len()).rev() {
        coords[d] = rem % out_batch[d];
        rem /= out_batch[d];
    }
    let lead = out_batch.len() - own.len();
    own.iter().enumerate().fold(0, |acc, (d, &e)| {
        acc * e + if e == 1 { 0 } else { coords[lead + d] }
    })
}

fn check(case: &Case, rng: &mut Rng, specs: &[CompileSpec], f16: bool) {
    let Case { m, k, n, .. } = *case;
    let a_shape: Vec<usize> = case
        .a_batch
        .iter()
        .copied()
        .chain(if case.transpose_a { [k, m] } else { [m, k] })
        .collect();
    let b_shape: Vec<usize> = case
        .b_batch
        .iter()
        .copied()
        .chain(if case.transpose_b { [n, k] } else { [k, n] })
        .collect();
    let out_batch = broadcast(&case.a_batch, &case.b_batch);
    let out_shape: Vec<usize> = out_batch.iter().copied().chain([m, n]).collect();
    let a = rng.f32s(a_shape.iter().product(), -1.0, 1.0);
    let b_vals = rng.f32s(b_shape.iter().product(), -1.0, 1.0);
    let bias = rng.f32s(n, -1.0, 1.0);

    let mut p = ProgramBuilder::new();
    p.input("a", DType::F32, dims(&a_shape));
    p.param("b", DType::F32, dims(&b_shape), super::SCOPE, "b");
    let bias_id = case
        .bias
        .then(|| p.param("bias", DType::F32, dims(&[n]), super::SCOPE, "bias"));
    let out = p.tensor("out", DType::F32, dims(&out_shape));
    p.op(Op::MatMul(ops::MatMul {
        a: 0,
        b: 1,
        bias: bias_id,
        transpose_a: case.transpose_a,
        transpose_b: case.transpose_b,
        out,
    }))
    .output(out);
    let params = [("b", f32_bytes(&b_vals)), ("bias", f32_bytes(&bias))];
    let got = run(
        &p,
        &params,
        vec![Tensor::from_f32(a_shape.clone(), a.clone()).unwrap()],
        specs,
    )
    .unwrap_or_else(|e| panic!("{a_shape:?} x {b_shape:?}: {e}"));

    let batches: usize = out_batch.iter().product();
    let mut want = Vec::with_capacity(batches * m * n);
    let mut scale = Vec::with_capacity(batches * m * n);
    for batch in 0..batches {
        let a0 = batch_offset(batch, &out_batch, &case.a_batch) * m * k;
        let b0 = batch_offset(batch, &out_batch, &case.b_batch) * k * n;
        for i in 0..m {
            for j in 0..n {
                let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
                for x in 0..k {
                    let av = a[a0
                        + if case.transpose_a {
                            x * m + i
                        } else {
                            i * k + x
                        }];
                    let bv = b_vals[b0
                        + if case.transpose_b {
                            j * k + x
                        } else {
                            x * n + j
                        }];
                    let product = f64::from(av) * f64::from(bv);
                    sum += product;
                    magnitude += product.abs();
                }
                if case.bias {
                    sum += f64::from(bias[j]);
                    magnitude += f64::from(bias[j]).abs();
                }
                want.push(sum);
                scale.push(magnitude);
            }
        }
    }
    let relative = if f16 { 2e-3 } else { 2e-6 };
    assert_close(
        &format!(
            "matmul {a_shape:?} x {b_shape:?} ta={} tb={} bias={} specs={specs:?}",
            case.transpose_a, case.transpose_b, case.bias
        ),
        floats(&got[0]),
        &want,
        |i| relative * scale[i] + 1e-6,
    );
}

fn random_cases(rng: &mut Rng, count: usize) -> Vec<Case> {
    let extents = [1, 3, 16, 31, 33, 64, 65, 97, 130];
    (0..count)
        .map(|i| {
            let pick = |rng: &mut Rng| extents[rng.range(0, extents.len() - 1)];
            let (a_batch, b_batch) = match i % 4 {
                0 => (vec![], vec![]),
                1 => (vec![2], vec![2]),
                2 => (vec![3, 1], vec![2]),
                _ => (vec![2, 1, 2], vec![3, 1]),
            };
            Case {
                a_batch,
                b_batch,
                m: pick(rng),
                k: pick(rng),
                n: pick(rng),
                transpose_a: i % 3 == 1,
                transpose_b: i % 2 == 1,
                bias: i % 5 != 0,
            }
        })
        .collect()
}

/// Every `matmul_kernel` value but the default `tiled`.
const KERNELS: [&str; 5] = ["tiled32", "tiled64", "tiled128", "tiled_v1", "naive"];

#[test]
fn tiled_matches_reference() {
    let mut rng = Rng::new(10);
    for case in random_cases(&mut rng, 14) {
        check(&case, &mut rng, &[], false);
    }
}

#[test]
fn every_kernel_matches_reference() {
    for (seed, kernel) in (11..).zip(KERNELS) {
        let mut rng = Rng::new(seed);
        let specs = [CompileSpec::new("matmul_kernel", kernel)];
        for case in random_cases(&mut rng, 6) {
            check(&case, &mut rng, &specs, false);
        }
    }
}

/// `workgroup_size` below 256 keeps `tiled` to 32 x 32 tiles.
#[test]
fn tiled_under_a_small_workgroup_size_matches_reference() {
    let mut rng = Rng::new(20);
    let specs = [CompileSpec::new("workgroup_size", "64")];
    for case in random_cases(&mut rng, 6) {
        check(&case, &mut rng, &specs, false);
    }
}

/// Shapes that are multiples of no tile (M = 129, N = 67, K = 33, and batches enough that
/// `tiled` picks its largest tile), transposed and plain, batched with broadcasting, with bias,
/// under every kernel.
#[test]
fn edge_tiles_match_reference_under_every_kernel() {
    let cases = [
        Case {
            a_batch: vec![2, 1],
            b_batch: vec![3],
            m: 129,
            k: 33,
            n: 67,
            transpose_a: true,
            transpose_b: true,
            bias: true,
        },
        Case {
            a_batch: vec![2],
            b_batch: vec![],
            m: 129,
            k: 33,
            n: 67,
            transpose_a: false,
            transpose_b: false,
            bias: true,
        },
        // 11 batches of 5 x 5 tiles of 128: `tiled` picks 128 x 128.
        Case {
            a_batch: vec![11],
            b_batch: vec![11],
            m: 513,
            k: 9,
            n: 515,
            transpose_a: false,
            transpose_b: true,
            bias: false,
        },
    ];
    let mut rng = Rng::new(15);
    for kernel in std::iter::once("tiled").chain(KERNELS) {
        let specs = [CompileSpec::new("matmul_kernel", kernel)];
        for case in &cases {
            check(case, &mut rng, &specs, false);
        }
    }
}

#[test]
fn f16_tiles_match_reference_within_half_precision() {
    if !super::backend()
        .adapter()
        .is_some_and(|_| super::backend().option_f16())
    {
        // The device lacks shader-f16: init must refuse the spec instead.
        let mut p = ProgramBuilder::new();
        p.input("a", DType::F32, dims(&[2, 2]));
        p.input("b", DType::F32, dims(&[2, 2]));
        p.tensor("out", DType::F32, dims(&[2, 2]));
        p.op(Op::MatMul(ops::MatMul {
            a: 0,
            b: 1,
            bias: None,
            transpose_a: false,
            transpose_b: false,
            out: 2,
        }))
        .output(2);
        let err = run(&p, &[], vec![], &[CompileSpec::new("precision", "f16")]).unwrap_err();
        assert_eq!(err.code(), crate::error::ErrorCode::NotSupported);
        return;
    }
    let mut rng = Rng::new(13);
    let specs = [CompileSpec::new("precision", "f16")];
    for case in random_cases(&mut rng, 6) {
        check(&case, &mut rng, &specs, true);
    }
}

/// K = 0: the product is empty and the output is the bias.
#[test]
fn empty_inner_dimension_gives_the_bias() {
    let case = Case {
        a_batch: vec![],
        b_batch: vec![],
        m: 5,
        k: 0,
        n: 3,
        transpose_a: false,
        transpose_b: true,
        bias: true,
    };
    check(&case, &mut Rng::new(14), &[], false);
}
