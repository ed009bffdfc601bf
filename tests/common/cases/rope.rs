//! Rotary position embedding: by hand (both styles, `dims < D`), against an f64 reference on
//! several heads, a leading batch dim and non-contiguous positions up to 4000 (with a
//! tolerance that grows with the position, see `tolerance`), negative positions, and hostile
//! programs refused with the operand named.

use crate::common::harness::{
    Model, SuiteConfig, assert_error, dims, f32_tensor, i32_tensor, init_blob,
};
use crate::common::reference::Ref;
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::program::ops::{Rope, RopeScaling, RopeStyle};
use webdelegate::program::{DType, Op, ProgramBuilder};
use webdelegate::registry::SharedBackend;
use webdelegate::{ErrorCode, Tensor};

/// RoPE in f64 from the definition: `x` `[.., S, H, D]`, exact angles `p * base^(-2i/dims)`.
pub(super) fn reference(
    x: &Ref,
    positions: &[i32],
    dims: usize,
    base: f64,
    style: RopeStyle,
) -> Ref {
    reference_scaled(x, positions, dims, base, style, &RopeScaling::default())
}

/// [`reference`] with a scaling: angles `p * f * base^(-2i/dims) / c_i`, rotated elements
/// times `m` (the op's definition).
fn reference_scaled(
    x: &Ref,
    positions: &[i32],
    dims: usize,
    base: f64,
    style: RopeStyle,
    scaling: &RopeScaling,
) -> Ref {
    let rank = x.shape.len();
    let (seq, heads, head_dim) = (x.shape[rank - 3], x.shape[rank - 2], x.shape[rank - 1]);
    let half = dims / 2;
    let mut data = x.data.clone();
    for (r, row) in data.chunks_mut(head_dim).enumerate() {
        let p = f64::from(positions[(r / heads) % seq]);
        let source = row.to_vec();
        for i in 0..half {
            let factor = scaling.factors.get(i).map_or(1.0, |&c| f64::from(c));
            let theta =
                p * f64::from(scaling.freq_scale) * base.powf(-2.0 * i as f64 / dims as f64)
                    / factor;
            let m = f64::from(scaling.attn_factor);
            let (a, b) = match style {
                RopeStyle::Neox => (i, i + half),
                RopeStyle::GptJ => (2 * i, 2 * i + 1),
            };
            let (s, c) = theta.sin_cos();
            row[a] = m * (source[a] * c - source[b] * s);
            row[b] = m * (source[a] * s + source[b] * c);
        }
    }
    Ref::from_f64(&x.shape, data)
}

/// The bound the op's doc promises: the f32 angle is within `~1.2e-7 |theta|` of the exact
/// one (two roundings: the inverse frequency and the product), `sin`/`cos` within 2.5e-7, and
/// each output sums two products of `|x| <= max_abs`: so `2 max_abs (|p| 1.5e-7 + 5e-7)`
/// (|theta| <= |p| since every inverse frequency is <= 1), plus the suite's element-wise floor.
fn tolerance(max_abs: f64, max_position: f64, floor: f64) -> f64 {
    2.0 * max_abs * (max_position * 1.5e-7 + 5e-7) + floor
}

fn assert_within(what: &str, got: &Tensor, want: &Ref, allowed: f64) {
    let got = Ref::from_tensor(got);
    assert_eq!(got.shape, want.shape, "{what}: shape");
    for (index, (g, w)) in got.data.iter().zip(&want.data).enumerate() {
        assert!(
            (g - w).abs() <= allowed,
            "{what}: element {index} is {g}, want {w} (error {:e} > {allowed:e})",
            (g - w).abs()
        );
    }
}

fn rope_model(shape: &[usize], dims: u32, base: f32, style: RopeStyle) -> Model {
    let mut m = Model::new();
    let x = m.input("x", shape);
    let positions = m.b.input(
        "positions",
        DType::I32,
        crate::common::harness::dims(&[shape[shape.len() - 3]]),
    );
    let out =
        m.b.push(|out| Rope {
            x,
            positions,
            dims,
            base,
            style,
            out,
            scaling: Default::default(),
        })
        .unwrap();
    m.b.output(out);
    m
}

