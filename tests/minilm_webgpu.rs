//! all-MiniLM-L6-v2 end to end on the WebGPU backend, natively (Mesa lavapipe through Vulkan):
//! the program built from the real checkpoint's config and index, weights loaded by the
//! provider straight into GPU buffers, embeddings compared with the NumPy float64 reference
//! (cosine >= 0.9999 and max abs difference <= 1e-3 for every sentence, the CPU backend's
//! bounds), and the retrieval ranking equal to the reference's.
#![cfg(not(target_arch = "wasm32"))]

mod minilm_support;

use minilm_support::*;
use pollster::block_on;
use std::sync::Arc;
use webdelegate::backends::WebGpuBackend;
use webdelegate::models::bert::{BertConfig, sentence_embedding_program};
use webdelegate::program;
use webdelegate::registry::{BackendInitContext, BackendInterface, FreeableBuffer, LoadedDelegate};

#[test]
fn embeddings_match_the_reference_and_rank_the_same() {
    let config =
        BertConfig::from_json(std::str::from_utf8(&model_file("config.json")).unwrap()).unwrap();
    let (index, provider) = checkpoint();
    let program = sentence_embedding_program(&config, &index, SCOPE).unwrap();
    let blob = program::encode(&program).unwrap();
    program::load(&blob).expect("the builder's program validates");

    let context = BackendInitContext::new().with_parameters(provider);
    let backend = Arc::new(block_on(WebGpuBackend::new()));
    assert!(
        backend.is_available(),
        "no WebGPU adapter natively: {:?} (install mesa-vulkan-drivers)",
        backend.unavailable_reason()
    );
    let mut delegate = block_on(LoadedDelegate::init_with_backend(
        "webgpu",
        backend.clone(),
        FreeableBuffer::new(blob),
        &[],
        &context,
    ))
    .unwrap();

    let reference = reference();
    // Batches of similar lengths (sorted, up to 8 rows and 256 padded tokens, as a serving
    // loop would pack them) keep lavapipe's time down while lengths still mix inside batches
    // (padding and the attention mask are exercised); the 256-token sentence runs alone.
    let mut order: Vec<usize> = (0..reference.token_ids.len()).collect();
    order.sort_by_key(|&i| reference.token_ids[i].len());
    let mut batches: Vec<Vec<usize>> = Vec::new();
    for i in order {
        let len = reference.token_ids[i].len();
        match batches.last_mut() {
            Some(batch) if batch.len() < 8 && (batch.len() + 1) * len <= 256 => batch.push(i),
            _ => batches.push(vec![i]),
        }
    }
    let mut ours = vec![Vec::new(); reference.token_ids.len()];
    for batch in &batches {
        let rows: Vec<Vec<i64>> = batch
            .iter()
            .map(|&i| reference.token_ids[i].clone())
            .collect();
        for (&i, embedding) in batch.iter().zip(embed_rows(&mut delegate, &rows)) {
            ours[i] = embedding;
        }
    }
    let mut worst_cos = 1.0f64;
    let mut worst_abs = 0.0f32;
    for (i, (got, want)) in ours.iter().zip(&reference.embeddings).enumerate() {
        let cos = cosine(got, want);
        let abs = max_abs_diff(got, want);
        assert!(
            cos >= 0.9999 && abs <= 1e-3,
            "sentence {i} {:?}: cosine {cos}, max abs {abs}",
            reference.sentences[i]
        );
        worst_cos = worst_cos.min(cos);
        worst_abs = worst_abs.max(abs);
    }
    println!(
        "webgpu vs reference over {} sentences: min cosine {worst_cos:.7}, max abs {worst_abs:.2e}",
        ours.len()
    );

    for (query, expected) in reference.queries.iter().zip(&reference.ranking) {
        let mut ranked = reference.corpus.clone();
        let score = |doc: &usize| cosine(&ours[*query], &ours[*doc]);
        ranked.sort_by(|a, b| score(b).total_cmp(&score(a)));
        assert_eq!(
            &ranked, expected,
            "ranking for query {:?}",
            reference.sentences[*query]
        );
    }
    drop(delegate);
    assert_eq!(backend.live_buffers(), 0, "destroy frees every GPU buffer");
}
