//! Decoder-only language models (Gemma 3, Llama, Qwen 2) as webdelegate programs, built from a
//! GGUF file's own metadata (`general.architecture` and its keys) and tensor index.
//!
//! The program references every weight by the GGUF tensor name (`token_embd.weight`,
//! `blk.0.attn_q.weight`, ...) in one scope, so a parameter provider serving the file streams
//! exactly the tensors the program reads, in their file format (block-quantized weights stay
//! quantized). [`DecoderConfig::from_gguf`] reads the hyper-parameters the way llama.cpp's
//! loader does (including the defaults it applies to absent keys); [`decoder_program`] checks
//! every tensor against them before emitting anything: a missing tensor, a wrong shape, an
//! unsupported dtype or a byte length that disagrees is `InvalidExternalData` naming the key.
//!
//! One program serves prefill and decode (decision records 0025 and 0029 in `docs/decisions/`):
//! - inputs `ids` i32 `[S]` (tokens), `positions` i32 `[S]` (their absolute positions),
//!   `logit_rows` i32 `[R]` (which of the `S` rows get logits: the last one when generating,
//!   all of them when testing), `knobs` f32 `[R, 4]` (temperature, top-k, top-p, draw: see
//!   [`Sample`](crate::program::ops::Sample)), `token_mask` i32 `[M, ceil(vocab / 32)]` (the
//!   tokens a grammar allows, one bit each, `M` 1 for every row or `R`: see
//!   [`TokenMask`](crate::program::ops::TokenMask); all ones when unconstrained);
//! - outputs `tokens` i32 `[R]` (the chosen token of each selected row) and, when
//!   [`DecoderProgramOptions::logits`] is set, `logits` f32 `[R, vocab]`;
//! - per layer a key and a value cache, state tensors `[context, kv_heads, head_dim]` that the
//!   attention op appends to at `positions`, so a generator feeds the prompt once and then one
//!   token per execute.

use crate::error::{Error, ErrorCode, Result};
use crate::models::catalog::TensorCatalog;
use crate::params::formats::gguf::{GgufArray, GgufValue};
use crate::program::ops::{Attention, Linear, RmsNorm, Rope, RopeStyle, Sample, TokenMask};
use crate::program::{BinaryOp, DType, Dim, Program, ProgramBuilder, TensorId, UnaryOp};

/// The architectures [`decoder_program`] builds, by their `general.architecture` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecoderArch {
    /// `gemma3`: GeGLU (tanh GELU), pre- and post-norms around attention and FFN, QK-norm,
    /// interleaved sliding-window and global layers, embeddings scaled by `sqrt(hidden)`.
    Gemma3,
    /// `llama` (Llama 1-3, SmolLM, TinyLlama, Mistral-style files): SwiGLU, interleaved RoPE.
    Llama,
    /// `qwen2`: Llama's graph with a bias on Q, K and V and rotate-half RoPE.
    Qwen2,
}

impl DecoderArch {
    /// The architecture named `name` (`general.architecture`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "gemma3" => Some(Self::Gemma3),
            "llama" => Some(Self::Llama),
            "qwen2" => Some(Self::Qwen2),
            _ => None,
        }
    }

    /// The name, as `general.architecture` spells it (and as the metadata keys are prefixed).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Gemma3 => "gemma3",
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
        }
    }
}

