//! The blocks every decoder architecture is built from, as llama.cpp's `llm_graph_context`
//! offers them (`build_norm`, `build_qkv`, `build_attn`, `build_ffn`): checked weights, RMS
//! norms, projections with their biases, the fused or separate Q/K/V projection, attention
//! over the KV caches with RoPE, gated feed-forward networks and soft-caps. An architecture's
//! file composes them into its layer; [`Decoder::build`] wraps the layers in the shared
//! embedding, final norm, output projection, token mask and sampling.

use crate::error::{Error, ErrorCode, Result};
use crate::models::catalog::TensorCatalog;
use crate::models::decoder::config::DecoderConfig;
use crate::models::decoder::metadata::check_extent;
use crate::models::decoder::{
    DecoderProgramOptions, IDS, KNOBS, LOGIT_ROWS, LOGITS, POSITIONS, TOKEN_MASK, TOKENS, missing,
};
use crate::program::ops::{Attention, Linear, RmsNorm, Rope, RopeScaling, Sample, TokenMask};
use crate::program::{BinaryOp, DType, Dim, Program, ProgramBuilder, TensorId, UnaryOp};

/// Whether a projection adds a bias `{name}.bias`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bias {
    /// Never (the architecture has none).
    No,
    /// When the file has the tensor (llama.cpp's `TENSOR_NOT_REQUIRED`).
    IfPresent,
    /// Always: a file without it is refused.
    Required,
}

/// How a layer projects Q, K and V.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Qkv {
    /// `attn_q`, `attn_k`, `attn_v`, each with its bias as given.
    Separate(Bias),
    /// One `attn_qkv` of `(heads + 2 kv_heads) * head_dim` outputs, Q then K then V
    /// (llama.cpp's `build_qkv` with `wqkv`).
    Fused,
}

/// The queries, keys and values of one layer, as head views `[S, heads, dim]`.
pub(crate) struct QkvHeads {
    pub q: TensorId,
    pub k: TensorId,
    pub v: TensorId,
}

/// Builds one decoder program: the builder, the config and the file's tensors.
pub(crate) struct Decoder<'a> {
    pub(crate) b: ProgramBuilder,
    pub(crate) config: &'a DecoderConfig,
    catalog: &'a dyn TensorCatalog,
    scope: &'a str,
    seq: Dim,
    positions: TensorId,
    context: u64,
    rope_scaling: RopeScaling,
}

/// `blk.{layer}.{name}`.
pub(crate) fn layer_key(layer: u32, name: &str) -> String {
    format!("blk.{layer}.{name}")
}

