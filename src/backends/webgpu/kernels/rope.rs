//! `Rope` on the GPU: one thread per output element (its pair's angle recomputed by both
//! halves of the pair; the op is memory-bound). The inverse frequencies travel in the
//! dispatch's uniform block, computed on the host by [`Rope::inverse_frequencies`] exactly as
//! the CPU backend uses them, so both form the same f32 angle `f32(p) * inv_freq[i]`; `sin`
//! and `cos` come from the same Cody-Waite reduction and Cephes polynomials as the CPU's
//! `webdelegate_kernels::math::sin_cos` (WGSL's own `sin`/`cos` promise only 2^-11 absolute, and only on
//! `[-pi, pi]`), times the op's `attn_factor` (a uniform; 1 leaves them bit for bit).
//! Positions are only multiplied, never used as an index.
//!
//! Bound: the uniform table holds at most [`MAX_PAIRS`] pairs (`dims <= 8192`, 16 KiB of the
//! 64 KiB uniform binding every device offers); larger `dims` are `NotSupported` here.

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::rms_norm::inverse_rms;
use crate::backends::webgpu::kernels::rows::{check_vector, row_workgroup, row_workgroups};
use crate::backends::webgpu::kernels::wgsl::fill;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Precision,
    Uniforms, Wgsl, grid_1d, to_u32,
};
use crate::error::{Error, Result};
use crate::program::TensorDecl;
use crate::program::ops::{RmsNorm, Rope, RopeStyle};

/// The most rotated pairs (`dims / 2`) one dispatch's uniform table holds.
pub(crate) const MAX_PAIRS: usize = 4096;

/// The rope kernel's element body (after the builder's `element_main` prologue): the rotary
/// embedding over [.., S, H, D] rows, one thread per element.
const ROPE: &str = r"
    let d = i % p.head.y;
    let row = i / p.head.y;
    let s = (row / p.head.z) % p.head.w;
    let half = p.rot.x;
    if (d >= 2u * half) {
        out[i] = x[i];
        return;
    }
    {{PAIR}}
    let inv = p.inv_freq[pair / 4u][pair % 4u];
    let sc = sin_cos(f32(bitcast<i32>(positions[s])) * inv) * bitcast<f32>(p.rot.w);
    let x0 = Acc(x[a]);
    let x1 = Acc(x[a + offset]);
    if (first) {
        out[i] = Act(x0 * sc.y - x1 * sc.x);
    } else {
        out[i] = Act(x0 * sc.x + x1 * sc.y);
    }
";

/// The one-set kernels' uniform block (the table of `vec4s` inverse-frequency vectors last).
fn params(vec4s: u32) -> [Field; 3] {
    [
        Field::vec4(
            "head",
            "x: elements (the fused kernel: rows), y: D, z: H, w: S",
        ),
        Field::vec4(
            "rot",
            "x: rotated pairs (dims / 2), y: the fused norm's eps, w: attn_factor (f32 bits)",
        ),
        Field::f32_table("inv_freq", vec4s, ""),
    ]
}

/// The two-set kernel's uniform block: the second set's geometry before the frequency table.
fn pair_params(vec4s: u32) -> [Field; 4] {
    [
        Field::vec4("head", "the first set: x: rows, y: D, z: H, w: S"),
        Field::vec4(
            "rot",
            "x: rotated pairs (dims / 2), y: the first norm's eps, z: the second's, w: \
             attn_factor\n(f32 bits)",
        ),
        Field::vec4("head2", "the second set, as head"),
        Field::f32_table("inv_freq", vec4s, ""),
    ]
}

