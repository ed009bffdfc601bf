//! Op chains a backend may run as one pass (the WebGPU backend fuses an RMSNorm with the `add`
//! that alone reads it, a residual `add` with the RMSNorm that reads its sum (after the norm
//! that feeds the add, Gemma's post-norm), and an activation with the product that alone reads
//! it; see its `fusion.rs`): the chains as a decoder layer writes them, and the variants that
//! must not fuse (the intermediate read again, returned as an output, or broadcast against a
//! vector), all against f64.

use super::activations::silu;
use crate::common::harness::{Model, SuiteConfig, Tol, assert_close, f32_tensor};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::program::ops::RmsNorm;
use webdelegate::program::{BinaryOp, UnaryOp};
use webdelegate::registry::SharedBackend;

const EPS: f32 = 1e-6;

/// `x / sqrt(mean(x^2) + eps) * weight` over rows of `weight.len()`, in f64.
fn rms_norm(x: &Ref, weight: &[f32]) -> Ref {
    let width = weight.len();
    let mut data = Vec::with_capacity(x.data.len());
    for row in x.data.chunks(width) {
        let mean_square = row.iter().map(|v| v * v).sum::<f64>() / width as f64;
        let inverse = 1.0 / (mean_square + f64::from(EPS)).sqrt();
        data.extend(
            row.iter()
                .zip(weight)
                .map(|(v, &w)| v * inverse * f64::from(w)),
        );
    }
    Ref::from_f64(&x.shape, data)
}

/// `x / sqrt(mean(x^2) + eps)` over rows of `width`, in f64.
fn rms_norm_unweighted(x: &Ref, width: usize) -> Ref {
    rms_norm(x, &vec![1.0; width])
}

op_case! {
/// `z = x + rms_norm(x * y)` (the product's last reader is the norm, so a fused pass must keep
/// it alive until the add's place) and `m = up * silu(z)`, operands in either order; then the
/// same chains where nothing may fuse: the norm's result also an output, the activation's
/// read by a second op, the norm added to a broadcast vector. Rows of 40 (3 of them).
pub async fn norm_add_and_gated_chains(backend: SharedBackend, config: SuiteConfig) {
    let (rows, width) = (3usize, 40usize);
    let shape = [rows, width];
    let mut rng = Rng::new(61);
    let (x, y, up) = (
        rng.vec(rows * width, -2.0, 2.0),
        rng.vec(rows * width, -1.5, 1.5),
        rng.vec(rows * width, -1.0, 1.0),
    );
    let weight: Vec<f32> = (0..width).map(|j| 0.5 + 0.05 * j as f32).collect();
    let bias: Vec<f32> = (0..width).map(|j| 0.1 * j as f32 - 2.0).collect();
    let (rx, ry, rup) = (Ref::new(&shape, &x), Ref::new(&shape, &y), Ref::new(&shape, &up));
    let normed = rms_norm(&reference::binary(&rx, &ry, |a, b| a * b), &weight);
    let z = reference::binary(&rx, &normed, |a, b| a + b);
    let activated = z.map(silu);
    let m = reference::binary(&rup, &activated, |a, b| a * b);
    let tol = Tol {
        rel: config.reduction.rel + 2e-6,
        abs: config.reduction.abs,
    };
    let inputs = || {
        vec![
            f32_tensor(&shape, x.clone()),
            f32_tensor(&shape, y.clone()),
            f32_tensor(&shape, up.clone()),
        ]
    };

    // x, y, up, the norm's weight, t = x * y and a = rms_norm(t).
    let start = || {
        let mut model = Model::new();
        let (xi, yi, ui) = (
            model.input("x", &shape),
            model.input("y", &shape),
            model.input("up", &shape),
        );
        let w = model.param("w", &[width], &weight);
        let t = model.b.binary(BinaryOp::Mul, xi, yi).unwrap();
        let a = model.b.push(|out| RmsNorm { x: t, weight: Some(w), eps: EPS, out }).unwrap();
        (model, xi, ui, w, t, a)
    };

    // The fusable chains.
    let (mut model, xi, ui, _, _, a) = start();
    let zi = model.b.binary(BinaryOp::Add, xi, a).unwrap();
    let g = model.b.unary(UnaryOp::Silu, zi).unwrap();
    let mi = model.b.binary(BinaryOp::Mul, ui, g).unwrap();
    model.b.output(mi).output(zi);
    let got = model.run(&backend, inputs()).await;
    assert_close("x + rms_norm(x * y)", &got[1], &z, tol);
    assert_close("up * silu(z)", &got[0], &m, tol);

    // The same chains, each intermediate read once more (or broadcast): nothing fuses.
    let (mut model, xi, ui, w, t, a) = start();
    let b = model.param("bias", &[width], &bias);
    let zi = model.b.binary(BinaryOp::Add, a, xi).unwrap();
    let g = model.b.unary(UnaryOp::Silu, zi).unwrap();
    let mi = model.b.binary(BinaryOp::Mul, g, ui).unwrap();
    let again = model.b.binary(BinaryOp::Add, g, mi).unwrap();
    let a2 = model.b.push(|out| RmsNorm { x: t, weight: Some(w), eps: EPS, out }).unwrap();
    let broadcast = model.b.binary(BinaryOp::Add, a2, b).unwrap();
    model.b.output(a).output(again).output(broadcast);
    let got = model.run(&backend, inputs()).await;
    let rbias = Ref::new(&[width], &bias);
    assert_close("rms_norm(x * y), an output", &got[0], &normed, tol);
    let want_again = reference::binary(&activated, &m, |a, b| a + b);
    assert_close("silu(z) + up * silu(z)", &got[1], &want_again, tol);
    let want_broadcast = reference::binary(&normed, &rbias, |a, b| a + b);
    assert_close("rms_norm(x * y) + bias", &got[2], &want_broadcast, tol);
}
}

