//! Small ready-made programs and deterministic data for benchmarks and demos, shared by the
//! native bench, the browser bench and tests of every backend.

use crate::error::Result;
use crate::params::MemoryProvider;
use crate::program::builder::ProgramBuilder;
use crate::program::ir::Program;
use crate::program::tensor::{DType, Dim, TensorId};

/// Scope of the parameters the sample programs reference.
pub const SAMPLE_SCOPE: &str = "samples";
/// Key of the weight of [`matmul`].
pub const MATMUL_WEIGHT_KEY: &str = "matmul.weight";

/// `out [m, n] = a [m, k] @ weight`, with `weight` a parameter (`SAMPLE_SCOPE`,
/// `MATMUL_WEIGHT_KEY`) of shape `[k, n]`, or `[n, k]` when `transpose_b` (the layout of
/// PyTorch's `nn.Linear`).
///
/// # Errors
/// `InvalidArgument` when a dim does not fit the platform (it does for any benchmark size).
pub fn matmul(m: u64, k: u64, n: u64, transpose_b: bool) -> Result<Program> {
    let mut builder = ProgramBuilder::new();
    let a = builder.input("a", DType::F32, vec![Dim::Fixed(m), Dim::Fixed(k)]);
    let weight_shape = if transpose_b {
        vec![Dim::Fixed(n), Dim::Fixed(k)]
    } else {
        vec![Dim::Fixed(k), Dim::Fixed(n)]
    };
    let weight = builder.param(
        "weight",
        DType::F32,
        weight_shape,
        SAMPLE_SCOPE,
        MATMUL_WEIGHT_KEY,
    );
    let out = builder.matmul(a, weight, None, false, transpose_b)?;
    builder.set_name(out, "out")?;
    builder.output(out);
    builder.finish()
}

/// `len` deterministic pseudo-random values in `[-1, 1)` (a 64-bit LCG seeded by `seed`), so
/// that every backend and benchmark sees the same data without a dependency.
pub fn fill(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // The top 24 bits, as a fraction in [0, 1), mapped to [-1, 1).
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            unit * 2.0 - 1.0
        })
        .collect()
}

/// `values` as little-endian bytes (how parameter providers hold f32 weights).
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The dimensions of a BERT-style encoder (defaults: all-MiniLM-L6-v2's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderShape {
    /// Vocabulary size.
    pub vocab: u64,
    /// Most positions.
    pub max_positions: u64,
    /// Hidden width.
    pub hidden: u64,
    /// Attention heads (`hidden` must be a multiple).
    pub heads: u64,
    /// Feed-forward width.
    pub intermediate: u64,
    /// Encoder layers.
    pub layers: usize,
}

impl Default for EncoderShape {
    fn default() -> Self {
        Self {
            vocab: 30522,
            max_positions: 512,
            hidden: 384,
            heads: 12,
            intermediate: 1536,
            layers: 6,
        }
    }
}