/// The angle's sine and cosine, shared by both kernels.
const SIN_COS: &str = r"
// (sin t, cos t): t - q pi/2 with pi/2 in three parts, Cephes' sinf/cosf polynomials on
// [-pi/4, pi/4], then the quadrant q mod 4 (the CPU's webdelegate_kernels::math::sin_cos).
fn sin_cos(t: f32) -> vec2<f32> {
    let q = floor(t * 0.63661977236758134 + 0.5);
    let r = clamp(((t - q * 1.5703125) - q * 4.837513e-4) - q * 7.54979e-8, -0.8, 0.8);
    let z = r * r;
    let s = r + r * z * (-1.6666655e-1 + z * (8.332161e-3 + z * -1.9515296e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.1666646e-2 + z * (-1.3887316e-3 + z * 2.4433157e-5));
    let quadrant = u32(q - 4.0 * floor(q * 0.25)) & 3u;
    var v = vec2<f32>(s, c);
    if ((quadrant & 1u) == 1u) {
        v = vec2<f32>(c, -s);
    }
    if ((quadrant & 2u) == 2u) {
        v = -v;
    }
    return v;
}
";

/// RMSNorm over each row (one head's `D` values), then the rotary embedding, one workgroup per
/// row: a per-head norm fused with the `rope` that alone reads it (Gemma's QK-norm; the planner
/// decides, see `fusion.rs`). Each element is normalised exactly as the norm kernel does
/// (`x * inv * weight`), then rotated exactly as the rope kernel does. One set of rows (`x`,
/// `out`, geometry `p.head`, eps `p.rot.y`), or two (the queries' and the keys' QK-norm in one
/// dispatch: the second set's rows follow the first's, with `x2`, `weight2`, `out2`, `p.head2`
/// and eps `p.rot.z`).
const NORM_ROPE: &str = r"
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    {{MAIN}}
}
";

/// One set's functions of [`NORM_ROPE`] (`{{S}}`: the set's suffix, "" or "2"; `{{EPS}}` its
/// eps).
const NORM_ROPE_SET: &str = r"
// Element e of the row at base, normalised.
fn normed{{S}}(base: u32, e: u32, inv: Acc) -> Acc {
    return Acc(x{{S}}[base + e]) * inv{{WEIGHT}};
}

// Row `row` of the set, normalised then rotated (call in workgroup-uniform control flow).
fn norm_rope_row{{S}}(row: u32, lid: u32) {
    let h = p.head{{S}}.y;
    let base = row * h;
    let inv_rms = inverse_rms{{S}}(base, h, lid, Acc(bitcast<f32>({{EPS}})));
    let s = (row / p.head{{S}}.z) % p.head{{S}}.w;
    let position = f32(bitcast<i32>(positions[s]));
    let half = p.rot.x;
    for (var d = lid; d < h; d = d + WG) {
        let i = base + d;
        if (d >= 2u * half) {
            out{{S}}[i] = Act(normed{{S}}(base, d, inv_rms));
            continue;
        }
        {{PAIR}}
        let inv = p.inv_freq[pair / 4u][pair % 4u];
        let sc = sin_cos(position * inv) * bitcast<f32>(p.rot.w);
        let x0 = normed{{S}}(base, a - base, inv_rms);
        let x1 = normed{{S}}(base, a + offset - base, inv_rms);
        if (first) {
            out{{S}}[i] = Act(x0 * sc.y - x1 * sc.x);
        } else {
            out{{S}}[i] = Act(x0 * sc.x + x1 * sc.y);
        }
    }
}
";

/// Rotary embedding kernel of one style, with a table of `vec4s` inverse-frequency vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RopeKey {
    /// Which elements pair up.
    pub style: RopeStyle,
    /// `vec4<f32>`s of the uniform frequency table (`ceil(dims / 8)`).
    pub vec4s: u32,
    /// Invocations per workgroup.
    pub wg: u32,
    /// Element types.
    pub precision: Precision,
}

impl Kernel for RopeKey {
    fn storage_bindings(&self) -> u32 {
        3
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&params(self.vec4s));
        w.storage("x", Elem::Act);
        w.storage("positions", Elem::U32);
        w.storage("out", Elem::Act);
        w.push(SIN_COS);
        let body = fill(ROPE, &[("PAIR", &pair_of(self.style))]);
        w.element_main(self.wg, "p.head.x", &body);
        w
    }
}

/// The WGSL that pairs element `d` (at index `i`) of a row: whether it is its pair's `first`,
/// the `pair`'s index in the frequency table, the index `a` of the pair's first element and
/// the `offset` of its second.
fn pair_of(style: RopeStyle) -> &'static str {
    match style {
        RopeStyle::Neox => {
            "let first = d < half;
    let pair = select(d - half, d, first);
    let a = select(i - half, i, first);
    let offset = half;"
        }
        RopeStyle::GptJ => {
            "let first = (d & 1u) == 0u;
    let pair = d / 2u;
    let a = i - (d & 1u);
    let offset = 1u;"
        }
    }
}

