//! `attention`: causal scaled-dot-product attention over a KV cache held in state tensors
//! (ExecuTorch's `sdpa_with_kv_cache`, llama.cpp's attention with its KV cache): the op
//! appends this execution's keys and values at their positions, then attends over the cache.
//!
//! Build it with [`ProgramBuilder::push`](crate::program::ProgramBuilder::push):
//! `b.push(|out| Attention { q, k, v, k_cache, v_cache, positions, scale, window: 0, softcap: 0.0, out })`.

use crate::program::infer::{InferResult, dim_text, shape_text};
use crate::program::ops::support::{
    OpDef, Operand, Operands, expect_constant, expect_float, tensor_text as t,
};
use crate::program::tensor::{DType, Dim, TensorId};
use serde::{Deserialize, Serialize};

/// Attention of `S` query rows over a KV cache of `C` positions, grouped heads.
///
/// Shapes: `q` `[S, Hq, D]`, `k` `[S, Hkv, D]`, `v` `[S, Hkv, Dv]` (this execution's rows),
/// `k_cache` `[C, Hkv, D]` and `v_cache` `[C, Hkv, Dv]` (state tensors, written in place),
/// `positions` i32 `[S]` (the absolute position of each row), `out` `[S, Hq, Dv]`. `Hq` is a
/// multiple of `Hkv`: query head `h` reads KV head `h / (Hq / Hkv)` (multi-query when
/// `Hkv` is 1). `Hq`, `Hkv`, `D`, `Dv` and `C` are fixed; `S` may be a symbol. f32.
///
/// Semantics, in this order:
/// 1. Every row is stored: `k_cache[positions[s]] = k[s]`, `v_cache[positions[s]] = v[s]`.
///    Positions must lie in `0..C` and be distinct within one execution, else the execution
///    fails with `InvalidArgument` before the cache is touched (the CPU checks always; the
///    WebGPU backend checks positions that are program inputs on the host, and flags computed
///    ones out of range through its status word, storing nothing for them).
/// 2. Query row `s` at `p = positions[s]` attends to cache positions `lo..=p`, where `lo = 0`,
///    or `max(0, p + 1 - window)` with a sliding `window > 0` (a query sees itself and the
///    `window - 1` positions before it: llama.cpp's and Hugging Face's sliding window).
///    Logits are `scale * q[s, h] . k_cache[j, g]`, soft-capped to `softcap * tanh(l / softcap)`
///    when `softcap > 0`, then softmax-normalised (max subtracted) and used to weight
///    `v_cache[j, g]`.
///
/// Cache positions are read as they stand: rows stored by earlier executions (and by this one,
/// in step 1) are the context; positions past `p` are never read, so the cache needs no
/// clearing between sequences that restart at position 0. A decode step reads `p + 1` rows at
/// most, not `C`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attention {
    /// The queries, `[S, Hq, D]`.
    pub q: TensorId,
    /// This execution's keys, `[S, Hkv, D]`.
    pub k: TensorId,
    /// This execution's values, `[S, Hkv, Dv]`.
    pub v: TensorId,
    /// The key cache, a state `[C, Hkv, D]`.
    pub k_cache: TensorId,
    /// The value cache, a state `[C, Hkv, Dv]`.
    pub v_cache: TensorId,
    /// Absolute positions of the `S` rows, i32 `[S]`.
    pub positions: TensorId,
    /// The logit scale (e.g. `1 / sqrt(D)`; Gemma 3 uses `1 / 16`); finite.
    pub scale: f32,
    /// The sliding window (positions a query sees, itself included); 0 for none.
    pub window: u32,
    /// Logit soft-cap; 0 for none, else finite and > 0.
    pub softcap: f32,
    /// The tensor the op writes, `[S, Hq, Dv]`.
    pub out: TensorId,
}

/// The fixed extent of `dim`, or a message naming `what`.
fn fixed(dim: Dim, what: &str) -> InferResult<u64> {
    match dim {
        Dim::Fixed(n) => Ok(n),
        Dim::Symbol(_) => Err(format!("{what} must be fixed, not {}", dim_text(dim))),
    }
}

/// The three dims of a rank-3 operand.
fn dims3(operand: &Operand<'_>) -> InferResult<[Dim; 3]> {
    <[Dim; 3]>::try_from(operand.shape()).map_err(|_| {
        format!(
            "{} is {}, expected rank 3",
            operand.describe(),
            shape_text(operand.shape())
        )
    })
}

impl Attention {
    /// The first cache position a query at `p` sees.
    pub fn window_start(&self, p: usize) -> usize {
        if self.window == 0 {
            0
        } else {
            (p + 1).saturating_sub(self.window as usize)
        }
    }

