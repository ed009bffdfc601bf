//! Gemma 3 270M (the real Q4_K_M GGUF) on the WebGPU backend natively (lavapipe, or any Vulkan
//! adapter): logits against the float64 NumPy reference (scripts/gemma_reference.py) at the
//! stored positions of two short prompts (one per test) (an emulated GPU is slow: the CPU test covers six at
//! every position, the `generate` bench suite all twelve), cosine >= 0.9999 and the same top-1
//! wherever the reference has no near-tie; the sliding window against the CPU backend with the
//! window narrowed; and the decode loop creating no plan, bind group or pipeline after its
//! first step.
#![cfg(not(target_arch = "wasm32"))]

mod gemma_support;

use gemma_support::*;
use pollster::block_on;
use std::sync::Arc;
use webdelegate::backends::WebGpuBackend;
use webdelegate::models::decoder_session::{GREEDY, LogitRows};

#[test]
fn logits_match_the_float64_reference_and_decode_builds_nothing_new() {
    let backend = Arc::new(block_on(WebGpuBackend::new()));
    let mut session = session("webgpu", backend, 64, true);
    let (min_cos, agree) = check_against_reference(&mut session, &["capital"], 0);
    println!("webgpu vs float64 reference: min cosine {min_cos:.7}, top-1 agreement {agree:.5}");

    // Decode steps after the first: no new plan, bind group or pipeline.
    let stats = |s: &webdelegate::models::decoder_session::DecoderSession| {
        WebGpuBackend::stats_of(s.delegate().handle().unwrap()).unwrap()
    };
    session.rewind();
    let mut next = block_on(session.feed(&[2, 818, 5279], LogitRows::Last, GREEDY))
        .unwrap()
        .tokens[0];
    next = block_on(session.feed(&[next], LogitRows::Last, GREEDY))
        .unwrap()
        .tokens[0];
    let after_first = stats(&session);
    for _ in 0..4 {
        next = block_on(session.feed(&[next], LogitRows::Last, GREEDY))
            .unwrap()
            .tokens[0];
    }
    let after = stats(&session);
    assert_eq!(after.plans_built, after_first.plans_built);
    assert_eq!(after.bind_groups_created, after_first.bind_groups_created);
    assert_eq!(after.pipelines, after_first.pipelines);
}

/// A chat-template prompt (16 tokens; the first test checks `capital`, 6) against the float64
/// reference at its stored positions. Lavapipe prefills ~8 tokens/s here, so a long prompt (the real 512-token window)
/// is left to the CPU tests (six prompts at every position, one of 575 tokens) and to the
/// bench's Chromium run; the window itself is checked on this backend by the next test.
#[test]
fn a_chat_prompt_matches_the_float64_reference() {
    let backend = Arc::new(block_on(WebGpuBackend::new()));
    let mut session = session("webgpu", backend, 64, true);
    let names = ["turns"];
    let known: Vec<String> = reference().into_iter().map(|p| p.name).collect();
    for name in names {
        assert!(known.iter().any(|n| n == name), "reference prompt {name}");
    }
    let (min_cos, agree) = check_against_reference(&mut session, &names, 0);
    println!("webgpu, turns: min cosine {min_cos:.7}, top-1 agreement {agree:.5}");
}

