//! `Attention` on the GPU: `KvStoreKey` writes this execution's keys and values into the cache
//! (state buffers; a position outside the cache is never written and raises the op's tag in
//! the status word), then `AttendKey` runs one workgroup per (head, row): the query in
//! workgroup memory, the visible cache positions in tiles of `wg` keys (one per thread), an
//! online softmax (running max and sum, the accumulator rescaled per tile) and `ceil(Dv / wg)`
//! output dims per thread. Dispatch boundaries order them: WebGPU makes a dispatch's storage
//! writes visible to the next one in the pass.
//!
//! A decode step has few (head, row) pairs (Gemma 3 270M: 4), so one workgroup each leaves
//! most of a GPU idle (an H200 spent 150 us per layer there). With fewer than
//! [`SPLIT_BELOW`] pairs and `attention_splits` > 1 (the config: 32 on real GPUs), each pair's
//! visible positions are cut into that many equal runs (at least [`MIN_SPLIT_RUN`] positions
//! each, so short contexts use fewer workgroups), each run attended by its own workgroup into a
//! partial result in the plan's scratch buffer (its running max, sum and unnormalised
//! accumulator), and `AttendCombineKey` merges a pair's partials: `out = sum_i acc_i *
//! exp(m_i - M) / sum_i l_i * exp(m_i - M)`, `M = max_i m_i` (flash decoding). The runs are cut
//! on the device from the live positions, so the plan does not depend on them.
//!
//! Under `KernelConfig::kv_f16` (the spec `precision` chose f16) the caches are `array<f16>`:
//! the store rounds each key and value to f16, the attend kernels widen them to f32 as they
//! read; the scores, the softmax statistics and the value sums stay f32.
//!
//! Positions are read on the device (`workgroupUniformLoad`, so the tile loop is uniform):
//! a decode step reads `p + 1` cache rows, and nothing is planned from them, so every step of a
//! decode loop reuses one plan and its bind groups.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Precision,
    Uniforms, Wgsl, grid_1d, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::Attention;
use crate::program::{TensorDecl, TensorId};

/// The cache store's uniform block.
const KV_STORE_PARAMS: [Field; 2] = [
    Field::vec4(
        "head",
        "x: S * k_row, y: k_row (Hkv * D), z: v_row (Hkv * Dv), w: C",
    ),
    Field::vec4("tail", "x: S * (k_row + v_row), y: op tag"),
];

/// The cache store's element body: cache[positions[s]] = rows[s] for the keys and the values
/// of this execution.
const KV_STORE: &str = r"
    let k_elems = p.head.x;
    var s: u32;
    if (i < k_elems) {
        s = i / p.head.y;
    } else {
        s = (i - k_elems) / p.head.z;
    }
    let position = bitcast<i32>(positions[s]);
    if (position < 0 || u32(position) >= p.head.w) {
        atomicMax(&status[0], p.tail.y);
        return;
    }
    let pos = u32(position);
    if (i < k_elems) {
        let e = i % p.head.y;
        k_cache[pos * p.head.y + e] = Kv(k[i]);
    } else {
        let j = i - k_elems;
        let e = j % p.head.z;
        v_cache[pos * p.head.z + e] = Kv(v[j]);
    }
";

/// The attend kernel's uniform block.
const ATTEND_PARAMS: [Field; 2] = [
    Field::vec4("head", "x: Hq, y: Hkv, z: C, w: window (0 = none)"),
    Field::vec4("tail", "x: scale bits, y: softcap bits (0 = none), z: S"),
];

const ATTEND: &str = r"
// out[s, h] = softmax(scale * q[s, h] . k_cache[lo..=p, g]) . v_cache[lo..=p, g],
// p = positions[s], g = h / (Hq / Hkv); one workgroup per (h, s). Bindings: q, k_cache,
// v_cache, positions, then out: when SPLITS == 1 the output [S, Hq, Dv], else the partials
// [S, Hq, SPLITS, Dv + 2] (running max, running sum, then the unnormalised accumulator), of
// element type `Out` (Act, or Acc for the partials).

const WG: u32 = {{WG}}u;
const D: u32 = {{D}}u;
const DV: u32 = {{DV}}u;
const PER: u32 = {{PER}}u;
// Workgroups per (h, s): wid.z is this one's run of the visible positions.
const SPLITS: u32 = {{SPLITS}}u;
const MIN_RUN: u32 = {{MIN_RUN}}u;
const LOWEST: Acc = -3.0e38;

