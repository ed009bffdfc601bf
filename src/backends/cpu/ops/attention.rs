//! `Attention` on the CPU: checks every position, stores this execution's keys and values in
//! the cache (state tensors, taken out of the frame and put back), then for each query row and
//! head a numerically stable softmax over the visible cache positions, accumulated in f32.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::values::Values;
use crate::error::{Error, Result};
use crate::program::ops::Attention;
use webdelegate_kernels::math::lane_dot;

/// The extents an attention runs with.
#[derive(Clone, Copy)]
struct Dims {
    rows: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    value_dim: usize,
}

/// Attends every row and head (the cache already holds this execution's rows).
fn attend(
    op: &Attention,
    dims: Dims,
    q: &[f32],
    positions: &[usize],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
) {
    let Dims {
        heads,
        kv_heads,
        head_dim,
        value_dim,
        ..
    } = dims;
    let group = heads / kv_heads;
    let mut logits: Vec<f32> = Vec::new();
    for (s, &p) in positions.iter().enumerate() {
        let lo = op.window_start(p);
        for h in 0..heads {
            let g = h / group;
            let query = &q[(s * heads + h) * head_dim..][..head_dim];
            logits.clear();
            let mut max = f32::NEG_INFINITY;
            for j in lo..=p {
                let key = &k_cache[(j * kv_heads + g) * head_dim..][..head_dim];
                let mut l = op.scale * lane_dot(query, key);
                if op.softcap > 0.0 {
                    l = op.softcap * (l / op.softcap).tanh();
                }
                max = max.max(l);
                logits.push(l);
            }
            let mut sum = 0.0f32;
            for l in &mut logits {
                *l = (*l - max).exp();
                sum += *l;
            }
            let target = &mut out[(s * heads + h) * value_dim..][..value_dim];
            target.fill(0.0);
            for (offset, &w) in logits.iter().enumerate() {
                let value = &v_cache[((lo + offset) * kv_heads + g) * value_dim..][..value_dim];
                for (o, &x) in target.iter_mut().zip(value) {
                    *o += w * x;
                }
            }
            let inverse = 1.0 / sum;
            for o in target.iter_mut() {
                *o *= inverse;
            }
        }
    }
}

/// Stores `rows` (`[S, Hkv, width]`) at `positions` of `cache` (`[C, Hkv, width]`).
fn store(cache: &mut [f32], rows: &[f32], positions: &[usize], row_len: usize) {
    for (row, &p) in rows.chunks_exact(row_len).zip(positions) {
        cache[p * row_len..][..row_len].copy_from_slice(row);
    }
}

impl CpuOp for Attention {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let [rows, heads, head_dim] = <[usize; 3]>::try_from(cx.frame.shape(self.q)?)
            .map_err(|_| Error::internal("attention q is not rank 3"))?;
        let [cache, kv_heads, value_dim] = <[usize; 3]>::try_from(cx.frame.shape(self.v_cache)?)
            .map_err(|_| Error::internal("attention v_cache is not rank 3"))?;
        let dims = Dims {
            rows,
            heads,
            kv_heads,
            head_dim,
            value_dim,
        };
        let op_index = cx.step.op;
        let positions =
            self.check_positions(op_index, cx.frame.typed::<i32>(self.positions)?, cache)?;
        let lengths_ok = positions.len() == dims.rows
            && cx.frame.numel(self.k)? == rows * kv_heads * head_dim
            && cx.frame.numel(self.v)? == rows * kv_heads * value_dim
            && cx.frame.numel(self.k_cache)? == cache * kv_heads * head_dim
            && kv_heads > 0
            && heads % kv_heads == 0;
        if !lengths_ok {
            return Err(Error::internal(
                "attention operands disagree with their shapes",
            ));
        }
        // The caches are state: owned by the frame for this execution; take them out to write.
        let (Slot::Owned(Values::F32(mut k_cache)), Slot::Owned(Values::F32(mut v_cache))) =
            (cx.frame.take(self.k_cache), cx.frame.take(self.v_cache))
        else {
            return Err(Error::internal("attention caches are not f32 state"));
        };
        let stored = cx.frame.f32(self.k).and_then(|k| {
            store(&mut k_cache, k, &positions, kv_heads * head_dim);
            let v = cx.frame.f32(self.v)?;
            store(&mut v_cache, v, &positions, kv_heads * value_dim);
            Ok(())
        });
        let result = stored.and_then(|()| {
            cx.f32_result(self.out, |f, out| {
                attend(
                    self,
                    dims,
                    f.f32(self.q)?,
                    &positions,
                    &k_cache,
                    &v_cache,
                    out,
                );
                Ok(())
            })
        });
        cx.frame
            .put(self.k_cache, Slot::Owned(Values::F32(k_cache)));
        cx.frame
            .put(self.v_cache, Slot::Owned(Values::F32(v_cache)));
        result
    }
}
