//! `gemma3`, as llama.cpp's `src/models/gemma3.cpp`: embeddings scaled by `sqrt(hidden)`,
//! RMSNorm before and after attention and FFN, per-head QK-norm before NEOX RoPE, GeGLU (tanh
//! GELU), sliding-window layers interleaved with global ones (5 local, 1 global; RoPE base
//! 10000 on local layers unless `rope.freq_base_swa` says otherwise).

use crate::error::Result;
use crate::models::decoder::Architecture;
use crate::models::decoder::blocks::{Bias, Decoder, Qkv};
use crate::models::decoder::config::DecoderConfig;
use crate::models::decoder::metadata::Metadata;
use crate::program::{TensorId, UnaryOp};

/// `gemma3`.
pub(super) static GEMMA3: Architecture = Architecture {
    name: "gemma3",
    configure,
    layer,
};

#[allow(clippy::cast_precision_loss)]
fn configure(meta: &Metadata<'_>, config: &mut DecoderConfig) -> Result<()> {
    // llama.cpp: `rope_freq_base_train_swa = 10000` for Gemma 3 (the converter writes no key
    // for it).
    config.rope.base_local = meta.opt_positive("rope.freq_base_swa")?.unwrap_or(10_000.0);
    config.set_window_pattern(meta, 6)?;
    config.read_softcaps(meta)?;
    // llama.cpp: 1/sqrt(n_embd / n_head) for the 27B model (62 layers), 1/sqrt(head_dim) for
    // the others.
    if config.layers == 62 {
        config.attn_scale = 1.0 / ((config.hidden / config.heads) as f32).sqrt();
    }
    config.embed_scale = (config.hidden as f32).sqrt();
    Ok(())
}

/// The Gemma layer (shared with `gemma2`, which has no QK-norm).
pub(super) fn gemma_layer(
    d: &mut Decoder<'_>,
    il: u32,
    x: TensorId,
    qk_norm: bool,
) -> Result<TensorId> {
    let hidden = d.config.hidden;
    let h = d.layer_norm(il, x, "attn_norm", hidden)?;
    let heads = d.qkv(il, h, Qkv::Separate(Bias::No))?;
    let a = d.attention(il, heads, qk_norm, Bias::No)?;
    let a = d.layer_norm(il, a, "post_attention_norm", hidden)?;
    let x = d.b.add(x, a)?;
    let f = d.layer_norm(il, x, "ffn_norm", hidden)?;
    let f = d.gated_ffn(il, f, UnaryOp::GeluTanh, Bias::No)?;
    let f = d.layer_norm(il, f, "post_ffw_norm", hidden)?;
    d.b.add(x, f)
}

fn layer(d: &mut Decoder<'_>, il: u32, x: TensorId) -> Result<TensorId> {
    gemma_layer(d, il, x, true)
}
