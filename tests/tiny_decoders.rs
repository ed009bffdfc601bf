//! Every decoder architecture on a tiny random-weight GGUF of its own (tests/fixtures/decoders,
//! written with the `gguf` package by scripts/make-tiny-decoders.py; F32, F16, Q8_0, Q5_0,
//! Q4_K and Q6_K weights, GQA, untied and tied output; see that directory's README for what
//! each variant exercises), on the CPU and the WebGPU backend, against two oracles in the
//! fixture:
//! - the float64 NumPy reference (scripts/gemma_reference.py, weights dequantized by gguf-py):
//!   max abs difference <= 2e-4 on every logit of every position, same top-1;
//! - llama.cpp's own logits (llama-cpp-python), which quantize activations to 8 bits and keep an
//!   f16 KV cache: cosine >= 0.99 and max abs <= 1.0 (the fixture's own reference-vs-llama.cpp
//!   gap is 0.34 / 0.57). Where llama.cpp ignores a file's sliding window (`llama`, `phi3`),
//!   only the positions before it.
#![cfg(not(target_arch = "wasm32"))]

mod tiny_support;

use tiny_support::{fixture, session};

use pollster::block_on;
use std::sync::Arc;
use webdelegate::backends::cpu::CpuBackend;
use webdelegate::backends::webgpu::WebGpuBackend;
use webdelegate::models::decoder::DecoderConfig;
use webdelegate::models::decoder_session::{GREEDY, LogitRows};
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::registry::BackendInterface;

fn rows(v: &serde_json::Value) -> Vec<Vec<f32>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

fn argmax(row: &[f32]) -> usize {
    (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b })
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// Every tiny fixture: its variant name (the file `tiny-{name}.gguf`) and the
/// `general.architecture` it declares. Each must exist: a variant dropped from
/// scripts/make-tiny-decoders.py fails here rather than going unchecked.
const VARIANTS: [(&str, &str); 9] = [
    ("llama", "llama"),
    ("llama3", "llama"),
    ("smollm", "llama"),
    ("mistral", "llama"),
    ("qwen2", "qwen2"),
    ("qwen3", "qwen3"),
    ("phi3", "phi3"),
    ("gemma2", "gemma2"),
    ("gemma3", "gemma3"),
];

/// How far one variant's logits were from each oracle.
struct Agreement {
    worst_ref: f32,
    worst_cpp: f32,
    min_cos: f64,
}

fn check(
    variant: &str,
    arch: &str,
    backend_id: &str,
    backend: Arc<dyn BackendInterface>,
) -> Agreement {
    let file = format!("tiny-{variant}.gguf");
    let (config, mut session, vocab) = session(&file, backend_id, backend, 64);
    assert_eq!(config.arch.name, arch, "{file}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture(&file.replace(".gguf", ".llamacpp.json")))
            .unwrap_or_else(|e| panic!("{file}: {e}; scripts/make-tiny-decoders.py writes it")),
    )
    .unwrap();
    assert_eq!(json["n_vocab"].as_u64().unwrap() as usize, vocab);
    // llama.cpp ignores the window of `llama` and `phi3` files: compare it only before.
    let window = json["window"].as_u64().unwrap_or(0) as usize;
    let cpp_until = if json["llamacpp_ignores_window"].as_bool().unwrap_or(false) && window > 0 {
        window
    } else {
        usize::MAX
    };
    let mut agreement = Agreement {
        worst_ref: 0.0,
        worst_cpp: 0.0,
        min_cos: 1.0,
    };
    for seq in json["sequences"].as_array().unwrap() {
        let ids: Vec<u32> = seq["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        session.rewind();
        // Two feeds (a prefill, then the rest one by one) so the caches carry across executes.
        let split = ids.len().div_ceil(2);
        let mut ours = block_on(session.feed(&ids[..split], LogitRows::All, GREEDY))
            .unwrap()
            .logits
            .unwrap();
        for &id in &ids[split..] {
            ours.extend(
                block_on(session.feed(&[id], LogitRows::All, GREEDY))
                    .unwrap()
                    .logits
                    .unwrap(),
            );
        }
        let reference = rows(&seq["reference_logits"]);
        let llamacpp = rows(&seq["llamacpp_logits"]);
        for (t, got) in ours.chunks_exact(vocab).enumerate() {
            let r = &reference[t];
            let max_ref = got
                .iter()
                .zip(r)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                max_ref <= 2e-4,
                "{file} {backend_id} position {t}: max abs {max_ref} vs the reference"
            );
            assert_eq!(
                argmax(got),
                argmax(r),
                "{file} {backend_id} position {t}: top-1"
            );
            agreement.worst_ref = agreement.worst_ref.max(max_ref);
            if t >= cpp_until {
                continue;
            }
            let max_cpp = got
                .iter()
                .zip(&llamacpp[t])
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            let cos = cosine(got, &llamacpp[t]);
            assert!(
                cos >= 0.99 && max_cpp <= 1.0,
                "{file} {backend_id} position {t}: vs llama.cpp cosine {cos}, max abs {max_cpp}"
            );
            agreement.worst_cpp = agreement.worst_cpp.max(max_cpp);
            agreement.min_cos = agreement.min_cos.min(cos);
        }
    }
    println!(
        "{file} ({arch}) on {backend_id}: max abs vs reference {:.2e}; vs llama.cpp {:.3} (min cosine {:.5})",
        agreement.worst_ref, agreement.worst_cpp, agreement.min_cos
    );
    agreement
}

