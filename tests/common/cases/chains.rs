//! Op chains a backend may run as one pass (the WebGPU backend fuses an RMSNorm with the `add`
//! that alone reads it, and an activation with the product that alone reads it; see its
//! `fusion.rs`): the chains as a decoder layer writes them, and the variants that must not
//! fuse (the intermediate read again, returned as an output, or broadcast against a vector),
//! all against f64.

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

/// `x * sigmoid(x)` in f64.
fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
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
