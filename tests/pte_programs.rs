//! ExecuTorch programs exported by the webdelegate partitioner (tests/fixtures/pte, written by
//! scripts/make-pte-fixtures.py with executorch 1.5.1 and torch 2.14.1), run natively by the
//! `.pte` runtime through the backend registry on the CPU backend and on the WebGPU backend
//! (lavapipe), with the `.ptd` served from memory through its own index parser.
//!
//! Oracles, per fixture (all recorded by the fixture script):
//! - `executorch_portable`: ExecuTorch's own runtime (portable kernels) on the non-delegated
//!   export of the same module, weights from its `.ptd`;
//! - `eager`: the PyTorch module;
//! - MiniLM also `sentence_transformers` (the library's own `encode`).
//!
//! Tolerances: 1e-4 absolute on the block's and the tiny decoder's outputs (f32 throughout,
//! summation order differs), equal greedy tokens, cosine >= 0.9999 on MiniLM's embeddings.
#![cfg(not(target_arch = "wasm32"))]

use pollster::block_on;
use std::path::PathBuf;
use std::sync::Arc;
use webdelegate::backends::CpuBackend;
use webdelegate::backends::WebGpuBackend;
use webdelegate::backends::{CPU, WEBGPU, register_if_absent};
use webdelegate::params::formats::{Format, parse_index_in_memory};
use webdelegate::params::{EntryStorage, MemoryProvider, SharedProvider};
use webdelegate::pte::{
    Method, MethodLoadOptions, NAMED_DATA_SCOPE, PteFile, WEBDELEGATE_BACKEND_ID,
};
use webdelegate::{EValue, ErrorCode, Tensor, TensorData};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = repo().join("tests/fixtures/pte").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture_json(name: &str) -> serde_json::Value {
    serde_json::from_slice(&fixture_bytes(name)).unwrap()
}

/// A provider serving every key of the `.ptd` `bytes` under the named-data scope, placed by the
/// runtime's own `.ptd` index parser.
fn ptd_provider(bytes: &[u8]) -> SharedProvider {
    let index = parse_index_in_memory(Format::Ptd, bytes).unwrap();
    let provider = MemoryProvider::new();
    for entry in index.entries() {
        let EntryStorage::Data { offset } = entry.storage else {
            panic!("a .ptd has no splats")
        };
        let range = offset as usize..(offset + entry.length) as usize;
        provider.insert_described(
            NAMED_DATA_SCOPE,
            &entry.key,
            bytes[range].to_vec(),
            entry.dtype.clone(),
            entry.shape.clone(),
        );
    }
    Arc::new(provider)
}

/// Registers the CPU backend and, when this machine has a Vulkan adapter, the WebGPU one; the
/// backends a test runs on.
fn backends() -> Vec<&'static str> {
    register_if_absent(CPU, Arc::new(CpuBackend::new())).unwrap();
    let webgpu = block_on(WebGpuBackend::new());
    let reason = webgpu.unavailable_reason();
    assert!(
        reason.is_none(),
        "no WebGPU adapter natively: {reason:?} (install mesa-vulkan-drivers)"
    );
    register_if_absent(WEBGPU, Arc::new(webgpu)).unwrap();
    vec![CPU, WEBGPU]
}

fn options(backend: &str, ptd: Option<&[u8]>) -> MethodLoadOptions {
    MethodLoadOptions {
        backends: vec![(WEBDELEGATE_BACKEND_ID.to_owned(), backend.to_owned())],
        external_data: ptd.map(ptd_provider),
        ..MethodLoadOptions::default()
    }
}

