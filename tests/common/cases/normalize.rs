//! Layer norm, softmax (with and without an additive mask), L2 normalisation, mean pooling.

use crate::common::harness::{Model, SuiteConfig, assert_close, dims, f32_tensor, i64_tensor};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::program::DType;
use webdelegate::registry::SharedBackend;
use webdelegate::{Tensor, TensorData};

op_case! {
/// `[1,2,3,4]`: mean 2.5, variance 1.25, with `eps = 0.75` so `(x - 2.5) / sqrt(2)` =
/// `+-1.0607, +-0.3536`; then `gamma = [1, 2, 1, 2]`, `beta = [0, 0, 1, 1]`. A constant row has
/// variance 0 and normalises to exactly `beta`.
pub async fn layer_norm_by_hand(backend: SharedBackend, config: SuiteConfig) {
    let mut m = Model::new();
    let x = m.input("x", &[2, 4]);
    let gamma = m.param("gamma", &[4], &[1.0, 2.0, 1.0, 2.0]);
    let beta = m.param("beta", &[4], &[0.0, 0.0, 1.0, 1.0]);
    let out = m.b.layer_norm(x, gamma, beta, 0.75).unwrap();
    m.b.output(out);
    let got = m
        .run(
            &backend,
            vec![f32_tensor(
                &[2, 4],
                vec![1.0, 2.0, 3.0, 4.0, 7.0, 7.0, 7.0, 7.0],
            )],
        )
        .await;
    let (big, small) = (1.060_660_171_779_821_3, 0.353_553_390_593_273_8);
    let want = [
        -big,
        -2.0 * small,
        small + 1.0,
        2.0 * big + 1.0,
        0.0,
        0.0,
        1.0,
        1.0,
    ];
    assert_close(
        "layer_norm",
        &got[0],
        &Ref::from_f64(&[2, 4], want.to_vec()),
        config.reduction,
    );
}
}

op_case! {
/// `softmax([1, 2, 3]) = [0.0900, 0.2447, 0.6652]`; with the mask `[0, -10000, 0]` the middle
/// entry vanishes: `[e/(e+e^3), 0, e^3/(e+e^3)]`.
pub async fn softmax_by_hand_with_and_without_mask(backend: SharedBackend, config: SuiteConfig) {
    let mut m = Model::new();
    let x = m.input("x", &[1, 3]);
    let mask = m.param("mask", &[3], &[0.0, -10000.0, 0.0]);
    let plain = m.b.softmax(x, None).unwrap();
    let masked = m.b.softmax(x, Some(mask)).unwrap();
    m.b.output(plain).output(masked);
    let got = m
        .run(&backend, vec![f32_tensor(&[1, 3], vec![1.0, 2.0, 3.0])])
        .await;
    let plain_want = [
        0.090_030_573_170_380_46,
        0.244_728_471_054_797_6,
        0.665_240_955_774_821_9,
    ];
    let masked_want = [0.119_202_922_022_117_55, 0.0, 0.880_797_077_977_882_3];
    assert_close(
        "softmax",
        &got[0],
        &Ref::from_f64(&[1, 3], plain_want.to_vec()),
        config.reduction,
    );
    assert_close(
        "masked",
        &got[1],
        &Ref::from_f64(&[1, 3], masked_want.to_vec()),
        config.reduction,
    );
}
}

op_case! {
/// `[3, 4] / 5 = [0.6, 0.8]`; a zero row stays zero (eps); mean pooling of `[[1,2],[3,4],[5,6]]`
/// under masks `[1,1,0]` (`[2, 3]`), `[0,0,0]` (zeros) and `[0,7,1]` (non-zero counts as 1:
/// `[4, 5]`).
pub async fn l2_normalize_and_mean_pool_by_hand(backend: SharedBackend, config: SuiteConfig) {
    let mut m = Model::new();
    let v = m.input("v", &[2, 2]);
    let normalized = m.b.l2_normalize(v, 1e-12).unwrap();
    let x = m.input("x", &[3, 3, 2]);
    let mask = m.b.input("mask", DType::I64, dims(&[3, 3]));
    let pooled = m.b.mean_pool(x, mask).unwrap();
    let mask_u8 = m.b.input("mask_u8", DType::U8, dims(&[3, 3]));
    let pooled_u8 = m.b.mean_pool(x, mask_u8).unwrap();
    m.b.output(normalized).output(pooled).output(pooled_u8);
    let tokens: Vec<f32> = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0].repeat(3);
    let masks = vec![1, 1, 0, 0, 0, 0, 0, 7, 1];
    let got = m
        .run(
            &backend,
            vec![
                f32_tensor(&[2, 2], vec![3.0, 4.0, 0.0, 0.0]),
                f32_tensor(&[3, 3, 2], tokens),
                i64_tensor(&[3, 3], masks.clone()),
                Tensor::new(
                    vec![3, 3],
                    TensorData::UInt8(masks.iter().map(|&v| v as u8).collect()),
                )
                .unwrap(),
            ],
        )
        .await;
    let tol = config.reduction;
    assert_close(
        "l2",
        &got[0],
        &Ref::new(&[2, 2], &[0.6, 0.8, 0.0, 0.0]),
        tol,
    );
    let pooled_want = Ref::new(&[3, 2], &[2.0, 3.0, 0.0, 0.0, 4.0, 5.0]);
    assert_close("mean_pool i64 mask", &got[1], &pooled_want, tol);
    assert_close("mean_pool u8 mask", &got[2], &pooled_want, tol);
}
}

