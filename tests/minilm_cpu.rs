//! all-MiniLM-L6-v2 end to end on the CPU backend, natively: the program built from the real
//! checkpoint's config and index, weights from a provider, embeddings compared with the NumPy
//! float64 reference (cosine >= 0.9999 and max abs difference <= 1e-3 for every sentence), and
//! the retrieval ranking equal to the reference's.
#![cfg(not(target_arch = "wasm32"))]

mod minilm_support;

use minilm_support::*;
use pollster::block_on;
use std::sync::Arc;
use webdelegate::backends::CpuBackend;
use webdelegate::models::bert::{BertConfig, sentence_embedding_program};
use webdelegate::program;
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};

#[test]
fn embeddings_match_the_reference_and_rank_the_same() {
    let config =
        BertConfig::from_json(std::str::from_utf8(&model_file("config.json")).unwrap()).unwrap();
    let (index, provider) = checkpoint();
    let program = sentence_embedding_program(&config, &index, SCOPE).unwrap();
    let blob = program::encode(&program).unwrap();
    program::load(&blob).expect("the builder's program validates");

    let context = BackendInitContext::new().with_parameters(provider);
    let mut delegate = block_on(LoadedDelegate::init_with_backend(
        "cpu",
        Arc::new(CpuBackend::new()),
        FreeableBuffer::new(blob),
        &[],
        &context,
    ))
    .unwrap();

    let reference = reference();
    // Batches of mixed lengths exercise padding and the attention mask.
    let mut ours = Vec::new();
    for chunk in reference.token_ids.chunks(8) {
        ours.extend(embed_rows(&mut delegate, chunk));
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
        "cpu vs reference over {} sentences: min cosine {worst_cos:.7}, max abs {worst_abs:.2e}",
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
}