/// A tensor from the fixture's `{dtype, shape, data}`.
fn tensor(value: &serde_json::Value) -> Tensor {
    let shape: Vec<usize> = value["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data = value["data"].as_array().unwrap();
    let data = match value["dtype"].as_str().unwrap() {
        "float32" => TensorData::Float32(data.iter().map(|v| v.as_f64().unwrap() as f32).collect()),
        "int64" => TensorData::Int64(data.iter().map(|v| v.as_i64().unwrap()).collect()),
        other => panic!("fixture dtype {other}"),
    };
    Tensor::new(shape, data).unwrap()
}

fn i64_tensor(values: &serde_json::Value) -> EValue {
    let values: Vec<i64> = values
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    EValue::Tensor(Tensor::new(vec![values.len()], TensorData::Int64(values)).unwrap())
}

fn max_abs_diff(got: &Tensor, want: &Tensor) -> f32 {
    assert_eq!(got.shape(), want.shape());
    let (got, want) = (got.as_f32().unwrap(), want.as_f32().unwrap());
    got.iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

fn output_tensor(outputs: Vec<EValue>) -> Tensor {
    match outputs.into_iter().next() {
        Some(EValue::Tensor(tensor)) => tensor,
        other => panic!("expected one tensor output, got {other:?}"),
    }
}

#[test]
fn the_block_matches_executorch_and_eager_on_both_backends() {
    let json = fixture_json("block.json");
    let file = PteFile::parse(fixture_bytes("block.pte")).unwrap();
    let ptd = fixture_bytes("block.ptd");
    let input = tensor(&json["inputs"][0]);
    for backend in backends() {
        let mut method = block_on(Method::load(
            &file,
            "forward",
            &options(backend, Some(&ptd)),
        ))
        .unwrap_or_else(|e| panic!("{backend}: {e}"));
        assert_eq!(method.delegates()[0].backend_id(), backend);
        // Twice: the method is reusable and keeps no state between calls.
        for run in 0..2 {
            let got = output_tensor(
                block_on(method.execute(vec![EValue::Tensor(input.clone())])).unwrap(),
            );
            for oracle in ["executorch_portable", "eager"] {
                let want = tensor(&json["expected"][oracle][0]);
                let diff = max_abs_diff(&got, &want);
                assert!(
                    diff <= 1e-4,
                    "{backend} run {run} vs {oracle}: max abs diff {diff}"
                );
            }
        }
    }
}

#[test]
fn the_tiny_decoder_prefills_and_decodes_with_its_cache_as_state() {
    let json = fixture_json("tiny_decoder.json");
    let file = PteFile::parse(fixture_bytes("tiny_decoder.pte")).unwrap();
    let ptd = fixture_bytes("tiny_decoder.ptd");
    let want_tokens: Vec<i64> = json["greedy_tokens"]["executorch_portable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(
        json["greedy_tokens"]["eager"],
        json["greedy_tokens"]["executorch_portable"]
    );
    for backend in backends() {
        let mut method = block_on(Method::load(
            &file,
            "forward",
            &options(backend, Some(&ptd)),
        ))
        .unwrap_or_else(|e| panic!("{backend}: {e}"));
        // Two sequences on one method: reset_state gives the second a fresh cache.
        for sequence in 0..2 {
            if sequence > 0 {
                method.reset_state().unwrap();
            }
            let mut tokens = Vec::new();
            for (step, call) in json["calls"].as_array().unwrap().iter().enumerate() {
                let inputs = vec![i64_tensor(&call["tokens"]), i64_tensor(&call["input_pos"])];
                let logits = output_tensor(block_on(method.execute(inputs)).unwrap());
                for oracle in ["executorch_portable", "eager"] {
                    let want = tensor(&call["expected"][oracle]);
                    let diff = max_abs_diff(&logits, &want);
                    assert!(
                        diff <= 1e-4,
                        "{backend} sequence {sequence} step {step} vs {oracle}: {diff}"
                    );
                }
                let vocab = logits.shape()[1];
                let last = &logits.as_f32().unwrap()[logits.numel() - vocab..];
                let argmax = (0..vocab)
                    .max_by(|&a, &b| last[a].total_cmp(&last[b]))
                    .unwrap();
                tokens.push(argmax as i64);
            }
            assert_eq!(tokens, want_tokens, "{backend} sequence {sequence}");
        }
    }
}

#[test]
fn minilm_from_the_pte_matches_sentence_transformers() {
    let json = fixture_json("minilm.json");
    let ptd_path = repo().join(".cache/pte/minilm.ptd");
    let ptd = std::fs::read(&ptd_path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; `npm run setup` rebuilds it (scripts/make-minilm-ptd.py)",
            ptd_path.display()
        )
    });
    let file = PteFile::parse(fixture_bytes("minilm.pte")).unwrap();
    let meta = file.method("forward").unwrap();
    assert_eq!(meta.delegates().len(), 1, "the whole model is one delegate");
    assert!(meta.operators().is_empty(), "no operator runs outside it");
    for backend in backends() {
        let mut method = block_on(Method::load(
            &file,
            "forward",
            &options(backend, Some(&ptd)),
        ))
        .unwrap_or_else(|e| panic!("{backend}: {e}"));
        for case in json["cases"].as_array().unwrap() {
            let inputs = vec![
                EValue::Tensor(tensor(&case["input_ids"])),
                EValue::Tensor(tensor(&case["attention_mask"])),
            ];
            let got = output_tensor(block_on(method.execute(inputs)).unwrap());
            let want = tensor(&case["expected"]["sentence_transformers"]);
            let (a, b) = (got.as_f32().unwrap(), want.as_f32().unwrap());
            let dot: f64 = a
                .iter()
                .zip(b)
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum();
            let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
            let cosine = dot / (norm(a) * norm(b));
            assert!(
                cosine >= 0.9999,
                "{backend}: {:?}: cosine {cosine}",
                case["sentence"]
            );
        }
    }
}

#[test]
fn a_missing_ptd_fails_the_load_naming_the_key() {
    let file = PteFile::parse(fixture_bytes("block.pte")).unwrap();
    register_if_absent(CPU, Arc::new(CpuBackend::new())).unwrap();
    let error = block_on(Method::load(&file, "forward", &options(CPU, None))).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound, "{error}");
    assert!(error.message().contains(".ptd"), "{error}");
}

#[test]
fn a_ptd_lacking_a_key_or_of_another_layout_is_refused_before_execute() {
    let file = PteFile::parse(fixture_bytes("block.pte")).unwrap();
    register_if_absent(CPU, Arc::new(CpuBackend::new())).unwrap();
    // The tiny decoder's weights: other keys, other shapes.
    let other = fixture_bytes("tiny_decoder.ptd");
    let error = block_on(Method::load(&file, "forward", &options(CPU, Some(&other)))).unwrap_err();
    assert!(
        matches!(
            error.code(),
            ErrorCode::NotFound | ErrorCode::InvalidExternalData
        ),
        "{error}"
    );
    assert!(
        error.message().contains("weight") || error.message().contains("bias"),
        "{error}"
    );
}

#[test]
fn the_partitioners_backend_id_must_be_mapped_or_registered() {
    let file = PteFile::parse(fixture_bytes("block.pte")).unwrap();
    let ptd = fixture_bytes("block.ptd");
    let unmapped = MethodLoadOptions {
        external_data: Some(ptd_provider(&ptd)),
        ..MethodLoadOptions::default()
    };
    let error = block_on(Method::load(&file, "forward", &unmapped)).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound, "{error}");
    assert!(error.message().contains(WEBDELEGATE_BACKEND_ID), "{error}");
    let mapped_to_nothing = options("no-such-backend", Some(&ptd));
    let error = block_on(Method::load(&file, "forward", &mapped_to_nothing)).unwrap_err();
    assert!(error.message().contains("no-such-backend"), "{error}");
}
