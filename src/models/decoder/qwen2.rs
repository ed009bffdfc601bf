//! `qwen2` (Qwen 2 and 2.5), as llama.cpp's `src/models/qwen2.cpp`: Llama's graph with a
//! required bias on Q, K and V and rotate-half (NEOX) RoPE. The file's sliding window is
//! ignored, as llama.cpp does (Qwen 2 configs carry one with `use_sliding_window: false`).

use crate::error::Result;
use crate::models::decoder::Architecture;
use crate::models::decoder::blocks::{Bias, Decoder, Qkv};
use crate::models::decoder::config::DecoderConfig;
use crate::models::decoder::metadata::Metadata;
use crate::program::{TensorId, UnaryOp};

/// `qwen2`.
pub(super) static QWEN2: Architecture = Architecture {
    name: "qwen2",
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
    let heads = d.qkv(il, h, Qkv::Separate(Bias::Required))?;
    let a = d.attention(il, heads, false, Bias::No)?;
    let x = d.b.add(x, a)?;
    let f = d.layer_norm(il, x, "ffn_norm", hidden)?;
    let f = d.gated_ffn(il, f, UnaryOp::Silu, Bias::No)?;
    d.b.add(x, f)
}