var<workgroup> query: array<Acc, D>;
var<workgroup> weights: array<Acc, WG>;
var<workgroup> scratch: array<Acc, WG>;
var<workgroup> position: i32;

fn reduce_max(lid: u32, value: Acc) -> Acc {
    scratch[lid] = value;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (lid < stride) {
            scratch[lid] = max(scratch[lid], scratch[lid + stride]);
        }
        workgroupBarrier();
    }
    let result = scratch[0];
    workgroupBarrier();
    return result;
}

fn reduce_add(lid: u32, value: Acc) -> Acc {
    scratch[lid] = value;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride = stride / 2u) {
        if (lid < stride) {
            scratch[lid] = scratch[lid] + scratch[lid + stride];
        }
        workgroupBarrier();
    }
    let result = scratch[0];
    workgroupBarrier();
    return result;
}

// An empty partial (a run with no visible position): max LOWEST, sum 0, accumulator 0.
fn write_empty_partial(at: u32, lid: u32) {
    for (var i = lid; i < DV + 2u; i = i + WG) {
        out[at + i] = Out(select(Acc(0.0), LOWEST, i == 0u));
    }
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let s = wid.y;
    let split = wid.z;
    let partial = ((s * p.head.x + h) * SPLITS + split) * (DV + 2u);
    let heads = p.head.x;
    let kv_heads = p.head.y;
    let cache = p.head.z;
    let window = p.head.w;
    let scale = Acc(bitcast<f32>(p.tail.x));
    let softcap = Acc(bitcast<f32>(p.tail.y));
    let g = h / (heads / kv_heads);
    let out_base = (s * heads + h) * DV;
    if (lid == 0u) {
        position = bitcast<i32>(positions[s]);
    }
    let at = workgroupUniformLoad(&position);
    if (at < 0 || u32(at) >= cache) {
        // The store dispatch flagged it; the execution fails. Write zeros, read nothing.
        if (SPLITS > 1u) {
            write_empty_partial(partial, lid);
            return;
        }
        for (var t = 0u; t < PER; t = t + 1u) {
            let d = lid + t * WG;
            if (d < DV) {
                out[out_base + d] = Out(0.0);
            }
        }
        return;
    }
    var last = u32(at);
    var first = 0u;
    if (window > 0u && last + 1u > window) {
        first = last + 1u - window;
    }
    if (SPLITS > 1u) {
        // This workgroup's run: equal runs of at least MIN_RUN positions (later ones empty).
        let run = max(MIN_RUN, (last - first) / SPLITS + 1u);
        let start = first + split * run;
        if (split * run > last - first) {
            write_empty_partial(partial, lid);
            return;
        }
        first = start;
        last = min(last, start + run - 1u);
    }
    for (var i = lid; i < D; i = i + WG) {
        query[i] = Acc(q[(s * heads + h) * D + i]);
    }
    workgroupBarrier();
    var running_max = LOWEST;
    var running_sum = Acc(0.0);
    var acc: array<Acc, PER>;
    for (var t = 0u; t < PER; t = t + 1u) {
        acc[t] = Acc(0.0);
    }
    for (var base = first; base <= last; base = base + WG) {
        let j = base + lid;
        let live = j <= last;
        var logit = LOWEST;
        if (live) {
            let key = (j * kv_heads + g) * D;
            var dot = Acc(0.0);
            for (var i = 0u; i < D; i = i + 1u) {
                dot = dot + query[i] * Acc(k_cache[key + i]);
            }
            logit = scale * dot;
            if (softcap > 0.0) {
                logit = softcap * tanh(logit / softcap);
            }
        }
        let new_max = max(running_max, reduce_max(lid, logit));
        let rescale = exp(running_max - new_max);
        var e = Acc(0.0);
        if (live) {
            e = exp(logit - new_max);
        }
        weights[lid] = e;
        running_sum = running_sum * rescale + reduce_add(lid, e);
        running_max = new_max;
        let count = min(WG, last + 1u - base);
        for (var t = 0u; t < PER; t = t + 1u) {
            let d = lid + t * WG;
            if (d < DV) {
                var a = acc[t] * rescale;
                for (var k = 0u; k < count; k = k + 1u) {
                    a = a + weights[k] * Acc(v_cache[((base + k) * kv_heads + g) * DV + d]);
                }
                acc[t] = a;
            }
        }
        workgroupBarrier();
    }
    if (SPLITS > 1u) {
        if (lid == 0u) {
            out[partial] = Out(running_max);
            out[partial + 1u] = Out(running_sum);
        }
        for (var t = 0u; t < PER; t = t + 1u) {
            let d = lid + t * WG;
            if (d < DV) {
                out[partial + 2u + d] = Out(acc[t]);
            }
        }
        return;
    }
    for (var t = 0u; t < PER; t = t + 1u) {
        let d = lid + t * WG;
        if (d < DV) {
            out[out_base + d] = Out(acc[t] / running_sum);
        }
    }
}
";

