//! The program the WebGPU-backend x HTTP-provider seam tests run (natively on Mesa lavapipe in
//! tests/webgpu_http_seam.rs, in headless Chromium in tests/web_webgpu_http.rs), its weights file,
//! its inputs, and the comparison of the WebGPU backend's outputs with the CPU backend's.
//!
//! The program is a one-block encoder: token embeddings plus positions, layer norm, a GELU
//! feed-forward with a residual, masked mean pooling, then two outputs: the L2-normalised
//! sentence vector and a softmax over a small classification head. All eleven parameters live in
//! the scope [`SCOPE`]; the weights file (tests/fixtures/seam/encoder.safetensors, about 100 KB)
//! is written by `the_fixture_is_what_the_generator_writes` in the native test. Its first tensor
//! is the 14-byte u8 pooling mask, so every f32 tensor after it starts at a file offset of 2 mod
//! 4: streamed into word-aligned GPU buffers, every response chunk leaves bytes to carry.
//!
//! Tolerance: every output element of the WebGPU backend is within `1e-5 + 1e-4 * |cpu|` of the
//! CPU backend's (both f32; the outputs are unit vectors and probabilities, so about 1e-5).
#![allow(dead_code)]

use webdelegate::params::formats::{Format, parse_index_in_memory};
use webdelegate::params::{EntryStorage, MemoryProvider, SharedProvider};
use webdelegate::program::{DType, Dim, ProgramBuilder};
use webdelegate::registry::{
    BackendExecutionContext, BackendInitContext, BackendInterface, DelegateHandle, FreeableBuffer,
};
use webdelegate::{EValue, Result, Tensor, TensorData};

/// The scope of every parameter.
pub const SCOPE: &str = "encoder";

/// Path of the weights file under tests/fixtures/ (and under the URL nginx serves it from).
pub const FILE: &str = "seam/encoder.safetensors";

/// The weights file's bytes.
pub const FIXTURE: &[u8] = include_bytes!("../fixtures/seam/encoder.safetensors");

/// Batch, sequence, vocabulary, hidden, feed-forward and class sizes.
pub const B: usize = 2;
pub const S: usize = 7;
pub const V: usize = 512;
pub const H: usize = 32;
pub const F: usize = 128;
pub const C: usize = 10;

/// One parameter: its key (also its tensor's name), dtype and shape.
pub struct ParamSpec {
    pub key: &'static str,
    pub dtype: DType,
    pub shape: [usize; 2],
    pub rank: usize,
}

impl ParamSpec {
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.rank]
    }

    pub fn bytes(&self) -> usize {
        self.shape().iter().product::<usize>() * self.dtype.size().unwrap()
    }
}

const fn spec(key: &'static str, dtype: DType, shape: [usize; 2], rank: usize) -> ParamSpec {
    ParamSpec {
        key,
        dtype,
        shape,
        rank,
    }
}

/// The parameters, in file order.
pub const PARAMS: [ParamSpec; 11] = [
    spec("pool.mask", DType::U8, [B, S], 2),
    spec("embeddings.word", DType::F32, [V, H], 2),
    spec("embeddings.position", DType::F32, [S, H], 2),
    spec("embeddings.norm.weight", DType::F32, [H, 0], 1),
    spec("embeddings.norm.bias", DType::F32, [H, 0], 1),
    spec("ffn.up.weight", DType::F32, [H, F], 2),
    spec("ffn.up.bias", DType::F32, [F, 0], 1),
    spec("ffn.down.weight", DType::F32, [F, H], 2),
    spec("ffn.down.bias", DType::F32, [H, 0], 1),
    spec("head.weight", DType::F32, [H, C], 2),
    spec("head.bias", DType::F32, [C, 0], 1),
];

fn fixed(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Fixed(d as u64)).collect()
}

/// The encoder program, with `PARAMS` declared as their specs say except where `reshape` gives
/// another shape for a key (to test what a mismatch does).
pub fn program_with(reshape: Option<(&str, [usize; 2])>) -> ProgramBuilder {
    let mut b = ProgramBuilder::new();
    let ids = b.input("ids", DType::I32, fixed(&[B, S]));
    let mut p = Vec::new();
    for spec in &PARAMS {
        let shape = match reshape {
            Some((key, shape)) if key == spec.key => shape[..spec.rank].to_vec(),
            _ => spec.shape().to_vec(),
        };
        p.push(b.param(spec.key, spec.dtype, fixed(&shape), SCOPE, spec.key));
    }
    let [
        mask,
        word,
        position,
        ln_w,
        ln_b,
        up_w,
        up_b,
        down_w,
        down_b,
        head_w,
        head_b,
    ] = p[..]
    else {
        unreachable!("eleven parameters")
    };
    let build = |b: &mut ProgramBuilder| -> Result<()> {
        let tokens = b.gather(word, ids)?;
        let embedded = b.add(tokens, position)?;
        let normed = b.layer_norm(embedded, ln_w, ln_b, 1e-5)?;
        let up = b.matmul(normed, up_w, Some(up_b), false, false)?;
        let activated = b.gelu(up)?;
        let down = b.matmul(activated, down_w, Some(down_b), false, false)?;
        let residual = b.add(normed, down)?;
        let pooled = b.mean_pool(residual, mask)?;
        let sentence = b.l2_normalize(pooled, 1e-12)?;
        let logits = b.matmul(pooled, head_w, Some(head_b), false, false)?;
        let probabilities = b.softmax(logits, None)?;
        b.output(sentence);
        b.output(probabilities);
        Ok(())
    };
    if let Err(error) = build(&mut b) {
        panic!("the seam program does not build: {error}");
    }
    b
}