/// A BERT-style sentence encoder over `input_ids` and `attention_mask` (both i64
/// `[batch, seq]`): word + position (+ token type 0) embeddings, `layers` post-norm encoder
/// layers (multi-head self-attention under the padding mask, GELU feed-forward), mean pooling
/// and L2 normalisation. Outputs `last_hidden_state` `[batch, seq, hidden]` and
/// `sentence_embedding` `[batch, hidden]`. Parameters use Hugging Face's BERT key names in
/// scope [`SAMPLE_SCOPE`] (e.g. `encoder.layer.0.attention.self.query.weight`, `nn.Linear`
/// layout `[out, in]`).
///
/// # Errors
/// `InvalidArgument` when `hidden` is not a multiple of `heads`.
pub fn encoder(shape: EncoderShape) -> Result<Program> {
    if shape.heads == 0 || !shape.hidden.is_multiple_of(shape.heads) {
        return Err(crate::error::Error::invalid_argument(format!(
            "hidden {} is not a multiple of heads {}",
            shape.hidden, shape.heads
        )));
    }
    let head_dim = shape.hidden / shape.heads;
    let mut b = ProgramBuilder::new();
    let f = Dim::Fixed;
    let param = |b: &mut ProgramBuilder, key: &str, dims: &[u64]| -> TensorId {
        let dims = dims.iter().map(|&d| f(d)).collect();
        b.param(key, DType::F32, dims, SAMPLE_SCOPE, key)
    };
    let (batch, seq) = (b.symbol("batch"), b.symbol("seq"));
    let ids = b.input("input_ids", DType::I64, vec![batch, seq]);
    let mask = b.input("attention_mask", DType::I64, vec![batch, seq]);
    let words = param(
        &mut b,
        "embeddings.word_embeddings.weight",
        &[shape.vocab, shape.hidden],
    );
    let positions_table = param(
        &mut b,
        "embeddings.position_embeddings.weight",
        &[shape.max_positions, shape.hidden],
    );
    let token_types = param(
        &mut b,
        "embeddings.token_type_embeddings.weight",
        &[2, shape.hidden],
    );
    let ln_gamma = param(&mut b, "embeddings.LayerNorm.weight", &[shape.hidden]);
    let ln_beta = param(&mut b, "embeddings.LayerNorm.bias", &[shape.hidden]);
    let positions = b.range(seq, DType::I64)?;
    let word_rows = b.gather(words, ids)?;
    let position_rows = b.gather(positions_table, positions)?;
    let type_row = b.slice(token_types, 0, 0, Some(1))?;
    let embedded = b.add(word_rows, position_rows)?;
    let embedded = b.add(embedded, type_row)?;
    let mut x = b.layer_norm(embedded, ln_gamma, ln_beta, 1e-12)?;
    let mask_f32 = b.cast(mask, DType::F32)?;
    let additive = b.scale(mask_f32, 10000.0, -10000.0)?;
    let mask4 = b.reshape(additive, vec![batch, f(1), f(1), seq])?;
    let split = vec![batch, seq, f(shape.heads), f(head_dim)];
    for layer in 0..shape.layers {
        let prefix = format!("encoder.layer.{layer}");
        let linear = |b: &mut ProgramBuilder, input, name: &str, out: u64, inner: u64| {
            let weight = param(b, &format!("{prefix}.{name}.weight"), &[out, inner]);
            let bias = param(b, &format!("{prefix}.{name}.bias"), &[out]);
            b.matmul(input, weight, Some(bias), false, true)
        };
        let mut heads = Vec::new();
        for name in ["query", "key", "value"] {
            let projected = linear(
                &mut b,
                x,
                &format!("attention.self.{name}"),
                shape.hidden,
                shape.hidden,
            )?;
            let reshaped = b.reshape(projected, split.clone())?;
            heads.push(b.permute(reshaped, vec![0, 2, 1, 3])?);
        }
        let scores = b.matmul(heads[0], heads[1], None, false, true)?;
        let scaled = b.scale(scores, 1.0 / (head_dim as f32).sqrt(), 0.0)?;
        let probs = b.softmax(scaled, Some(mask4))?;
        let context = b.matmul(probs, heads[2], None, false, false)?;
        let merged = b.permute(context, vec![0, 2, 1, 3])?;
        let merged = b.reshape(merged, vec![batch, seq, f(shape.hidden)])?;
        let attended = linear(
            &mut b,
            merged,
            "attention.output.dense",
            shape.hidden,
            shape.hidden,
        )?;
        let residual = b.add(attended, x)?;
        let gamma = param(
            &mut b,
            &format!("{prefix}.attention.output.LayerNorm.weight"),
            &[shape.hidden],
        );
        let beta = param(
            &mut b,
            &format!("{prefix}.attention.output.LayerNorm.bias"),
            &[shape.hidden],
        );
        let h = b.layer_norm(residual, gamma, beta, 1e-12)?;
        let up = linear(
            &mut b,
            h,
            "intermediate.dense",
            shape.intermediate,
            shape.hidden,
        )?;
        let activated = b.gelu(up)?;
        let down = linear(
            &mut b,
            activated,
            "output.dense",
            shape.hidden,
            shape.intermediate,
        )?;
        let residual = b.add(down, h)?;
        let gamma = param(
            &mut b,
            &format!("{prefix}.output.LayerNorm.weight"),
            &[shape.hidden],
        );
        let beta = param(
            &mut b,
            &format!("{prefix}.output.LayerNorm.bias"),
            &[shape.hidden],
        );
        x = b.layer_norm(residual, gamma, beta, 1e-12)?;
    }
    let pooled = b.mean_pool(x, mask)?;
    let embedding = b.l2_normalize(pooled, 1e-12)?;
    b.set_name(x, "last_hidden_state")?;
    b.set_name(embedding, "sentence_embedding")?;
    b.output(x).output(embedding);
    b.finish()
}

/// A provider holding deterministic small random values (`fill`, scaled by 0.05; LayerNorm
/// weights around 1) for every f32 parameter of `program`.
pub fn random_parameters(program: &Program, seed: u64) -> MemoryProvider {
    let provider = MemoryProvider::new();
    for (index, param) in program.params.iter().enumerate() {
        let Some(decl) = program.tensors.get(param.tensor as usize) else {
            continue;
        };
        let count = decl
            .shape
            .iter()
            .map(|dim| match dim {
                Dim::Fixed(extent) => *extent as usize,
                Dim::Symbol(_) => 0,
            })
            .product();
        let offset = if param.key.ends_with("LayerNorm.weight") {
            1.0
        } else {
            0.0
        };
        let values: Vec<f32> = fill(count, seed.wrapping_add(index as u64))
            .into_iter()
            .map(|v| v * 0.05 + offset)
            .collect();
        provider.insert(&param.scope, &param.key, f32_bytes(&values));
    }
    provider
}
