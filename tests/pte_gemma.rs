//! Gemma 3 270M as an ExecuTorch program (tests/fixtures/pte/gemma.pte, exported by the
//! webdelegate partitioner from transformers' model loaded from the same GGUF; weights in
//! `.cache/pte/gemma.ptd`, f32, rebuilt torch-free by `npm run setup`), run natively by the `.pte`
//! runtime on the CPU backend: prefill then greedy decode, one token per `execute`, its 36 KV
//! caches kept as delegate state and reset between prompts.
//!
//! Oracle: transformers' own greedy tokens (eager, f32; the fixture also records that ExecuTorch's
//! portable runtime and the NumPy interpreter of the program agree with them, 136 of 136). Every
//! token must be equal. WebGPU is left to the op suite and the small `.pte` fixtures: on lavapipe
//! the 1 GB f32 decode would take minutes of CI.
#![cfg(not(target_arch = "wasm32"))]

use pollster::block_on;
use std::sync::Arc;
use webdelegate::backends::CpuBackend;
use webdelegate::backends::{CPU, register_if_absent};
use webdelegate::params::formats::{Format, parse_index_in_memory};
use webdelegate::params::{EntryStorage, MemoryProvider};
use webdelegate::pte::*;
use webdelegate::{EValue, Tensor, TensorData};
#[test]
fn gemma_from_its_pte_decodes_transformers_greedy_tokens() {
    let json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/pte/gemma.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let file = PteFile::parse(
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/pte/gemma.pte"
        ))
        .unwrap(),
    )
    .unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/.cache/pte/gemma.ptd");
    let bytes = std::fs::read(path)
        .unwrap_or_else(|e| panic!("{path}: {e}; `npm run setup` rebuilds it (make-gemma-ptd.py)"));
    let index = parse_index_in_memory(Format::Ptd, &bytes).unwrap();
    let p = MemoryProvider::new();
    for e in index.entries() {
        let EntryStorage::Data { offset } = e.storage else {
            panic!()
        };
        p.insert_described(
            NAMED_DATA_SCOPE,
            &e.key,
            bytes[offset as usize..(offset + e.length) as usize].to_vec(),
            e.dtype.clone(),
            e.shape.clone(),
        );
    }
    drop(bytes);
    register_if_absent(CPU, Arc::new(CpuBackend::new())).unwrap();
    let opts = MethodLoadOptions {
        backends: vec![(WEBDELEGATE_BACKEND_ID.into(), CPU.into())],
        external_data: Some(Arc::new(p)),
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let mut m = block_on(Method::load(&file, "forward", &opts)).unwrap();
    println!("load {:?}", t.elapsed());
    let (mut equal, mut total) = (0, 0);
    for case in json["cases"].as_array().unwrap().iter().take(4) {
        m.reset_state().unwrap();
        let want: Vec<i64> = case["greedy"]["transformers_eager"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let mut ids: Vec<i64> = case["prompt_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        let mut pos: Vec<i64> = (0..ids.len() as i64).collect();
        let mut got = vec![];
        let t = std::time::Instant::now();
        for _ in 0..want.len() {
            let n = ids.len();
            let out = block_on(m.execute(vec![
                EValue::Tensor(Tensor::new(vec![n], TensorData::Int64(ids.clone())).unwrap()),
                EValue::Tensor(Tensor::new(vec![n], TensorData::Int64(pos.clone())).unwrap()),
            ]))
            .unwrap();
            let EValue::Tensor(l) = &out[0] else { panic!() };
            let l = l.as_f32().unwrap();
            let best = (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap() as i64;
            got.push(best);
            let next = *pos.last().unwrap() + 1;
            ids = vec![best];
            pos = vec![next];
        }
        equal += got.iter().zip(&want).filter(|(a, b)| a == b).count();
        total += want.len();
        println!(
            "{:?}: {} tokens in {:?}, equal so far {equal}/{total}",
            case["prompt"].as_str().map(|s| &s[..s.len().min(30)]),
            want.len(),
            t.elapsed()
        );
    }
    println!("equal {equal}/{total}");
    assert_eq!(equal, total, "greedy tokens equal to transformers'");
}