impl Decoder<'_> {
    /// Whether the file has the tensor `key`.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.catalog.tensor_info(key).is_some()
    }

    /// Declares the parameter `key` with its expected row-major `shape`, after checking the
    /// file agrees on shape, dtype and byte length. `dense` restricts it to f32 (norms,
    /// biases); otherwise any weight dtype `Linear` reads.
    pub(crate) fn weight(&mut self, key: &str, shape: &[u64], dense: bool) -> Result<TensorId> {
        let info = self.catalog.tensor_info(key).ok_or_else(|| missing(key))?;
        let bad = |message: String| {
            Error::new(
                ErrorCode::InvalidExternalData,
                format!("{key:?}: {message}"),
            )
        };
        let dtype_name = info
            .dtype
            .as_deref()
            .ok_or_else(|| bad("the index records no dtype".into()))?;
        let dtype = DType::from_name(&dtype_name.to_ascii_lowercase())
            .filter(|d| crate::program::ops::is_weight_dtype(*d))
            .ok_or_else(|| bad(format!("dtype {dtype_name} is not a weight format we read")))?;
        if dense && dtype != DType::F32 {
            return Err(bad(format!("is {dtype_name}; this tensor must be F32")));
        }
        if let Some(actual) = info.row_major_shape()
            && actual.as_slice() != shape
        {
            return Err(bad(format!(
                "has shape {actual:?} (row-major); the metadata implies {shape:?}"
            )));
        }
        let bytes = dtype.tensor_bytes(shape).ok_or_else(|| {
            bad(format!(
                "shape {shape:?} is not whole {dtype_name} blocks per row"
            ))
        })?;
        if bytes != info.length {
            return Err(bad(format!(
                "holds {} bytes; {shape:?} of {dtype_name} needs {bytes}",
                info.length
            )));
        }
        let shape = shape.iter().map(|&e| Dim::Fixed(e)).collect();
        Ok(self.b.param(key, dtype, shape, self.scope, key))
    }

    /// RMSNorm of `x` over its last dim (`width`) with the weight `key`.
    pub(crate) fn norm(&mut self, x: TensorId, key: &str, width: u64) -> Result<TensorId> {
        let weight = self.weight(key, &[width], true)?;
        let eps = self.config.eps;
        self.b.push(|out| RmsNorm {
            x,
            weight: Some(weight),
            eps,
            out,
        })
    }

    /// RMSNorm of `x` with layer `layer`'s weight `name` (`blk.{layer}.{name}.weight`).
    pub(crate) fn layer_norm(
        &mut self,
        layer: u32,
        x: TensorId,
        name: &str,
        width: u64,
    ) -> Result<TensorId> {
        self.norm(x, &layer_key(layer, &format!("{name}.weight")), width)
    }

    /// `x @ W^T (+ b)` for the weight `{name}.weight` (`[outputs, inputs]`) and, as `bias`
    /// says, `{name}.bias`.
    pub(crate) fn linear(
        &mut self,
        x: TensorId,
        name: &str,
        inputs: u64,
        outputs: u64,
        bias: Bias,
    ) -> Result<TensorId> {
        let weight = self.weight(&format!("{name}.weight"), &[outputs, inputs], false)?;
        let bias_key = format!("{name}.bias");
        let bias = match bias {
            Bias::No => None,
            Bias::IfPresent if !self.has(&bias_key) => None,
            Bias::IfPresent | Bias::Required => Some(self.weight(&bias_key, &[outputs], true)?),
        };
        self.b.push(|out| Linear {
            x,
            weight,
            bias,
            out,
        })
    }

    /// `x` `[S, heads * dim]` viewed as `[S, heads, dim]`.
    fn heads_view(&mut self, x: TensorId, heads: u64, dim: u64) -> Result<TensorId> {
        let seq = self.seq;
        self.b
            .reshape(x, vec![seq, Dim::Fixed(heads), Dim::Fixed(dim)])
    }

    /// Layer `layer`'s queries, keys and values of `h` `[S, hidden]`.
    pub(crate) fn qkv(&mut self, layer: u32, h: TensorId, form: Qkv) -> Result<QkvHeads> {
        let c = self.config;
        let (hidden, heads, kv_heads, head_dim, value_dim) =
            (c.hidden, c.heads, c.kv_heads, c.head_dim, c.value_dim);
        let (q_width, k_width, v_width) =
            (heads * head_dim, kv_heads * head_dim, kv_heads * value_dim);
        let (q, k, v) = match form {
            Qkv::Separate(bias) => {
                let mut project = |name: &str, width: u64| {
                    self.linear(h, &layer_key(layer, name), hidden, width, bias)
                };
                (
                    project("attn_q", q_width)?,
                    project("attn_k", k_width)?,
                    project("attn_v", v_width)?,
                )
            }
            Qkv::Fused => {
                let total = q_width + k_width + v_width;
                let all = self.linear(
                    h,
                    &layer_key(layer, "attn_qkv"),
                    hidden,
                    total,
                    Bias::IfPresent,
                )?;
                (
                    self.b.slice(all, 1, 0, Some(q_width))?,
                    self.b.slice(all, 1, q_width, Some(q_width + k_width))?,
                    self.b.slice(all, 1, q_width + k_width, Some(total))?,
                )
            }
        };
        Ok(QkvHeads {
            q: self.heads_view(q, heads, head_dim)?,
            k: self.heads_view(k, kv_heads, head_dim)?,
            v: self.heads_view(v, kv_heads, value_dim)?,
        })
    }

    /// RoPE of `x` `[S, H, D]` at the positions, with layer `layer`'s base.
    pub(crate) fn rope(&mut self, layer: u32, x: TensorId) -> Result<TensorId> {
        let rope = &self.config.rope;
        let base = if self.config.is_global(layer) {
            rope.base
        } else {
            rope.base_local
        };
        let (dims, style, positions) = (rope.dims, rope.style, self.positions);
        let scaling = self.rope_scaling.clone();
        self.b.push(|out| Rope {
            x,
            positions,
            dims,
            base,
            style,
            out,
            scaling,
        })
    }

    /// Attention of layer `layer`: QK-norm per head first when `qk_norm` (each right before
    /// its RoPE, so the WebGPU backend runs the pair as one pass), RoPE, the layer's KV
    /// caches, causal attention (over the sliding window on local layers), then
    /// `attn_output` (its bias as `out_bias` says). Returns `[S, hidden]`.
    pub(crate) fn attention(
        &mut self,
        layer: u32,
        heads: QkvHeads,
        qk_norm: bool,
        out_bias: Bias,
    ) -> Result<TensorId> {
        let c = self.config;
        let QkvHeads { mut q, mut k, v } = heads;
        if qk_norm {
            q = self.layer_norm(layer, q, "attn_q_norm", c.head_dim)?;
        }
        let q = self.rope(layer, q)?;
        if qk_norm {
            k = self.layer_norm(layer, k, "attn_k_norm", c.head_dim)?;
        }
        let k = self.rope(layer, k)?;
        let context = self.context;
        let kv_heads = c.kv_heads;
        let cache = |b: &mut ProgramBuilder, name: &str, dim: u64| {
            b.state(
                &layer_key(layer, name),
                DType::F32,
                vec![Dim::Fixed(context), Dim::Fixed(kv_heads), Dim::Fixed(dim)],
            )
        };
        let k_cache = cache(&mut self.b, "k_cache", c.head_dim);
        let v_cache = cache(&mut self.b, "v_cache", c.value_dim);
        let (scale, softcap) = (c.attn_scale, c.attn_softcap);
        let window = if c.is_global(layer) {
            0
        } else {
            c.sliding_window
        };
        let positions = self.positions;
        let attended = self.b.push(|out| Attention {
            q,
            k,
            v,
            k_cache,
            v_cache,
            positions,
            scale,
            window,
            softcap,
            out,
        })?;
        let seq = self.seq;
        let width = c.heads * c.value_dim;
        let attended = self.b.reshape(attended, vec![seq, Dim::Fixed(width)])?;
        self.linear(
            attended,
            &layer_key(layer, "attn_output"),
            width,
            c.hidden,
            out_bias,
        )
    }

    /// `ffn_down(activation(ffn_gate(x)) * ffn_up(x))` (llama.cpp's `LLM_FFN_PAR`), each
    /// projection's bias as `bias` says.
    pub(crate) fn gated_ffn(
        &mut self,
        layer: u32,
        x: TensorId,
        activation: UnaryOp,
        bias: Bias,
    ) -> Result<TensorId> {
        let (hidden, ff) = (self.config.hidden, self.config.ff);
        let gate = self.linear(x, &layer_key(layer, "ffn_gate"), hidden, ff, bias)?;
        let up = self.linear(x, &layer_key(layer, "ffn_up"), hidden, ff, bias)?;
        self.down(layer, gate, up, activation, bias)
    }

    /// The gated network with gate and up in one `ffn_up` of `2 ff` outputs, the gate first
    /// (llama.cpp's `LLM_FFN_SWIGLU` on one tensor: `ggml_swiglu` gates with the first half).
    pub(crate) fn fused_gated_ffn(
        &mut self,
        layer: u32,
        x: TensorId,
        activation: UnaryOp,
    ) -> Result<TensorId> {
        let (hidden, ff) = (self.config.hidden, self.config.ff);
        let both = self.linear(x, &layer_key(layer, "ffn_up"), hidden, 2 * ff, Bias::No)?;
        let gate = self.b.slice(both, 1, 0, Some(ff))?;
        let up = self.b.slice(both, 1, ff, Some(2 * ff))?;
        self.down(layer, gate, up, activation, Bias::No)
    }

    fn down(
        &mut self,
        layer: u32,
        gate: TensorId,
        up: TensorId,
        activation: UnaryOp,
        bias: Bias,
    ) -> Result<TensorId> {
        let (hidden, ff) = (self.config.hidden, self.config.ff);
        let gate = self.b.unary(activation, gate)?;
        let gated = self.b.binary(BinaryOp::Mul, gate, up)?;
        self.linear(gated, &layer_key(layer, "ffn_down"), ff, hidden, bias)
    }

    /// `cap * tanh(x / cap)`.
    fn softcap(&mut self, x: TensorId, cap: f32) -> Result<TensorId> {
        let scaled = self.b.scale(x, 1.0 / cap, 0.0)?;
        let squashed = self.b.tanh(scaled)?;
        self.b.scale(squashed, cap, 0.0)
    }
}