op_case! {
/// One row `[1, 2, 3, 4, 5, 6]` at position 1, `dims = 4` of `D = 6`, base 10000: pairs
/// rotate by 1 rad and 0.01 rad, elements 4 and 5 pass through. NEOX pairs (0, 2), (1, 3);
/// GPT-J pairs (0, 1), (2, 3). Worked out by hand with `c = cos`, `s = sin` of those angles.
pub async fn rope_by_hand_both_styles(backend: SharedBackend, config: SuiteConfig) {
    let x = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let (s0, c0) = 1f64.sin_cos();
    let (s1, c1) = 0.01f64.sin_cos();
    let cases = [
        (
            RopeStyle::Neox,
            "neox",
            [c0 - 3.0 * s0, 2.0 * c1 - 4.0 * s1, s0 + 3.0 * c0, 2.0 * s1 + 4.0 * c1, 5.0, 6.0],
        ),
        (
            RopeStyle::GptJ,
            "gptj",
            [c0 - 2.0 * s0, s0 + 2.0 * c0, 3.0 * c1 - 4.0 * s1, 3.0 * s1 + 4.0 * c1, 5.0, 6.0],
        ),
    ];
    for (style, name, want) in cases {
        let m = rope_model(&[1, 1, 6], 4, 10_000.0, style);
        assert!(
            m.dump().contains(&format!("rope x=%0 positions=%1 dims=4 base=10000.0 style={name}")),
            "{}",
            m.dump()
        );
        let got = m
            .run(&backend, vec![f32_tensor(&[1, 1, 6], x.clone()), i32_tensor(&[1], vec![1])])
            .await;
        let allowed = tolerance(6.0, 1.0, config.elementwise.abs);
        assert_within(name, &got[0], &Ref::from_f64(&[1, 1, 6], want.to_vec()), allowed);
        // Position 0 is the identity.
        let got = m
            .run(&backend, vec![f32_tensor(&[1, 1, 6], x.clone()), i32_tensor(&[1], vec![0])])
            .await;
        assert_within(name, &got[0], &Ref::new(&[1, 1, 6], &x), 0.0);
    }
}
}

op_case! {
/// Random `[B, S, H, D]` views against the f64 reference: both styles, full and partial
/// rotary dims, Gemma's (D 256, base 1e6) and Llama's (D 64..128, base 1e4..5e5) shapes,
/// several heads, positions non-contiguous ([5, 9, 100]), large (up to 4000) and negative.
pub async fn rope_random_against_f64(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(61);
    let cases: &[(&[usize], u32, f32, &[i32])] = if config.small {
        &[
            (&[1, 3, 2, 8], 8, 10_000.0, &[5, 9, 100]),
            (&[3, 1, 12], 6, 1e6, &[0, 4000, -7]),
        ]
    } else {
        &[
            (&[1, 3, 2, 8], 8, 10_000.0, &[5, 9, 100]),
            (&[3, 1, 12], 6, 1e6, &[0, 4000, -7]),
            (&[2, 3, 4, 64], 64, 10_000.0, &[5, 9, 100]),
            (&[1, 4, 4, 256], 256, 1e6, &[0, 1, 2047, 3999]),
            (&[2, 2, 3, 80], 32, 500_000.0, &[-3000, 3]),
            (&[5, 3, 130], 128, 10_000.0, &[17, 1024, 2500, 3333, 4000]),
        ]
    };
    for &(shape, dims, base, positions) in cases {
        for style in [RopeStyle::Neox, RopeStyle::GptJ] {
            let values = rng.vec(shape.iter().product(), -2.0, 2.0);
            let m = rope_model(shape, dims, base, style);
            let seq = shape[shape.len() - 3];
            let got = m
                .run(
                    &backend,
                    vec![f32_tensor(shape, values.clone()), i32_tensor(&[seq], positions.to_vec())],
                )
                .await;
            let want = reference(&Ref::new(shape, &values), positions, dims as usize, f64::from(base), style);
            let max_position = positions.iter().map(|p| f64::from(p.unsigned_abs())).fold(0.0, f64::max);
            let allowed = tolerance(2.0, max_position, config.elementwise.abs);
            assert_within(&format!("rope {shape:?} dims {dims} {style:?}"), &got[0], &want, allowed);
        }
    }
}
}

