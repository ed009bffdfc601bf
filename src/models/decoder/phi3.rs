//! `phi3` (Phi-3, Phi-3.5, Phi-4-mini), as llama.cpp's `src/models/phi3.cpp`: one fused
//! `attn_qkv` projection (or separate ones), NEOX RoPE over `rope.dimension_count` dims
//! (partial rotary) with the long-rope factors (`rope_factors_long` past
//! `rope.scaling.original_context_length`, else `rope_factors_short`) and
//! `rope.scaling.attn_factor`, and SwiGLU on one fused `ffn_up` (gate first). llama.cpp
//! disables Phi-3's sliding window ("Phi SWA is currently disabled"); so do we, to agree with
//! it.

use crate::error::Result;
use crate::models::decoder::Architecture;
use crate::models::decoder::blocks::layer_key;
use crate::models::decoder::blocks::{Bias, Decoder, Qkv};
use crate::models::decoder::config::{DecoderConfig, RopeFactors};
use crate::models::decoder::metadata::Metadata;
use crate::program::{TensorId, UnaryOp};

/// `phi3`.
pub(super) static PHI3: Architecture = Architecture {
    name: "phi3",
    configure,
    layer,
};

fn configure(_meta: &Metadata<'_>, config: &mut DecoderConfig) -> Result<()> {
    config.rope.factors = RopeFactors::LongShort;
    config.no_window();
    Ok(())
}

fn layer(d: &mut Decoder<'_>, il: u32, x: TensorId) -> Result<TensorId> {
    let hidden = d.config.hidden;
    let h = d.layer_norm(il, x, "attn_norm", hidden)?;
    let form = if d.has(&layer_key(il, "attn_qkv.weight")) {
        Qkv::Fused
    } else {
        Qkv::Separate(Bias::IfPresent)
    };
    let heads = d.qkv(il, h, form)?;
    let a = d.attention(il, heads, false, Bias::IfPresent)?;
    let x = d.b.add(x, a)?;
    let f = d.layer_norm(il, x, "ffn_norm", hidden)?;
    let f = d.fused_gated_ffn(il, f, UnaryOp::Silu)?;
    d.b.add(x, f)
}
