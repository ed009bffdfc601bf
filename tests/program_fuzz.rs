//! Deterministic fuzzing in CI: thousands of mutations of valid blobs (bit flips, byte
//! overwrites, truncations, insertions, deletions, duplications, inflated length prefixes)
//! go through `program::load`, and those that still load run once on the CPU backend (with a
//! provider serving zeros for every parameter).
//!
//! Properties: nothing panics; `load` fails only with `DelegateInvalidCompatibility` or
//! `InvalidProgram`; a program that loads dumps, re-encodes to an equal program, and executes
//! or fails with a caller-facing code (`InvalidArgument`, `NotFound`, `MemoryAllocationFailed`),
//! never `Internal` (which would mean validation let through something a kernel cannot run).
#![cfg(not(target_arch = "wasm32"))]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use webdelegate::backends::CpuBackend;
use webdelegate::params::MemoryProvider;
use webdelegate::program::{DType, Dim, Program, ProgramBuilder, dump, encode, load, samples};
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};
use webdelegate::{EValue, ErrorCode, ScalarType, Tensor};

/// A program that uses every op, with no parameters (so mutants can execute).
fn every_op() -> Program {
    let mut b = ProgramBuilder::new();
    let (batch, seq) = (b.symbol("batch"), b.symbol("seq"));
    let f = |n: u64| Dim::Fixed(n);
    let ids = b.input("ids", DType::I64, vec![batch, seq]);
    let mask = b.input("mask", DType::I64, vec![batch, seq]);
    let table = b.input("table", DType::F32, vec![f(10), f(4)]);
    let x = b.input("x", DType::F32, vec![batch, seq, f(4)]);
    let w = b.input("w", DType::F32, vec![f(4), f(4)]);
    let gamma = b.input("gamma", DType::F32, vec![f(4)]);
    let embedded = b.gather(table, ids).unwrap();
    let added = b.add(embedded, x).unwrap();
    let multiplied = b.mul(added, embedded).unwrap();
    let subtracted = b.sub(multiplied, x).unwrap();
    let divided = b.div(subtracted, gamma).unwrap();
    let scaled = b.scale(divided, 0.5, 1.0).unwrap();
    let activated = b.gelu(scaled).unwrap();
    let squashed = b.tanh(activated).unwrap();
    let rectified = b.relu(squashed).unwrap();
    let projected = b.matmul(rectified, w, Some(gamma), false, true).unwrap();
    let normed = b.layer_norm(projected, gamma, gamma, 1e-5).unwrap();
    let split = b.reshape(normed, vec![batch, seq, f(2), f(2)]).unwrap();
    let heads = b.permute(split, vec![0, 2, 1, 3]).unwrap();
    let scores = b.matmul(heads, heads, None, false, true).unwrap();
    let mask_f32 = b.cast(mask, DType::F32).unwrap();
    let mask4 = b.reshape(mask_f32, vec![batch, f(1), f(1), seq]).unwrap();
    let probs = b.softmax(scores, Some(mask4)).unwrap();
    let context = b.matmul(probs, heads, None, false, false).unwrap();
    let merged = b.permute(context, vec![0, 2, 1, 3]).unwrap();
    let merged = b.reshape(merged, vec![batch, seq, f(4)]).unwrap();
    let half = b.slice(merged, 2, 1, Some(3)).unwrap();
    let joined = b.concat(vec![half, half], 2).unwrap();
    let positions = b.range(seq, DType::I64).unwrap();
    let position_rows = b.gather(table, positions).unwrap();
    let summed = b.add(joined, position_rows).unwrap();
    let pooled = b.mean_pool(summed, mask).unwrap();
    let embedding = b.l2_normalize(pooled, 1e-12).unwrap();
    b.output(embedding).output(probs);
    b.finish().unwrap()
}

