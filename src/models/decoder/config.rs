//! [`DecoderConfig`]: a decoder's hyper-parameters read from GGUF metadata the way llama.cpp's
//! loader reads them (`llama-model.cpp` `load_hparams` for the shared keys, each
//! architecture's `load_arch_hparams` for its own), including the defaults llama.cpp applies
//! to absent keys. A value this runtime does not implement (a YaRN RoPE, say) is refused with
//! `NotSupported` naming the key, never approximated.

use crate::error::{Error, ErrorCode, Result};
use crate::models::decoder::Architecture;
use crate::models::decoder::metadata::{
    MAX_EXTENT, MAX_LAYERS, Metadata, bad_metadata, check_extent, unsupported,
};
use crate::params::formats::gguf::GgufValue;
use crate::program::ops::{RopeScaling, RopeStyle};

/// The hyper-parameters of a decoder, as llama.cpp reads them from GGUF metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderConfig {
    /// The architecture (`general.architecture`): its metadata reader and layer graph.
    pub arch: &'static Architecture,
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
    /// The rotary embedding.
    pub rope: RopeConfig,
    /// Sliding window of local layers (`attention.sliding_window`); 0 for none.
    pub sliding_window: u32,
    /// Which layers attend over the sliding window only (one entry per layer; all false
    /// without a window).
    pub local_layers: Vec<bool>,
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

/// The rotary embedding of a decoder.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfig {
    /// Rotated dims per head (`rope.dimension_count`; defaults to `head_dim`).
    pub dims: u32,
    /// Which elements pair up (fixed by the architecture, as llama.cpp's `rope_type`).
    pub style: RopeStyle,
    /// Frequency base of global layers (`rope.freq_base`; default 10000).
    pub base: f32,
    /// Frequency base of sliding-window layers (`rope.freq_base_swa` where the architecture
    /// reads it; Gemma 3: 10000 when absent, which llama.cpp hard-codes; others: `base`).
    pub base_local: f32,
    /// Linear interpolation: `1 / rope.scaling.factor` (1 without it, or with
    /// `rope.scaling.type = none`).
    pub freq_scale: f32,
    /// Multiplies the rotated elements (`rope.scaling.attn_factor`; default 1).
    pub attn_factor: f32,
    /// Which of the file's tensors hold per-pair frequency divisors.
    pub factors: RopeFactors,
    /// The context the factors were made for (`rope.scaling.original_context_length`;
    /// defaults to the training context): longer contexts use the long factors.
    pub original_context: u64,
}

/// Which tensors of per-pair RoPE frequency divisors an architecture reads, when the file has
/// them (llama.cpp's `llama_model::get_rope_factors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeFactors {
    /// None: every divisor is 1.
    None,
    /// `rope_freqs.weight` (Llama 3.1+ frequency scaling), whatever the context.
    Freqs,
    /// `rope_factors_long.weight` for contexts past the original one, else
    /// `rope_factors_short.weight` (Phi-3 long-rope).
    LongShort,
}

/// The tensor holding Llama 3's per-pair frequency divisors.
pub const ROPE_FREQS: &str = "rope_freqs.weight";
/// Phi-3's divisors for contexts past the original one.
pub const ROPE_FACTORS_LONG: &str = "rope_factors_long.weight";
/// Phi-3's divisors within the original context.
pub const ROPE_FACTORS_SHORT: &str = "rope_factors_short.weight";

impl RopeConfig {
    /// The tensor of divisors a program of `context` positions uses when the file has it.
    pub fn factors_key(&self, context: u64) -> Option<&'static str> {
        match self.factors {
            RopeFactors::None => None,
            RopeFactors::Freqs => Some(ROPE_FREQS),
            RopeFactors::LongShort if context > self.original_context => Some(ROPE_FACTORS_LONG),
            RopeFactors::LongShort => Some(ROPE_FACTORS_SHORT),
        }
    }

    /// The op's scaling, with `factors` (read from [`factors_key`](Self::factors_key)'s
    /// tensor, or empty).
    pub fn scaling(&self, factors: Vec<f32>) -> RopeScaling {
        RopeScaling {
            factors,
            freq_scale: self.freq_scale,
            attn_factor: self.attn_factor,
        }
    }
}