    /// Checks this execution's positions against a cache of `cache` positions (in range, no
    /// repeats) and returns them as indices; `op_index` names the op in the message.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first bad row.
    pub fn check_positions(
        &self,
        op_index: usize,
        positions: &[i32],
        cache: usize,
    ) -> crate::error::Result<Vec<usize>> {
        let mut seen = vec![false; cache];
        let mut out = Vec::with_capacity(positions.len());
        for (row, &p) in positions.iter().enumerate() {
            let index = usize::try_from(p).ok().filter(|&i| i < cache).ok_or_else(|| {
                crate::error::Error::invalid_argument(format!(
                    "op {op_index} (attention): row {row} has position {p}, outside the cache of \
                     {cache} positions"
                ))
            })?;
            if std::mem::replace(&mut seen[index], true) {
                return Err(crate::error::Error::invalid_argument(format!(
                    "op {op_index} (attention): position {p} appears twice in one execution \
                     (row {row})"
                )));
            }
            out.push(index);
        }
        Ok(out)
    }
}

impl OpDef for Attention {
    fn name(&self) -> &'static str {
        "attention"
    }

    fn inputs(&self) -> Vec<TensorId> {
        vec![
            self.q,
            self.k,
            self.v,
            self.k_cache,
            self.v_cache,
            self.positions,
        ]
    }

    fn output(&self) -> TensorId {
        self.out
    }

    fn state_writes(&self) -> Vec<TensorId> {
        vec![self.k_cache, self.v_cache]
    }

    fn infer(&self, operands: &Operands<'_>) -> InferResult<(DType, Vec<Dim>)> {
        let q = operands.get("q", self.q)?;
        let k = operands.get("k", self.k)?;
        let v = operands.get("v", self.v)?;
        let k_cache = operands.get("k_cache", self.k_cache)?;
        let v_cache = operands.get("v_cache", self.v_cache)?;
        let positions = operands.get("positions", self.positions)?;
        expect_float(&[&q, &k, &v, &k_cache, &v_cache])?;
        positions.expect_dtype(&[DType::I32])?;
        expect_constant("scale", self.scale, false)?;
        expect_constant("softcap", self.softcap, true)?;
        if self.k_cache == self.v_cache {
            return Err("k_cache and v_cache must be distinct tensors".to_owned());
        }
        let [s, hq, d] = dims3(&q)?;
        let [k_s, hkv, k_d] = dims3(&k)?;
        let [v_s, v_hkv, dv] = dims3(&v)?;
        let [c, kc_h, kc_d] = dims3(&k_cache)?;
        let [v_c, vc_h, vc_d] = dims3(&v_cache)?;
        let hq_n = fixed(hq, "q's head count")?;
        let hkv_n = fixed(hkv, "k's head count")?;
        fixed(d, "the head dim")?;
        fixed(dv, "the value head dim")?;
        fixed(c, "the cache length")?;
        if hkv_n == 0 || hq_n % hkv_n != 0 {
            return Err(format!(
                "q has {hq_n} heads and k {hkv_n}: the KV heads must divide the query heads"
            ));
        }
        let agree = [
            ("k's rows", k_s, "q's rows", s),
            ("v's rows", v_s, "q's rows", s),
            ("k's head dim", k_d, "q's head dim", d),
            ("v's heads", v_hkv, "k's heads", hkv),
            ("k_cache's heads", kc_h, "k's heads", hkv),
            ("k_cache's head dim", kc_d, "k's head dim", d),
            ("v_cache's length", v_c, "k_cache's length", c),
            ("v_cache's heads", vc_h, "v's heads", hkv),
            ("v_cache's head dim", vc_d, "v's head dim", dv),
        ];
        for (what, dim, other, expected) in agree {
            if dim != expected {
                return Err(format!(
                    "{what} is {} but {other} is {}",
                    dim_text(dim),
                    dim_text(expected)
                ));
            }
        }
        if positions.shape() != [s] {
            return Err(format!(
                "positions is {}, expected [{}] (one per row of q)",
                shape_text(positions.shape()),
                dim_text(s)
            ));
        }
        Ok((DType::F32, vec![s, hq, dv]))
    }

    fn attributes(&self) -> String {
        format!(
            "q={} k={} v={} k_cache={} v_cache={} positions={} scale={:?} window={} softcap={:?}",
            t(self.q),
            t(self.k),
            t(self.v),
            t(self.k_cache),
            t(self.v_cache),
            t(self.positions),
            self.scale,
            self.window,
            self.softcap
        )
    }
}
