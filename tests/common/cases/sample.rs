//! Token selection (`sample`): picks worked out by hand on a tiny vocabulary for chosen `u`,
//! temperature and top-k/top-p; greedy (temperature 0, top-k 1) equal to `argmax` on rows of
//! 262,144 logits with NaN/inf rows; the `K_MAX` bound on a flat row (ties to the lowest
//! indices); long rows against an f64 model of the chain, where the chosen token's `u`
//! interval must contain `u`; the seeded RNG's reproducibility; hostile programs refused; the
//! grammar's `token_mask` before `sample` (the masked logits exactly, picks only allowed ids).

use crate::common::cases::argmax::reference_row;
use crate::common::harness::{
    Model, SuiteConfig, assert_error, dims, f32_tensor, i32_tensor, init_blob,
};
use crate::common::reference::Ref;
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::ErrorCode;
use webdelegate::program::ops::{Argmax, Sample, TokenMask};
use webdelegate::program::{DType, Op, ProgramBuilder};
use webdelegate::registry::SharedBackend;

/// A program `sample(logits [R, V], knobs [R, 4])` (plus `argmax(logits)` as a second output).
fn sample_model(rows: usize, v: usize) -> Model {
    let mut m = Model::new();
    let logits = m.input("logits", &[rows, v]);
    let knobs = m.input("knobs", &[rows, 4]);
    let out = m.b.push(|out| Sample { logits, knobs, out }).unwrap();
    let greedy = m.b.push(|out| Argmax { x: logits, out }).unwrap();
    m.b.output(out).output(greedy);
    m
}

async fn run_sample(
    backend: &SharedBackend,
    v: usize,
    logits: Vec<f32>,
    knobs: &[[f32; 4]],
) -> (Vec<f64>, Vec<f64>) {
    let rows = knobs.len();
    let flat: Vec<f32> = knobs.iter().flatten().copied().collect();
    let got = sample_model(rows, v)
        .run(
            backend,
            vec![f32_tensor(&[rows, v], logits), f32_tensor(&[rows, 4], flat)],
        )
        .await;
    (
        Ref::from_tensor(&got[0]).data,
        Ref::from_tensor(&got[1]).data,
    )
}

op_case! {
/// Logits `ln [1, 2, 3, 4]`. At temperature 1 the weights relative to the top (index 3) are
/// 1, 3/4, 1/2, 1/4 in rank order 3, 2, 1, 0 (total 2.5): running sums 1, 1.75, 2.25, 2.5, so
/// `u` in [0, .4) picks 3, [.4, .7) 2, [.7, .9) 1, [.9, 1] 0. Top-k 2 keeps 1 + 3/4: the
/// boundary is 1/1.75 = .5714. Top-p .5 needs 1.25 of 2.5: keeps two (same boundary); top-p .4
/// keeps one. Temperature 2 takes square roots: 1, .8660, .7071, .5 (total 3.0731), boundaries
/// .3254, .6072, .8373. Greedy rows (temperature 0 or -1, top-k 1) pick 3 whatever `u`.
pub async fn sample_by_hand(backend: SharedBackend, _config: SuiteConfig) {
    let row = [0.0f32, 2f32.ln(), 3f32.ln(), 4f32.ln()];
    let cases: [([f32; 4], i32); 17] = [
        ([1.0, 0.0, 1.0, 0.0], 3),
        ([1.0, 0.0, 1.0, 0.39], 3),
        ([1.0, 0.0, 1.0, 0.41], 2),
        ([1.0, 0.0, 1.0, 0.69], 2),
        ([1.0, 0.0, 1.0, 0.71], 1),
        ([1.0, 0.0, 1.0, 0.95], 0),
        ([1.0, 0.0, 1.0, 1.0], 0),
        ([1.0, 2.0, 1.0, 0.56], 3),
        ([1.0, 2.0, 1.0, 0.58], 2),
        ([1.0, 0.0, 0.5, 0.58], 2),
        ([1.0, 0.0, 0.4, 0.99], 3),
        ([2.0, 0.0, 1.0, 0.60], 2),
        ([2.0, 0.0, 1.0, 0.62], 1),
        ([2.0, 0.0, 1.0, 0.84], 0),
        ([0.0, 0.0, 1.0, 0.99], 3),
        ([-1.0, 4.0, 1.0, 0.99], 3),
        ([1.0, 1.0, 1.0, 0.99], 3),
    ];
    let knobs: Vec<[f32; 4]> = cases.iter().map(|(k, _)| *k).collect();
    let logits: Vec<f32> = (0..cases.len()).flat_map(|_| row).collect();
    let m = sample_model(1, 4);
    assert!(m.dump().contains("sample logits=%0 knobs=%1"), "{}", m.dump());
    let (got, _) = run_sample(&backend, 4, logits, &knobs).await;
    let want: Vec<f64> = cases.iter().map(|(_, i)| f64::from(*i)).collect();
    assert_eq!(got, want, "picks for {knobs:?}");
}
}