/// The hyper-parameters of a decoder, as llama.cpp reads them from GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// The graph family.
    pub arch: DecoderArch,
    /// Hidden size (`embedding_length`).
    pub hidden: u64,
    /// Number of layers (`block_count`).
    pub layers: u32,
    /// Feed-forward inner size (`feed_forward_length`).
    pub ff: u64,
    /// Query heads (`attention.head_count`).
    pub heads: u64,
    /// Key/value heads (`attention.head_count_kv`; defaults to `heads`).
    pub kv_heads: u64,
    /// Per-head key (and query) size (`attention.key_length`; defaults to `hidden / heads`).
    pub head_dim: u64,
    /// Per-head value size (`attention.value_length`; defaults to `head_dim`).
    pub value_dim: u64,
    /// RMSNorm epsilon (`attention.layer_norm_rms_epsilon`).
    pub eps: f32,
    /// RoPE frequency base of global layers (`rope.freq_base`; default 10000).
    pub rope_base: f32,
    /// RoPE frequency base of sliding-window layers (Gemma 3: 10000, which llama.cpp
    /// hard-codes; other architectures: `rope_base`).
    pub rope_base_local: f32,
    /// Rotated dims per head (`rope.dimension_count`; defaults to `head_dim`).
    pub rope_dims: u32,
    /// Which elements RoPE pairs up.
    pub rope_style: RopeStyle,
    /// Sliding window of local layers (`attention.sliding_window`); 0 for none.
    pub sliding_window: u32,
    /// With a sliding window, layer `i` is global when `i % pattern == pattern - 1`
    /// (llama.cpp's `set_swa_pattern`; Gemma 3: 6).
    pub swa_pattern: u32,
    /// The context the model was trained for (`context_length`).
    pub train_context: u64,
    /// Attention logit scale.
    pub attn_scale: f32,
    /// Attention logit soft-cap (`attn_logit_softcapping`); 0 for none.
    pub attn_softcap: f32,
    /// Final logit soft-cap (`final_logit_softcapping`); 0 for none.
    pub final_softcap: f32,
    /// Factor applied to the token embeddings (Gemma: `sqrt(hidden)` in f32; others 1).
    pub embed_scale: f32,
}

/// Largest accepted extent of any hyper-parameter, far above real models, so hostile metadata
/// cannot make the builder declare absurd tensors.
const MAX_EXTENT: u64 = 1 << 24;
/// Most layers accepted.
const MAX_LAYERS: u64 = 4096;

/// Typed reads of GGUF metadata, with the key named in every error.
struct Metadata<'a> {
    entries: &'a [(String, GgufValue)],
    prefix: &'static str,
}

fn bad_metadata(message: String) -> Error {
    Error::new(ErrorCode::InvalidExternalData, message)
}

impl Metadata<'_> {
    fn get(&self, key: &str) -> Option<&GgufValue> {
        self.entries
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value)
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.prefix)
    }

    /// An integer key of the architecture (any integer type, non-negative), if present.
    fn opt_uint(&self, suffix: &str) -> Result<Option<u64>> {
        let key = self.key(suffix);
        let Some(value) = self.get(&key) else {
            return Ok(None);
        };
        let number = match *value {
            GgufValue::U8(v) => Some(u64::from(v)),
            GgufValue::U16(v) => Some(u64::from(v)),
            GgufValue::U32(v) => Some(u64::from(v)),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            // llama.cpp accepts a per-layer array when every layer agrees; so do we.
            GgufValue::Array(ref array) => uniform_array(array),
            _ => None,
        };
        number
            .map(Some)
            .ok_or_else(|| bad_metadata(format!("{key} is {value:?}, not a non-negative integer")))
    }

    fn uint(&self, suffix: &str) -> Result<u64> {
        self.opt_uint(suffix)?
            .ok_or_else(|| bad_metadata(format!("the file has no {}", self.key(suffix))))
    }

    /// An extent key: present, in `1..=MAX_EXTENT`.
    fn extent(&self, suffix: &str) -> Result<u64> {
        let value = self.uint(suffix)?;
        check_extent(&self.key(suffix), value)
    }

    fn opt_float(&self, suffix: &str) -> Result<Option<f32>> {
        let key = self.key(suffix);
        let Some(value) = self.get(&key) else {
            return Ok(None);
        };
        let number = match *value {
            GgufValue::F32(v) => Some(v),
            #[allow(clippy::cast_possible_truncation)]
            GgufValue::F64(v) => Some(v as f32),
            _ => None,
        };
        match number {
            Some(v) if v.is_finite() => Ok(Some(v)),
            _ => Err(bad_metadata(format!(
                "{key} is {value:?}, not a finite float"
            ))),
        }
    }
}