op_case! {
/// A residual stream as decoder layers write it, rows of 40 (3 of them; 1100, past one
/// workgroup's stride, in a second program): `s1 = x + rms_norm(a)` (Gemma's post-norm and
/// residual add), `h = rms_norm'(s1)` (the next pre-norm), `s2 = s1 + h * y` (s1 read again),
/// `g = rms_norm(s2)` without a weight (Llama's add then pre-norm), the output `s2 + g`; then
/// the post-norm's result read twice (only the add and the norm after it may fuse).
pub async fn residual_add_and_next_norm_chains(backend: SharedBackend, config: SuiteConfig) {
    for (rows, width, seed) in [(3usize, 40usize, 71u64), (2, 1100, 72)] {
        let shape = [rows, width];
        let mut rng = Rng::new(seed);
        let (x, a, y) = (
            rng.vec(rows * width, -2.0, 2.0),
            rng.vec(rows * width, -3.0, 3.0),
            rng.vec(rows * width, -1.0, 1.0),
        );
        let w1: Vec<f32> = (0..width).map(|j| 0.5 + 0.01 * (j % 50) as f32).collect();
        let w2: Vec<f32> = (0..width).map(|j| 1.5 - 0.02 * (j % 40) as f32).collect();
        let (rx, ra, ry) = (Ref::new(&shape, &x), Ref::new(&shape, &a), Ref::new(&shape, &y));
        let post = rms_norm(&ra, &w1);
        let s1 = reference::binary(&rx, &post, |a, b| a + b);
        let h = rms_norm(&s1, &w2);
        let s2 = reference::binary(&s1, &reference::binary(&h, &ry, |a, b| a * b), |a, b| a + b);
        let g = rms_norm_unweighted(&s2, width);
        let total = reference::binary(&s2, &g, |a, b| a + b);
        let tol = Tol {
            rel: config.reduction.rel + 2e-6,
            abs: config.reduction.abs,
        };
        let inputs = || {
            vec![
                f32_tensor(&shape, x.clone()),
                f32_tensor(&shape, a.clone()),
                f32_tensor(&shape, y.clone()),
            ]
        };
        let norm = |model: &mut Model, x, weight| {
            model.b.push(|out| RmsNorm { x, weight, eps: EPS, out }).unwrap()
        };

        let mut model = Model::new();
        let (xi, ai, yi) = (
            model.input("x", &shape),
            model.input("a", &shape),
            model.input("y", &shape),
        );
        let (w1i, w2i) = (model.param("w1", &[width], &w1), model.param("w2", &[width], &w2));
        let pi = norm(&mut model, ai, Some(w1i));
        let s1i = model.b.binary(BinaryOp::Add, xi, pi).unwrap();
        let hi = norm(&mut model, s1i, Some(w2i));
        let hy = model.b.binary(BinaryOp::Mul, hi, yi).unwrap();
        let s2i = model.b.binary(BinaryOp::Add, s1i, hy).unwrap();
        let gi = norm(&mut model, s2i, None);
        let ti = model.b.binary(BinaryOp::Add, s2i, gi).unwrap();
        model.b.output(ti).output(hi);
        let got = model.run(&backend, inputs()).await;
        assert_close("rms_norm'(x + rms_norm(a))", &got[1], &h, tol);
        assert_close("s2 + rms_norm(s2)", &got[0], &total, tol);

        // The post-norm's result read twice: the add and the next norm alone may fuse.
        let mut model = Model::new();
        let (xi, ai) = (model.input("x", &shape), model.input("a", &shape));
        model.input("y", &shape);
        let (w1i, w2i) = (model.param("w1", &[width], &w1), model.param("w2", &[width], &w2));
        let pi = norm(&mut model, ai, Some(w1i));
        let s1i = model.b.binary(BinaryOp::Add, pi, xi).unwrap();
        let hi = norm(&mut model, s1i, Some(w2i));
        let again = model.b.binary(BinaryOp::Add, hi, pi).unwrap();
        model.b.output(again).output(s1i);
        let got = model.run(&backend, inputs()).await;
        assert_close("x + rms_norm(a), an output", &got[1], &s1, tol);
        let want = reference::binary(&h, &post, |a, b| a + b);
        assert_close("rms_norm'(s1) + rms_norm(a)", &got[0], &want, tol);
    }
}
}
