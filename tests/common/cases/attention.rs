//! Attention over a KV cache held in state tensors: by hand, against an f64 reference that
//! keeps its own cache (grouped heads 1, 2 and 4 query heads per KV head, sliding windows
//! shorter and longer than the live length, soft-capping), decode steps against one prefill
//! (and, on WebGPU, no new plan, bind group or pipeline after the first step), reset, bad
//! positions refused before the cache is touched, lifecycle signals, and hostile programs.
//!
//! Oracle: `Reference`, written from the op's documented semantics in f64 (its own cache, its
//! own softmax); tolerance: the suite's reduction bound (f32 dot products of up to 256 terms
//! and a softmax, summed in another order on each backend).

use crate::common::harness::{
    Model, SuiteConfig, assert_close, assert_error, execute, f32_tensor, i32_tensor,
};
use crate::common::reference::Ref;
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::backends::WebGpuBackend;
use webdelegate::lifecycle::Signal;
use webdelegate::program::ops::Attention;
use webdelegate::program::{DType, Dim, ProgramBuilder};
use webdelegate::registry::{
    BackendOption, BackendOptionContext, CompileSpec, LoadedDelegate, SharedBackend,
};
use webdelegate::{ErrorCode, Tensor};

/// The shape and attributes of one attention under test.
#[derive(Clone, Copy, Debug)]
struct Spec {
    heads: usize,
    kv_heads: usize,
    d: usize,
    dv: usize,
    cache: usize,
    scale: f32,
    window: u32,
    softcap: f32,
}

/// `attention(q, k, v)` over a symbolic number of rows, caches as states.
fn model(spec: Spec) -> Model {
    let mut m = Model::new();
    let rows = m.b.symbol("rows");
    let f = |n: usize| Dim::Fixed(n as u64);
    let q =
        m.b.input("q", DType::F32, vec![rows, f(spec.heads), f(spec.d)]);
    let k =
        m.b.input("k", DType::F32, vec![rows, f(spec.kv_heads), f(spec.d)]);
    let v =
        m.b.input("v", DType::F32, vec![rows, f(spec.kv_heads), f(spec.dv)]);
    let positions = m.b.input("positions", DType::I32, vec![rows]);
    let k_cache = m.b.state(
        "k_cache",
        DType::F32,
        vec![f(spec.cache), f(spec.kv_heads), f(spec.d)],
    );
    let v_cache = m.b.state(
        "v_cache",
        DType::F32,
        vec![f(spec.cache), f(spec.kv_heads), f(spec.dv)],
    );
    let out =
        m.b.push(|out| Attention {
            q,
            k,
            v,
            k_cache,
            v_cache,
            positions,
            scale: spec.scale,
            window: spec.window,
            softcap: spec.softcap,
            out,
        })
        .unwrap();
    m.b.output(out);
    m
}

/// `m` initialised on `backend` under one of the suite's attention spec variants.
async fn init_variant(
    m: &Model,
    backend: &SharedBackend,
    specs: &[(&str, &str)],
) -> LoadedDelegate {
    let specs: Vec<CompileSpec> = specs.iter().map(|&(k, v)| CompileSpec::new(k, v)).collect();
    match m.init_with(backend, &specs).await {
        Ok(delegate) => delegate,
        Err(error) => panic!("init failed ({specs:?}): {error}"),
    }
}

/// The op's semantics in f64, with its own cache.
struct Reference {
    spec: Spec,
    k: Vec<f64>,
    v: Vec<f64>,
    /// Whether the cache stores each key and value rounded to f16 (round to nearest even, as
    /// WGSL's `f16(x)` conversion does: the `precision = f16` cache), else exactly.
    f16_cache: bool,
}

impl Reference {
    fn new(spec: Spec) -> Self {
        Self {
            spec,
            k: vec![0.0; spec.cache * spec.kv_heads * spec.d],
            v: vec![0.0; spec.cache * spec.kv_heads * spec.dv],
            f16_cache: false,
        }
    }

    /// A value as the cache keeps it.
    fn stored(&self, x: f32) -> f64 {
        if self.f16_cache {
            f64::from(half::f16::from_f32(x).to_f32())
        } else {
            f64::from(x)
        }
    }