/// The one value of an integer array whose elements are all equal.
fn uniform_array(array: &GgufArray) -> Option<u64> {
    fn first_if_uniform<T: Copy + PartialEq>(values: &[T]) -> Option<T> {
        let first = *values.first()?;
        values.iter().all(|v| *v == first).then_some(first)
    }
    match array {
        GgufArray::U32(v) => first_if_uniform(v).map(u64::from),
        GgufArray::I32(v) => first_if_uniform(v).and_then(|x| u64::try_from(x).ok()),
        GgufArray::U64(v) => first_if_uniform(v),
        GgufArray::I64(v) => first_if_uniform(v).and_then(|x| u64::try_from(x).ok()),
        _ => None,
    }
}

fn check_extent(key: &str, value: u64) -> Result<u64> {
    if value == 0 || value > MAX_EXTENT {
        return Err(bad_metadata(format!(
            "{key} = {value} is outside 1..={MAX_EXTENT}"
        )));
    }
    Ok(value)
}

impl DecoderConfig {
    /// Reads the hyper-parameters from a GGUF file's metadata (`GgufIndex::metadata`).
    ///
    /// # Errors
    /// `NotSupported` for an architecture other than `gemma3`, `llama` and `qwen2`;
    /// `InvalidExternalData` naming the key for a missing, ill-typed or out-of-range value, or
    /// for heads that do not divide.
    pub fn from_gguf(metadata: &[(String, GgufValue)]) -> Result<Self> {
        let arch_value = metadata
            .iter()
            .find(|(k, _)| k == "general.architecture")
            .map(|(_, v)| v)
            .ok_or_else(|| bad_metadata("the file has no general.architecture".into()))?;
        let arch_name = arch_value
            .as_str()
            .ok_or_else(|| bad_metadata("general.architecture is not a string".into()))?;
        let arch = DecoderArch::from_name(arch_name).ok_or_else(|| {
            Error::new(
                ErrorCode::NotSupported,
                format!(
                    "architecture {arch_name:?} is not supported (gemma3, llama and qwen2 are)"
                ),
            )
        })?;
        let meta = Metadata {
            entries: metadata,
            prefix: arch.name(),
        };

        let hidden = meta.extent("embedding_length")?;
        let layers = meta.uint("block_count")?;
        if layers == 0 || layers > MAX_LAYERS {
            return Err(bad_metadata(format!(
                "{} = {layers} is outside 1..={MAX_LAYERS}",
                meta.key("block_count")
            )));
        }
        let layers = u32::try_from(layers).expect("bounded by MAX_LAYERS");
        let ff = meta.extent("feed_forward_length")?;
        let heads = meta.extent("attention.head_count")?;
        let kv_heads = match meta.opt_uint("attention.head_count_kv")? {
            Some(v) => check_extent(&meta.key("attention.head_count_kv"), v)?,
            None => heads,
        };
        if heads % kv_heads != 0 {
            return Err(bad_metadata(format!(
                "{heads} query heads cannot share {kv_heads} key/value heads"
            )));
        }
        let head_dim = match meta.opt_uint("attention.key_length")? {
            Some(v) => check_extent(&meta.key("attention.key_length"), v)?,
            None if hidden % heads == 0 => hidden / heads,
            None => {
                return Err(bad_metadata(format!(
                    "{heads} heads do not divide the hidden size {hidden} (and the file has no {})",
                    meta.key("attention.key_length")
                )));
            }
        };
        let value_dim = match meta.opt_uint("attention.value_length")? {
            Some(v) => check_extent(&meta.key("attention.value_length"), v)?,
            None => head_dim,
        };
        let eps_key = "attention.layer_norm_rms_epsilon";
        let eps = meta
            .opt_float(eps_key)?
            .ok_or_else(|| bad_metadata(format!("the file has no {}", meta.key(eps_key))))?;
        if eps < 0.0 {
            return Err(bad_metadata(format!("{} is negative", meta.key(eps_key))));
        }
        let rope_base = meta.opt_float("rope.freq_base")?.unwrap_or(10_000.0);
        let rope_dims = match meta.opt_uint("rope.dimension_count")? {
            Some(v) => v,
            None => head_dim,
        };
        if rope_dims == 0 || rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(bad_metadata(format!(
                "{} = {rope_dims} must be even and within 1..={head_dim}",
                meta.key("rope.dimension_count")
            )));
        }
        if rope_base <= 0.0 {
            return Err(bad_metadata(format!(
                "{} is not positive",
                meta.key("rope.freq_base")
            )));
        }
        let train_context = meta.opt_uint("context_length")?.unwrap_or(2048);
        if train_context < 2 {
            // A model that holds one position can never generate a token after its prompt.
            return Err(bad_metadata(format!(
                "{} is {train_context}; at least 2 positions are needed",
                meta.key("context_length")
            )));
        }
        let window = u32::try_from(meta.opt_uint("attention.sliding_window")?.unwrap_or(0))
            .map_err(|_| bad_metadata("the sliding window does not fit 32 bits".into()))?;
        let attn_softcap = meta.opt_float("attn_logit_softcapping")?.unwrap_or(0.0);
        let final_softcap = meta.opt_float("final_logit_softcapping")?.unwrap_or(0.0);
        if attn_softcap < 0.0 || final_softcap < 0.0 {
            return Err(bad_metadata("a soft-cap is negative".into()));
        }

