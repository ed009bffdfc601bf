//! `rope`: rotary position embedding over the head dim of a `[.., S, H, D]` view (Llama,
//! Gemma, Qwen), with positions read from an execute-time tensor.
//!
//! Build it with [`ProgramBuilder::push`](crate::program::ProgramBuilder::push):
//! `b.push(|out| Rope { x, positions, dims: 256, base: 1e6, style: RopeStyle::Neox, out })`.

use crate::program::infer::{InferResult, dim_text, shape_text};
use crate::program::ops::support::{OpDef, Operands, expect_float, tensor_text as t};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Which elements of a row rotate together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RopeStyle {
    /// Rotate-half: pair `i` is `(i, i + dims / 2)` (llama.cpp `GGML_ROPE_TYPE_NEOX`, Hugging
    /// Face `rotate_half`; Gemma 3, Qwen 2, GPT-NeoX).
    Neox,
    /// Interleaved: pair `i` is `(2i, 2i + 1)` (llama.cpp's "normal" mode
    /// `GGML_ROPE_TYPE_NORMAL`; Llama GGUFs, GPT-J).
    GptJ,
}

impl RopeStyle {
    /// The style's name in dumps: `"neox"` or `"gptj"`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Neox => "neox",
            Self::GptJ => "gptj",
        }
    }
}

/// Rotary position embedding: `x` f32 `[.., S, H, D]` (rank >= 3, `D` fixed), `positions` i32
/// `[S]` (the absolute position of each of the `S` rows, read at execute time) -> `out` like
/// `x`. For row `s`, with `p = positions[s]` and pair `i < dims / 2` of elements `(a, b)` (see
/// [`RopeStyle`]), and the [`RopeScaling`] `m = attn_factor`, `f = freq_scale`, `c_i =
/// factors[i]` (1 when there are none): `theta = p * f * base^(-2i / dims) / c_i`,
/// `out[a] = m (x[a] cos(theta) - x[b] sin(theta))`, `out[b] = m (x[a] sin(theta) + x[b]
/// cos(theta))`; elements `dims..D` pass through unchanged. Exactly llama.cpp's
/// `ggml_rope_ext` with `ext_factor = 0` (no YaRN ramp), `freq_factors = c`, `freq_scale = f`
/// and `attn_factor = m` (checked against `ggml/src/ggml-cpu/ops.cpp`: `rope_yarn` multiplies
/// both `cos` and `sin` by `mscale = attn_factor`; `rotate_pairs` with `n_offset = n_dims / 2`
/// for NEOX, `1` for normal, and the pass-through of `n_dims..ne0`).
///
/// How the angle is computed (both backends, f32): the inverse frequencies
/// `f * base^(-2i / dims) / c_i` are computed once in f64 and rounded to f32
/// ([`Rope::inverse_frequencies`]); `theta = f32(p) * inv_freq[i]`, one f32 rounding;
/// then `sin`/`cos` after a Cody-Waite reduction by `pi / 2`, each within 2.5e-7 of the true
/// values of that f32 angle (for `|theta| <= 1e5`; beyond, finite and within `[-1, 1]`). So the angle is within `~1.2e-7 * |theta|` (two roundings) of the
/// exact `p * base^(-2i/dims)`: the error grows with the position (at `p = 4096` up to
/// ~5e-4 rad on the fastest pairs), as in every f32 RoPE. llama.cpp instead forms
/// `theta_i = p * theta_scale^i` by repeated f32 multiplication (`i` roundings, so up to
/// ~`i * 6e-8` relative) and Hugging Face multiplies f32 `inv_freq` by f32 positions: all
/// three agree within that growing bound, not bit for bit.
///
/// Positions: any i32 is used as its value. Negative positions rotate backwards (RoPE is a
/// relative encoding: a shift of every position cancels in `q . k`); positions beyond `2^24`
/// are rounded to f32 first. Nothing is indexed by a position, so no value reads or writes
/// out of bounds, and every finite `x` gives a finite result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rope {
    /// The input, `[.., S, H, D]`.
    pub x: TensorId,
    /// The absolute position of each row, i32 `[S]`.
    pub positions: TensorId,
    /// How many leading elements of each `D`-row rotate: even, `0 < dims <= D`.
    pub dims: u32,
    /// The frequency base (`rope.freq_base`, `rope_theta`), finite and > 0.
    pub base: f32,
    /// Which elements pair up.
    pub style: RopeStyle,
    /// The tensor the op writes.
    pub out: TensorId,
    /// Frequency and magnitude scaling (none by default). Not in blobs before format
    /// version 4, which decode with none.
    #[serde(default, deserialize_with = "scaling_of_any_version")]
    pub scaling: RopeScaling,
}