    fn step(&mut self, q: &[f32], k: &[f32], v: &[f32], positions: &[i32]) -> Ref {
        let Spec {
            heads,
            kv_heads,
            d,
            dv,
            ..
        } = self.spec;
        let (k_row, v_row) = (kv_heads * d, kv_heads * dv);
        for (s, &p) in positions.iter().enumerate() {
            let p = p as usize;
            for e in 0..k_row {
                self.k[p * k_row + e] = self.stored(k[s * k_row + e]);
            }
            for e in 0..v_row {
                self.v[p * v_row + e] = self.stored(v[s * v_row + e]);
            }
        }
        let mut out = Vec::new();
        for (s, &p) in positions.iter().enumerate() {
            let p = p as usize;
            let lo = match self.spec.window as usize {
                0 => 0,
                w => (p + 1).saturating_sub(w),
            };
            for h in 0..heads {
                let g = h / (heads / kv_heads);
                let logits: Vec<f64> = (lo..=p)
                    .map(|j| {
                        let dot: f64 = (0..d)
                            .map(|i| {
                                f64::from(q[(s * heads + h) * d + i])
                                    * self.k[(j * kv_heads + g) * d + i]
                            })
                            .sum();
                        let l = f64::from(self.spec.scale) * dot;
                        let cap = f64::from(self.spec.softcap);
                        if cap > 0.0 { cap * (l / cap).tanh() } else { l }
                    })
                    .collect();
                let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
                let sum: f64 = weights.iter().sum();
                for e in 0..dv {
                    let value: f64 = weights
                        .iter()
                        .zip(lo..=p)
                        .map(|(w, j)| w * self.v[(j * kv_heads + g) * dv + e])
                        .sum();
                    out.push(value / sum);
                }
            }
        }
        Ref::from_f64(&[positions.len(), heads, dv], out)
    }
}

/// Random rows for `positions`: (q, k, v).
fn rows(rng: &mut Rng, spec: Spec, count: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        rng.vec(count * spec.heads * spec.d, -1.0, 1.0),
        rng.vec(count * spec.kv_heads * spec.d, -1.0, 1.0),
        rng.vec(count * spec.kv_heads * spec.dv, -1.0, 1.0),
    )
}

/// The four inputs of one execution.
fn inputs(spec: Spec, q: &[f32], k: &[f32], v: &[f32], positions: &[i32]) -> Vec<Tensor> {
    let s = positions.len();
    vec![
        f32_tensor(&[s, spec.heads, spec.d], q.to_vec()),
        f32_tensor(&[s, spec.kv_heads, spec.d], k.to_vec()),
        f32_tensor(&[s, spec.kv_heads, spec.dv], v.to_vec()),
        i32_tensor(&[s], positions.to_vec()),
    ]
}

async fn step(
    delegate: &mut LoadedDelegate,
    spec: Spec,
    (q, k, v): (&[f32], &[f32], &[f32]),
    positions: &[i32],
) -> webdelegate::Result<Tensor> {
    let mut out = execute(delegate, inputs(spec, q, k, v, positions), 1).await?;
    Ok(out.remove(0))
}

/// The WebGPU stats of `delegate` (`None` on other backends).
fn gpu_stats(delegate: &LoadedDelegate) -> Option<webdelegate::backends::webgpu::ProgramStats> {
    WebGpuBackend::stats_of(delegate.handle()?).ok()
}

const TINY: Spec = Spec {
    heads: 1,
    kv_heads: 1,
    d: 2,
    dv: 2,
    cache: 4,
    scale: 1.0,
    window: 0,
    softcap: 0.0,
};

