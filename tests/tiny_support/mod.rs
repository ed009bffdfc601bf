//! Shared by the tests over the tiny random-weight GGUFs of tests/fixtures/decoders: the
//! fixture paths and a decoder session over any backend.
#![allow(dead_code)]

use pollster::block_on;
use std::path::PathBuf;
use std::sync::Arc;
use webdelegate::models::decoder::{DecoderConfig, DecoderProgramOptions, decoder_program};
use webdelegate::models::decoder_session::DecoderSession;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::params::{EntryStorage, MemoryProvider};
use webdelegate::program;
use webdelegate::registry::{BackendInitContext, BackendInterface, FreeableBuffer, LoadedDelegate};

/// A file of tests/fixtures/decoders.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoders")
        .join(name)
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
    let config = DecoderConfig::from_gguf(header.metadata()).unwrap();
    let provider = MemoryProvider::new();
    for entry in header.index().entries() {
        let EntryStorage::Data { offset } = entry.storage else {
            panic!("no splats in GGUF")
        };
        let range = offset as usize..(offset + entry.length) as usize;
        let shape = entry.shape.clone().map(|mut s| {
            s.reverse();
            s
        });
        provider.insert_described(
            "tiny",
            &entry.key,
            bytes[range].to_vec(),
            entry.dtype.clone(),
            shape,
        );
    }
    let options = DecoderProgramOptions {
        context,
        logits: true,
    };
    let program = decoder_program(&config, header.index(), "tiny", options).unwrap();
    let blob = program::encode(&program).unwrap();
    let init = BackendInitContext::new().with_parameters(Arc::new(provider));
    let delegate = block_on(LoadedDelegate::init_with_backend(
        backend_id,
        backend,
        FreeableBuffer::new(blob),
        &[],
        &init,
    ))
    .unwrap();
    let vocab = header
        .index()
        .entries()
        .iter()
        .find(|e| e.key == "token_embd.weight")
        .and_then(|e| e.shape.as_ref().map(|s| s[1] as usize))
        .unwrap();
    (
        config,
        DecoderSession::new(delegate, context, vocab, true),
        vocab,
    )
}