/// The per-head RMSNorm fused with the rotary embedding (one workgroup per row), over one set
/// of rows or two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NormRopeKey {
    /// Which elements pair up.
    pub style: RopeStyle,
    /// `vec4<f32>`s of the uniform frequency table.
    pub vec4s: u32,
    /// Threads per row.
    pub wg: u32,
    /// Whether the norm multiplies by a weight (binding 2; both sets' norms when `two`).
    pub weighted: bool,
    /// Whether a second set of rows follows the first (weighted: bindings 5, 6 and 7).
    pub two: bool,
    /// Element types.
    pub precision: Precision,
}

impl Kernel for NormRopeKey {
    fn storage_bindings(&self) -> u32 {
        3 + u32::from(self.weighted) + if self.two { 3 } else { 0 }
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 4
    }

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        if self.two {
            w.uniforms(&pair_params(self.vec4s));
        } else {
            w.uniforms(&params(self.vec4s));
        }
        w.storage("x", Elem::Act);
        w.storage_if(self.weighted, "weight", Elem::F32);
        w.storage("positions", Elem::U32);
        w.storage("out", Elem::Act);
        if self.two {
            // The second set (weighted: `fusion.rs` pairs weighted norms only).
            w.storage("x2", Elem::Act);
            w.storage("weight2", Elem::F32);
            w.storage("out2", Elem::Act);
        }
        w.reduce(self.wg);
        w.constant("WG", self.wg);
        w.push(SIN_COS);
        let set = |w: &mut Wgsl, suffix: &str, eps: &str| {
            let weight = if self.weighted {
                format!(" * Acc(weight{suffix}[e])")
            } else {
                String::new()
            };
            w.push(&inverse_rms(suffix));
            w.template(
                NORM_ROPE_SET,
                &[
                    ("WEIGHT", &weight),
                    ("PAIR", &pair_of(self.style)),
                    ("S", &suffix),
                    ("EPS", &eps),
                ],
            );
        };
        set(&mut w, "", "p.rot.y");
        let main = if self.two {
            set(&mut w, "2", "p.rot.z");
            "if (row < p.head.x) {
        norm_rope_row(row, lid);
    } else if (row - p.head.x < p.head2.x) {
        norm_rope_row2(row - p.head.x, lid);
    }"
        } else {
            "if (row < p.head.x) {
        norm_rope_row(row, lid);
    }"
        };
        w.template(NORM_ROPE, &[("MAIN", &main)]);
        w
    }
}

/// The table's `vec4` count for `dims` rotary dims (at least one).
fn vec4s(dims: u32) -> u32 {
    (dims / 2).div_ceil(4).max(1)
}

/// A rope's uniform fields for the bound shapes: the `head` and `rot` vectors and the
/// frequency table.
struct RopeFields {
    rows: usize,
    head_dim: usize,
    head: [u32; 4],
    rot: [u32; 4],
    table: Vec<f32>,
}

/// A rope's rows, head dim and uniform fields for the bound shapes. The `head` field's first
/// word is the element count (the rope kernel: a thread per element) or, for the fused
/// norm-and-rope kernel (`fused_eps` given), the row count, with the norm's eps beside the pair
/// count.
fn rope_uniforms(ctx: &PlanContext<'_>, rope: &Rope, fused_eps: Option<f32>) -> Result<RopeFields> {
    let shape = ctx.shape(rope.x)?;
    let rank = shape.len();
    let n = ctx.numel(rope.x)?;
    if rank < 3 || ctx.numel(rope.out)? != n {
        return Err(Error::invalid_program(
            "rope: x must be [.., S, H, D] and out of its size",
        ));
    }
    let (seq, heads, head_dim) = (shape[rank - 3], shape[rank - 2], shape[rank - 1]);
    if ctx.shape(rope.positions)? != [seq] {
        return Err(Error::invalid_program(format!(
            "rope: positions are {:?}, expected [{seq}]",
            ctx.shape(rope.positions)?
        )));
    }
    if rope.dims as usize / 2 > MAX_PAIRS {
        return Err(Error::not_supported(format!(
            "rope: dims = {} exceeds the WebGPU kernel's {} rotary dims",
            rope.dims,
            2 * MAX_PAIRS
        )));
    }
    if rope.dims as usize > head_dim {
        return Err(Error::invalid_program("rope: dims exceed the head dim"));
    }
    let table = rope.inverse_frequencies();
    let rows = n.checked_div(head_dim).unwrap_or(0);
    let (first, eps) = match fused_eps {
        None => (to_u32(n, "element count")?, 0),
        Some(eps) => (to_u32(rows, "rows")?, eps.to_bits()),
    };
    Ok(RopeFields {
        rows,
        head_dim,
        head: [
            first,
            to_u32(head_dim, "head dim")?,
            to_u32(heads, "heads")?,
            to_u32(seq, "sequence length")?,
        ],
        rot: [
            to_u32(table.len(), "rotary pairs")?,
            eps,
            0,
            rope.scaling.attn_factor.to_bits(),
        ],
        table,
    })
}