op_case! {
/// D = 2, one head. Row 0 (position 0) sees only itself: out = v0. Row 1 (position 1) with
/// q1 = [1, 0], k0 = [0, 0], k1 = [ln 3, 0]: logits 0 and ln 3, weights 1/4 and 3/4 of
/// v0 = [4, 0] and v1 = [0, 8]: [1, 6]. A second execution at position 2 with k2 = [0, 0],
/// q = [1, 0] sees the cache rows 0 and 1 from before: logits 0, ln 3, 0 -> weights 1/5, 3/5,
/// 1/5 of v0, v1, v2 = [0, 0]: [0.8, 4.8]. With window 2 it sees rows 1 and 2 only: 3/4, 1/4:
/// [0, 6].
pub async fn attention_by_hand(backend: SharedBackend, config: SuiteConfig) {
    let ln3 = 3f32.ln();
    for &variant in config.attention_specs {
    for (window, want) in [(0u32, [0.8, 4.8]), (2, [0.0, 6.0])] {
        let spec = Spec { window, ..TINY };
        let m = model(spec);
        assert!(
            m.dump().contains("attention q=%0 k=%1 v=%2 k_cache=%4 v_cache=%5 positions=%3 scale=1.0"),
            "{}",
            m.dump()
        );
        let mut delegate = init_variant(&m, &backend, variant).await;
        let first = step(
            &mut delegate,
            spec,
            (&[5.0, 5.0, 1.0, 0.0], &[0.0, 0.0, ln3, 0.0], &[4.0, 0.0, 0.0, 8.0]),
            &[0, 1],
        )
        .await
        .unwrap();
        assert_close(
            &format!("window {window}, prefill"),
            &first,
            &Ref::from_f64(&[2, 1, 2], vec![4.0, 0.0, 1.0, 6.0]),
            config.reduction,
        );
        let second = step(&mut delegate, spec, (&[1.0, 0.0], &[0.0, 0.0], &[0.0, 0.0]), &[2])
            .await
            .unwrap();
        assert_close(
            &format!("window {window}, decode, {variant:?}"),
            &second,
            &Ref::from_f64(&[1, 1, 2], want.to_vec()),
            config.reduction,
        );
    }
    }
}
}

op_case! {
/// Random caches built over several executions (a prefill, then single-row steps, one of them
/// rewriting an earlier position), against the f64 reference: 1, 2 and 4 query heads per KV
/// head, head dims 8 to 256 (values narrower than keys once), windows of 0, 3 (shorter than
/// the live length) and 64 (longer), and a soft-cap.
pub async fn attention_random_against_f64(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(83);
    let big = if config.small { 64 } else { 256 };
    let specs = [
        Spec { heads: 2, kv_heads: 2, d: 8, dv: 8, cache: 16, scale: 0.35, window: 0, softcap: 0.0 },
        Spec { heads: 4, kv_heads: 2, d: 16, dv: 8, cache: 24, scale: 0.25, window: 3, softcap: 0.0 },
        Spec { heads: 4, kv_heads: 1, d: big, dv: big, cache: 80, scale: 1.0 / 16.0, window: 64, softcap: 0.0 },
        Spec { heads: 3, kv_heads: 3, d: 32, dv: 40, cache: 12, scale: 1.5, window: 0, softcap: 5.0 },
    ];
    for (spec, &variant) in specs.into_iter().flat_map(|s| config.attention_specs.iter().map(move |v| (s, v))) {
        let m = model(spec);
        let mut delegate = init_variant(&m, &backend, variant).await;
        let mut reference = Reference::new(spec);
        let prefill: Vec<i32> = (0..(spec.cache as i32 * 2 / 3)).collect();
        let mut schedule = vec![prefill.clone()];
        let next = prefill.len() as i32;
        schedule.push(vec![next]);
        schedule.push(vec![next + 1]);
        schedule.push(vec![2, next + 2]);
        for positions in schedule {
            let (q, k, v) = rows(&mut rng, spec, positions.len());
            let got = step(&mut delegate, spec, (&q, &k, &v), &positions).await.unwrap();
            let want = reference.step(&q, &k, &v, &positions);
            assert_close(
                &format!("{spec:?} {variant:?} at {positions:?}"),
                &got,
                &want,
                config.reduction,
            );
        }
    }
}
}

/// Whether `backend` reports the WebGPU feature shader-f16 (`features.shader_f16`; a backend
/// without that option has no f16).
pub(super) fn reports_shader_f16(backend: &SharedBackend) -> bool {
    let mut options = [BackendOption::new("features.shader_f16", false).unwrap()];
    backend
        .get_option(&mut BackendOptionContext::default(), &mut options)
        .is_ok()
        && matches!(
            options[0].value(),
            webdelegate::registry::OptionValue::Bool(true)
        )
}

