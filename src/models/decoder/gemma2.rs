//! `gemma2`, as llama.cpp's `src/models/gemma2.cpp`: Gemma 3's layer without QK-norm, with
//! attention-logit and final-logit soft-caps, a sliding window (default 4096) on every other
//! layer starting with the first (`set_swa_pattern(2)`), one RoPE base, and the attention
//! scale `1/sqrt(head_dim)` (`1/sqrt(hidden / heads)` for the 27B model, 46 layers).

use crate::error::Result;
use crate::models::decoder::Architecture;
use crate::models::decoder::blocks::Decoder;
use crate::models::decoder::config::DecoderConfig;
use crate::models::decoder::gemma3::gemma_layer;
use crate::models::decoder::metadata::Metadata;
use crate::program::TensorId;

/// `gemma2`.
pub(super) static GEMMA2: Architecture = Architecture {
    name: "gemma2",
    configure,
    layer,
};

#[allow(clippy::cast_precision_loss)]
fn configure(meta: &Metadata<'_>, config: &mut DecoderConfig) -> Result<()> {
    if !meta.has("attention.sliding_window") {
        config.sliding_window = 4096;
    }
    config.rope.base_local = meta
        .opt_positive("rope.freq_base_swa")?
        .unwrap_or(config.rope.base);
    config.set_window_pattern(meta, 2)?;
    config.read_softcaps(meta)?;
    if config.layers == 46 {
        config.attn_scale = 1.0 / ((config.hidden / config.heads) as f32).sqrt();
    }
    config.embed_scale = (config.hidden as f32).sqrt();
    Ok(())
}

fn layer(d: &mut Decoder<'_>, il: u32, x: TensorId) -> Result<TensorId> {
    gemma_layer(d, il, x, false)
}