/// A decoder step: state tensors (the KV cache), attention with grouped heads and a window,
/// positions as an input, and a block-format (Q8_0) parameter.
fn decoder_step() -> Program {
    use webdelegate::program::BlockFormat;
    use webdelegate::program::ops::Attention;
    let mut b = ProgramBuilder::new();
    let rows = b.symbol("rows");
    let f = |n: u64| Dim::Fixed(n);
    let q = b.input("q", DType::F32, vec![rows, f(2), f(4)]);
    let k = b.input("k", DType::F32, vec![rows, f(1), f(4)]);
    let v = b.input("v", DType::F32, vec![rows, f(1), f(4)]);
    let positions = b.input("positions", DType::I32, vec![rows]);
    b.param(
        "embd",
        DType::Block(BlockFormat::Q8_0),
        vec![f(3), f(32)],
        "s",
        "embd",
    );
    let k_cache = b.state("k_cache", DType::F32, vec![f(6), f(1), f(4)]);
    let v_cache = b.state("v_cache", DType::F32, vec![f(6), f(1), f(4)]);
    let out = b
        .push(|out| Attention {
            q,
            k,
            v,
            k_cache,
            v_cache,
            positions,
            scale: 0.5,
            window: 3,
            softcap: 2.0,
            out,
        })
        .unwrap();
    b.output(out);
    b.finish().unwrap()
}

fn seeds() -> Vec<Program> {
    let tiny = samples::EncoderShape {
        vocab: 20,
        max_positions: 8,
        hidden: 8,
        heads: 2,
        intermediate: 16,
        layers: 1,
    };
    vec![
        every_op(),
        decoder_step(),
        samples::matmul(3, 5, 7, true).unwrap(),
        samples::encoder(tiny).unwrap(),
        Program::default(),
    ]
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random mutation of `blob`.
fn mutate(rng: &mut Rng, blob: &mut Vec<u8>) {
    let len = blob.len();
    match rng.below(10) {
        7 | 8 => {
            // Nudge one body byte by one: usually still decodes, so it tests validation.
            let at = 8 + rng.below(len.saturating_sub(8));
            if let Some(byte) = blob.get_mut(at) {
                *byte = if rng.below(2) == 0 {
                    byte.wrapping_add(1)
                } else {
                    byte.wrapping_sub(1)
                };
            }
        }
        0 => {
            let bit = rng.below(len * 8);
            blob[bit / 8] ^= 1 << (bit % 8);
        }
        1 => {
            let at = rng.below(len);
            blob[at] = [0x00, 0xFF, 0x7F, 0x80, rng.next() as u8][rng.below(5)];
        }
        2 => blob.truncate(rng.below(len)),
        3 => {
            let at = rng.below(len + 1);
            let extra: Vec<u8> = (0..1 + rng.below(8)).map(|_| rng.next() as u8).collect();
            blob.splice(at..at, extra);
        }
        4 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(8)).min(len);
            blob.drain(at..end);
        }
        5 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(16)).min(len);
            let copy = blob[at..end].to_vec();
            blob.splice(at..at, copy);
        }
        _ => {
            // Length-prefix inflation: a maximal varint (u32::MAX, or longer) in place of
            // whatever byte was there.
            let at = rng.below(len);
            let varint: &[u8] = match rng.below(3) {
                0 => &[0xFF, 0xFF, 0xFF, 0xFF, 0x0F],
                1 => &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
                _ => &[0x80, 0x80, 0x80, 0x80, 0x08],
            };
            let end = (at + 1).min(len);
            blob.splice(at..end, varint.iter().copied());
        }
    }
}

/// Most elements any tensor may have for a loaded mutant to be executed (symbols bound to 2).
const MAX_EXECUTED_ELEMENTS: u64 = 1 << 16;

fn small_inputs(program: &Program) -> Option<Vec<EValue>> {
    let extent = |dim: &Dim| match dim {
        Dim::Fixed(n) => *n,
        Dim::Symbol(_) => 2,
    };
    for decl in &program.tensors {
        let count = decl
            .shape
            .iter()
            .try_fold(1u64, |acc, dim| acc.checked_mul(extent(dim)))?;
        if count > MAX_EXECUTED_ELEMENTS {
            return None;
        }
    }
    program
        .inputs
        .iter()
        .map(|&id| {
            let decl = program.tensors.get(id as usize)?;
            let shape = decl.shape.iter().map(|d| extent(d) as usize).collect();
            let dtype = match decl.dtype {
                DType::F32 => ScalarType::Float32,
                DType::I32 => ScalarType::Int32,
                DType::I64 => ScalarType::Int64,
                DType::U8 | DType::Block(_) => ScalarType::UInt8,
            };
            Tensor::zeros(dtype, shape).ok().map(EValue::Tensor)
        })
        .collect()
}