/// How a model stretches RoPE past its trained context (llama.cpp's `freq_factors`,
/// `freq_scale` and `attn_factor` of `ggml_rope_ext`): Llama 3's per-pair factors
/// (`rope_freqs.weight`), Phi-3's long and short factors and attention factor, linear
/// position interpolation. The default changes nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    /// Divisors of each pair's frequency: empty (none) or `dims / 2` finite values > 0.
    pub factors: Vec<f32>,
    /// Multiplies every frequency (linear interpolation: `1 / rope.scaling.factor`); finite
    /// and > 0.
    pub freq_scale: f32,
    /// Multiplies `cos` and `sin` (so the rotated elements); finite and > 0.
    pub attn_factor: f32,
}

impl Default for RopeScaling {
    fn default() -> Self {
        Self {
            factors: Vec::new(),
            freq_scale: 1.0,
            attn_factor: 1.0,
        }
    }
}

impl RopeScaling {
    /// Whether it changes nothing.
    pub fn is_identity(&self) -> bool {
        *self == Self::default()
    }
}

/// The scaling as the blob's format version writes it: absent before version 4 (see
/// [`crate::program::format`]).
fn scaling_of_any_version<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<RopeScaling, D::Error> {
    if crate::program::format::decoding_version() < 4 {
        Ok(RopeScaling::default())
    } else {
        RopeScaling::deserialize(deserializer)
    }
}

impl Rope {
    /// `freq_scale * base^(-2i / dims) / factors[i]` for each pair `i < dims / 2`, computed in
    /// f64 and rounded to f32: what both backends multiply positions by.
    pub fn inverse_frequencies(&self) -> Vec<f32> {
        let dims = f64::from(self.dims.max(1));
        let base = f64::from(self.base);
        let scale = f64::from(self.scaling.freq_scale);
        (0..self.dims / 2)
            .map(|i| {
                let factor = self
                    .scaling
                    .factors
                    .get(i as usize)
                    .map_or(1.0, |&c| f64::from(c));
                (scale * base.powf(-2.0 * f64::from(i) / dims) / factor) as f32
            })
            .collect()
    }
}