/// The one-set kernels' uniform words.
fn one_set_uniforms(rope: &Rope, fields: &RopeFields) -> Result<Vec<u32>> {
    Uniforms::new(&params(vec4s(rope.dims)))
        .vec4("head", fields.head)
        .vec4("rot", fields.rot)
        .table("inv_freq", &fields.table)
        .finish()
}

impl GpuOp for Rope {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        let uniforms = one_set_uniforms(self, &rope_uniforms(ctx, self, None)?)?;
        let Some(workgroups) = ctx.grid_for_threads(ctx.numel(self.x)?)? else {
            return Ok(Vec::new());
        };
        Ok(vec![Dispatch {
            key: KernelKey::new(RopeKey {
                style: self.style,
                vec4s: vec4s(self.dims),
                wg: ctx.config.workgroup_size,
                precision: ctx.precision(self.x, Precision::F32),
            }),
            uniforms,
            bindings: vec![
                Binding::Tensor(self.x),
                Binding::Tensor(self.positions),
                Binding::Tensor(self.out),
            ],
            workgroups,
        }])
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        if self.dims as usize / 2 > MAX_PAIRS {
            return Vec::new();
        }
        vec![KernelKey::new(RopeKey {
            style: self.style,
            vec4s: vec4s(self.dims),
            wg: config.workgroup_size,
            precision: floats.precision(self.x, Precision::F32),
        })]
    }
}

/// `out = rope(rms_norm(x))` in one pass: `norm` (over each head's values) fused with the
/// `rope` that alone reads its result.
///
/// # Errors
/// As either op's own dispatch.
pub(crate) fn norm_rope(
    ctx: &PlanContext<'_>,
    norm: &RmsNorm,
    rope: &Rope,
) -> Result<Vec<Dispatch>> {
    ctx.require_f32(&[norm.x, rope.out])?;
    if ctx.shape(norm.x)? != ctx.shape(rope.x)? {
        return Err(Error::invalid_program(
            "rms_norm + rope: the norm's input is not the rope's shape",
        ));
    }
    let fields = rope_uniforms(ctx, rope, Some(norm.eps))?;
    let (rows, head_dim) = (fields.rows, fields.head_dim);
    let uniforms = one_set_uniforms(rope, &fields)?;
    if let Some(weight) = norm.weight {
        ctx.require_f32(&[weight])?;
        check_vector(ctx, "rms_norm weight", weight, head_dim)?;
    }
    let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::new(NormRopeKey {
            style: rope.style,
            vec4s: vec4s(rope.dims),
            wg: row_workgroup(ctx, head_dim),
            weighted: norm.weight.is_some(),
            two: false,
            precision: ctx.precision(norm.x, Precision::F32),
        }),
        uniforms,
        bindings: [
            Some(norm.x),
            norm.weight,
            Some(rope.positions),
            Some(rope.out),
        ]
        .into_iter()
        .flatten()
        .map(Binding::Tensor)
        .collect(),
        workgroups,
    }])
}

/// The kernels of [`norm_rope`] under `config`.
pub(crate) fn norm_rope_kernels(
    norm: &RmsNorm,
    rope: &Rope,
    config: KernelConfig,
    floats: &TensorFloats,
) -> Vec<KernelKey> {
    let precision = floats.precision(norm.x, Precision::F32);
    norm_rope_keys(rope, norm.weight.is_some(), false, config, precision)
}

/// The norm-and-rope kernels for `rope` under `config`, in every row workgroup size (none
/// when `dims` exceeds the uniform table).
fn norm_rope_keys(
    rope: &Rope,
    weighted: bool,
    two: bool,
    config: KernelConfig,
    precision: Precision,
) -> Vec<KernelKey> {
    if rope.dims as usize / 2 > MAX_PAIRS {
        return Vec::new();
    }
    row_workgroups(config)
        .map(|wg| {
            KernelKey::new(NormRopeKey {
                style: rope.style,
                vec4s: vec4s(rope.dims),
                wg,
                weighted,
                two,
                precision,
            })
        })
        .to_vec()
}