#[test]
fn every_architecture_matches_the_reference_and_llama_cpp_on_the_cpu() {
    for (variant, arch) in VARIANTS {
        check(variant, arch, "cpu", Arc::new(CpuBackend::new()));
    }
}

/// Natively the WebGPU backend runs on Mesa's lavapipe (Vulkan on the CPU) here.
#[test]
fn every_architecture_matches_the_reference_and_llama_cpp_on_webgpu() {
    let backend: Arc<dyn BackendInterface> = Arc::new(block_on(WebGpuBackend::new()));
    for (variant, arch) in VARIANTS {
        check(variant, arch, "webgpu", Arc::clone(&backend));
    }
}

/// `TextGenerator::evaluate` feeds in chunks of `EVALUATE_CHUNK` tokens: its greedy tokens and
/// its logits at positions in several chunks equal one feed of every row (oracle: the same
/// program run in one execute; rows may differ by float reassociation across row counts, so
/// 1e-5), and bad input is refused before anything runs.
#[test]
fn evaluate_across_chunks_equals_one_feed_of_every_row() {
    use webdelegate::ErrorCode;
    use webdelegate::models::generator::{EVALUATE_CHUNK, TextGenerator};
    use webdelegate::text::GgufTokenizer;

    let file = "tiny-llama.gguf";
    let bytes = std::fs::read(fixture(file)).unwrap();
    let header = block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
    let tokenizer = Arc::new(GgufTokenizer::from_gguf(&header).unwrap());
    let (_, mut whole, vocab) = session(file, "cpu", Arc::new(CpuBackend::new()), 64);
    let n = EVALUATE_CHUNK + 18;
    let ids: Vec<u32> = (0..n as u32)
        .map(|i| (i * 37 + 11) % vocab as u32)
        .collect();
    let all = block_on(whole.feed(&ids, LogitRows::All, GREEDY)).unwrap();
    let all_logits = all.logits.unwrap();

    let (_, session_b, _) = session(file, "cpu", Arc::new(CpuBackend::new()), 64);
    let mut generator = TextGenerator::new(tokenizer, session_b);
    let last = n as u32 - 1;
    let positions = [0, EVALUATE_CHUNK as u32 - 1, EVALUATE_CHUNK as u32, last];
    let ev = block_on(generator.evaluate(&ids, &positions)).unwrap();
    assert_eq!(ev.tokens, all.tokens, "greedy token after every position");
    assert_eq!(ev.logits.len(), positions.len() * vocab);
    for (row, &p) in positions.iter().enumerate() {
        let want = &all_logits[p as usize * vocab..(p as usize + 1) * vocab];
        let got = &ev.logits[row * vocab..(row + 1) * vocab];
        let worst = want
            .iter()
            .zip(got)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= 1e-5, "position {p}: max abs {worst}");
    }
    // The caches hold `ids` now: evaluating again gives the same (from position 0 again).
    let again = block_on(generator.evaluate(&ids, &[last])).unwrap();
    assert_eq!(again.tokens, ev.tokens);
    assert_eq!(again.logits, ev.logits[3 * vocab..]);

    let code = |r: webdelegate::Result<_>| {
        r.map(|_: webdelegate::models::generator::Evaluation| ())
            .unwrap_err()
            .code()
    };
    assert_eq!(
        code(block_on(generator.evaluate(&[], &[]))),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(block_on(generator.evaluate(&[vocab as u32], &[]))),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(block_on(generator.evaluate(&ids, &[3, 3]))),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(block_on(generator.evaluate(&ids, &[n as u32]))),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code(block_on(generator.evaluate(&vec![1; 65], &[]))),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn a_vocabulary_unlike_the_embedding_table_or_a_one_position_context_is_refused_at_load() {
    use webdelegate::error::ErrorCode;
    use webdelegate::models::decoder::check_vocabulary;
    use webdelegate::params::formats::gguf::GgufValue;
    use webdelegate::text::GgufTokenizer;
    for file in ["tiny-llama.gguf", "tiny-qwen2.gguf"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        let header = block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
        let tokenizer = GgufTokenizer::from_gguf(&header).unwrap();
        let vocab = tokenizer.vocab_size() as u64;
        check_vocabulary(header.index(), vocab).unwrap();
        for other in [vocab - 1, vocab + 182] {
            let error = check_vocabulary(header.index(), other).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidExternalData, "{error}");
            assert!(
                error.message().contains(&other.to_string())
                    && error.message().contains(&vocab.to_string()),
                "{error}"
            );
        }
        let mut metadata = header.metadata().to_vec();
        let at = metadata
            .iter()
            .position(|(key, _)| key.ends_with(".context_length"))
            .unwrap();
        for bad in [0, 1] {
            metadata[at].1 = GgufValue::U32(bad);
            let error = DecoderConfig::from_gguf(&metadata).unwrap_err();
            assert!(error.message().contains("context_length"), "{error}");
        }
    }
}