/// The sliding window on this backend, cheaply: the real weights with the local layers' window
/// narrowed to 16 positions, 40 tokens of a reference prompt (a 32-token tiled prefill, then
/// 8 decode steps, all past the window), every position against the CPU backend's logits (the
/// CPU path is checked against the float64 reference past the real 512-token window).
/// Cosine >= 0.9999 and the same top-1 wherever the CPU's margin is >= 1e-3. The narrowed
/// window must change the CPU's logits, or the test could not see a backend ignore it.
#[test]
fn a_narrowed_sliding_window_matches_the_cpu_backend() {
    let prompt = reference()
        .into_iter()
        .find(|p| p.name == "list")
        .expect("reference prompt list");
    let ids = &prompt.ids[..40];
    let mut config = model().config.clone();
    assert!(config.sliding_window > 0, "Gemma 3 has local layers");
    config.sliding_window = 16;
    let run = |session: &mut webdelegate::models::decoder_session::DecoderSession| {
        session.rewind();
        let rows: Vec<u32> = (0..32).collect();
        let fed = block_on(session.feed(&ids[..32], LogitRows::Rows(&rows), GREEDY)).unwrap();
        let mut logits = fed.logits.unwrap();
        for &id in &ids[32..] {
            let fed = block_on(session.feed(&[id], LogitRows::Last, GREEDY)).unwrap();
            logits.extend(fed.logits.unwrap());
        }
        logits
    };
    let cpu_backend = Arc::new(webdelegate::backends::CpuBackend::new());
    let want = run(&mut session_with(
        "cpu",
        cpu_backend.clone(),
        &config,
        64,
        true,
    ));
    let wide = run(&mut session_with(
        "cpu",
        cpu_backend,
        &model().config,
        64,
        true,
    ));
    let vocab = 262_144;
    let last = |v: &[f32]| v[v.len() - vocab..].to_vec();
    let changed = cosine(&last(&want), &last(&wide));
    assert!(
        changed < 0.999,
        "the narrowed window changes the logits (cosine {changed})"
    );

    let backend = Arc::new(block_on(WebGpuBackend::new()));
    let got = run(&mut session_with("webgpu", backend, &config, 64, true));
    assert_eq!(got.len(), want.len());
    let mut min_cos = 1.0f64;
    for (position, (g, w)) in got
        .chunks_exact(vocab)
        .zip(want.chunks_exact(vocab))
        .enumerate()
    {
        let cos = cosine(g, w);
        assert!(cos >= 0.9999, "position {position}: cosine {cos}");
        min_cos = min_cos.min(cos);
        let ((ours, _), (theirs, margin)) = (top1(g), top1(w));
        assert!(
            ours == theirs || margin < 1e-3,
            "position {position}: top-1 {ours} != the CPU's {theirs} (margin {margin})"
        );
    }
    println!(
        "webgpu vs cpu, window 16, 40 positions: min cosine {min_cos:.7} (window 512 vs 16 at the last: {changed:.5})"
    );
}

/// A 64-position session under `precision = f16`, or `None` after checking the refusal: an
/// adapter without shader-f16 must refuse the spec with `NotSupported` and must not report the
/// feature.
fn f16_session_or_refusal(
    backend: &Arc<WebGpuBackend>,
    config: &webdelegate::models::decoder::DecoderConfig,
) -> Option<webdelegate::models::decoder_session::DecoderSession> {
    use webdelegate::registry::{BackendOption, BackendOptionContext, CompileSpec, OptionValue};
    let f16 = [CompileSpec::new("precision", "f16")];
    match try_session_with_specs("webgpu", backend.clone(), config, 64, true, &f16) {
        Ok(session) => Some(session),
        Err(error) => {
            assert_eq!(
                error.code(),
                webdelegate::ErrorCode::NotSupported,
                "{error}"
            );
            let mut option = [BackendOption::new("features.shader_f16", false).unwrap()];
            webdelegate::registry::BackendInterface::get_option(
                backend.as_ref(),
                &mut BackendOptionContext::default(),
                &mut option,
            )
            .unwrap();
            assert_eq!(option[0].value(), &OptionValue::Bool(false), "{error}");
            println!("this adapter has no shader-f16: f16 refused ({error})");
            None
        }
    }
}