op_case! {
/// Greedy rows (temperature 0, NaN or negative; top-k 1 or in [1, 2)) of V = 262,144 equal
/// the Argmax op's result exactly, including a row with NaN and +inf, a row of only NaN and
/// -inf and a row of ties.
pub async fn sample_greedy_equals_argmax(backend: SharedBackend, _config: SuiteConfig) {
    let v = 262_144;
    let mut rng = Rng::new(91);
    let mut logits = rng.vec(6 * v, -20.0, 20.0);
    logits[v + 5] = f32::NAN;
    logits[v + 200_000] = f32::INFINITY;
    logits[v + 200_001] = f32::INFINITY;
    for x in &mut logits[2 * v..3 * v] {
        *x = if rng.below(2) == 0 { f32::NAN } else { f32::NEG_INFINITY };
    }
    for x in &mut logits[3 * v..4 * v] {
        *x = (rng.below(3) as f32).min(1.0);
    }
    let knobs = [
        [0.0, 40.0, 0.9, 0.7],
        [f32::NAN, 0.0, 1.0, 0.3],
        [-1.0, 0.0, 1.0, 0.3],
        [1.0, 1.0, 1.0, 0.9],
        [0.8, 1.7, 0.5, 0.9],
        [0.0, 0.0, 0.0, 0.0],
    ];
    let want: Vec<f64> = logits.chunks(v).map(|r| f64::from(reference_row(r))).collect();
    let (got, argmax) = run_sample(&backend, v, logits, &knobs).await;
    assert_eq!(argmax, want, "argmax");
    assert_eq!(got, want, "greedy sample");
    assert_eq!(want[1], 200_000.0);
}
}

op_case! {
/// A flat row of 5000 equal logits with top-k 0 (= K_MAX = 1024): the candidates are the 1024
/// lowest indices, each of weight 1, so `u` picks index `floor(1024 u)` exactly (running sums
/// are integers); top-k 1000 picks `floor(1000 u)`; a two-level row keeps the 1024 highest
/// with ties at the boundary taken from the lowest indices.
pub async fn sample_k_max_bound_and_ties(backend: SharedBackend, _config: SuiteConfig) {
    let v = 5000;
    let mut logits = vec![0.5f32; 3 * v];
    // Row 2: 600 values of 1.0 at odd indices < 1200, the rest 0: k = 1024 keeps those 600 and
    // the 424 lowest indices holding 0, i.e. even indices 0, 2, .., 846 (424 of them).
    for (i, x) in logits[2 * v..].iter_mut().enumerate() {
        *x = if i % 2 == 1 && i < 1200 { 1.0 } else { 0.0 };
    }
    let knobs = [[1.0, 0.0, 1.0, 0.5], [1.0, 1000.0, 1.0, 0.999], [1e-3, 0.0, 1.0, 0.999]];
    let (got, _) = run_sample(&backend, v, logits, &knobs).await;
    // Row 2 at temperature 1e-3: the 0-valued candidates weigh e^-1000 = 0, so the pick is
    // among the 600 ones, uniformly: u = .999 -> the 600th (index 1199).
    assert_eq!(got, vec![512.0, 999.0, 1199.0]);
}
}