op_case! {
/// Positions are data, not indices: `i32::MIN` and `i32::MAX` give finite values of the
/// same norm per pair (a rotation), never an error or an out-of-bounds read.
pub async fn rope_extreme_positions_stay_finite(backend: SharedBackend, _config: SuiteConfig) {
    let m = rope_model(&[2, 1, 4], 4, 10_000.0, RopeStyle::Neox);
    let x = vec![1.0f32, 0.0, 0.0, 1.0, 3.0, 4.0, 0.0, 0.0];
    let got = m
        .run(&backend, vec![f32_tensor(&[2, 1, 4], x), i32_tensor(&[2], vec![i32::MIN, i32::MAX])])
        .await;
    let got = Ref::from_tensor(&got[0]);
    assert!(got.data.iter().all(|v| v.is_finite() && v.abs() <= 5.0), "{got:?}");
}
}

/// A hostile rope: what, x shape, positions dtype, positions length, dims, base, and the
/// word its error must name.
type BadRope = (
    &'static str,
    &'static [usize],
    DType,
    usize,
    u32,
    f32,
    &'static str,
);

op_case! {
/// Odd, zero or too many rotary dims, a non-positive or NaN base, i64 or mis-sized positions
/// and a rank-2 `x`: `InvalidArgument` from the builder, `InvalidProgram` at init, the message
/// naming the op and the attribute or operand.
pub async fn rope_refuses_bad_programs(backend: SharedBackend, _config: SuiteConfig) {
    let cases: [BadRope; 8] = [
        ("odd dims", &[3, 2, 8], DType::I32, 3, 5, 1e4, "dims"),
        ("zero dims", &[3, 2, 8], DType::I32, 3, 0, 1e4, "dims"),
        ("dims > D", &[3, 2, 8], DType::I32, 3, 10, 1e4, "dims"),
        ("zero base", &[3, 2, 8], DType::I32, 3, 8, 0.0, "base"),
        ("NaN base", &[3, 2, 8], DType::I32, 3, 8, f32::NAN, "base"),
        ("i64 positions", &[3, 2, 8], DType::I64, 3, 8, 1e4, "positions"),
        ("positions [2] for S 3", &[3, 2, 8], DType::I32, 2, 8, 1e4, "positions"),
        ("rank-2 x", &[3, 8], DType::I32, 3, 8, 1e4, "x"),
    ];
    for (what, shape, positions_dtype, seq, rope_dims, base, part) in cases {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, dims(shape));
        let positions = b.input("positions", positions_dtype, dims(&[seq]));
        let op = |out| Rope {
            x,
            positions,
            dims: rope_dims,
            base,
            style: RopeStyle::Neox,
            out,
            scaling: Default::default(),
        };
        assert_error(what, b.push(op), ErrorCode::InvalidArgument, &["rope", part]);
        let out = b.tensor("out", DType::F32, dims(shape));
        b.op(Op::Rope(op(out))).output(out);
        assert_error(what, init_blob(&backend, &b).await, ErrorCode::InvalidProgram, &["rope", part]);
    }
}
}