/// The whole program: inputs, the embedding, `config.layers` layers of the architecture, the
/// final norm, the output projection (tied to the embedding when the file has no
/// `output.weight`), the final soft-cap, the token mask and sampling. See the module
/// documentation of [`crate::models::decoder`].
pub(crate) fn build(
    config: &DecoderConfig,
    catalog: &dyn TensorCatalog,
    scope: &str,
    options: &DecoderProgramOptions,
    vocab: u64,
) -> Result<Program> {
    let mut b = ProgramBuilder::new();
    let seq = b.symbol("seq");
    let rows = b.symbol("rows");
    let ids = b.input(IDS, DType::I32, vec![seq]);
    let positions = b.input(POSITIONS, DType::I32, vec![seq]);
    let logit_rows = b.input(LOGIT_ROWS, DType::I32, vec![rows]);
    let knobs = b.input(KNOBS, DType::F32, vec![rows, Dim::Fixed(4)]);
    let mask_rows = b.symbol("mask_rows");
    let mask_words = Dim::Fixed(TokenMask::words(vocab));
    let mask = b.input(TOKEN_MASK, DType::I32, vec![mask_rows, mask_words]);
    check_extent("the vocabulary (token_embd rows)", vocab)?;
    let mut d = Decoder {
        b,
        config,
        catalog,
        scope,
        seq,
        positions,
        context: options.context,
        rope_scaling: config
            .rope
            .scaling(options.rope_factors.clone().unwrap_or_default()),
    };

    let table = d.weight("token_embd.weight", &[vocab, config.hidden], false)?;
    let mut x = d.b.gather(table, ids)?;
    if config.embed_scale != 1.0 {
        x = d.b.scale(x, config.embed_scale, 0.0)?;
    }
    for layer in 0..config.layers {
        x = (config.arch.layer)(&mut d, layer, x)?;
    }
    let x = d.norm(x, "output_norm.weight", config.hidden)?;
    let selected = d.b.gather(x, logit_rows)?;
    let output = if d.has("output.weight") {
        d.weight("output.weight", &[vocab, config.hidden], false)?
    } else {
        table // tied: the token embedding is the output projection
    };
    let mut logits = d.b.push(|out| Linear {
        x: selected,
        weight: output,
        bias: None,
        out,
    })?;
    if config.final_softcap > 0.0 {
        logits = d.softcap(logits, config.final_softcap)?;
    }
    let allowed = d.b.push(|out| TokenMask { logits, mask, out })?;
    let tokens = d.b.push(|out| Sample {
        logits: allowed,
        knobs,
        out,
    })?;
    d.b.set_name(tokens, TOKENS)?;
    d.b.output(tokens);
    if options.logits {
        d.b.set_name(logits, LOGITS)?;
        d.b.output(logits);
    }
    d.b.finish()
}