op_case! {
/// Layer norm, softmax with a broadcast `[B, 1, 1, S]` mask, L2 norm and mean pooling over
/// random shapes, against the f64 reference.
pub async fn reductions_random(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(31);
    let widths: &[usize] = if config.small {
        &[1, 3, 8]
    } else {
        &[1, 7, 64, 65, 384]
    };
    for trial in 0..(if config.small { 2 } else { 5 }) {
        let (batch, heads, seq) = (1 + rng.below(2), 1 + rng.below(3), 1 + rng.below(9));
        let width = rng.pick(widths);
        let x_shape = [batch, seq, width];
        let x_values = rng.vec(batch * seq * width, -3.0, 3.0);
        let gamma_values = rng.vec(width, 0.5, 1.5);
        let beta_values = rng.vec(width, -0.5, 0.5);
        let scores_shape = [batch, heads, seq, seq];
        let scores = rng.vec(scores_shape.iter().product(), -5.0, 5.0);
        let mask_values: Vec<f32> = (0..batch * seq)
            .map(|i| {
                if i % seq == 0 || rng.below(3) > 0 {
                    0.0
                } else {
                    -10000.0
                }
            })
            .collect();
        let keep: Vec<i64> = mask_values.iter().map(|&v| i64::from(v == 0.0)).collect();

        let mut m = Model::new();
        let x = m.input("x", &x_shape);
        let gamma = m.param("gamma", &[width], &gamma_values);
        let beta = m.param("beta", &[width], &beta_values);
        let s = m.input("scores", &scores_shape);
        let mask = m.input("mask", &[batch, 1, 1, seq]);
        let keep_input = m.b.input("keep", DType::I64, dims(&[batch, seq]));
        let norm = m.b.layer_norm(x, gamma, beta, 1e-5).unwrap();
        let probs = m.b.softmax(s, Some(mask)).unwrap();
        let plain = m.b.softmax(x, None).unwrap();
        let l2 = m.b.l2_normalize(x, 1e-12).unwrap();
        let pooled = m.b.mean_pool(x, keep_input).unwrap();
        for out in [norm, probs, plain, l2, pooled] {
            m.b.output(out);
        }
        let got = m
            .run(
                &backend,
                vec![
                    f32_tensor(&x_shape, x_values.clone()),
                    f32_tensor(&scores_shape, scores.clone()),
                    f32_tensor(&[batch, 1, 1, seq], mask_values.clone()),
                    i64_tensor(&[batch, seq], keep.clone()),
                ],
            )
            .await;
        let rx = Ref::new(&x_shape, &x_values);
        let wants = [
            reference::layer_norm(
                &rx,
                &Ref::new(&[width], &gamma_values),
                &Ref::new(&[width], &beta_values),
                1e-5,
            ),
            reference::softmax(
                &Ref::new(&scores_shape, &scores),
                Some(&Ref::new(&[batch, 1, 1, seq], &mask_values)),
            ),
            reference::softmax(&rx, None),
            reference::l2_normalize(&rx, 1e-12),
            reference::mean_pool(
                &rx,
                &Ref::from_f64(&[batch, seq], keep.iter().map(|&k| k as f64).collect()),
            ),
        ];
        for (what, (got, want)) in ["layer_norm", "masked softmax", "softmax", "l2", "mean_pool"]
            .iter()
            .zip(got.iter().zip(&wants))
        {
            assert_close(
                &format!("trial {trial} {what} {x_shape:?}"),
                got,
                want,
                config.reduction,
            );
        }
    }
}
}
