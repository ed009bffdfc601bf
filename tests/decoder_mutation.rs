//! Deterministic mutation testing of everything a GGUF header reaches at a Generator's load,
//! past the index parser (issue 37): the decoder config, the tokenizer, the vocabulary check,
//! the decoder program and the chat template — the in-CI counterpart of the `gguf_decoder` fuzz
//! target. Mutants of the two tiny decoders (SentencePiece and byte-level BPE vocabularies):
//! bit flips, random bytes, boundary numbers written over counts and lengths, truncations.
//! Each must load or fail with an error; never panic (4000 mutants per file, about 8 s). Some mutants must fail, and the
//! originals must load (so the test can tell a pipeline that refuses everything).
#![cfg(not(target_arch = "wasm32"))]

mod formats_support;

use formats_support::Rng;
use pollster::block_on;
use webdelegate::models::chat::ChatPrompt;
use webdelegate::models::decoder::{DecoderLoadOptions, PreparedDecoder};
use webdelegate::params::MemoryProvider;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::text::ChatRender;

const MUTANTS_PER_FIXTURE: usize = 4000;

/// Loads as `Generator.load` does; `Ok` with the vocabulary size.
fn load(bytes: &[u8]) -> Result<usize, String> {
    let header = block_on(GgufIndex::parse(bytes)).map_err(|e| e.to_string())?;
    let provider = MemoryProvider::new();
    provider
        .insert_index("model", header.index(), bytes)
        .map_err(|e| e.to_string())?;
    let options = DecoderLoadOptions {
        context: Some(64),
        logits: false,
    };
    let prepared = block_on(PreparedDecoder::prepare(
        &header, &provider, "model", options,
    ))
    .map_err(|e| e.to_string())?;
    let tokenizer = prepared.tokenizer;
    let messages = serde_json::json!([{"role": "user", "content": "hi"}]);
    let template =
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}{{ eos_token }}";
    let prompt = ChatPrompt::new(Some(template), header.metadata(), &tokenizer)
        .map_err(|e| e.to_string())?;
    let ids = prompt
        .token_ids(
            &tokenizer,
            &ChatRender {
                messages: Some(&messages),
                add_generation_prompt: true,
                ..ChatRender::default()
            },
        )
        .map_err(|e| e.to_string())?;
    let _ = tokenizer.decode(&ids);
    Ok(tokenizer.vocab_size())
}

fn mutate(rng: &mut Rng, original: &[u8], region: usize) -> Vec<u8> {
    const BOUNDARY: [u64; 12] = [
        0,
        1,
        2,
        255,
        256,
        65_535,
        1 << 20,
        1 << 24,
        1 << 31,
        1 << 32,
        1 << 62,
        u64::MAX,
    ];
    let mut bytes = original.to_vec();
    for _ in 0..=rng.below(2) {
        let region = region.min(bytes.len());
        if region == 0 {
            break;
        }
        let at = rng.below(region as u64) as usize;
        match rng.below(5) {
            0 => bytes[at] ^= 1 << rng.below(8),
            1 => bytes[at] = rng.next() as u8,
            2 | 3 => {
                let value = BOUNDARY[rng.below(BOUNDARY.len() as u64) as usize].to_le_bytes();
                let width = if rng.below(2) == 0 { 8 } else { 4 };
                for (i, byte) in value.iter().take(width).enumerate() {
                    if let Some(slot) = bytes.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

#[test]
fn mutated_decoder_headers_load_or_fail_cleanly() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/decoders");
    for (seed, name) in [(11, "tiny-llama.gguf"), (12, "tiny-qwen2.gguf")] {
        let original = std::fs::read(dir.join(name)).unwrap();
        let vocab = load(&original).unwrap_or_else(|e| panic!("{name}: {e}"));
        let header = block_on(GgufIndex::parse(original.as_slice())).unwrap();
        // The header region: everything before the first tensor's data.
        let region = header
            .index()
            .entries()
            .iter()
            .filter_map(|e| match e.storage {
                webdelegate::params::EntryStorage::Data { offset } => Some(offset as usize),
                _ => None,
            })
            .min()
            .unwrap();
        let mut rng = Rng(seed);
        let (mut loaded, mut refused) = (0, 0);
        for i in 0..MUTANTS_PER_FIXTURE {
            let mutant = mutate(&mut rng, &original, region);
            let outcome = std::panic::catch_unwind(|| load(&mutant));
            match outcome {
                Ok(Ok(_)) => loaded += 1,
                Ok(Err(_)) => refused += 1,
                Err(_) => panic!("{name}: mutant {i} panicked"),
            }
        }
        println!("{name} (vocabulary {vocab}): {loaded} mutants loaded, {refused} refused");
        assert!(
            refused > MUTANTS_PER_FIXTURE / 10,
            "{name}: only {refused} refused"
        );
    }
}
