//! Gather, binaries, scale and activations.

use crate::common::harness::{
    Model, SuiteConfig, assert_close, assert_error, assert_exact, dims, execute, f32_tensor,
    i32_tensor, i64_tensor,
};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::ErrorCode;
use webdelegate::program::{BinaryOp, DType, UnaryOp};
use webdelegate::registry::SharedBackend;

fn table_4x2(m: &mut Model) -> u32 {
    m.param(
        "table",
        &[4, 2],
        &[0.0, 1.0, 10.0, 11.0, 20.0, 21.0, 30.0, 31.0],
    )
}

op_case! {
/// Rows 3, 0, 1, 1 of a 4 x 2 table.
pub async fn gather_by_hand_with_i32_ids(backend: SharedBackend, _config: SuiteConfig) {
    let mut m = Model::new();
    let table = table_4x2(&mut m);
    let ids = m.b.input("ids", DType::I32, dims(&[2, 2]));
    let out = m.b.gather(table, ids).unwrap();
    m.b.output(out);
    let got = m
        .run(&backend, vec![i32_tensor(&[2, 2], vec![3, 0, 1, 1])])
        .await;
    let want = Ref::new(&[2, 2, 2], &[30.0, 31.0, 0.0, 1.0, 10.0, 11.0, 10.0, 11.0]);
    assert_exact("gather i32", &got[0], &want);
}
}

op_case! {
/// i64 ids (as PyTorch produces them) under a symbolic sequence; ids outside the table are
/// `InvalidArgument` at execute, and the delegate still works afterwards.
pub async fn gather_by_hand_with_i64_ids_and_bad_ids(backend: SharedBackend, _config: SuiteConfig) {
    let mut m = Model::new();
    let table = table_4x2(&mut m);
    let seq = m.b.symbol("seq");
    let ids = m.b.input("ids", DType::I64, vec![seq]);
    let out = m.b.gather(table, ids).unwrap();
    m.b.output(out);
    let mut delegate = m.init(&backend).await.unwrap();
    let got = execute(&mut delegate, vec![i64_tensor(&[3], vec![2, 2, 0])], 1)
        .await
        .unwrap();
    assert_exact(
        "gather i64",
        &got[0],
        &Ref::new(&[3, 2], &[20.0, 21.0, 20.0, 21.0, 0.0, 1.0]),
    );
    for bad in [4i64, -1, i64::MAX, i64::MIN] {
        let result = execute(&mut delegate, vec![i64_tensor(&[2], vec![1, bad])], 1).await;
        assert_error(
            "out-of-range id",
            result,
            ErrorCode::InvalidArgument,
            &[&bad.to_string()],
        );
    }
    let got = execute(&mut delegate, vec![i64_tensor(&[1], vec![3])], 1)
        .await
        .unwrap();
    assert_exact(
        "gather after errors",
        &got[0],
        &Ref::new(&[1, 2], &[30.0, 31.0]),
    );
}
}

op_case! {
/// `[[1,2,3],[4,5,6]]` against a row, a column and a scalar-like `[1]`.
pub async fn binary_ops_by_hand_with_broadcasting(backend: SharedBackend, config: SuiteConfig) {
    let mut m = Model::new();
    let a = m.input("a", &[2, 3]);
    let row = m.param("row", &[3], &[10.0, 20.0, 30.0]);
    let column = m.param("column", &[2, 1], &[1.0, 2.0]);
    let two = m.param("two", &[1], &[2.0]);
    let zeros = m.param("zeros", &[3], &[0.0, 0.0, 0.0]);
    let add = m.b.add(a, row).unwrap();
    let sub = m.b.sub(a, column).unwrap();
    let mul = m.b.mul(two, a).unwrap();
    let div = m.b.div(row, a).unwrap();
    let by_zero = m.b.div(a, zeros).unwrap();
    for out in [add, sub, mul, div, by_zero] {
        m.b.output(out);
    }
    let x = f32_tensor(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = m.run(&backend, vec![x]).await;
    let expected = [
        ("add", vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]),
        ("sub", vec![0.0, 1.0, 2.0, 2.0, 3.0, 4.0]),
        ("mul", vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]),
        ("div", vec![10.0, 10.0, 10.0, 2.5, 4.0, 5.0]),
        ("div by zero", vec![f64::INFINITY; 6]),
    ];
    // Small integers: exact on any IEEE hardware, except that GPU division may be off by an
    // ulp or two, hence the element-wise tolerance.
    for ((what, want), got) in expected.iter().zip(&got) {
        assert_close(
            what,
            got,
            &Ref::from_f64(&[2, 3], want.clone()),
            config.elementwise,
        );
    }
}
}

op_case! {
/// `2x + 1`, GELU (erf form), tanh and ReLU at points whose values are known.
pub async fn scale_and_activations_by_hand(backend: SharedBackend, config: SuiteConfig) {
    let mut m = Model::new();
    let x = m.input("x", &[5]);
    let scaled = m.b.scale(x, 2.0, 1.0).unwrap();
    let gelu = m.b.gelu(x).unwrap();
    let tanh = m.b.tanh(x).unwrap();
    let relu = m.b.relu(x).unwrap();
    for out in [scaled, gelu, tanh, relu] {
        m.b.output(out);
    }
    let got = m
        .run(
            &backend,
            vec![f32_tensor(&[5], vec![-1.0, 0.0, 0.5, 1.0, 2.0])],
        )
        .await;
    let tol = config.elementwise;
    assert_close(
        "scale",
        &got[0],
        &Ref::new(&[5], &[-1.0, 1.0, 2.0, 3.0, 5.0]),
        tol,
    );
    // x * Phi(x) with Phi(-1) = 0.158655254, Phi(0.5) = 0.691462461, Phi(1) = 0.841344746,
    // Phi(2) = 0.977249868 (standard normal table).
    let gelu_want = [
        -0.158_655_253_931_457_05,
        0.0,
        0.345_731_230_637_006_5,
        0.841_344_746_068_542_9,
        1.954_499_736_103_641_6,
    ];
    assert_close(
        "gelu",
        &got[1],
        &Ref::from_f64(&[5], gelu_want.to_vec()),
        tol,
    );
    let tanh_want = [
        -0.761_594_155_955_764_9,
        0.0,
        0.462_117_157_260_009_7,
        0.761_594_155_955_764_9,
        0.964_027_580_075_817,
    ];
    assert_close(
        "tanh",
        &got[2],
        &Ref::from_f64(&[5], tanh_want.to_vec()),
        tol,
    );
    assert_exact("relu", &got[3], &Ref::new(&[5], &[0.0, 0.0, 0.5, 1.0, 2.0]));
}
}

