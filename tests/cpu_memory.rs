//! Host memory of a CPU program's load, counted by a counting global allocator: the real Gemma
//! 3 270M Q4_K_M (`.cache`, fetched by `npm run setup`) and all-MiniLM-L6-v2 initialised on the
//! CPU backend from a provider. The load must place each weight once: its peak may exceed what
//! the program keeps (weights + KV cache) by the staging batches' bound and a little slack,
//! never by a second copy of a large tensor (before 12-07 the tied 178 MB Gemma embedding was
//! held twice while it loaded). The program's own report ([`CpuBackend::memory_of`]) is checked
//! against the same counts. Oracle: the allocator's counts (the heap the load really took).
#![cfg(not(target_arch = "wasm32"))]

mod counting_alloc;
mod gemma_support;
mod minilm_support;

use counting_alloc::{live, peak, reset_peak};
use std::sync::Arc;
use webdelegate::backends::cpu::{CpuBackend, CpuMemory};
use webdelegate::models::bert::{BertConfig, sentence_embedding_program};
use webdelegate::models::decoder::{DecoderProgramOptions, DecoderSignature, decoder_program};
use webdelegate::models::decoder_session::{DecoderSession, GREEDY, LogitRows};
use webdelegate::program;
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};

const MIB: f64 = 1048576.0;

/// Initialises `blob` on a fresh CPU backend with `context`, returning the delegate, the heap
/// bytes the load left held and its peak above what was held before.
fn measured_init(blob: Vec<u8>, context: &BackendInitContext) -> (LoadedDelegate, u64, u64) {
    let blob_bytes = blob.len() as isize;
    let before = live();
    reset_peak();
    let delegate = pollster::block_on(LoadedDelegate::init_with_backend(
        "cpu",
        Arc::new(CpuBackend::new()),
        FreeableBuffer::new(blob),
        &[],
        context,
    ))
    .unwrap();
    // The blob was allocated before `before`; the load frees it.
    let held = live() - before + blob_bytes;
    let peak = peak() - before;
    (delegate, held.max(0) as u64, peak.max(0) as u64)
}

fn report(what: &str, tensors: u64, memory: &CpuMemory, held: u64, peak: u64) {
    println!(
        "{what}: tensors {:.1} MiB; held {:.1} MiB, load peak {:.1} MiB; the program's report: \
         weights {:.1} MiB, state {:.1} MiB, activations {:.1} MiB, staging {:.1} MiB",
        tensors as f64 / MIB,
        held as f64 / MIB,
        peak as f64 / MIB,
        memory.weights as f64 / MIB,
        memory.state as f64 / MIB,
        memory.activations as f64 / MIB,
        memory.staging as f64 / MIB,
    );
}

/// Slack above weights + state: the program itself (ops, plan, names), the decoder's index
/// lookups, allocator rounding.
const SLACK: u64 = 8 << 20;

#[test]
fn gemma_loads_each_weight_once_on_the_cpu() {
    let model = gemma_support::model();
    let options = DecoderProgramOptions::new(1024, false);
    let program = decoder_program(
        &model.config,
        model.header.index(),
        gemma_support::SCOPE,
        &options,
    )
    .unwrap();
    let tensors: u64 = program
        .params
        .iter()
        .map(|p| model.header.index().get(&p.key).unwrap().length)
        .sum();
    let blob = program::encode(&program).unwrap();
    drop(program);
    let context = BackendInitContext::new().with_parameters(model.provider.clone());
    let (delegate, held, peak) = measured_init(blob, &context);
    let memory = CpuBackend::memory_of(delegate.handle().unwrap()).unwrap();
    report("gemma 3 270m", tensors, &memory, held, peak);
    // What the program keeps: every tensor once (no packing for block weights) and the KV
    // cache of 1024 positions (18 layers x K and V x 1 head x 256 x 4 bytes).
    assert_eq!(
        memory.weights, tensors,
        "every weight kept once, as its file bytes"
    );
    assert_eq!(
        memory.state,
        18 * 2 * 256 * 4 * 1024,
        "the KV cache as the program sizes it"
    );
    let kept = memory.weights + memory.state;
    assert!(held <= kept + SLACK, "held {held} > kept {kept} + slack");
    assert!(
        memory.staging <= 16 << 20,
        "staging {} above its bound",
        memory.staging
    );
    assert!(
        peak <= kept + memory.staging + SLACK,
        "the load peaked at {peak} bytes: a large tensor was held twice (kept {kept}, staging {})",
        memory.staging
    );

    // A 128-token prefill, then 32 decode steps: what executions keep for intermediates.
    let signature = DecoderSignature::of(
        &program::load(
            &program::encode(
                &decoder_program(
                    &model.config,
                    model.header.index(),
                    gemma_support::SCOPE,
                    &options,
                )
                .unwrap(),
            )
            .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let mut session = DecoderSession::new(delegate, signature);
    let prompt: Vec<u32> = (0..128u32).map(|i| 1000 + i * 7).collect();
    reset_peak();
    let before = live();
    pollster::block_on(session.feed(&prompt, LogitRows::Last, GREEDY)).unwrap();
    let prefill_peak = counting_alloc::peak() - before;
    for step in 0..32u32 {
        pollster::block_on(session.feed(&[2000 + step], LogitRows::Last, GREEDY)).unwrap();
    }
    let memory = CpuBackend::memory_of(session.delegate().handle().unwrap()).unwrap();
    println!(
        "gemma 3 270m after a 128-token prefill and 32 steps: activations {:.1} MiB kept, the \
         prefill peaked {:.1} MiB above what was held",
        memory.activations as f64 / MIB,
        prefill_peak as f64 / MIB
    );
    // Kept buffers never add up over steps: at most what the prefill needed at once (plus a
    // logits row). Before 12-07 they grew by a buffer per step, to 37.9 MiB after 32 steps.
    assert!(
        memory.activations <= prefill_peak.max(0) as u64 + (2 << 20),
        "{} bytes of activations kept after 32 decode steps",
        memory.activations
    );
}

#[test]
fn minilm_loads_each_weight_once_on_the_cpu() {
    let config = BertConfig::from_json(
        std::str::from_utf8(&minilm_support::model_file("config.json")).unwrap(),
    )
    .unwrap();
    let (index, provider) = minilm_support::checkpoint();
    let program = sentence_embedding_program(&config, &index, minilm_support::SCOPE).unwrap();
    let tensors: u64 = program
        .params
        .iter()
        .map(|p| index.get(&p.key).unwrap().length)
        .sum();
    let blob = program::encode(&program).unwrap();
    drop(program);
    let context = BackendInitContext::new().with_parameters(provider);
    let (delegate, held, peak) = measured_init(blob, &context);
    let memory = CpuBackend::memory_of(delegate.handle().unwrap()).unwrap();
    report("all-MiniLM-L6-v2", tensors, &memory, held, peak);
    // f32 weights: the matmul weights are packed (panel padding may add a little), the rest
    // kept as they are.
    assert!(
        memory.weights >= tensors && memory.weights <= tensors + tensors / 50,
        "weights {} for {tensors} bytes of tensors",
        memory.weights
    );
    assert_eq!(memory.state, 0, "an encoder has no state");
    assert!(
        memory.staging <= 16 << 20,
        "staging {} above its bound",
        memory.staging
    );
    assert!(held <= memory.weights + SLACK, "held {held}");
    assert!(
        peak <= memory.weights + memory.staging + SLACK,
        "the load peaked at {peak} bytes (weights {}, staging {}): a large tensor was held twice",
        memory.weights,
        memory.staging
    );
}