op_case! {
/// QK-norm then RoPE, as Gemma 3 writes them: an RMSNorm over each head's values (with and
/// without a weight) whose only reader is the rope (the WebGPU backend runs the two as one
/// pass), both styles, `dims = 8` of `D = 12` (a pass-through tail), positions 0, 5 and 300;
/// and the same chain with the norm's result also an output (no fusion). Against f64.
pub async fn rms_norm_then_rope(backend: SharedBackend, config: SuiteConfig) {
    use webdelegate::program::ops::RmsNorm;
    let shape = [3usize, 2, 12];
    let mut rng = Rng::new(83);
    let x = rng.vec(72, -3.0, 3.0);
    let weight: Vec<f32> = (0..12).map(|j| 0.6 + 0.1 * j as f32).collect();
    let positions = vec![0, 5, 300];
    for style in [RopeStyle::Neox, RopeStyle::GptJ] {
        for weighted in [true, false] {
            for also_output in [false, true] {
                let mut m = Model::new();
                let xi = m.input("x", &shape);
                let p = m.b.input("positions", DType::I32, dims(&[3]));
                let w = weighted.then(|| m.param("w", &[12], &weight));
                let normed = m
                    .b
                    .push(|out| RmsNorm { x: xi, weight: w, eps: 1e-6, out })
                    .unwrap();
                let out = m
                    .b
                    .push(|out| Rope { x: normed, positions: p, dims: 8, base: 10_000.0, style, out, scaling: Default::default() })
                    .unwrap();
                m.b.output(out);
                if also_output {
                    m.b.output(normed);
                }
                let got = m
                    .run(&backend, vec![f32_tensor(&shape, x.clone()), i32_tensor(&[3], positions.clone())])
                    .await;
                let mut norm_data = Vec::with_capacity(72);
                for row in x.chunks(12) {
                    let mean_square = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / 12.0;
                    let inverse = 1.0 / (mean_square + 1e-6).sqrt();
                    norm_data.extend(row.iter().enumerate().map(|(j, &v)| {
                        f64::from(v) * inverse * if weighted { f64::from(weight[j]) } else { 1.0 }
                    }));
                }
                let want_norm = Ref::from_f64(&shape, norm_data);
                let want = reference(&want_norm, &positions, 8, 10_000.0, style);
                let max_abs = want_norm.data.iter().fold(0f64, |m, v| m.max(v.abs()));
                // The rope's own bound on values within the norm's rounding, plus that rounding
                // carried through the rotation.
                let allowed = tolerance(max_abs, 300.0, config.elementwise.abs)
                    + 2.0 * max_abs * config.reduction.rel;
                let what = format!("{style:?} weighted={weighted} also_output={also_output}");
                assert_within(&what, &got[0], &want, allowed);
                if also_output {
                    assert_within(&what, &got[1], &want_norm, max_abs * config.reduction.rel + config.reduction.abs);
                }
            }
        }
    }
}
}

op_case! {
/// The queries' and the keys' QK-norm and RoPE back to back, as Gemma 3 writes them (the WebGPU
/// backend runs all four ops as one dispatch when both norms are weighted and both ropes agree):
/// q `[3, 4, 12]` and k `[3, 1, 12]` with weights of their own and eps 1e-6 and 1e-5, both
/// styles, `dims = 8`, positions 0, 5 and 300; then k with another head dim (16: the two pairs
/// run apart) and k's norm without a weight. Against f64.
pub async fn two_norm_rope_pairs(backend: SharedBackend, config: SuiteConfig) {
    use webdelegate::program::ops::RmsNorm;
    let mut rng = Rng::new(87);
    let positions = vec![0, 5, 300];
    // (its rows' head dim, its norm weighted)
    for (k_dim, k_weighted) in [(12usize, true), (16, true), (12, false)] {
        for style in [RopeStyle::Neox, RopeStyle::GptJ] {
            let (q_shape, k_shape) = ([3usize, 4, 12], [3usize, 1, k_dim]);
            let q = rng.vec(144, -3.0, 3.0);
            let k = rng.vec(3 * k_dim, -3.0, 3.0);
            let wq: Vec<f32> = (0..12).map(|j| 0.6 + 0.1 * j as f32).collect();
            let wk: Vec<f32> = (0..k_dim).map(|j| 1.4 - 0.05 * j as f32).collect();
            let mut m = Model::new();
            let (qi, ki) = (m.input("q", &q_shape), m.input("k", &k_shape));
            let p = m.b.input("positions", DType::I32, dims(&[3]));
            let wqi = m.param("wq", &[12], &wq);
            let wki = k_weighted.then(|| m.param("wk", &[k_dim], &wk));
            let mut pair = |x, weight, eps| {
                let normed = m.b.push(|out| RmsNorm { x, weight, eps, out }).unwrap();
                m.b.push(|out| Rope { x: normed, positions: p, dims: 8, base: 10_000.0, style, out, scaling: Default::default() })
                    .unwrap()
            };
            let (qo, ko) = (pair(qi, Some(wqi), 1e-6), pair(ki, wki, 1e-5));
            m.b.output(qo).output(ko);
            let inputs = vec![
                f32_tensor(&q_shape, q.clone()),
                f32_tensor(&k_shape, k.clone()),
                i32_tensor(&[3], positions.clone()),
            ];
            let got = m.run(&backend, inputs).await;
            let sets = [
                (&q, &q_shape[..], Some(&wq), 1e-6),
                (&k, &k_shape[..], k_weighted.then_some(&wk), 1e-5),
            ];
            for (output, (x, shape, weight, eps)) in sets.into_iter().enumerate() {
                let width = shape[2];
                let mut norm_data = Vec::with_capacity(x.len());
                for row in x.chunks(width) {
                    let mean_square = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / width as f64;
                    let inverse = 1.0 / (mean_square + eps).sqrt();
                    norm_data.extend(row.iter().enumerate().map(|(j, &v)| {
                        f64::from(v) * inverse * weight.map_or(1.0, |w| f64::from(w[j]))
                    }));
                }
                let want_norm = Ref::from_f64(shape, norm_data);
                let want = reference(&want_norm, &positions, 8, 10_000.0, style);
                let max_abs = want_norm.data.iter().fold(0f64, |m, v| m.max(v.abs()));
                let allowed = tolerance(max_abs, 300.0, config.elementwise.abs)
                    + 2.0 * max_abs * config.reduction.rel;
                let what = format!("{style:?} k_dim={k_dim} k_weighted={k_weighted} output {output}");
                assert_within(&what, &got[output], &want, allowed);
            }
        }
    }
}
}