        #[allow(clippy::cast_precision_loss)]
        let config = match arch {
            DecoderArch::Gemma3 => Self {
                arch,
                hidden,
                layers,
                ff,
                heads,
                kv_heads,
                head_dim,
                value_dim,
                eps,
                rope_base,
                // llama.cpp: `rope_freq_base_train_swa = 10000` for Gemma 3 (the converter
                // writes no key for it).
                rope_base_local: meta.opt_float("rope.freq_base_swa")?.unwrap_or(10_000.0),
                rope_dims: u32::try_from(rope_dims).expect("bounded by MAX_EXTENT"),
                rope_style: RopeStyle::Neox,
                sliding_window: window,
                swa_pattern: if window > 0 { 6 } else { 1 },
                train_context,
                // llama.cpp: 1/sqrt(n_embd / n_head) for the 27B model (62 layers),
                // 1/sqrt(head_dim) for the others.
                attn_scale: if layers == 62 {
                    1.0 / ((hidden / heads) as f32).sqrt()
                } else {
                    1.0 / (head_dim as f32).sqrt()
                },
                attn_softcap,
                final_softcap,
                embed_scale: (hidden as f32).sqrt(),
            },
            DecoderArch::Llama | DecoderArch::Qwen2 => Self {
                arch,
                hidden,
                layers,
                ff,
                heads,
                kv_heads,
                head_dim,
                value_dim,
                eps,
                rope_base,
                rope_base_local: rope_base,
                rope_dims: u32::try_from(rope_dims).expect("bounded by MAX_EXTENT"),
                rope_style: if arch == DecoderArch::Llama {
                    RopeStyle::GptJ
                } else {
                    RopeStyle::Neox
                },
                sliding_window: 0,
                swa_pattern: 1,
                train_context,
                attn_scale: 1.0 / (head_dim as f32).sqrt(),
                attn_softcap,
                final_softcap,
                embed_scale: 1.0,
            },
        };
        Ok(config)
    }

    /// Whether layer `layer` attends over the whole context (else over the sliding window).
    pub fn is_global(&self, layer: u32) -> bool {
        self.sliding_window == 0 || layer % self.swa_pattern == self.swa_pattern - 1
    }

    /// Bytes of the key and value caches for `context` positions (f32).
    pub fn kv_cache_bytes(&self, context: u64) -> Option<u64> {
        let per_position = self
            .kv_heads
            .checked_mul(self.head_dim.checked_add(self.value_dim)?)?
            .checked_mul(4)?;
        per_position
            .checked_mul(context)?
            .checked_mul(u64::from(self.layers))
    }
}

