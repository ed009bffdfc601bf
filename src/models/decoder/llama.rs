//! `llama` (Llama 1-3, TinyLlama, SmolLM, Mistral-style files), as llama.cpp's
//! `src/models/llama.cpp`: RMSNorm, Q/K/V with optional biases, interleaved (GPT-J) RoPE with
//! Llama 3's per-pair frequency divisors (`rope_freqs.weight`) when the file has them, SwiGLU
//! with optional biases.
//!
//! One departure, on purpose: a file with `llama.attention.sliding_window` gets a sliding
//! window on every layer (Hugging Face's Mistral), where llama.cpp's `llama` ignores the key.
//! llama.cpp's converter never writes it for `llama`, so only files made elsewhere carry it.

use crate::error::Result;
use crate::models::decoder::Architecture;
use crate::models::decoder::blocks::{Bias, Decoder, Qkv};
use crate::models::decoder::config::{DecoderConfig, RopeFactors};
use crate::models::decoder::metadata::Metadata;
use crate::program::ops::RopeStyle;
use crate::program::{TensorId, UnaryOp};

/// `llama`.
pub(super) static LLAMA: Architecture = Architecture {
    name: "llama",
    configure,
    layer,
};

fn configure(meta: &Metadata<'_>, config: &mut DecoderConfig) -> Result<()> {
    config.rope.style = RopeStyle::GptJ;
    config.rope.factors = if meta.opt_str("rope.scaling.type")? == Some("longrope") {
        RopeFactors::LongShort
    } else {
        RopeFactors::Freqs
    };
    config.all_local();
    Ok(())
}

fn layer(d: &mut Decoder<'_>, il: u32, x: TensorId) -> Result<TensorId> {
    let hidden = d.config.hidden;
    let h = d.layer_norm(il, x, "attn_norm", hidden)?;
    let heads = d.qkv(il, h, Qkv::Separate(Bias::IfPresent))?;
    let a = d.attention(il, heads, false, Bias::IfPresent)?;
    let x = d.b.add(x, a)?;
    let f = d.layer_norm(il, x, "ffn_norm", hidden)?;
    let f = d.gated_ffn(il, f, UnaryOp::Silu, Bias::IfPresent)?;
    d.b.add(x, f)
}