/// `precision = f16` (the KV cache stored in f16, matmul tiles staged in f16; norms, softmax
/// and every sum in f32) on an adapter with shader-f16 (lavapipe has it; `auto` never picks it
/// there, as lavapipe is a CPU): logits of the two short prompts against the float64 reference,
/// cosine >= 0.999 at every stored position and top-1 agreement >= 0.98 over every position;
/// the cache's state bytes are half the f32 session's at the same context
/// (`kv_cache_bytes_ratio_f16`, target <= 0.55). An adapter without shader-f16 must refuse the
/// spec with `NotSupported`, and must not report the feature.
#[test]
fn an_f16_cache_matches_the_float64_reference_within_half_precision() {
    let backend = Arc::new(block_on(WebGpuBackend::new()));
    let config = model().config.clone();
    let Some(mut session) = f16_session_or_refusal(&backend, &config) else {
        return;
    };
    let stats = |s: &webdelegate::models::decoder_session::DecoderSession| {
        WebGpuBackend::stats_of(s.delegate().handle().unwrap()).unwrap()
    };
    let half = stats(&session);
    assert!(half.kv_cache_f16 && half.precision == "f16", "{half:?}");
    let full = stats(&session_with("webgpu", backend.clone(), &config, 64, false));
    assert!(!full.kv_cache_f16 && full.precision == "f32", "{full:?}");
    let ratio = half.state_bytes as f64 / full.state_bytes as f64;
    println!(
        "kv_cache_bytes_ratio_f16 = {ratio:.4} ({} / {} bytes)",
        half.state_bytes, full.state_bytes
    );
    assert!(ratio <= 0.55, "{ratio}");
    let agreement = Agreement {
        min_cosine: 0.999,
        strict_top1: false,
    };
    let (min_cos, agree) =
        check_against_reference_within(&mut session, &["capital", "turns"], 64, agreement);
    println!("gen_logits_cosine_min_f16 = {min_cos:.9} (top-1 agreement {agree:.5})");
    assert!(agree >= 0.98, "top-1 agreement {agree}");
}

/// `precision = f16` with f16 activations as well as the f16 cache (lavapipe exposes
/// shader-f16, so f16 really runs here): the stats say the activations are f16 (the arena's
/// float intermediates; logits, the sampling knobs and weights stay f32), the activation arena
/// is smaller than the f32 program's, and the logits match the float64 reference
/// (`scripts/gemma_reference.py`, the gguf package's dequantizer) with cosine >= 0.999 at every
/// compared position and top-1 agreement >= 0.98 over the reference's positions.
#[test]
fn f16_activations_match_the_float64_reference_within_half_precision() {
    let backend = Arc::new(block_on(WebGpuBackend::new()));
    let config = model().config.clone();
    let Some(mut session) = f16_session_or_refusal(&backend, &config) else {
        return;
    };
    let agreement = Agreement {
        min_cosine: 0.999,
        strict_top1: false,
    };
    let (min_cos, agree, max_abs) =
        check_against_reference_measured(&mut session, &["capital", "turns"], 64, agreement);
    let half = WebGpuBackend::stats_of(session.delegate().handle().unwrap()).unwrap();
    assert!(
        half.activations_f16 && half.kv_cache_f16 && half.precision == "f16",
        "{half:?}"
    );
    assert!(half.f16_activation_tensors > 0, "{half:?}");
    let mut full_session = session_with("webgpu", backend.clone(), &config, 64, true);
    check_against_reference_within(&mut full_session, &["capital", "turns"], 64, agreement);
    let full = WebGpuBackend::stats_of(full_session.delegate().handle().unwrap()).unwrap();
    assert!(!full.activations_f16 && full.precision == "f32", "{full:?}");
    assert_eq!(full.f16_activation_tensors, 0);
    let ratio = half.arena_bytes as f64 / full.arena_bytes as f64;
    println!(
        "f16 activations: {} tensors; arena_bytes_ratio_f16 = {ratio:.4} ({} / {} bytes; \
         without reuse {} / {})",
        half.f16_activation_tensors,
        half.arena_bytes,
        full.arena_bytes,
        half.arena_bytes_without_reuse,
        full.arena_bytes_without_reuse
    );
    println!(
        "gen_logits_cosine_min_f16_activations = {min_cos:.9} (top-1 agreement {agree:.5}, \
         max abs logit diff {max_abs:.4e})"
    );
    // The arena's peak holds the f32 logits of a prefill chunk (they stay f32), so it need
    // not shrink; the activations summed without reuse do.
    let unshared = half.arena_bytes_without_reuse as f64 / full.arena_bytes_without_reuse as f64;
    println!("activation_bytes_without_reuse_ratio_f16 = {unshared:.4}");
    assert!(ratio <= 1.0, "{ratio}");
    assert!(unshared < 0.9, "{unshared}");
    assert!(agree >= 0.98, "top-1 agreement {agree}");
}