op_case! {
/// `precision = f16`: where the backend takes it (WebGPU with shader-f16), the KV cache is
/// stored in f16 (the stats say so, and its state bytes are half the f32 program's) and the
/// random caches of `attention_random_against_f64` (several executions, grouped heads, windows,
/// a soft-cap; heads up to 256 wide) match an f64 reference whose cache rounds every key and
/// value to f16 the same way, within the suite's reduction bound (the rounding is the
/// reference's; what is left is f32 summation order); and they differ from the exact-cache
/// reference by more than that bound somewhere (else the cache was not f16). A backend
/// without f16 refuses the spec with `NotSupported`, and says it has no shader-f16.
pub async fn attention_f16_cache_against_f64(backend: SharedBackend, config: SuiteConfig) {
    let mut rng = Rng::new(89);
    let big = if config.small { 64 } else { 256 };
    let specs = [
        Spec { heads: 4, kv_heads: 2, d: 16, dv: 8, cache: 24, scale: 0.25, window: 3, softcap: 0.0 },
        Spec { heads: 4, kv_heads: 1, d: big, dv: big, cache: 80, scale: 1.0 / 16.0, window: 64, softcap: 0.0 },
        Spec { heads: 3, kv_heads: 3, d: 32, dv: 40, cache: 12, scale: 1.5, window: 0, softcap: 5.0 },
    ];
    let mut beyond_f32_bound = 0usize;
    for spec in specs {
        let m = model(spec);
        let f16 = [CompileSpec::new("precision", "f16")];
        let mut delegate = match m.init_with(&backend, &f16).await {
            Ok(delegate) => delegate,
            Err(error) => {
                assert_eq!(error.code(), ErrorCode::NotSupported, "{error}");
                assert!(!reports_shader_f16(&backend), "shader-f16 reported, yet f16 refused: {error}");
                println!("no shader-f16 here: precision=f16 refused ({error})");
                return;
            }
        };
        let f32 = m.init_with(&backend, &[CompileSpec::new("precision", "f32")]).await.unwrap();
        let (half_stats, full_stats) = (gpu_stats(&delegate).unwrap(), gpu_stats(&f32).unwrap());
        assert!(half_stats.kv_cache_f16 && half_stats.precision == "f16", "{half_stats:?}");
        assert!(!full_stats.kv_cache_f16 && full_stats.precision == "f32", "{full_stats:?}");
        assert_eq!(half_stats.state_bytes * 2, full_stats.state_bytes, "{spec:?}");
        let mut reference = Reference { f16_cache: true, ..Reference::new(spec) };
        let mut exact = Reference::new(spec);
        let prefill: Vec<i32> = (0..(spec.cache as i32 * 2 / 3)).collect();
        let next = prefill.len() as i32;
        for positions in [prefill, vec![next], vec![next + 1], vec![2, next + 2]] {
            // Values up to 4 in magnitude, so f16's rounding (2^-11 relative) is visible.
            let (q, k, v) = rows(&mut rng, spec, positions.len());
            let (k, v): (Vec<f32>, Vec<f32>) =
                (k.iter().map(|x| x * 4.0).collect(), v.iter().map(|x| x * 4.0).collect());
            let got = step(&mut delegate, spec, (&q, &k, &v), &positions).await.unwrap();
            let want = reference.step(&q, &k, &v, &positions);
            assert_close(&format!("{spec:?} f16 cache at {positions:?}"), &got, &want, config.reduction);
            let unrounded = exact.step(&q, &k, &v, &positions);
            let tol = config.reduction;
            beyond_f32_bound += Ref::from_tensor(&got)
                .data
                .iter()
                .zip(&unrounded.data)
                .filter(|&(g, w)| (g - w).abs() > tol.abs + tol.rel * w.abs())
                .count();
        }
    }
    assert!(beyond_f32_bound > 0, "an f16 cache left every output within the f32 bound");
    println!("f16 cache: {beyond_f32_bound} outputs beyond the f32 bound, all within it of the f16-rounded reference");
}
}