impl DecoderConfig {
    /// Reads the hyper-parameters from a GGUF file's metadata (`GgufIndex::metadata`).
    ///
    /// # Errors
    /// `NotSupported` for an architecture this runtime does not build (the message lists
    /// those it does) or a metadata value it does not implement, naming the key;
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
        let arch = Architecture::named(arch_name).ok_or_else(|| {
            Error::new(
                ErrorCode::NotSupported,
                format!(
                    "architecture {arch_name:?} is not supported (these are: {})",
                    Architecture::names().join(", ")
                ),
            )
        })?;
        let meta = Metadata::new(metadata, arch.name);
        let mut config = Self::shared(arch, &meta)?;
        (arch.configure)(&meta, &mut config)?;
        config.check()?;
        Ok(config)
    }

    /// The keys every architecture reads (`load_hparams`), with llama.cpp's defaults.
    fn shared(arch: &'static Architecture, meta: &Metadata<'_>) -> Result<Self> {
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
        let kv_heads = meta.opt_extent("attention.head_count_kv")?.unwrap_or(heads);
        if heads % kv_heads != 0 {
            return Err(bad_metadata(format!(
                "{heads} query heads cannot share {kv_heads} key/value heads"
            )));
        }
        let head_dim = match meta.opt_extent("attention.key_length")? {
            Some(v) => v,
            None if hidden % heads == 0 => hidden / heads,
            None => {
                return Err(bad_metadata(format!(
                    "{heads} heads do not divide the hidden size {hidden} (and the file has no {})",
                    meta.key("attention.key_length")
                )));
            }
        };
        let value_dim = meta
            .opt_extent("attention.value_length")?
            .unwrap_or(head_dim);
        let eps_key = "attention.layer_norm_rms_epsilon";
        let eps = meta
            .opt_float(eps_key)?
            .ok_or_else(|| bad_metadata(format!("the file has no {}", meta.key(eps_key))))?;
        if eps < 0.0 {
            return Err(bad_metadata(format!("{} is negative", meta.key(eps_key))));
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
        #[allow(clippy::cast_precision_loss)]
        let attn_scale = 1.0 / (head_dim as f32).sqrt();
        Ok(Self {
            arch,
            hidden,
            layers,
            ff,
            heads,
            kv_heads,
            head_dim,
            value_dim,
            eps,
            rope: Self::shared_rope(meta, head_dim, train_context)?,
            sliding_window: window,
            // No layer local: which layers use the window (if any) is the architecture's
            // (`set_window_pattern`, `all_local`).
            local_layers: vec![false; layers as usize],
            train_context,
            attn_scale,
            attn_softcap: 0.0,
            final_softcap: 0.0,
            embed_scale: 1.0,
        })
    }

    /// `rope.*` keys: dims, base and the scaling llama.cpp applies (linear; long-rope for
    /// the architectures that read factors). YaRN and other ramps are refused.
    fn shared_rope(meta: &Metadata<'_>, head_dim: u64, train_context: u64) -> Result<RopeConfig> {
        let base = meta.opt_positive("rope.freq_base")?.unwrap_or(10_000.0);
        let dims = meta.opt_uint("rope.dimension_count")?.unwrap_or(head_dim);
        if dims == 0 || dims > head_dim || dims % 2 != 0 {
            return Err(bad_metadata(format!(
                "{} = {dims} must be even and within 1..={head_dim}",
                meta.key("rope.dimension_count")
            )));
        }
        // llama.cpp: the type defaults to linear; `none` disables the factor.
        let kind = meta.opt_str("rope.scaling.type")?.unwrap_or("linear");
        let factor = match meta.opt_positive("rope.scaling.factor")? {
            Some(f) => Some(f),
            None => meta.opt_positive("rope.scale_linear")?,
        };
        let freq_scale = match kind {
            "none" => 1.0,
            "linear" | "longrope" => factor.map_or(1.0, |f| 1.0 / f),
            other => {
                return Err(unsupported(format!(
                    "{} = {other:?} is not supported (none, linear and Phi-3's longrope are)",
                    meta.key("rope.scaling.type")
                )));
            }
        };
        let original_context = meta
            .opt_uint("rope.scaling.original_context_length")?
            .unwrap_or(train_context);
        Ok(RopeConfig {
            dims: u32::try_from(dims).expect("bounded by MAX_EXTENT"),
            style: RopeStyle::Neox,
            base,
            base_local: base,
            freq_scale,
            attn_factor: meta
                .opt_positive("rope.scaling.attn_factor")?
                .unwrap_or(1.0),
            factors: RopeFactors::None,
            original_context,
        })
    }

    /// What every architecture's result must satisfy.
    fn check(&self) -> Result<()> {
        if self.local_layers.len() != self.layers as usize {
            return Err(Error::internal("one local-layer flag per layer"));
        }
        if self.attn_softcap < 0.0 || self.final_softcap < 0.0 {
            return Err(bad_metadata("a soft-cap is negative".into()));
        }
        check_extent("the rotary dims", u64::from(self.rope.dims))?;
        if u64::from(self.rope.dims) > MAX_EXTENT {
            return Err(bad_metadata("the rotary dims are too large".into()));
        }
        Ok(())
    }

    /// Reads the Gemma-style soft-caps (`attn_logit_softcapping`, `final_logit_softcapping`).
    pub(crate) fn read_softcaps(&mut self, meta: &Metadata<'_>) -> Result<()> {
        self.attn_softcap = meta.opt_float("attn_logit_softcapping")?.unwrap_or(0.0);
        self.final_softcap = meta.opt_float("final_logit_softcapping")?.unwrap_or(0.0);
        Ok(())
    }

    /// Sets llama.cpp's `set_swa_pattern(pattern)` over the layers, unless the file gives
    /// `attention.sliding_window_pattern` (a per-layer array, or a period): layer `i` is
    /// local when `i % pattern < pattern - 1` (`pattern` 0: every layer).
    pub(crate) fn set_window_pattern(&mut self, meta: &Metadata<'_>, pattern: u32) -> Result<()> {
        let key = "attention.sliding_window_pattern";
        if let Some(flags) = meta.opt_layer_flags(key, self.layers)? {
            self.local_layers = flags;
            return Ok(());
        }
        let pattern = match meta.opt_uint(key)? {
            Some(p) => u32::try_from(p)
                .map_err(|_| bad_metadata(format!("{} = {p} is too large", meta.key(key))))?,
            None => pattern,
        };
        let window = self.sliding_window > 0;
        self.local_layers = (0..self.layers)
            .map(|i| window && (pattern == 0 || i % pattern < pattern - 1))
            .collect();
        Ok(())
    }

    /// Makes every layer local when the file has a window (Mistral-style), or none.
    pub(crate) fn all_local(&mut self) {
        self.local_layers = vec![self.sliding_window > 0; self.layers as usize];
    }

    /// Drops the file's window: the architecture's graph has none (llama.cpp ignores the
    /// key for it).
    pub(crate) fn no_window(&mut self) {
        self.sliding_window = 0;
        self.local_layers = vec![false; self.layers as usize];
    }

    /// Whether layer `layer` attends over the whole context (else over the sliding window).
    pub fn is_global(&self, layer: u32) -> bool {
        !self
            .local_layers
            .get(layer as usize)
            .copied()
            .unwrap_or(false)
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