const COMBINE: &str = r"
// out[s, h] from the SPLITS partials of (h, s) (attend with SPLITS > 1): with M the largest
// running max, out = sum_i acc_i * exp(m_i - M) / sum_i l_i * exp(m_i - M). One workgroup per
// (h, s); every thread merges the maxima, weights and sums itself (SPLITS <= 64), then its
// dims. Bindings: positions, partials, out.

const WG: u32 = {{WG}}u;
const DV: u32 = {{DV}}u;
const SPLITS: u32 = {{SPLITS}}u;
const LOWEST: Acc = -3.0e38;

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let s = wid.y;
    let out_base = (s * p.head.x + h) * DV;
    let at = bitcast<i32>(positions[s]);
    if (at < 0 || u32(at) >= p.head.y) {
        // The store dispatch flagged it; the execution fails. Zeros, as unsplit.
        for (var d = lid; d < DV; d = d + WG) {
            out[out_base + d] = Act(0.0);
        }
        return;
    }
    let base = (s * p.head.x + h) * SPLITS * (DV + 2u);
    var m = LOWEST;
    for (var i = 0u; i < SPLITS; i = i + 1u) {
        m = max(m, partials[base + i * (DV + 2u)]);
    }
    // Each partial's weight exp(m_i - M), computed once for the sum and every dim.
    var weight: array<Acc, SPLITS>;
    var l = Acc(0.0);
    for (var i = 0u; i < SPLITS; i = i + 1u) {
        let at_i = base + i * (DV + 2u);
        weight[i] = exp(partials[at_i] - m);
        l = l + partials[at_i + 1u] * weight[i];
    }
    for (var d = lid; d < DV; d = d + WG) {
        var a = Acc(0.0);
        for (var i = 0u; i < SPLITS; i = i + 1u) {
            a = a + partials[base + i * (DV + 2u) + 2u + d] * weight[i];
        }
        out[out_base + d] = Act(a / l);
    }
}
";

/// The combine kernel's uniform block.
const COMBINE_PARAMS: [Field; 1] = [Field::vec4("head", "x: Hq, y: C, z: S")];

/// The cache-store kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KvStoreKey {
    /// Invocations per workgroup.
    pub wg: u32,
    /// Element types (activations in, the cache's stored).
    pub precision: Precision,
}

impl Kernel for KvStoreKey {
    fn storage_bindings(&self) -> u32 {
        6
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&KV_STORE_PARAMS);
        w.storage("k", Elem::Act);
        w.storage("v", Elem::Act);
        w.storage("k_cache", Elem::Kv);
        w.storage("v_cache", Elem::Kv);
        w.storage("positions", Elem::U32);
        w.storage("status", Elem::Atomic);
        w.element_main(self.wg, "p.tail.x", KV_STORE);
        w
    }
}

/// The attend kernel for head dims `d` (keys) and `dv` (values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AttendKey {
    /// Invocations per workgroup (keys per tile).
    pub wg: u32,
    /// Key head dim.
    pub d: u32,
    /// Value head dim.
    pub dv: u32,
    /// Workgroups per (head, row), writing partials (1: the output itself).
    pub splits: u32,
    /// Element types (activations, the cache's, the softmax statistics').
    pub precision: Precision,
}

/// The kernel merging the partials of a split attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AttendCombineKey {
    /// Invocations per workgroup.
    pub wg: u32,
    /// Value head dim.
    pub dv: u32,
    /// Partials per (head, row).
    pub splits: u32,
    /// Element types.
    pub precision: Precision,
}

impl Kernel for AttendCombineKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&COMBINE_PARAMS);
        w.storage("positions", Elem::U32);
        w.storage("partials", Elem::Acc);
        w.storage("out", Elem::Act);
        w.template(
            COMBINE,
            &[("WG", &self.wg), ("DV", &self.dv), ("SPLITS", &self.splits)],
        );
        w
    }
}

