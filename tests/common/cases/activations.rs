//! The decoder activations `gelu_tanh` and `silu` (element-wise `Unary` ops): against their
//! formulas in f64 over a dense range, at the extremes (no NaN or inf from overflow), and as
//! the gated product GeGLU / SwiGLU (`act(gate) * up`, a `Unary` then the `Binary` Mul).

use crate::common::harness::{Model, SuiteConfig, Tol, assert_close, assert_error, f32_tensor};
use crate::common::reference::Ref;
use crate::op_case;
use std::sync::Arc;
use webdelegate::ErrorCode;
use webdelegate::program::ops::Unary;
use webdelegate::program::{DType, Op, ProgramBuilder, UnaryOp};
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate, SharedBackend};

/// PyTorch `gelu(approximate='tanh')` in f64.
pub(super) fn gelu_tanh(x: f64) -> f64 {
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044_715 * x * x * x);
    0.5 * x * (1.0 + u.tanh())
}

/// `x * sigmoid(x)` in f64.
pub(super) fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// 1003 points over [-20, 20] (not a multiple of any workgroup size) plus the extremes.
fn inputs() -> Vec<f32> {
    let mut values: Vec<f32> = (0..1003)
        .map(|i| -20.0 + 40.0 * i as f32 / 1002.0)
        .collect();
    values.extend([
        0.0,
        -0.0,
        1e-30,
        -1e-30,
        50.0,
        -50.0,
        100.0,
        -100.0,
        1e30,
        -1e30,
        f32::MAX,
        -f32::MAX,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ]);
    values
}

op_case! {
/// Both functions against their f64 formulas (the suite's element-wise tolerance plus 2e-6
/// relative: the f32 sigmoid/tanh round a few times), finite everywhere, with the limits
/// `f(inf) = inf` and `f(-inf) = -0`.
pub async fn gelu_tanh_and_silu_against_f64(backend: SharedBackend, config: SuiteConfig) {
    let values = inputs();
    let n = values.len();
    for (op, name, reference) in [
        (UnaryOp::GeluTanh, "gelu_tanh", gelu_tanh as fn(f64) -> f64),
        (UnaryOp::Silu, "silu", silu),
    ] {
        let mut m = Model::new();
        let x = m.input("x", &[n]);
        let out = m.b.unary(op, x).unwrap();
        m.b.output(out);
        assert!(m.dump().contains(&format!("{name} x=%0")), "{}", m.dump());
        let got = m.run(&backend, vec![f32_tensor(&[n], values.clone())]).await;
        let want = Ref::new(&[n], &values).map(|v| {
            if v.is_infinite() {
                if v > 0.0 { v } else { 0.0 }
            } else {
                reference(v)
            }
        });
        let tol = Tol {
            rel: config.elementwise.rel + 2e-6,
            abs: config.elementwise.abs,
        };
        assert_close(name, &got[0], &want, tol);
        let got = Ref::from_tensor(&got[0]);
        for (v, g) in values.iter().zip(&got.data) {
            assert!(!g.is_nan(), "{name}({v}) is NaN");
            assert!(g.is_finite() || *v == f32::INFINITY, "{name}({v}) = {g}");
        }
    }
}
}

op_case! {
/// GeGLU and SwiGLU as two ops: `act(gate) * up` on a `[3, 5]` pair, against f64.
pub async fn gated_products_compose(backend: SharedBackend, config: SuiteConfig) {
    let gate: Vec<f32> = (0..15).map(|i| -3.0 + 0.4 * i as f32).collect();
    let up: Vec<f32> = (0..15).map(|i| 1.5 - 0.2 * i as f32).collect();
    for (op, reference) in [
        (UnaryOp::GeluTanh, gelu_tanh as fn(f64) -> f64),
        (UnaryOp::Silu, silu),
    ] {
        let mut m = Model::new();
        let g = m.input("gate", &[3, 5]);
        let u = m.input("up", &[3, 5]);
        let activated = m.b.unary(op, g).unwrap();
        let out = m.b.mul(activated, u).unwrap();
        m.b.output(out);
        let got = m
            .run(
                &backend,
                vec![f32_tensor(&[3, 5], gate.clone()), f32_tensor(&[3, 5], up.clone())],
            )
            .await;
        let want: Vec<f64> = gate
            .iter()
            .zip(&up)
            .map(|(&g, &u)| reference(f64::from(g)) * f64::from(u))
            .collect();
        let tol = Tol {
            rel: config.elementwise.rel + 2e-6,
            abs: config.elementwise.abs,
        };
        assert_close("gated", &got[0], &Ref::from_f64(&[3, 5], want), tol);
    }
}
}

op_case! {
/// An i32 input is refused: `InvalidArgument` from the builder, `InvalidProgram` at init,
/// both naming the op and the operand.
pub async fn activations_refuse_non_float_inputs(backend: SharedBackend, _config: SuiteConfig) {
    for op in [UnaryOp::GeluTanh, UnaryOp::Silu] {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::I32, crate::common::harness::dims(&[4]));
        assert_error(
            "i32 x",
            b.unary(op, x),
            ErrorCode::InvalidArgument,
            &[op.name(), "x"],
        );
        let out = b.tensor("out", DType::F32, crate::common::harness::dims(&[4]));
        b.op(Op::Unary(Unary { op, x, out })).output(out);
        let blob = b.encode_unchecked().unwrap();
        let result = LoadedDelegate::init_with_backend(
            "under-test",
            Arc::clone(&backend),
            FreeableBuffer::new(blob),
            &[],
            &BackendInitContext::new(),
        )
        .await;
        assert_error("i32 x", result, ErrorCode::InvalidProgram, &[op.name(), "x"]);
    }
}
}