/// Choices the caller makes when building a decoder program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecoderProgramOptions {
    /// Positions the KV caches hold (the longest prompt + generation); at most the model's
    /// training context.
    pub context: u64,
    /// Whether the program also outputs the selected rows' logits (tests and scoring;
    /// generation reads only the tokens).
    pub logits: bool,
}

/// The input holding the tokens, i32 `[S]`.
pub const IDS: &str = "ids";
/// The input holding each token's absolute position, i32 `[S]`.
pub const POSITIONS: &str = "positions";
/// The input naming the rows that get logits, i32 `[R]` (values in `0..S`).
pub const LOGIT_ROWS: &str = "logit_rows";
/// The input holding each selected row's sampling knobs, f32 `[R, 4]`.
pub const KNOBS: &str = "knobs";
/// The input holding the allowed tokens as bits, i32 `[1 or R, ceil(vocab / 32)]`.
pub const TOKEN_MASK: &str = "token_mask";
/// The output: the chosen token of each selected row, i32 `[R]`.
pub const TOKENS: &str = "tokens";
/// The optional output: the selected rows' logits, f32 `[R, vocab]`.
pub const LOGITS: &str = "logits";

/// Builds one decoder program.
struct Decoder<'a> {
    b: ProgramBuilder,
    config: &'a DecoderConfig,
    catalog: &'a dyn TensorCatalog,
    scope: &'a str,
    seq: Dim,
}

fn missing(key: &str) -> Error {
    Error::new(
        ErrorCode::InvalidExternalData,
        format!("the file has no tensor {key:?}"),
    )
}