/// Attention splits its (head, row) pairs' positions only when there are fewer pairs than this
/// (a decode step; prefill has enough pairs to fill a GPU).
pub(crate) const SPLIT_BELOW: usize = 64;
/// The shortest run of positions a split workgroup attends (shorter contexts split less).
pub(crate) const MIN_SPLIT_RUN: u32 = 16;

impl Kernel for AttendKey {
    fn storage_bindings(&self) -> u32 {
        5
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        (self.d + 2 * self.wg + 1) * 4
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&ATTEND_PARAMS);
        let out = if self.splits > 1 {
            Elem::Acc
        } else {
            Elem::Act
        };
        w.alias("Out", out);
        w.storage("q", Elem::Act);
        w.storage("k_cache", Elem::Kv);
        w.storage("v_cache", Elem::Kv);
        w.storage("positions", Elem::U32);
        w.storage("out", Elem::Named("Out"));
        w.template(
            ATTEND,
            &[
                ("WG", &self.wg),
                ("D", &self.d.max(1)),
                ("DV", &self.dv),
                ("PER", &self.dv.div_ceil(self.wg).max(1)),
                ("SPLITS", &self.splits.max(1)),
                ("MIN_RUN", &MIN_SPLIT_RUN),
            ],
        );
        w
    }
}

/// Keys per tile: 64 threads (fits every device's 256-invocation floor).
const ATTEND_WG: u32 = 64;

/// The extents of one attention.
struct Extents {
    rows: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    value_dim: usize,
    cache: usize,
}

fn extents(op: &Attention, ctx: &PlanContext<'_>) -> Result<Extents> {
    let three = |id, what: &str| -> Result<[usize; 3]> {
        <[usize; 3]>::try_from(ctx.shape(id)?)
            .map_err(|_| Error::invalid_program(format!("attention {what} is not rank 3")))
    };
    let [rows, heads, head_dim] = three(op.q, "q")?;
    let [cache, kv_heads, value_dim] = three(op.v_cache, "v_cache")?;
    if kv_heads == 0 || heads % kv_heads != 0 {
        return Err(Error::invalid_program(
            "attention KV heads must divide the query heads",
        ));
    }
    Ok(Extents {
        rows,
        heads,
        kv_heads,
        head_dim,
        value_dim,
        cache,
    })
}

/// The attend kernels `op` may dispatch under `config` (unsplit, and split with its combine
/// when the config splits), where its head dims are fixed.
/// The element types of attention's kernels under `config`: f32 throughout, or an f16 cache
/// (the scores, the softmax statistics and the output's sums stay f32 either way).
const fn cache_precision(config: KernelConfig) -> Precision {
    if config.kv_f16 {
        Precision::KV_F16
    } else {
        Precision::F32
    }
}

/// The element types of the attention op `q` belongs to: [`cache_precision`], with f16
/// activations where `q` is stored in f16 (`plan::f16_activations` moves attention's
/// activations to f16 only together with an f16 cache).
fn op_precision(floats: &TensorFloats, q: TensorId, config: KernelConfig) -> Precision {
    floats.precision(q, cache_precision(config))
}

/// The combine kernel's element types: f32 partials in, `out` in its own type.
fn combine_precision(floats: &TensorFloats, out: TensorId) -> Precision {
    if floats.is_f16(out) {
        Precision::F16
    } else {
        Precision::F32
    }
}

fn attend_keys(
    tensors: &[TensorDecl],
    op: &Attention,
    config: KernelConfig,
    floats: &TensorFloats,
) -> Vec<KernelKey> {
    let dim = |id: u32| -> Option<u32> {
        match tensors.get(id as usize)?.shape.get(2)? {
            crate::program::Dim::Fixed(n) => u32::try_from(*n).ok(),
            crate::program::Dim::Symbol(_) => None,
        }
    };
    let (Some(d), Some(dv)) = (dim(op.q), dim(op.v_cache)) else {
        return Vec::new();
    };
    let attend = |splits| {
        KernelKey::new(AttendKey {
            wg: ATTEND_WG,
            d,
            dv,
            splits,
            precision: op_precision(floats, op.q, config),
        })
    };
    let mut keys = vec![attend(1)];
    if config.attention_splits > 1 {
        keys.push(attend(config.attention_splits));
        keys.push(KernelKey::new(AttendCombineKey {
            wg: ATTEND_WG,
            dv,
            splits: config.attention_splits,
            precision: combine_precision(floats, op.out),
        }));
    }
    keys
}