op_case! {
/// One sequence decoded position by position (100 steps; 24 in Chromium) equals one prefill of
/// the same positions on a fresh delegate, row by row; on WebGPU the steps after the first add
/// no plan, bind group or pipeline (one plan for every decode step, positions read on the
/// device).
pub async fn attention_decode_steps_equal_one_prefill(backend: SharedBackend, config: SuiteConfig) {
    let steps = if config.small { 24 } else { 100 };
    let spec = Spec { heads: 4, kv_heads: 1, d: 32, dv: 32, cache: 128, scale: 0.2, window: 48, softcap: 0.0 };
    let mut rng = Rng::new(89);
    let (q, k, v) = rows(&mut rng, spec, steps);
    let positions: Vec<i32> = (0..steps as i32).collect();
    let m = model(spec);
    for &variant in config.attention_specs {
    let mut prefill = init_variant(&m, &backend, variant).await;
    let all = step(&mut prefill, spec, (&q, &k, &v), &positions).await.unwrap();
    let all = Ref::from_tensor(&all);
    let mut decode = init_variant(&m, &backend, variant).await;
    let (qd, kd, vd) = (spec.heads * spec.d, spec.kv_heads * spec.d, spec.kv_heads * spec.dv);
    let mut after_first = None;
    for s in 0..steps {
        let got = step(
            &mut decode,
            spec,
            (&q[s * qd..][..qd], &k[s * kd..][..kd], &v[s * vd..][..vd]),
            &[s as i32],
        )
        .await
        .unwrap();
        let row = spec.heads * spec.dv;
        let want = Ref::from_f64(
            &[1, spec.heads, spec.dv],
            all.data[s * row..][..row].to_vec(),
        );
        assert_close(&format!("step {s} {variant:?}"), &got, &want, config.reduction);
        let stats = gpu_stats(&decode);
        if s == 0 {
            after_first = stats;
        } else if let (Some(first), Some(now)) = (&after_first, stats) {
            assert_eq!(now.plans_built, first.plans_built, "step {s}: a new plan");
            assert_eq!(now.bind_groups_created, first.bind_groups_created, "step {s}: new bind groups");
            assert_eq!(now.pipelines, first.pipelines, "step {s}: new pipelines");
        }
    }
    if let Some(first) = after_first {
        assert_eq!(first.plans_built, 1, "{first:?}");
        assert_eq!(first.states, 2);
        assert_eq!(
            first.state_bytes,
            2 * (spec.cache * spec.kv_heads * spec.d * 4) as u64,
            "{first:?}"
        );
    }
    }
}
}

op_case! {
/// Bad positions (outside the cache, negative, repeated) fail with `InvalidArgument` before
/// anything is stored: the next valid step sees the cache as it was. `reset_state` zeroes it:
/// a query at position 1 then sees a zero key and value at position 0.
pub async fn attention_bad_positions_and_reset(backend: SharedBackend, config: SuiteConfig) {
    let spec = TINY;
    let m = model(spec);
    for &variant in config.attention_specs {
    let mut delegate = init_variant(&m, &backend, variant).await;
    let mut reference = Reference::new(spec);
    let (q, k, v) = ([1.0, 2.0], [0.5, -1.0], [3.0, 4.0]);
    let want = reference.step(&q, &k, &v, &[0]);
    let got = step(&mut delegate, spec, (&q, &k, &v), &[0]).await.unwrap();
    assert_close("position 0", &got, &want, config.reduction);
    let bad: [(&[i32], &str); 3] = [(&[4], "position 4"), (&[-1], "position -1"), (&[1, 1], "twice")];
    for (positions, part) in bad {
        let n = positions.len();
        let result = step(
            &mut delegate,
            spec,
            (&vec![9.0; 2 * n], &vec![9.0; 2 * n], &vec![9.0; 2 * n]),
            positions,
        )
        .await;
        assert_error(&format!("{positions:?}"), result, ErrorCode::InvalidArgument, &["attention", part]);
    }
    let (q1, k1, v1) = ([0.0, 1.0], [1.0, 1.0], [-2.0, 0.5]);
    let want = reference.step(&q1, &k1, &v1, &[1]);
    let got = step(&mut delegate, spec, (&q1, &k1, &v1), &[1]).await.unwrap();
    assert_close("after the refused steps", &got, &want, config.reduction);

    delegate.reset_state().unwrap();
    let mut fresh = Reference::new(spec);
    let want = fresh.step(&q1, &k1, &v1, &[1]);
    let got = step(&mut delegate, spec, (&q1, &k1, &v1), &[1]).await.unwrap();
    assert_close("after reset", &got, &want, config.reduction);
    if let Some(stats) = gpu_stats(&delegate) {
        assert_eq!(stats.state_resets, 1);
    }
    }
}
}