/// Checks every property for one blob; returns whether it loaded.
fn check_blob(blob: &[u8]) -> bool {
    let program = match load(blob) {
        Ok(program) => program,
        Err(error) => {
            assert!(
                matches!(
                    error.code(),
                    ErrorCode::InvalidProgram | ErrorCode::DelegateInvalidCompatibility
                ),
                "load failed with {error}"
            );
            return false;
        }
    };
    assert!(!dump(&program).is_empty());
    let again = encode(&program).unwrap();
    assert_eq!(load(&again).unwrap(), program, "re-encoded program differs");
    let Some(mut args) = small_inputs(&program) else {
        return true;
    };
    args.extend(program.outputs.iter().map(|_| EValue::None));
    // Serve every parameter (zeros of the declared size) so that mutants with params run too.
    let provider = MemoryProvider::new();
    for param in &program.params {
        let bytes = program.tensors.get(param.tensor as usize).and_then(|decl| {
            let shape: Option<Vec<u64>> = decl
                .shape
                .iter()
                .map(|dim| match dim {
                    Dim::Fixed(n) => Some(*n),
                    Dim::Symbol(_) => None,
                })
                .collect();
            decl.dtype.tensor_bytes(&shape?)
        });
        if let Some(bytes) = bytes.filter(|&b| b <= 1 << 20) {
            provider.insert(&param.scope, &param.key, vec![0; bytes as usize]);
        }
    }
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    pollster::block_on(async {
        let init = LoadedDelegate::init_with_backend(
            "cpu",
            Arc::new(CpuBackend::new()),
            FreeableBuffer::new(blob.to_vec()),
            &[],
            &context,
        )
        .await;
        let outcome = match init {
            Ok(mut delegate) => delegate.execute(&mut args).await,
            Err(error) => Err(error),
        };
        if let Err(error) = outcome {
            assert!(
                matches!(
                    error.code(),
                    ErrorCode::InvalidArgument
                        | ErrorCode::NotFound
                        | ErrorCode::MemoryAllocationFailed
                ),
                "a loaded program failed with {error}\n{}",
                dump(&program)
            );
        }
    });
    true
}

#[test]
fn mutated_blobs_never_panic_and_fail_with_program_codes() {
    let mut rng = Rng(0x5EED);
    let mut loaded = 0;
    let mut total = 0;
    for seed in seeds() {
        let original = encode(&seed).unwrap();
        assert!(check_blob(&original));
        for _ in 0..6000 {
            let mut blob = original.clone();
            for _ in 0..1 + rng.below(3) {
                if blob.is_empty() {
                    break;
                }
                mutate(&mut rng, &mut blob);
            }
            total += 1;
            match catch_unwind(AssertUnwindSafe(|| check_blob(&blob))) {
                Ok(true) => loaded += 1,
                Ok(false) => {}
                Err(_) => panic!("panic on blob {blob:02x?}"),
            }
        }
    }
    eprintln!("{loaded} of {total} mutants loaded");
    // The mutations must reach past the header: some mutants still load.
    assert!(loaded > 0 && loaded < total, "{loaded} of {total} loaded");
}

#[test]
fn headers_are_checked_before_the_body() {
    let blob = encode(&every_op()).unwrap();
    // Shorter than the magic: not ours. Our magic but cut anywhere after it: a broken program.
    for cut in 0..4 {
        let error = load(&blob[..cut]).unwrap_err();
        assert_eq!(
            error.code(),
            ErrorCode::DelegateInvalidCompatibility,
            "{cut}"
        );
    }
    for cut in 4..blob.len() {
        let error = load(&blob[..cut]).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidProgram, "{cut}: {error}");
    }
}

/// Writes the seed blobs into `fuzz/corpus/*` for `cargo fuzz run` (not part of the suite).
#[test]
#[ignore]
fn write_fuzz_seeds() {
    for target in ["load", "execute"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (index, seed) in seeds().iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{index}")), encode(seed).unwrap()).unwrap();
        }
    }
}
