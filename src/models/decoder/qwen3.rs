//! `qwen3` (Qwen 3 dense), as llama.cpp's `src/models/qwen3.cpp`: Qwen 2's graph without the
//! Q/K/V biases and with a per-head RMSNorm of the queries and keys (`attn_q_norm`,
//! `attn_k_norm`) right before their NEOX RoPE.

use crate::error::Result;
use crate::models::decoder::Architecture;
use crate::models::decoder::blocks::{Bias, Decoder, Qkv};
use crate::models::decoder::config::DecoderConfig;
use crate::models::decoder::metadata::Metadata;
use crate::program::{TensorId, UnaryOp};

/// `qwen3`.
pub(super) static QWEN3: Architecture = Architecture {
    name: "qwen3",
    configure,
    layer,
};

fn configure(_meta: &Metadata<'_>, config: &mut DecoderConfig) -> Result<()> {
    config.no_window();
    Ok(())
}

fn layer(d: &mut Decoder<'_>, il: u32, x: TensorId) -> Result<TensorId> {
    let hidden = d.config.hidden;
    let h = d.layer_norm(il, x, "attn_norm", hidden)?;
    let heads = d.qkv(il, h, Qkv::Separate(Bias::No))?;
    let a = d.attention(il, heads, true, Bias::No)?;
    let x = d.b.add(x, a)?;
    let f = d.layer_norm(il, x, "ffn_norm", hidden)?;
    let f = d.gated_ffn(il, f, UnaryOp::Silu, Bias::No)?;
    d.b.add(x, f)
}
