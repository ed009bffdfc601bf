//! Matrix products: every transpose combination, bias, batch broadcasting, random shapes that
//! are not multiples of any tile size; each case under every matmul kernel of the backend
//! (`config.matmul_specs`).

use crate::common::harness::{Model, SuiteConfig, assert_close, assert_exact, f32_tensor};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::registry::SharedBackend;

op_case! {
/// `[[1,2],[3,4]] @ [[5,6],[7,8]] = [[19,22],[43,50]]` with each operand stored plain or
/// transposed, with and without the bias `[1, -1]`.
pub async fn matmul_by_hand_all_transposes_and_bias(backend: SharedBackend, config: SuiteConfig) {
    let a_plain = [1.0, 2.0, 3.0, 4.0];
    let a_transposed = [1.0, 3.0, 2.0, 4.0];
    let b_plain = [5.0, 6.0, 7.0, 8.0];
    let b_transposed = [5.0, 7.0, 6.0, 8.0];
    for ta in [false, true] {
        for tb in [false, true] {
            for with_bias in [false, true] {
                let mut m = Model::new();
                let a = m.input("a", &[2, 2]);
                let b = m.param("b", &[2, 2], if tb { &b_transposed } else { &b_plain });
                let bias = with_bias.then(|| m.param("bias", &[2], &[1.0, -1.0]));
                let out = m.b.matmul(a, b, bias, ta, tb).unwrap();
                m.b.output(out);
                let a_values = if ta { a_transposed } else { a_plain };
                let want = if with_bias {
                    [20.0, 21.0, 44.0, 49.0]
                } else {
                    [19.0, 22.0, 43.0, 50.0]
                };
                for &specs in config.matmul_specs {
                    let got = m
                        .run_with(&backend, specs, vec![f32_tensor(&[2, 2], a_values.to_vec())])
                        .await;
                    let what = format!("matmul ta={ta} tb={tb} bias={with_bias} {specs:?}");
                    assert_exact(&what, &got[0], &Ref::new(&[2, 2], &want));
                }
            }
        }
    }
}
}

op_case! {
/// A `[2, 1, 2]` batch against a shared `[2, 2]` matrix, and a `[2, 1, 1, 2]` batch against a
/// `[3, 2, 1]` one (both batch dims broadcast).
pub async fn matmul_by_hand_batch_broadcast(backend: SharedBackend, config: SuiteConfig) {
    for &specs in config.matmul_specs {
    let mut m = Model::new();
    let a = m.input("a", &[2, 1, 2]);
    let b = m.param("b", &[2, 2], &[5.0, 6.0, 7.0, 8.0]);
    let out = m.b.matmul(a, b, None, false, false).unwrap();
    m.b.output(out);
    let got = m
        .run_with(
            &backend,
            specs,
            vec![f32_tensor(&[2, 1, 2], vec![1.0, 0.0, 0.0, 1.0])],
        )
        .await;
    assert_exact(
        "shared b",
        &got[0],
        &Ref::new(&[2, 1, 2], &[5.0, 6.0, 7.0, 8.0]),
    );

    let mut m = Model::new();
    let a = m.input("a", &[2, 1, 1, 2]);
    let b = m.param("b", &[3, 2, 1], &[1.0, 1.0, 1.0, -1.0, 2.0, 0.0]);
    let out = m.b.matmul(a, b, None, false, false).unwrap();
    m.b.output(out);
    let got = m
        .run_with(
            &backend,
            specs,
            vec![f32_tensor(&[2, 1, 1, 2], vec![1.0, 2.0, 3.0, 4.0])],
        )
        .await;
    // Row [1, 2] and row [3, 4], each against columns [1,1], [1,-1], [2,0].
    let want = [3.0, -1.0, 2.0, 7.0, -1.0, 6.0];
    assert_exact(&format!("both broadcast {specs:?}"), &got[0], &Ref::new(&[2, 3, 1, 1], &want));
    }
}
}

op_case! {
/// Random `m x k x n` (odd, prime, tile-straddling, 1) with every transpose combination, an
/// optional bias and random batch broadcasting, against the f64 reference.
pub async fn matmul_random_shapes(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(21);
    let extents: &[usize] = if config.small {
        &[1, 3, 5, 8, 17]
    } else {
        &[1, 3, 16, 17, 33, 64, 65, 100, 129]
    };
    let trials = if config.small { 8 } else { 24 };
    for trial in 0..trials {
        let (m_, k, n) = (rng.pick(extents), rng.pick(extents), rng.pick(extents));
        let (ta, tb) = (rng.below(2) == 1, rng.below(2) == 1);
        let batch_a: Vec<usize> = match rng.below(4) {
            0 => vec![],
            1 => vec![2],
            2 => vec![2, 1],
            _ => vec![1, 3],
        };
        let batch_b: Vec<usize> = match rng.below(3) {
            0 => vec![],
            1 => batch_a
                .iter()
                .map(|&d| if d == 1 { 2 } else { d })
                .collect(),
            _ => batch_a.clone(),
        };
        let mut a_shape = batch_a.clone();
        a_shape.extend(if ta { [k, m_] } else { [m_, k] });
        let mut b_shape = batch_b.clone();
        b_shape.extend(if tb { [n, k] } else { [k, n] });
        let a_values = rng.vec(a_shape.iter().product(), -1.0, 1.0);
        let b_values = rng.vec(b_shape.iter().product(), -1.0, 1.0);
        let bias_values = (rng.below(2) == 1).then(|| rng.vec(n, -1.0, 1.0));
        let mut model = Model::new();
        let a = model.input("a", &a_shape);
        let b = model.param("b", &b_shape, &b_values);
        let bias = bias_values.as_ref().map(|v| model.param("bias", &[n], v));
        let out = model.b.matmul(a, b, bias, ta, tb).unwrap();
        model.b.output(out);
        let want = reference::matmul(
            &Ref::new(&a_shape, &a_values),
            &Ref::new(&b_shape, &b_values),
            bias_values.as_ref().map(|v| Ref::new(&[n], v)).as_ref(),
            ta,
            tb,
        );
        for &specs in config.matmul_specs {
            let got = model
                .run_with(&backend, specs, vec![f32_tensor(&a_shape, a_values.clone())])
                .await;
            let what =
                format!("trial {trial}: {a_shape:?} (t={ta}) @ {b_shape:?} (t={tb}) {specs:?}");
            assert_close(&what, &got[0], &want, config.matmul);
        }
    }
}
}