op_case! {
/// RoPE with a scaling (Llama 3's per-pair divisors, linear interpolation, Phi-3's attention
/// factor): `[3, 2, 12]` rows, `dims = 8` of 12 (partial rotary), divisors from 0.5 to 8,
/// `freq_scale` 0.25, `attn_factor` 1.19, positions 0, 5 and 3000, both styles; alone, after
/// an RMSNorm (the WebGPU backend fuses the pair) and as two norm-and-rope pairs (one
/// dispatch there). Against f64 from the op's definition; the unrotated elements pass through
/// unscaled.
pub async fn rope_with_scaling(backend: SharedBackend, config: SuiteConfig) {
    use webdelegate::program::ops::RmsNorm;
    let shape = [3usize, 2, 12];
    let mut rng = Rng::new(89);
    let x = rng.vec(72, -3.0, 3.0);
    let positions = vec![0, 5, 3000];
    let scaling = RopeScaling { factors: vec![0.5, 1.0, 3.0, 8.0], freq_scale: 0.25, attn_factor: 1.19 };
    let max_theta = 3000.0 * 0.25 / 0.5;
    for style in [RopeStyle::Neox, RopeStyle::GptJ] {
        for normed in [false, true] {
            let mut m = Model::new();
            let xi = m.input("x", &shape);
            let p = m.b.input("positions", DType::I32, dims(&[3]));
            let rope = |m: &mut Model, input| {
                let source = if normed {
                    m.b.push(|out| RmsNorm { x: input, weight: None, eps: 1e-6, out }).unwrap()
                } else {
                    input
                };
                let scaling = scaling.clone();
                m.b.push(|out| Rope { x: source, positions: p, dims: 8, base: 10_000.0, style, out, scaling })
                    .unwrap()
            };
            let first = rope(&mut m, xi);
            let second = rope(&mut m, xi);
            m.b.output(first).output(second);
            let got = m
                .run(&backend, vec![f32_tensor(&shape, x.clone()), i32_tensor(&[3], positions.clone())])
                .await;
            let source: Vec<f64> = if normed {
                x.chunks(12)
                    .flat_map(|row| {
                        let ms = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / 12.0;
                        let inverse = 1.0 / (ms + 1e-6).sqrt();
                        row.iter().map(move |&v| f64::from(v) * inverse).collect::<Vec<_>>()
                    })
                    .collect()
            } else {
                x.iter().map(|&v| f64::from(v)).collect()
            };
            let source = Ref::from_f64(&shape, source);
            let want = reference_scaled(&source, &positions, 8, 10_000.0, style, &scaling);
            let max_abs = source.data.iter().fold(0f64, |m, v| m.max(v.abs())) * 1.19;
            let allowed = tolerance(max_abs, max_theta, config.elementwise.abs)
                + if normed { 2.0 * max_abs * config.reduction.rel } else { 0.0 };
            for (k, out) in got.iter().enumerate() {
                assert_within(&format!("{style:?} normed={normed} output {k}"), out, &want, allowed);
            }
        }
    }
}
}