impl OpDef for Rope {
    fn name(&self) -> &'static str {
        "rope"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![self.x, self.positions]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let x = operands.get("x", self.x)?;
        let positions = operands.get("positions", self.positions)?;
        expect_float(&[&x])?;
        positions.expect_dtype(&[DType::I32])?;
        let shape = x.shape();
        let rank = shape.len();
        if rank < 3 {
            return Err(format!(
                "{} is {}, expected [.., S, H, D] (rank >= 3)",
                x.describe(),
                shape_text(shape)
            ));
        }
        let Dim::Fixed(head_dim) = shape[rank - 1] else {
            return Err(format!(
                "{} has a symbolic head dim {}; rope needs a fixed D",
                x.describe(),
                dim_text(shape[rank - 1])
            ));
        };
        if self.dims == 0 || !self.dims.is_multiple_of(2) || u64::from(self.dims) > head_dim {
            return Err(format!(
                "dims is {}, expected even and in 1..={head_dim} (the head dim of x)",
                self.dims
            ));
        }
        if !self.base.is_finite() || self.base <= 0.0 {
            return Err(format!("base is {}, expected finite and > 0", self.base));
        }
        let scaling = &self.scaling;
        if !scaling.factors.is_empty() && scaling.factors.len() != (self.dims / 2) as usize {
            return Err(format!(
                "scaling has {} factors, expected none or {} (dims / 2)",
                scaling.factors.len(),
                self.dims / 2
            ));
        }
        let positive = |v: f32| v.is_finite() && v > 0.0;
        if let Some(bad) = scaling.factors.iter().find(|&&c| !positive(c)) {
            return Err(format!("scaling factor {bad} is not finite and > 0"));
        }
        if !positive(scaling.freq_scale) || !positive(scaling.attn_factor) {
            return Err(format!(
                "scaling freq_scale {} and attn_factor {} must be finite and > 0",
                scaling.freq_scale, scaling.attn_factor
            ));
        }
        let seq = shape[rank - 3];
        if positions.shape() != [seq] {
            return Err(format!(
                "{} is {}, expected [{}] (one position per row S of x {})",
                positions.describe(),
                shape_text(positions.shape()),
                dim_text(seq),
                shape_text(shape)
            ));
        }
        Ok((DType::F32, shape.to_vec()))
    }

    fn attributes(&self) -> String {
        let mut text = format!(
            "x={} positions={} dims={} base={:?} style={}",
            t(self.x),
            t(self.positions),
            self.dims,
            self.base,
            self.style.name()
        );
        let scaling = &self.scaling;
        if !scaling.is_identity() {
            text.push_str(&format!(
                " factors={} freq_scale={:?} attn_factor={:?}",
                scaling.factors.len(),
                scaling.freq_scale,
                scaling.attn_factor
            ));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::tensor::TensorDecl;

    fn decl(dtype: DType, shape: &[u64]) -> TensorDecl {
        TensorDecl {
            name: "t".into(),
            dtype,
            shape: shape.iter().map(|&d| Dim::Fixed(d)).collect(),
        }
    }

    fn check(x: TensorDecl, positions: TensorDecl, dims: u32, base: f32) -> InferResult<()> {
        let out = x.clone();
        let tensors = [x, positions, out];
        let op = Rope {
            x: 0,
            positions: 1,
            dims,
            base,
            style: RopeStyle::Neox,
            out: 2,
            scaling: RopeScaling::default(),
        };
        op.check(&Operands::new(&tensors))
    }

    #[test]
    fn refuses_bad_operands_naming_them() {
        let x = || decl(DType::F32, &[3, 2, 8]);
        let pos = || decl(DType::I32, &[3]);
        assert!(check(x(), pos(), 8, 1e4).is_ok());
        assert!(check(x(), pos(), 4, 1e4).is_ok());
        let cases: [(InferResult<()>, &str); 8] = [
            (check(x(), pos(), 0, 1e4), "dims"),
            (check(x(), pos(), 3, 1e4), "dims"),
            (check(x(), pos(), 10, 1e4), "dims"),
            (check(x(), pos(), 8, 0.0), "base"),
            (check(x(), pos(), 8, f32::NAN), "base"),
            (check(x(), decl(DType::I64, &[3]), 8, 1e4), "positions"),
            (check(x(), decl(DType::I32, &[2]), 8, 1e4), "positions"),
            (
                check(decl(DType::F32, &[2, 8]), decl(DType::I32, &[2]), 8, 1e4),
                "x",
            ),
        ];
        for (result, part) in cases {
            let message = result.unwrap_err();
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }

    #[test]
    fn inverse_frequencies_are_the_f64_powers_rounded() {
        let op = Rope {
            x: 0,
            positions: 1,
            dims: 4,
            base: 10_000.0,
            style: RopeStyle::GptJ,
            out: 2,
            scaling: RopeScaling::default(),
        };
        assert_eq!(op.inverse_frequencies(), vec![1.0, 0.01]);
        assert!(op.attributes().contains("dims=4 base=10000.0 style=gptj"));
        assert!(!op.attributes().contains("factors"));
        let scaled = Rope {
            scaling: RopeScaling {
                factors: vec![1.0, 8.0],
                freq_scale: 0.5,
                attn_factor: 1.2,
            },
            ..op
        };
        assert_eq!(scaled.inverse_frequencies(), vec![0.5, 0.000625]);
        assert!(
            scaled
                .attributes()
                .contains("factors=2 freq_scale=0.5 attn_factor=1.2")
        );
    }

    #[test]
    fn refuses_bad_scaling_naming_it() {
        let tensors = [
            decl(DType::F32, &[3, 2, 8]),
            decl(DType::I32, &[3]),
            decl(DType::F32, &[3, 2, 8]),
        ];
        let with = |factors: Vec<f32>, freq_scale: f32, attn_factor: f32| {
            Rope {
                x: 0,
                positions: 1,
                dims: 8,
                base: 1e4,
                style: RopeStyle::Neox,
                out: 2,
                scaling: RopeScaling {
                    factors,
                    freq_scale,
                    attn_factor,
                },
            }
            .check(&Operands::new(&tensors))
        };
        assert!(with(vec![1.0; 4], 0.25, 1.1).is_ok());
        for (result, part) in [
            (with(vec![1.0; 3], 1.0, 1.0), "3 factors"),
            (with(vec![1.0, 0.0, 1.0, 1.0], 1.0, 1.0), "factor 0"),
            (with(vec![f32::NAN; 4], 1.0, 1.0), "factor NaN"),
            (with(Vec::new(), 0.0, 1.0), "freq_scale 0"),
            (with(Vec::new(), 1.0, f32::INFINITY), "attn_factor inf"),
        ] {
            let message = result.unwrap_err();
            assert!(message.contains(part), "{message:?} lacks {part:?}");
        }
    }
}