impl Decoder<'_> {
    /// Declares the parameter `key` with its expected row-major `shape`, after checking the
    /// file agrees on shape, dtype and byte length. `dense` restricts it to f32 (norms,
    /// biases); otherwise any weight dtype `Linear` reads.
    fn weight(&mut self, key: &str, shape: &[u64], dense: bool) -> Result<TensorId> {
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

    fn has(&self, key: &str) -> bool {
        self.catalog.tensor_info(key).is_some()
    }

    fn rms_norm(&mut self, x: TensorId, key: &str, width: u64) -> Result<TensorId> {
        let weight = self.weight(key, &[width], true)?;
        let eps = self.config.eps;
        self.b.push(|out| RmsNorm {
            x,
            weight: Some(weight),
            eps,
            out,
        })
    }

    /// `x @ W^T (+ b)` for the GGUF weight `{name}.weight` (`[outputs, inputs]`), with the bias
    /// `{name}.bias` when `bias` is set.
    fn linear(
        &mut self,
        x: TensorId,
        name: &str,
        inputs: u64,
        outputs: u64,
        bias: bool,
    ) -> Result<TensorId> {
        let weight = self.weight(&format!("{name}.weight"), &[outputs, inputs], false)?;
        let bias = if bias {
            Some(self.weight(&format!("{name}.bias"), &[outputs], true)?)
        } else {
            None
        };
        self.b.push(|out| Linear {
            x,
            weight,
            bias,
            out,
        })
    }

    fn heads_view(&mut self, x: TensorId, heads: u64, dim: u64) -> Result<TensorId> {
        let seq = self.seq;
        self.b
            .reshape(x, vec![seq, Dim::Fixed(heads), Dim::Fixed(dim)])
    }

    fn rope(&mut self, x: TensorId, positions: TensorId, base: f32) -> Result<TensorId> {
        let (dims, style) = (self.config.rope_dims, self.config.rope_style);
        self.b.push(|out| Rope {
            x,
            positions,
            dims,
            base,
            style,
            out,
        })
    }

    /// `cap * tanh(x / cap)`.
    fn softcap(&mut self, x: TensorId, cap: f32) -> Result<TensorId> {
        let scaled = self.b.scale(x, 1.0 / cap, 0.0)?;
        let squashed = self.b.tanh(scaled)?;
        self.b.scale(squashed, cap, 0.0)
    }

    /// One transformer block: `x` `[S, hidden]` in, the residual stream out.
    fn layer(
        &mut self,
        layer: u32,
        x: TensorId,
        positions: TensorId,
        context: u64,
    ) -> Result<TensorId> {
        let c = self.config;
        let (hidden, heads, kv_heads, head_dim, value_dim) =
            (c.hidden, c.heads, c.kv_heads, c.head_dim, c.value_dim);
        let gemma = c.arch == DecoderArch::Gemma3;
        let qkv_bias = c.arch == DecoderArch::Qwen2;
        let global = c.is_global(layer);
        let p = format!("blk.{layer}");

        let h = self.rms_norm(x, &format!("{p}.attn_norm.weight"), hidden)?;
        let q = self.linear(
            h,
            &format!("{p}.attn_q"),
            hidden,
            heads * head_dim,
            qkv_bias,
        )?;
        let k = self.linear(
            h,
            &format!("{p}.attn_k"),
            hidden,
            kv_heads * head_dim,
            qkv_bias,
        )?;
        let v = self.linear(
            h,
            &format!("{p}.attn_v"),
            hidden,
            kv_heads * value_dim,
            qkv_bias,
        )?;
        let mut q = self.heads_view(q, heads, head_dim)?;
        let mut k = self.heads_view(k, kv_heads, head_dim)?;
        let v = self.heads_view(v, kv_heads, value_dim)?;
        let base = if global {
            c.rope_base
        } else {
            c.rope_base_local
        };
        // Gemma: QK-norm per head, each right before its RoPE (the WebGPU backend then runs the
        // pair as one pass).
        if gemma {
            q = self.rms_norm(q, &format!("{p}.attn_q_norm.weight"), head_dim)?;
        }
        let q = self.rope(q, positions, base)?;
        if gemma {
            k = self.rms_norm(k, &format!("{p}.attn_k_norm.weight"), head_dim)?;
        }
        let k = self.rope(k, positions, base)?;

        let cache = |b: &mut ProgramBuilder, name: String, dim: u64| {
            b.state(
                &name,
                DType::F32,
                vec![Dim::Fixed(context), Dim::Fixed(kv_heads), Dim::Fixed(dim)],
            )
        };
        let k_cache = cache(&mut self.b, format!("{p}.k_cache"), head_dim);
        let v_cache = cache(&mut self.b, format!("{p}.v_cache"), value_dim);
        let (scale, softcap) = (c.attn_scale, c.attn_softcap);
        let window = if global { 0 } else { c.sliding_window };
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
        let attended = self
            .b
            .reshape(attended, vec![seq, Dim::Fixed(heads * value_dim)])?;
        let mut a = self.linear(
            attended,
            &format!("{p}.attn_output"),
            heads * value_dim,
            hidden,
            false,
        )?;
        if gemma {
            a = self.rms_norm(a, &format!("{p}.post_attention_norm.weight"), hidden)?;
        }
        let x = self.b.add(x, a)?;

        let f = self.rms_norm(x, &format!("{p}.ffn_norm.weight"), hidden)?;
        let gate = self.linear(f, &format!("{p}.ffn_gate"), hidden, c.ff, false)?;
        let up = self.linear(f, &format!("{p}.ffn_up"), hidden, c.ff, false)?;
        let activation = if gemma {
            UnaryOp::GeluTanh
        } else {
            UnaryOp::Silu
        };
        let gate = self.b.unary(activation, gate)?;
        let gated = self.b.binary(BinaryOp::Mul, gate, up)?;
        let mut down = self.linear(gated, &format!("{p}.ffn_down"), c.ff, hidden, false)?;
        if gemma {
            down = self.rms_norm(down, &format!("{p}.post_ffw_norm.weight"), hidden)?;
        }
        self.b.add(x, down)
    }
}

