//! Argmax over the last dim: by hand (ties to the lowest index, NaN ranked as `-inf`, `-0` equal
//! to `+0`, infinite rows), rows longer than any workgroup (V = 262,144, the Gemma vocabulary)
//! with the maximum placed at the start, end and middle, random rows against a plain loop, and
//! hostile programs refused.

use crate::common::harness::{
    Model, SuiteConfig, assert_error, assert_exact, dims, f32_tensor, init_blob,
};
use crate::common::reference::Ref;
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::ErrorCode;
use webdelegate::program::ops::Argmax;
use webdelegate::program::{DType, Op, ProgramBuilder};
use webdelegate::registry::SharedBackend;

/// The first index of the largest value, NaN as `-inf` (the op's definition, in plain Rust).
pub fn reference_row(row: &[f32]) -> i32 {
    let rank = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let mut best = -1i32;
    for (i, &v) in row.iter().enumerate() {
        if best < 0 || rank(v) > rank(row[best as usize]) {
            best = i as i32;
        }
    }
    best
}

fn argmax_model(shape: &[usize]) -> Model {
    let mut m = Model::new();
    let x = m.input("x", shape);
    let out = m.b.push(|out| Argmax { x, out }).unwrap();
    m.b.output(out);
    m
}

async fn run_argmax(backend: &SharedBackend, shape: &[usize], values: Vec<f32>) -> Vec<f64> {
    let got = argmax_model(shape)
        .run(backend, vec![f32_tensor(shape, values)])
        .await;
    assert!(
        matches!(got[0].data(), webdelegate::TensorData::Int32(_)),
        "argmax gives i32"
    );
    Ref::from_tensor(&got[0]).data
}

op_case! {
/// Eight rows of five, each with its expected index worked out by hand.
pub async fn argmax_by_hand_ties_nan_inf(backend: SharedBackend, _config: SuiteConfig) {
    let (nan, inf) = (f32::NAN, f32::INFINITY);
    let rows: [([f32; 5], i32); 8] = [
        ([1.0, 5.0, 2.0, 5.0, 0.0], 1),        // tie: the lower index
        ([-3.0, -1.0, -2.0, -1.5, -9.0], 1),   // all negative
        ([nan, 1.0, nan, 2.0, nan], 3),        // NaN ranks as -inf
        ([nan, nan, nan, nan, nan], 0),        // only NaN: the first
        ([-inf, nan, -inf, -inf, -inf], 0),    // -inf and NaN tie
        ([1.0, inf, 3.0, inf, nan], 1),        // +inf wins, first of two
        ([-0.0, 0.0, -0.0, -1.0, -2.0], 0),    // -0 == +0
        ([1.0, 2.0, 3.0, 4.0, 4.5], 4),        // the last
    ];
    let values: Vec<f32> = rows.iter().flat_map(|(r, _)| r.iter().copied()).collect();
    let m = argmax_model(&[2, 4, 5]);
    assert!(m.dump().contains("argmax x=%0 -> %1"), "{}", m.dump());
    let got = m.run(&backend, vec![f32_tensor(&[2, 4, 5], values)]).await;
    let want: Vec<f64> = rows.iter().map(|(_, i)| f64::from(*i)).collect();
    assert_exact("argmax", &got[0], &Ref::from_f64(&[2, 4], want));
}
}

op_case! {
/// One row of V = 262,144 (and V = 262,144 + 37, not a multiple of any workgroup size) with the
/// maximum at the first, the last and a middle index, plus an equal value placed later (the
/// first must win); then random rows of several widths against `reference_row`.
pub async fn argmax_long_and_random_rows(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(83);
    for v in [262_144usize, 262_181] {
        for peak in [0, v - 1, 131_071] {
            let mut values = rng.vec(v, -30.0, 30.0);
            values[peak] = 31.0;
            if peak + 1000 < v {
                values[peak + 1000] = 31.0;
            }
            let got = run_argmax(&backend, &[1, v], values).await;
            assert_eq!(got, vec![peak as f64], "V = {v}, peak at {peak}");
        }
    }
    let widths: &[usize] = if config.small { &[1, 33, 1025] } else { &[1, 7, 32, 33, 1000, 1025, 5000] };
    for &width in widths {
        let rows = 1 + rng.below(6);
        // Few distinct values so ties are common.
        let values: Vec<f32> = (0..rows * width).map(|_| rng.below(9) as f32 - 4.0).collect();
        let want: Vec<f64> = values.chunks(width).map(|r| f64::from(reference_row(r))).collect();
        let got = run_argmax(&backend, &[rows, width], values).await;
        assert_eq!(got, want, "rows {rows} x {width}");
    }
}
}

op_case! {
/// An i32 `x`, a scalar `x`, an f32 or wrongly shaped `out`: refused naming the operand.
pub async fn argmax_refuses_bad_programs(backend: SharedBackend, _config: SuiteConfig) {
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::I32, dims(&[2, 3]));
    assert_error("i32 x", b.push(|out| Argmax { x, out }), ErrorCode::InvalidArgument, &["argmax", "x"]);
    let scalar = b.input("s", DType::F32, dims(&[]));
    assert_error("scalar x", b.push(|out| Argmax { x: scalar, out }), ErrorCode::InvalidArgument, &["argmax", "x"]);
    let cases: [(&str, DType, &[usize]); 2] = [("f32 out", DType::F32, &[2]), ("out [3]", DType::I32, &[3])];
    for (what, dtype, shape) in cases {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, dims(&[2, 3]));
        let out = b.tensor("out", dtype, dims(shape));
        b.op(Op::Argmax(Argmax { x, out })).output(out);
        assert_error(what, init_blob(&backend, &b).await, ErrorCode::InvalidProgram, &["argmax", "out"]);
    }
}
}