impl GpuOp for Attention {
    fn dispatches(&self, ctx: &PlanContext<'_>, index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.q, self.k, self.v, self.k_cache, self.v_cache, self.out])?;
        let e = extents(self, ctx)?;
        if e.rows == 0 {
            return Ok(Vec::new());
        }
        let k_row = e.kv_heads * e.head_dim;
        let v_row = e.kv_heads * e.value_dim;
        let stored = e.rows * (k_row + v_row);
        let wg = ctx.config.workgroup_size;
        let mut dispatches = Vec::with_capacity(2);
        if let Some(workgroups) = grid_1d(stored.div_ceil(wg as usize), ctx.max_workgroups)? {
            dispatches.push(Dispatch {
                key: KernelKey::new(KvStoreKey {
                    wg,
                    precision: op_precision(ctx.floats, self.q, ctx.config),
                }),
                uniforms: Uniforms::new(&KV_STORE_PARAMS)
                    .vec4(
                        "head",
                        [
                            to_u32(e.rows * k_row, "stored keys")?,
                            to_u32(k_row, "key row")?,
                            to_u32(v_row, "value row")?,
                            to_u32(e.cache, "cache length")?,
                        ],
                    )
                    .vec4(
                        "tail",
                        [
                            to_u32(stored, "stored elements")?,
                            to_u32(index + 1, "op index")?,
                            0,
                            0,
                        ],
                    )
                    .finish()?,
                bindings: vec![
                    Binding::Tensor(self.k),
                    Binding::Tensor(self.v),
                    Binding::Tensor(self.k_cache),
                    Binding::Tensor(self.v_cache),
                    Binding::Tensor(self.positions),
                    Binding::Status,
                ],
                workgroups,
            });
        }
        let heads = to_u32(e.heads, "query heads")?;
        let rows = to_u32(e.rows, "rows")?;
        if heads > ctx.max_workgroups || rows > ctx.max_workgroups {
            return Err(Error::out_of_resources(format!(
                "attention over {} rows x {} heads exceeds {} workgroups per dimension",
                e.rows, e.heads, ctx.max_workgroups
            )));
        }
        let pairs = e.heads.saturating_mul(e.rows);
        let splits = if pairs < SPLIT_BELOW {
            ctx.config.attention_splits.max(1)
        } else {
            1
        };
        let dv = to_u32(e.value_dim, "value head dim")?;
        // Split: partials [S, Hq, splits, Dv + 2] in the scratch buffer, merged into out.
        let partials = Binding::Scratch {
            bytes: (pairs as u64)
                .saturating_mul(u64::from(splits))
                .saturating_mul(u64::from(dv) + 2)
                .saturating_mul(4),
        };
        dispatches.push(Dispatch {
            key: KernelKey::new(AttendKey {
                wg: ATTEND_WG,
                d: to_u32(e.head_dim, "head dim")?,
                dv,
                splits,
                precision: op_precision(ctx.floats, self.q, ctx.config),
            }),
            uniforms: Uniforms::new(&ATTEND_PARAMS)
                .vec4(
                    "head",
                    [
                        heads,
                        to_u32(e.kv_heads, "KV heads")?,
                        to_u32(e.cache, "cache length")?,
                        self.window,
                    ],
                )
                .vec4(
                    "tail",
                    [self.scale.to_bits(), self.softcap.to_bits(), rows, 0],
                )
                .finish()?,
            bindings: vec![
                Binding::Tensor(self.q),
                Binding::Tensor(self.k_cache),
                Binding::Tensor(self.v_cache),
                Binding::Tensor(self.positions),
                if splits > 1 {
                    partials
                } else {
                    Binding::Tensor(self.out)
                },
            ],
            workgroups: [heads, rows, splits],
        });
        if splits > 1 {
            dispatches.push(Dispatch {
                key: KernelKey::new(AttendCombineKey {
                    wg: ATTEND_WG,
                    dv,
                    splits,
                    precision: combine_precision(ctx.floats, self.out),
                }),
                uniforms: Uniforms::new(&COMBINE_PARAMS)
                    .vec4("head", [heads, to_u32(e.cache, "cache length")?, rows, 0])
                    .finish()?,
                bindings: vec![
                    Binding::Tensor(self.positions),
                    partials,
                    Binding::Tensor(self.out),
                ],
                workgroups: [heads, rows, 1],
            });
        }
        Ok(dispatches)
    }

    fn kernels(
        &self,
        tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        let mut keys = vec![KernelKey::new(KvStoreKey {
            wg: config.workgroup_size,
            precision: op_precision(floats, self.q, config),
        })];
        keys.extend(attend_keys(tensors, self, config, floats));
        keys
    }
}