op_case! {
/// `Suspend` and `LowMemory` keep the state: the next step continues the sequence. A backend
/// told it may drop state under memory pressure (WebGPU's `drop_state_on_low_memory`; the CPU
/// backend has no such option and refuses the key) fails the next step with `InvalidState`
/// saying the cache was dropped, until `reset_state`.
pub async fn attention_state_across_lifecycle_signals(backend: SharedBackend, config: SuiteConfig) {
    let spec = Spec { heads: 2, kv_heads: 1, d: 8, dv: 8, cache: 8, ..TINY };
    let mut rng = Rng::new(97);
    let m = model(spec);
    let mut delegate = m.init(&backend).await.unwrap();
    let mut reference = Reference::new(spec);
    let phases: [(&str, Option<Signal>); 3] = [
        ("first", None),
        ("after suspend and resume", Some(Signal::Suspend)),
        ("after low memory", Some(Signal::LowMemory)),
    ];
    for (position, (what, signal)) in phases.into_iter().enumerate() {
        if let Some(signal) = signal {
            backend.notify(signal);
            if signal == Signal::Suspend {
                backend.notify(Signal::Resume);
            }
        }
        let (q, k, v) = rows(&mut rng, spec, 1);
        let at = [position as i32];
        let want = reference.step(&q, &k, &v, &at);
        let got = step(&mut delegate, spec, (&q, &k, &v), &at).await.unwrap();
        assert_close(what, &got, &want, config.reduction);
    }
    let allow = backend.set_option(
        &mut BackendOptionContext::default(),
        &[BackendOption::new("drop_state_on_low_memory", true).unwrap()],
    );
    if allow.is_ok() {
        backend.notify(Signal::LowMemory);
        let (q, k, v) = rows(&mut rng, spec, 1);
        let result = step(&mut delegate, spec, (&q, &k, &v), &[3]).await;
        assert_error("dropped state", result, ErrorCode::InvalidState, &["dropped", "reset"]);
        delegate.reset_state().unwrap();
        let mut fresh = Reference::new(spec);
        let want = fresh.step(&q, &k, &v, &[0]);
        let got = step(&mut delegate, spec, (&q, &k, &v), &[0]).await.unwrap();
        assert_close("after reset", &got, &want, config.reduction);
    } else {
        assert_error("option", allow, ErrorCode::InvalidArgument, &["drop_state_on_low_memory"]);
    }
}
}

op_case! {
/// Hostile programs: KV heads that do not divide the query heads, a cache that is not a
/// state, a state as a program output, mismatched head dims, f32 positions, a non-finite
/// scale: `InvalidProgram` naming what is wrong.
pub async fn attention_hostile_programs(backend: SharedBackend, _config: SuiteConfig) {
    let _ = &backend;
    let build = |heads: usize, kv: usize, d_cache: usize, cache_is_state: bool, output_state: bool, pos: DType, scale: f32| {
        let mut b = ProgramBuilder::new();
        let f = |n: usize| Dim::Fixed(n as u64);
        let q = b.input("q", DType::F32, vec![f(1), f(heads), f(4)]);
        let k = b.input("k", DType::F32, vec![f(1), f(kv), f(4)]);
        let v = b.input("v", DType::F32, vec![f(1), f(kv), f(4)]);
        let positions = b.input("positions", pos, vec![f(1)]);
        let k_cache = if cache_is_state {
            b.state("k_cache", DType::F32, vec![f(8), f(kv), f(d_cache)])
        } else {
            b.input("k_cache", DType::F32, vec![f(8), f(kv), f(d_cache)])
        };
        let v_cache = b.state("v_cache", DType::F32, vec![f(8), f(kv), f(4)]);
        let out = b.tensor("out", DType::F32, vec![f(1), f(heads), f(4)]);
        b.op(Attention { q, k, v, k_cache, v_cache, positions, scale, window: 0, softcap: 0.0, out }.into());
        b.output(if output_state { v_cache } else { out });
        b.into_program()
    };
    let cases: [(_, &[&str]); 6] = [
        (build(3, 2, 4, true, false, DType::I32, 1.0), &["KV heads must divide"]),
        (build(2, 1, 4, false, false, DType::I32, 1.0), &["not a state tensor"]),
        (build(2, 1, 4, true, true, DType::I32, 1.0), &["state 1", "outputs must be inputs or op outputs"]),
        (build(2, 1, 6, true, false, DType::I32, 1.0), &["head dim"]),
        (build(2, 1, 4, true, false, DType::F32, 1.0), &["positions", "i32"]),
        (build(2, 1, 4, true, false, DType::I32, f32::NAN), &["scale"]),
    ];
    for (program, parts) in cases {
        let result = webdelegate::program::validate(&program);
        assert_error(&format!("{parts:?}"), result, ErrorCode::InvalidProgram, parts);
    }
}
}