/// The chain of `Sample` in f64 over a row: for each kept candidate, `(index, lo, hi)` where
/// `u` in `[lo, hi)` picks it.
fn intervals(row: &[f32], [temperature, top_k, top_p, _]: [f32; 4]) -> Vec<(usize, f64, f64)> {
    let rank = |v: f32| if v.is_nan() { f32::NEG_INFINITY } else { v };
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.sort_by(|&a, &b| rank(row[b]).total_cmp(&rank(row[a])).then(a.cmp(&b)));
    let k = if top_k >= 1.0 {
        (top_k as usize).min(1024)
    } else {
        1024
    }
    .min(row.len());
    let top = f64::from(row[order[0]]);
    let weights: Vec<f64> = order[..k]
        .iter()
        .map(|&i| {
            let d = (f64::from(row[i]) - top) / f64::from(temperature);
            if d < -87.0 { 0.0 } else { d.exp() }
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let mut kept = k;
    if top_p < 1.0 {
        let mut running = 0.0;
        for (j, w) in weights.iter().enumerate() {
            running += w;
            if running >= f64::from(top_p) * total {
                kept = j + 1;
                break;
            }
        }
    }
    let mass: f64 = weights[..kept].iter().sum();
    let mut running = 0.0;
    order[..kept]
        .iter()
        .zip(&weights)
        .map(|(&i, &w)| {
            let lo = running / mass;
            running += w;
            (i, lo, running / mass)
        })
        .collect()
}

op_case! {
/// Rows of V = 262,144 (V = 3001 in the small suite) with mixed knobs and `u` drawn from
/// `Sample::uniform(seed, step)`: the chosen token must be a kept candidate of the f64 model
/// whose `u` interval contains `u` within 1e-4 (f32 sums over up to 1024 weights round
/// differently from f64 sums; a `u` that close to a boundary is a near-tie either side may
/// take). The same knobs twice give the same tokens.
pub async fn sample_long_rows_against_f64_chain(backend: SharedBackend, config: SuiteConfig) {
    let v = if config.small { 3001 } else { 262_144 };
    let mut rng = Rng::new(97);
    let settings = [(1.0, 40.0, 0.9), (0.7, 0.0, 0.95), (1.5, 200.0, 1.0), (0.3, 64.0, 0.5)];
    let mut logits = Vec::with_capacity(settings.len() * v);
    for r in 0..settings.len() {
        // Row 3 has few distinct levels, so ties straddle the top-k boundary.
        let row: Vec<f32> = if r == 3 {
            (0..v).map(|_| rng.below(40) as f32 * 0.25).collect()
        } else {
            rng.vec(v, -10.0, 12.0)
        };
        logits.extend(row);
    }
    for step in 0..3u64 {
        let knobs: Vec<[f32; 4]> = settings
            .iter()
            .enumerate()
            .map(|(r, &(t, k, p))| [t, k, p, Sample::uniform(7, step * 4 + r as u64)])
            .collect();
        let (got, _) = run_sample(&backend, v, logits.clone(), &knobs).await;
        let (again, _) = run_sample(&backend, v, logits.clone(), &knobs).await;
        assert_eq!(got, again, "same knobs, same tokens");
        for (r, (&token, knob)) in got.iter().zip(&knobs).enumerate() {
            let row = &logits[r * v..(r + 1) * v];
            let kept = intervals(row, *knob);
            let u = f64::from(knob[3]);
            let hit = kept.iter().find(|(i, _, _)| *i as f64 == token);
            let Some(&(_, lo, hi)) = hit else {
                panic!("row {r}: token {token} is not a kept candidate (knobs {knob:?})");
            };
            assert!(
                lo - 1e-4 <= u && u < hi + 1e-4,
                "row {r}: token {token} covers u in [{lo}, {hi}), u = {u}"
            );
        }
    }
}
}

/// A hostile sample: what, logits dtype and shape, knobs dtype and shape, and the word its
/// error must name.
type BadSample = (
    &'static str,
    DType,
    &'static [usize],
    DType,
    &'static [usize],
    &'static str,
);

op_case! {
/// i32 logits, rank-1 logits, knobs `[R, 3]` or for other rows, i32 knobs: refused naming the
/// operand; an f32 `out` is refused at init.
pub async fn sample_refuses_bad_programs(backend: SharedBackend, _config: SuiteConfig) {
    let cases: [BadSample; 5] = [
        ("i32 logits", DType::I32, &[2, 8], DType::F32, &[2, 4], "logits"),
        ("rank-1 logits", DType::F32, &[8], DType::F32, &[1, 4], "logits"),
        ("knobs [2, 3]", DType::F32, &[2, 8], DType::F32, &[2, 3], "knobs"),
        ("knobs [3, 4]", DType::F32, &[2, 8], DType::F32, &[3, 4], "knobs"),
        ("i32 knobs", DType::F32, &[2, 8], DType::I32, &[2, 4], "knobs"),
    ];
    for (what, logits_dtype, logits_shape, knobs_dtype, knobs_shape, part) in cases {
        let mut b = ProgramBuilder::new();
        let logits = b.input("logits", logits_dtype, dims(logits_shape));
        let knobs = b.input("knobs", knobs_dtype, dims(knobs_shape));
        let op = |out| Sample { logits, knobs, out };
        assert_error(what, b.push(op), ErrorCode::InvalidArgument, &["sample", part]);
        let out = b.tensor("out", DType::I32, dims(&[2]));
        b.op(Op::Sample(op(out))).output(out);
        assert_error(what, init_blob(&backend, &b).await, ErrorCode::InvalidProgram, &["sample", part]);
    }
    let mut b = ProgramBuilder::new();
    let logits = b.input("logits", DType::F32, dims(&[2, 8]));
    let knobs = b.input("knobs", DType::F32, dims(&[2, 4]));
    let out = b.tensor("out", DType::F32, dims(&[2]));
    b.op(Op::Sample(Sample { logits, knobs, out })).output(out);
    assert_error("f32 out", init_blob(&backend, &b).await, ErrorCode::InvalidProgram, &["sample", "out"]);
}
}

op_case! {
/// `token_mask` then `sample` on 3 rows of 1000 random logits (32 mask words, the last one
/// partly past the vocabulary): with one mask for every row and with one mask per row, the masked
/// logits equal the reference (the value where the bit is set, `-inf` elsewhere, exactly), and
/// greedy and sampled picks are always allowed tokens (the greedy one the best allowed).
pub async fn token_mask_then_sample(backend: SharedBackend, _config: SuiteConfig) {
    let (rows, v) = (3usize, 1000usize);
    let words = v.div_ceil(32);
    let mut rng = Rng::new(31);
    let logits = rng.vec(rows * v, -4.0, 4.0);
    let knobs: Vec<f32> = [[0.0, 1.0, 1.0, 0.0], [0.9, 0.0, 1.0, 0.37], [1.5, 50.0, 0.8, 0.91]]
        .iter()
        .flatten()
        .copied()
        .collect();
    for mask_rows in [1usize, rows] {
        // Sparse masks: about one token in 16 allowed, bits past V set too (they must not count).
        let mask: Vec<i32> = (0..mask_rows * words)
            .map(|_| (rng.next_u64() & rng.next_u64() & rng.next_u64() & rng.next_u64()) as i32)
            .collect();
        let allowed = |r: usize, t: usize| {
            let m = if mask_rows == 1 { 0 } else { r };
            (mask[m * words + t / 32] as u32 >> (t % 32)) & 1 == 1
        };
        let mut m = Model::new();
        let x = m.input("logits", &[rows, v]);
        let k = m.input("knobs", &[rows, 4]);
        let bits = m.b.input("mask", DType::I32, dims(&[mask_rows, words]));
        let masked = m
            .b
            .push(|out| TokenMask { logits: x, mask: bits, out })
            .unwrap();
        let picked = m.b.push(|out| Sample { logits: masked, knobs: k, out }).unwrap();
        m.b.output(masked).output(picked);
        let got = m
            .run(
                &backend,
                vec![
                    f32_tensor(&[rows, v], logits.clone()),
                    f32_tensor(&[rows, 4], knobs.clone()),
                    i32_tensor(&[mask_rows, words], mask.clone()),
                ],
            )
            .await;
        let want: Vec<f64> = (0..rows * v)
            .map(|i| {
                if allowed(i / v, i % v) {
                    f64::from(logits[i])
                } else {
                    f64::NEG_INFINITY
                }
            })
            .collect();
        assert_eq!(Ref::from_tensor(&got[0]).data, want, "masked logits, {mask_rows} mask rows");
        let picks = Ref::from_tensor(&got[1]).data;
        for (r, &p) in picks.iter().enumerate() {
            assert!(allowed(r, p as usize), "row {r} picked {p}, not allowed");
        }
        let best = (0..v)
            .filter(|&t| allowed(0, t))
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]).then(b.cmp(&a)))
            .unwrap();
        assert_eq!(picks[0] as usize, best, "greedy = best allowed");
    }
}
}
