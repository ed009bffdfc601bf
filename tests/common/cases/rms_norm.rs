//! RMS normalisation: by hand (with and without a weight), on random shapes (short and long
//! rows) against f64, and hostile programs (wrong weight shape or dtype, bad eps) refused with
//! the right codes.

use crate::common::harness::{
    Model, SuiteConfig, assert_close, assert_error, f32_tensor, init_blob,
};
use crate::common::reference::Ref;
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::program::ops::RmsNorm;
use webdelegate::program::{DType, Op, ProgramBuilder};
use webdelegate::registry::SharedBackend;
use webdelegate::{ErrorCode, program::dump};

/// `x / sqrt(mean(x^2) + eps) (* weight)` over the last dim (`width` long), in f64.
fn reference(x: &Ref, width: usize, weight: Option<&[f32]>, eps: f64) -> Ref {
    let mut data = Vec::with_capacity(x.data.len());
    for row in x.data.chunks(width.max(1)) {
        let mean_square = row.iter().map(|v| v * v).sum::<f64>() / width as f64;
        let inverse = 1.0 / (mean_square + eps).sqrt();
        data.extend(
            row.iter()
                .enumerate()
                .map(|(j, v)| v * inverse * weight.map_or(1.0, |w| f64::from(w[j]))),
        );
    }
    Ref::from_f64(&x.shape, data)
}

op_case! {
/// `[1, 2, 3, 4]` has mean square 7.5, plus `eps = 0.5` gives 8: divided by `2 sqrt 2`, times
/// `weight = [1, 2, 1, 2]`; `[-2, 2, -2, 2]` has 4 + 0.5: divided by `sqrt 4.5`.
pub async fn rms_norm_by_hand(backend: SharedBackend, config: SuiteConfig) {
    let mut m = Model::new();
    let x = m.input("x", &[2, 4]);
    let weight = m.param("weight", &[4], &[1.0, 2.0, 1.0, 2.0]);
    let weight = Some(weight);
    let out = m.b.push(|out| RmsNorm { x, weight, eps: 0.5, out }).unwrap();
    m.b.output(out);
    assert!(m.dump().contains("rms_norm x=%0 weight=%1 eps=0.5 -> %2"), "{}", m.dump());
    let values = vec![1.0, 2.0, 3.0, 4.0, -2.0, 2.0, -2.0, 2.0];
    let got = m.run(&backend, vec![f32_tensor(&[2, 4], values)]).await;
    let (a, b) = (1.0 / 8f64.sqrt(), 1.0 / 4.5f64.sqrt());
    let want = [a, 4.0 * a, 3.0 * a, 8.0 * a, -2.0 * b, 4.0 * b, -2.0 * b, 4.0 * b];
    assert_close(
        "rms_norm",
        &got[0],
        &Ref::from_f64(&[2, 4], want.to_vec()),
        config.reduction,
    );
}
}

op_case! {
/// Without a weight: the same rows as above, normalised and not scaled.
pub async fn rms_norm_without_weight(backend: SharedBackend, config: SuiteConfig) {
    let mut m = Model::new();
    let x = m.input("x", &[2, 4]);
    let out = m.b.push(|out| RmsNorm { x, weight: None, eps: 0.5, out }).unwrap();
    m.b.output(out);
    assert!(m.dump().contains("rms_norm x=%0 weight=none eps=0.5 -> %1"), "{}", m.dump());
    let values = vec![1.0, 2.0, 3.0, 4.0, -2.0, 2.0, -2.0, 2.0];
    let got = m.run(&backend, vec![f32_tensor(&[2, 4], values)]).await;
    let (a, b) = (1.0 / 8f64.sqrt(), 1.0 / 4.5f64.sqrt());
    let want = [a, 2.0 * a, 3.0 * a, 4.0 * a, -2.0 * b, 2.0 * b, -2.0 * b, 2.0 * b];
    assert_close(
        "rms_norm without weight",
        &got[0],
        &Ref::from_f64(&[2, 4], want.to_vec()),
        config.reduction,
    );
}
}

op_case! {
/// Random rows of every width class (one element, short rows of one 32-thread workgroup, rows
/// past 1024 on the configured workgroup size) and leading dims, with `eps` 1e-6 as Gemma.
pub async fn rms_norm_random(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(47);
    let widths: &[usize] = if config.small {
        &[1, 5, 64]
    } else {
        &[1, 7, 64, 65, 640, 1100]
    };
    for &width in widths {
        let (batch, seq) = (1 + rng.below(2), 1 + rng.below(5));
        let shape = [batch, seq, width];
        let values = rng.vec(batch * seq * width, -3.0, 3.0);
        let weight_values = rng.vec(width, 0.2, 30.0);
        let mut m = Model::new();
        let x = m.input("x", &shape);
        // Every other width without a weight.
        let weighted = width % 2 == 1 || width == 64;
        let weight = weighted.then(|| m.param("weight", &[width], &weight_values));
        let out = m.b.push(|out| RmsNorm { x, weight, eps: 1e-6, out }).unwrap();
        m.b.output(out);
        let got = m.run(&backend, vec![f32_tensor(&shape, values.clone())]).await;
        let reference_weight = weighted.then_some(&weight_values[..]);
        let want = reference(&Ref::new(&shape, &values), width, reference_weight, 1e-6);
        assert_close(&format!("rms_norm {shape:?} weight {weighted}"), &got[0], &want, config.reduction);
    }
}
}

op_case! {
/// The builder refuses a weight that is not `[H]`, a non-f32 operand and a negative or NaN
/// `eps` (`InvalidArgument`); the same programs made by hand are `InvalidProgram` at init.
pub async fn rms_norm_refuses_bad_programs(backend: SharedBackend, _config: SuiteConfig) {
    let cases: [(&str, usize, DType, f32, &str); 4] = [
        ("weight [3] for rows of 4", 3, DType::F32, 1e-6, "weight"),
        ("i32 weight", 4, DType::I32, 1e-6, "i32"),
        ("negative eps", 4, DType::F32, -1.0, "eps"),
        ("NaN eps", 4, DType::F32, f32::NAN, "eps"),
    ];
    for (what, width, dtype, eps, part) in cases {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, crate::common::harness::dims(&[2, 4]));
        let weight = Some(b.input("weight", dtype, crate::common::harness::dims(&[width])));
        let before = b.program().clone();
        assert_error(
            what,
            b.push(|out| RmsNorm { x, weight, eps, out }),
            ErrorCode::InvalidArgument,
            &["rms_norm", part],
        );
        assert_eq!(b.program(), &before, "{what}: a refused op leaves the builder unchanged");
        let out = b.tensor("out", DType::F32, crate::common::harness::dims(&[2, 4]));
        b.op(Op::RmsNorm(RmsNorm { x, weight, eps, out })).output(out);
        assert_error(
            what,
            init_blob(&backend, &b).await,
            ErrorCode::InvalidProgram,
            &["rms_norm", part],
        );
        let _ = dump(b.program());
    }
}
}