/// Whether two norm-and-rope pairs can run as one dispatch, whatever the shapes ([`norm_rope_two`]
/// also needs one head dim): both norms weighted, the ropes of one style, dims, base and
/// positions.
pub(crate) fn pairs_share_a_dispatch(first: (&RmsNorm, &Rope), second: (&RmsNorm, &Rope)) -> bool {
    let [(norm, rope), (norm2, rope2)] = [first, second];
    norm.weight.is_some()
        && norm2.weight.is_some()
        && rope.style == rope2.style
        && rope.dims == rope2.dims
        && rope.base.to_bits() == rope2.base.to_bits()
        && rope.scaling == rope2.scaling
        && rope.positions == rope2.positions
}

/// Two per-head norms each fused with its rope (the queries' and the keys' QK-norm) in one
/// dispatch: `first.1.out = rope(rms_norm(first.0.x))`, the same for `second`, the second's
/// rows after the first's. Both norms weighted; both ropes of one style, dims, base and
/// scaling, over one positions tensor and one head dim.
///
/// # Errors
/// As the pairs' own dispatches; `InvalidProgram` when the two differ in what they must share.
pub(crate) fn norm_rope_two(
    ctx: &PlanContext<'_>,
    first: (&RmsNorm, &Rope),
    second: (&RmsNorm, &Rope),
) -> Result<Vec<Dispatch>> {
    let [(norm, rope), (norm2, rope2)] = [first, second];
    let (true, Some(weight), Some(weight2)) = (
        pairs_share_a_dispatch(first, second),
        norm.weight,
        norm2.weight,
    ) else {
        return Err(Error::invalid_program(
            "rms_norm + rope twice: a norm without a weight, or ropes that differ in style, \
             dims, base or positions",
        ));
    };
    for (n, r) in [first, second] {
        ctx.require_f32(&[n.x, r.out])?;
        if ctx.shape(n.x)? != ctx.shape(r.x)? {
            return Err(Error::invalid_program(
                "rms_norm + rope: the norm's input is not the rope's shape",
            ));
        }
    }
    let fields = rope_uniforms(ctx, rope, Some(norm.eps))?;
    let fields2 = rope_uniforms(ctx, rope2, Some(norm2.eps))?;
    let (rows, head_dim) = (fields.rows, fields.head_dim);
    let (rows2, head_dim2) = (fields2.rows, fields2.head_dim);
    if head_dim != head_dim2 {
        return Err(Error::invalid_program(format!(
            "rms_norm + rope twice: head dims {head_dim} and {head_dim2} differ"
        )));
    }
    ctx.require_f32(&[weight, weight2])?;
    check_vector(ctx, "rms_norm weight", weight, head_dim)?;
    check_vector(ctx, "rms_norm weight", weight2, head_dim)?;
    let Some(total) = rows.checked_add(rows2) else {
        return Err(Error::out_of_resources(
            "rms_norm + rope twice: too many rows",
        ));
    };
    let Some(workgroups) = grid_1d(total, ctx.max_workgroups)? else {
        return Ok(Vec::new());
    };
    // The first set's rotation with the second's eps beside its own, then the second's
    // geometry, then the shared frequency table.
    let mut rot = fields.rot;
    rot[2] = norm2.eps.to_bits();
    let block = Uniforms::new(&pair_params(vec4s(rope.dims)))
        .vec4("head", fields.head)
        .vec4("rot", rot)
        .vec4("head2", fields2.head)
        .table("inv_freq", &fields.table)
        .finish()?;
    Ok(vec![Dispatch {
        key: KernelKey::new(NormRopeKey {
            style: rope.style,
            vec4s: vec4s(rope.dims),
            wg: row_workgroup(ctx, head_dim),
            weighted: true,
            two: true,
            precision: ctx.precision(norm.x, Precision::F32),
        }),
        uniforms: block,
        bindings: [
            norm.x,
            weight,
            rope.positions,
            rope.out,
            norm2.x,
            weight2,
            rope2.out,
        ]
        .into_iter()
        .map(Binding::Tensor)
        .collect(),
        workgroups,
    }])
}

/// The kernels of [`norm_rope_two`] for `rope` under `config`.
pub(crate) fn norm_rope_two_kernels(
    norm: &RmsNorm,
    rope: &Rope,
    config: KernelConfig,
    floats: &TensorFloats,
) -> Vec<KernelKey> {
    let precision = floats.precision(norm.x, Precision::F32);
    norm_rope_keys(rope, true, true, config, precision)
}
