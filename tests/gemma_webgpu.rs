//! Gemma 3 270M (the real Q4_K_M GGUF) on the WebGPU backend natively (lavapipe, or any Vulkan
//! adapter): logits against the float64 NumPy reference (scripts/gemma_reference.py) at the
//! stored positions of three prompts (an emulated GPU is slow: the CPU test covers six at every
//! position, the `generate` bench suite all twelve), cosine >= 0.9999 and the same top-1 wherever the reference has no
//! near-tie; and the decode loop creating no plan, bind group or pipeline after its first step.
#![cfg(not(target_arch = "wasm32"))]

mod gemma_support;

use gemma_support::*;
use pollster::block_on;
use std::sync::Arc;
use webdelegate::backends::webgpu::WebGpuBackend;
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

/// Three of the reference prompts (6, 16 and 575 tokens: the 512-token window and the tiled
/// prefill path are exercised), at the reference's stored positions (first, last, 512, 513 of
/// each). Lavapipe prefills ~8 tokens/s here, so the others are left to the CPU tests; the
/// bench's WebGPU keys come from Chromium.
#[test]
fn three_prompts_match_the_float64_reference() {
    let backend = Arc::new(block_on(WebGpuBackend::new()));
    let mut session = session("webgpu", backend, 1024, true);
    let names = ["capital", "turns", "lighthouse_long"];
    let known: Vec<String> = reference().into_iter().map(|p| p.name).collect();
    for name in names {
        assert!(known.iter().any(|n| n == name), "reference prompt {name}");
    }
    let (min_cos, agree) = check_against_reference(&mut session, &names, 0);
    println!("webgpu, three prompts: min cosine {min_cos:.7}, top-1 agreement {agree:.5}");
}