/// Checks that the tokenizer's vocabulary (`tokens` entries) and the embedding table
/// (`token_embd.weight` rows) have one size: ids past the table would fail the gather, rows
/// past the vocabulary would be chosen as tokens without text.
///
/// # Errors
/// `InvalidExternalData` naming both sizes; as [`decoder_program`] for a missing or ill-shaped
/// table.
pub fn check_vocabulary(catalog: &dyn TensorCatalog, tokenizer_vocab: u64) -> Result<()> {
    let embedding = catalog
        .tensor_info("token_embd.weight")
        .ok_or_else(|| missing("token_embd.weight"))?;
    let rows = embedding
        .row_major_shape()
        .and_then(|shape| shape.first().copied())
        .ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidExternalData,
                "\"token_embd.weight\" records no shape",
            )
        })?;
    if rows != tokenizer_vocab {
        return Err(Error::new(
            ErrorCode::InvalidExternalData,
            format!(
                "the vocabulary has {tokenizer_vocab} tokens but the embedding table \
                 (\"token_embd.weight\") has {rows} rows"
            ),
        ));
    }
    Ok(())
}

/// The decoder program for `config`, reading the GGUF tensors `catalog` lists (an index or a
/// provider's [`ProviderCatalog`](crate::models::catalog::ProviderCatalog)) from `scope`. See
/// the module documentation for its inputs, outputs and state.
///
/// # Errors
/// `InvalidArgument` for a context of 0 or beyond the model's training context (or one whose
/// caches overflow); `InvalidExternalData` when a tensor is missing or disagrees with the
/// metadata on shape, dtype or size.
pub fn decoder_program(
    config: &DecoderConfig,
    catalog: &dyn TensorCatalog,
    scope: &str,
    options: DecoderProgramOptions,
) -> Result<Program> {
    let context = options.context;
    if context == 0 || context > config.train_context {
        return Err(Error::invalid_argument(format!(
            "context {context} is outside 1..={} (the model's training context)",
            config.train_context
        )));
    }
    if i32::try_from(context).is_err() || config.kv_cache_bytes(context).is_none() {
        return Err(Error::invalid_argument(format!(
            "context {context} is too large"
        )));
    }
    let embedding = catalog
        .tensor_info("token_embd.weight")
        .ok_or_else(|| missing("token_embd.weight"))?;
    let vocab = embedding
        .row_major_shape()
        .and_then(|shape| match shape.as_slice() {
            [rows, cols] if *cols == config.hidden => Some(*rows),
            _ => None,
        })
        .ok_or_else(|| {
            Error::new(
                ErrorCode::InvalidExternalData,
                format!(
                    "\"token_embd.weight\" has shape {:?}; [vocab, {}] expected",
                    embedding.row_major_shape(),
                    config.hidden
                ),
            )
        })?;
    check_extent("the vocabulary (token_embd rows)", vocab)?;

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
    let mut d = Decoder {
        b,
        config,
        catalog,
        scope,
        seq,
    };

    let table = d.weight("token_embd.weight", &[vocab, config.hidden], false)?;
    let mut x = d.b.gather(table, ids)?;
    if config.embed_scale != 1.0 {
        x = d.b.scale(x, config.embed_scale, 0.0)?;
    }
    for layer in 0..config.layers {
        x = d.layer(layer, x, positions, context)?;
    }
    let x = d.rms_norm(x, "output_norm.weight", config.hidden)?;
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
