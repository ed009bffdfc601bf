//! f16 activations (`precision = f16` on WebGPU with shader-f16): a chain whose intermediates
//! the backend may store in f16 (every kernel that has an f16 form: scale, RMSNorm, RoPE through
//! reshape views, add, linear, tanh-GELU, mul, layer norm, softmax), against an f64 reference
//! with a stated f16 tolerance; a backend without f16 refuses the spec with `NotSupported`.

use super::activations::gelu_tanh;
use crate::common::harness::{
    Model, SuiteConfig, Tol, assert_close, execute, f32_tensor, i32_tensor,
};
use crate::common::reference::{self, Ref};
use crate::common::rng::Rng;
use crate::op_case;
use webdelegate::ErrorCode;
use webdelegate::backends::WebGpuBackend;
use webdelegate::program::ops::{LayerNorm, Linear, RmsNorm, Rope, RopeStyle, Softmax};
use webdelegate::program::{BinaryOp, DType, UnaryOp};
use webdelegate::registry::{CompileSpec, SharedBackend};

/// `x / sqrt(mean(x^2) + eps) * weight` over rows of `weight.len()`, in f64.
fn rms_norm(x: &Ref, weight: &[f32], eps: f64) -> Ref {
    let width = weight.len();
    let mut data = Vec::with_capacity(x.data.len());
    for row in x.data.chunks(width) {
        let inverse = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / width as f64 + eps).sqrt();
        data.extend(
            row.iter()
                .zip(weight)
                .map(|(v, &w)| v * inverse * f64::from(w)),
        );
    }
    Ref::from_f64(&x.shape, data)
}

/// `x @ w^T (+ bias)` for `w` `[N, K]`, in f64.
fn linear(x: &Ref, w: &Ref, bias: Option<&Ref>) -> Ref {
    reference::matmul(x, w, bias, false, true)
}