/// Random shape pairs that broadcast (size-1 dims, missing leading dims, odd extents).
fn broadcast_pair(rng: &mut Rng, small: bool) -> (Vec<usize>, Vec<usize>) {
    let extents: &[usize] = if small {
        &[1, 2, 3, 5]
    } else {
        &[1, 2, 3, 7, 17, 33]
    };
    let rank = 1 + rng.below(4);
    let out: Vec<usize> = (0..rank).map(|_| rng.pick(extents)).collect();
    let mut operand = |which: usize| -> Vec<usize> {
        let drop_leading = rng.below(2) * (which + 1) / 2;
        out[drop_leading.min(rank - 1)..]
            .iter()
            .map(|&d| if rng.below(3) == 0 { 1 } else { d })
            .collect()
    };
    let a = operand(0);
    let b = operand(1);
    (a, b)
}

op_case! {
/// All four binaries over random broadcasting shapes, against the f64 reference.
pub async fn binary_ops_random_broadcasts(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(11);
    let trials = if config.small { 4 } else { 16 };
    for trial in 0..trials {
        let (a_shape, b_shape) = broadcast_pair(&mut rng, config.small);
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            let mut m = Model::new();
            let a = m.input("a", &a_shape);
            let b = m.input("b", &b_shape);
            let out = m.b.binary(op, a, b).unwrap();
            m.b.output(out);
            let a_values = rng.vec(a_shape.iter().product(), -2.0, 2.0);
            // Denominators away from zero.
            let b_values: Vec<f32> = rng
                .vec(b_shape.iter().product(), 0.5, 2.0)
                .into_iter()
                .map(|v| if rng.below(2) == 0 { v } else { -v })
                .collect();
            let got = m
                .run(
                    &backend,
                    vec![
                        f32_tensor(&a_shape, a_values.clone()),
                        f32_tensor(&b_shape, b_values.clone()),
                    ],
                )
                .await;
            let (ra, rb) = (Ref::new(&a_shape, &a_values), Ref::new(&b_shape, &b_values));
            let want = reference::binary(&ra, &rb, |x, y| match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div => x / y,
            });
            let what = format!("trial {trial} {op:?} {a_shape:?} with {b_shape:?}");
            assert_close(&what, &got[0], &want, config.elementwise);
        }
    }
}
}

op_case! {
/// Scale and the activations over random odd-sized inputs spanning both GELU tails.
pub async fn scale_and_activations_random(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(12);
    let len = if config.small { 37 } else { 1037 };
    let values = rng.vec(len, -8.0, 8.0);
    let mut m = Model::new();
    let x = m.input("x", &[len]);
    let scaled = m.b.scale(x, -0.75, 0.25).unwrap();
    m.b.output(scaled);
    for op in [UnaryOp::Gelu, UnaryOp::Tanh, UnaryOp::Relu] {
        let out = m.b.unary(op, x).unwrap();
        m.b.output(out);
    }
    let got = m
        .run(&backend, vec![f32_tensor(&[len], values.clone())])
        .await;
    let x = Ref::new(&[len], &values);
    let wants = [
        x.map(|v| v * -0.75 + 0.25),
        x.map(reference::gelu),
        x.map(f64::tanh),
        x.map(|v| v.max(0.0)),
    ];
    for (what, (got, want)) in ["scale", "gelu", "tanh", "relu"]
        .iter()
        .zip(got.iter().zip(&wants))
    {
        assert_close(what, got, want, config.elementwise);
    }
}
}

op_case! {
/// Embedding lookup over random tables (odd widths) and i32 / i64 ids.
pub async fn gather_random(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(13);
    let (vocab, width) = if config.small { (11, 5) } else { (50, 37) };
    for (trial, dtype) in [DType::I32, DType::I64, DType::I64].into_iter().enumerate() {
        let ids_shape = [1 + rng.below(3), 1 + rng.below(9)];
        let table_values = rng.vec(vocab * width, -1.0, 1.0);
        let ids: Vec<i64> = (0..ids_shape[0] * ids_shape[1])
            .map(|_| rng.below(vocab) as i64)
            .collect();
        let mut m = Model::new();
        let table = m.param("table", &[vocab, width], &table_values);
        let ids_input = m.b.input("ids", dtype, dims(&ids_shape));
        let out = m.b.gather(table, ids_input).unwrap();
        m.b.output(out);
        let ids_tensor = match dtype {
            DType::I32 => i32_tensor(&ids_shape, ids.iter().map(|&i| i as i32).collect()),
            _ => i64_tensor(&ids_shape, ids.clone()),
        };
        let got = m.run(&backend, vec![ids_tensor]).await;
        let want = reference::gather(&Ref::new(&[vocab, width], &table_values), &ids, &ids_shape);
        assert_exact(&format!("gather trial {trial}"), &got[0], &want);
    }
}
}
