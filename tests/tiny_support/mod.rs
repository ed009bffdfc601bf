//! Shared by the tests over the tiny random-weight GGUFs of tests/fixtures/decoders: the
//! fixture paths and a decoder session over any backend, loaded by `decoder::load` (the path
//! the web `Generator` takes).
#![allow(dead_code)]

use pollster::block_on;
use std::path::PathBuf;
use std::sync::Arc;
use webdelegate::models::decoder::{DecoderConfig, DecoderLoadOptions, load};
use webdelegate::models::decoder_session::DecoderSession;
use webdelegate::params::MemoryProvider;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::registry::BackendInterface;

/// A file of tests/fixtures/decoders.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoders")
        .join(name)
}

/// A provider serving every tensor of the GGUF `bytes` (parsed as `header`) in scope `tiny`.
pub fn provider(bytes: &[u8], header: &GgufIndex) -> Arc<MemoryProvider> {
    let provider = MemoryProvider::new();
    provider
        .insert_index("tiny", header.index(), bytes)
        .unwrap();
    Arc::new(provider)
}

/// The file's config, a session over `backend` (`context` positions, with logits) and its
/// vocabulary size.
pub fn session(
    file: &str,
    backend_id: &str,
    backend: Arc<dyn BackendInterface>,
    context: u64,
) -> (DecoderConfig, DecoderSession, usize) {
    let bytes = std::fs::read(fixture(file)).unwrap();
    let header = block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
    let options = DecoderLoadOptions {
        context: Some(context),
        logits: true,
    };
    let loaded = block_on(load(
        &header,
        provider(&bytes, &header),
        "tiny",
        options,
        backend_id,
        backend,
    ))
    .unwrap_or_else(|e| panic!("{file}: {e}"));
    let vocab = loaded.session.vocab();
    (loaded.config, loaded.session, vocab)
}