/// What the builders do not implement is refused at load with the key named, never run
/// (oracle: the documented codes): an architecture not in the table, a YaRN RoPE, a
/// per-layer window pattern of the wrong length; and a program built without the file's RoPE
/// factors, or with factors of another count.
#[test]
fn unsupported_metadata_is_refused_naming_the_key() {
    use webdelegate::error::ErrorCode;
    use webdelegate::models::decoder::{DecoderProgramOptions, decoder_program};
    use webdelegate::params::formats::gguf::{GgufArray, GgufValue};
    let bytes = std::fs::read(fixture("tiny-llama.gguf")).unwrap();
    let header = block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
    let with = |key: &str, value: GgufValue| {
        let mut metadata = header.metadata().to_vec();
        metadata.retain(|(k, _)| k != key);
        metadata.push((key.to_owned(), value));
        DecoderConfig::from_gguf(&metadata)
    };
    let text = |s: &str| GgufValue::String(s.as_bytes().to_vec());
    let error = with("general.architecture", text("mamba")).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotSupported, "{error}");
    assert!(
        error.message().contains("mamba") && error.message().contains("qwen3"),
        "{error}"
    );
    let error = with("llama.rope.scaling.type", text("yarn")).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotSupported, "{error}");
    assert!(
        error.message().contains("llama.rope.scaling.type"),
        "{error}"
    );
    let error = with(
        "llama.attention.sliding_window_pattern",
        GgufValue::Array(GgufArray::Bool(vec![true; 3])),
    );
    // `llama` reads no pattern (every layer is local when there is a window): accepted.
    assert!(error.is_ok());
    let mut gemma = header.metadata().to_vec();
    for (key, value) in &mut gemma {
        if let Some(rest) = key.strip_prefix("llama.") {
            *key = format!("gemma2.{rest}");
        } else if key == "general.architecture" {
            *value = text("gemma2");
        }
    }
    gemma.push((
        "gemma2.attention.sliding_window_pattern".into(),
        GgufValue::Array(GgufArray::Bool(vec![true; 3])),
    ));
    let error = DecoderConfig::from_gguf(&gemma).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidExternalData, "{error}");
    assert!(
        error.message().contains("sliding_window_pattern"),
        "{error}"
    );

    // tiny-llama3 carries `rope_freqs.weight`: a program must be given its values.
    let bytes = std::fs::read(fixture("tiny-llama3.gguf")).unwrap();
    let header = block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
    let config = DecoderConfig::from_gguf(header.metadata()).unwrap();
    let build = |factors: Option<Vec<f32>>| {
        let mut options = DecoderProgramOptions::new(64, false);
        options.rope_factors = factors;
        decoder_program(&config, header.index(), "tiny", &options)
    };
    let error = build(None).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidArgument, "{error}");
    assert!(error.message().contains("rope_freqs.weight"), "{error}");
    let pairs = config.rope.dims as usize / 2;
    let error = build(Some(vec![1.0; pairs + 1])).unwrap_err();
    assert_eq!(error.code(), ErrorCode::InvalidExternalData, "{error}");
    assert!(build(Some(vec![1.0; pairs])).is_ok());
}
