//! One tensor read through two operands of one op: `x * x`, `x + x`, `x @ x^T`, `x + reshape(x)`
//! and a layer norm whose gamma and beta are one parameter. Browsers refuse a dispatch that binds
//! the same bytes twice as writable storage, so the WebGPU backend must give the repeated
//! operand its own copy; the results are checked against f64 references here.

use crate::common::harness::{Model, SuiteConfig, assert_close, dims, f32_tensor};
use crate::common::reference::Ref;
use crate::op_case;
use webdelegate::program::BinaryOp;
use webdelegate::registry::SharedBackend;

op_case! {
/// `x = [[1, -2, 3], [0.5, 4, -1]]`; gamma = beta = `[1, 2, 3]`, layer norm eps `1e-5`.
pub async fn one_tensor_read_through_two_operands(backend: SharedBackend, config: SuiteConfig) {
    let xs = [1.0f32, -2.0, 3.0, 0.5, 4.0, -1.0];
    let mut m = Model::new();
    let x = m.input("x", &[2, 3]);
    let g = m.param("g", &[3], &[1.0, 2.0, 3.0]);
    let square = m.b.binary(BinaryOp::Mul, x, x).unwrap();
    let double = m.b.binary(BinaryOp::Add, x, x).unwrap();
    let gram = m.b.matmul(x, x, None, false, true).unwrap();
    let view = m.b.reshape(x, dims(&[2, 3])).unwrap();
    let with_view = m.b.binary(BinaryOp::Sub, view, x).unwrap();
    let norm = m.b.layer_norm(x, g, g, 1e-5).unwrap();
    m.b.output(square)
        .output(double)
        .output(gram)
        .output(with_view)
        .output(norm);
    let got = m
        .run(&backend, vec![f32_tensor(&[2, 3], xs.to_vec())])
        .await;

    let x64: Vec<f64> = xs.iter().map(|&v| f64::from(v)).collect();
    let row = |r: usize| &x64[r * 3..r * 3 + 3];
    let gram_want: Vec<f64> = (0..4)
        .map(|i| row(i / 2).iter().zip(row(i % 2)).map(|(a, b)| a * b).sum())
        .collect();
    let norm_want: Vec<f64> = (0..2)
        .flat_map(|r| {
            let mean = row(r).iter().sum::<f64>() / 3.0;
            let var = row(r).iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 3.0;
            let scale = 1.0 / (var + 1e-5).sqrt();
            (0..3).map(move |c| (row(r)[c] - mean) * scale * (c + 1) as f64 + (c + 1) as f64)
        })
        .collect();
    let cases = [
        (
            "x * x",
            Ref::from_f64(&[2, 3], x64.iter().map(|v| v * v).collect()),
            config.elementwise,
        ),
        (
            "x + x",
            Ref::from_f64(&[2, 3], x64.iter().map(|v| v + v).collect()),
            config.elementwise,
        ),
        ("x @ x^T", Ref::from_f64(&[2, 2], gram_want), config.matmul),
        (
            "reshape(x) - x",
            Ref::from_f64(&[2, 3], vec![0.0; 6]),
            config.elementwise,
        ),
        (
            "layer_norm(x, g, g)",
            Ref::from_f64(&[2, 3], norm_want),
            config.reduction,
        ),
    ];
    assert_eq!(got.len(), cases.len());
    for ((what, want, tol), got) in cases.iter().zip(&got) {
        assert_close(what, got, want, *tol);
    }
}
}