op_case! {
/// Rows of 64 (S = 5 positions; 4 heads of 16 for RoPE), every intermediate an f16
/// candidate: `t0 = 1.5 x + 0.25` (the f32 input read, f16 written), `t1 = rms_norm(t0) w`,
/// `r = rope(t1 as [S, 4, 16])` viewed back as `[S, 64]`, `t2 = r + t0`, `h = t2 W1^T`
/// `[S, 48]`, `u = gelu_tanh(h) * h`, `l = layer_norm(u)`, `p = softmax(l)`, and the outputs
/// `y = p W2^T + b2` (an f16 input, f32 logits) and `z = 1 * l + 0` (f16 in, f32 out).
/// Oracle: the same chain in f64. Tolerance: every stored intermediate rounds to f16 (relative
/// 2^-11 ~ 4.9e-4); through this chain of eight stored roundings, each at most amplified by the
/// norms' and the products' conditioning, the outputs hold abs 1.5e-2 + rel 1.5e-2 (about 30
/// f16 ulps; f32 meets the suite's reduction bound). The f16 program's stats say activations
/// are f16, its arena is smaller than the f32 program's, and some output differs from the f64
/// chain by more than the f32 bound (else nothing was stored in f16).
pub async fn f16_activation_chain_against_f64(backend: SharedBackend, config: SuiteConfig) {
    let (s, width, heads, hd, n, m_out) = (5usize, 64usize, 4usize, 16usize, 48usize, 24usize);
    let mut rng = Rng::new(1634);
    let x = rng.vec(s * width, -2.0, 2.0);
    let positions: Vec<i32> = vec![0, 3, 7, 11, 40];
    let wn: Vec<f32> = (0..width).map(|j| 0.6 + 0.01 * j as f32).collect();
    let w1 = rng.vec(n * width, -0.2, 0.2);
    let gamma: Vec<f32> = (0..n).map(|j| 0.8 + 0.01 * j as f32).collect();
    let beta: Vec<f32> = (0..n).map(|j| 0.05 * j as f32 - 1.0).collect();
    let w2 = rng.vec(m_out * n, -3.0, 3.0);
    let b2 = rng.vec(m_out, -0.5, 0.5);
    let (eps_rms, eps_ln) = (1e-6f32, 1e-5f32);

    let mut model = Model::new();
    let xi = model.input("x", &[s, width]);
    let pi = model.b.input("positions", DType::I32, crate::common::harness::dims(&[s]));
    let wni = model.param("wn", &[width], &wn);
    let w1i = model.param("w1", &[n, width], &w1);
    let gi = model.param("gamma", &[n], &gamma);
    let bi = model.param("beta", &[n], &beta);
    let w2i = model.param("w2", &[m_out, n], &w2);
    let b2i = model.param("b2", &[m_out], &b2);
    let b = &mut model.b;
    let t0 = b.scale(xi, 1.5, 0.25).unwrap();
    let t1 = b.push(|out| RmsNorm { x: t0, weight: Some(wni), eps: eps_rms, out }).unwrap();
    let heads_view = b.reshape(t1, crate::common::harness::dims(&[s, heads, hd])).unwrap();
    let r = b
        .push(|out| Rope {
            x: heads_view,
            positions: pi,
            dims: hd as u32,
            base: 10_000.0,
            style: RopeStyle::Neox,
            out,
            scaling: Default::default(),
        })
        .unwrap();
    let rows_view = b.reshape(r, crate::common::harness::dims(&[s, width])).unwrap();
    let t2 = b.binary(BinaryOp::Add, rows_view, t0).unwrap();
    let h = b.push(|out| Linear { x: t2, weight: w1i, bias: None, out }).unwrap();
    let g = b.unary(UnaryOp::GeluTanh, h).unwrap();
    let u = b.binary(BinaryOp::Mul, g, h).unwrap();
    let l = b.push(|out| LayerNorm { x: u, gamma: gi, beta: bi, eps: eps_ln, out }).unwrap();
    let p = b.push(|out| Softmax { x: l, mask: None, out }).unwrap();
    let y = b.push(|out| Linear { x: p, weight: w2i, bias: Some(b2i), out }).unwrap();
    let z = b.scale(l, 1.0, 0.0).unwrap();
    b.output(y).output(z);

    // The chain in f64.
    let rx = Ref::new(&[s, width], &x);
    let r0 = rx.map(|v| 1.5 * v + 0.25);
    let r1 = rms_norm(&r0, &wn, f64::from(eps_rms));
    let rr = super::rope::reference(&r1.reshape(&[s, heads, hd]), &positions, hd, 10_000.0, RopeStyle::Neox)
        .reshape(&[s, width]);
    let r2 = reference::binary(&rr, &r0, |a, b| a + b);
    let rh = linear(&r2, &Ref::new(&[n, width], &w1), None);
    let ru = reference::binary(&rh.map(gelu_tanh), &rh, |a, b| a * b);
    let rl = reference::layer_norm(&ru, &Ref::new(&[n], &gamma), &Ref::new(&[n], &beta), f64::from(eps_ln));
    let rp = reference::softmax(&rl, None);
    let ry = linear(&rp, &Ref::new(&[m_out, n], &w2), Some(&Ref::new(&[m_out], &b2)));
    let inputs = || vec![f32_tensor(&[s, width], x.clone()), i32_tensor(&[s], positions.clone())];

    let mut half = match model.init_with(&backend, &[CompileSpec::new("precision", "f16")]).await {
        Ok(delegate) => delegate,
        Err(error) => {
            assert_eq!(error.code(), ErrorCode::NotSupported, "{error}");
            assert!(!super::attention::reports_shader_f16(&backend), "shader-f16 reported, yet f16 refused: {error}");
            println!("no shader-f16 here: precision=f16 refused ({error})");
            return;
        }
    };
    let mut full = model.init_with(&backend, &[CompileSpec::new("precision", "f32")]).await.unwrap();
    let got_half = execute(&mut half, inputs(), 2).await.unwrap();
    let got_full = execute(&mut full, inputs(), 2).await.unwrap();
    let stats = |d: &webdelegate::registry::LoadedDelegate| {
        WebGpuBackend::stats_of(d.handle().expect("a WebGPU handle")).expect("WebGPU stats")
    };
    let (half_stats, full_stats) = (stats(&half), stats(&full));
    assert!(half_stats.activations_f16 && half_stats.precision == "f16", "{half_stats:?}");
    assert!(half_stats.f16_activation_tensors >= 10, "{half_stats:?}");
    assert!(!full_stats.activations_f16 && full_stats.f16_activation_tensors == 0, "{full_stats:?}");
    assert!(half_stats.arena_bytes < full_stats.arena_bytes, "{half_stats:?} vs {full_stats:?}");

    let f32_tol = Tol { rel: config.reduction.rel * 4.0, abs: config.reduction.abs * 4.0 };
    assert_close("y (f32)", &got_full[0], &ry, f32_tol);
    assert_close("z (f32)", &got_full[1], &rl, f32_tol);
    let f16_tol = Tol { rel: 1.5e-2, abs: 1.5e-2 };
    assert_close("y (f16 activations)", &got_half[0], &ry, f16_tol);
    assert_close("z (f16 activations)", &got_half[1], &rl, f16_tol);
    let beyond = [(&got_half[0], &ry), (&got_half[1], &rl)]
        .iter()
        .map(|(got, want)| {
            Ref::from_tensor(got)
                .data
                .iter()
                .zip(&want.data)
                .filter(|&(g, w)| (g - w).abs() > f32_tol.abs + f32_tol.rel * w.abs())
                .count()
        })
        .sum::<usize>();
    assert!(beyond > 0, "f16 activations left every output within the f32 bound");
    println!(
        "f16 activations: {} tensors, arena {} vs {} bytes, {beyond} outputs beyond the f32 bound",
        half_stats.f16_activation_tensors, half_stats.arena_bytes, full_stats.arena_bytes
    );
}
}