/// The encoder program as the weights file shapes it.
pub fn program() -> ProgramBuilder {
    program_with(None)
}

/// Token ids `[B, S]`, spread over the vocabulary.
pub fn ids() -> Tensor {
    let ids = (0..B * S).map(|i| ((i * 181 + 17) % V) as i32).collect();
    Tensor::new(vec![B, S], TensorData::Int32(ids)).expect("ids tensor")
}

/// The parameters of `file` (a safetensors file) in a `MemoryProvider` under [`SCOPE`]: the
/// CPU reference gets the same weights without HTTP or streaming.
pub fn memory_provider(file: &[u8]) -> MemoryProvider {
    let index = parse_index_in_memory(Format::Safetensors, file).expect("the fixture's index");
    let provider = MemoryProvider::new();
    for entry in index.entries() {
        let EntryStorage::Data { offset } = entry.storage else {
            panic!("{}: no splats in safetensors", entry.key)
        };
        let bytes = file[offset as usize..(offset + entry.length) as usize].to_vec();
        provider.insert_described(
            SCOPE,
            &entry.key,
            bytes,
            entry.dtype.clone(),
            entry.shape.clone(),
        );
    }
    provider
}

/// Initialises the encoder on `backend` with its parameters from `provider`.
pub async fn init(
    backend: &dyn BackendInterface,
    program: &ProgramBuilder,
    provider: SharedProvider,
) -> Result<DelegateHandle> {
    let blob = program.encode()?;
    let context = BackendInitContext::new().with_parameters(provider);
    backend.init(&context, FreeableBuffer::new(blob), &[]).await
}

/// Executes the encoder on [`ids`]; returns `[sentence, probabilities]`.
pub async fn execute(
    backend: &dyn BackendInterface,
    handle: &mut DelegateHandle,
) -> Result<Vec<Tensor>> {
    let mut args = vec![EValue::Tensor(ids()), EValue::None, EValue::None];
    backend
        .execute(&BackendExecutionContext::default(), handle, &mut args)
        .await?;
    Ok(args
        .into_iter()
        .skip(1)
        .map(|value| match value {
            EValue::Tensor(tensor) => tensor,
            other => panic!("output slot holds {} after execute", other.tag()),
        })
        .collect())
}

/// Asserts that the WebGPU outputs match the CPU outputs within the module's tolerance, and
/// that the outputs are what the program promises (unit rows, probability rows that are not
/// uniform), so two backends agreeing on garbage cannot pass.
pub fn assert_matches_cpu(gpu: &[Tensor], cpu: &[Tensor]) {
    assert_eq!(gpu.len(), 2, "two outputs");
    assert_eq!(cpu.len(), 2, "two outputs");
    for (name, g, c, width) in [
        ("sentence", &gpu[0], &cpu[0], H),
        ("probabilities", &gpu[1], &cpu[1], C),
    ] {
        assert_eq!(g.shape(), [B, width], "{name}: GPU shape");
        assert_eq!(c.shape(), [B, width], "{name}: CPU shape");
        let (g, c) = (
            g.as_f32().expect("f32 output"),
            c.as_f32().expect("f32 output"),
        );
        for (index, (&got, &want)) in g.iter().zip(c).enumerate() {
            let allowed = 1e-5 + 1e-4 * want.abs();
            assert!(
                want.is_finite() && (got - want).abs() <= allowed,
                "{name}[{index}]: WebGPU {got}, CPU {want} (allowed error {allowed:e})"
            );
        }
        for row in c.chunks(width) {
            let (sum, squares) = row.iter().fold((0.0, 0.0), |(s, q), v| (s + v, q + v * v));
            if name == "sentence" {
                assert!((squares - 1.0f32).abs() < 1e-4, "{name}: a unit row");
            } else {
                assert!((sum - 1.0f32).abs() < 1e-4, "{name}: rows sum to 1");
                let top = row.iter().copied().fold(0.0f32, f32::max);
                assert!(top > 1.5 / C as f32, "{name}: the weights shape the output");
            }
        }
    }
}

/// Bytes of the f32 parameters (those the backend binds in the buffers they were loaded into).
pub fn f32_param_bytes() -> u64 {
    PARAMS
        .iter()
        .filter(|p| p.dtype == DType::F32)
        .map(|p| p.bytes() as u64)
        .sum()
}

/// Bytes of all parameters.
pub fn param_bytes() -> u64 {
    PARAMS.iter().map(|p| p.bytes() as u64).sum()
}
