//! `RmsNorm` on the GPU: one workgroup per row (32 threads up to 1024 elements, see `rows.rs`),
//! the mean square by the shared tree reduction, then `x * inverse_rms * weight` (or
//! `x * inverse_rms` without a weight: a kernel of its own, with one binding fewer). The
//! residual form adds a second tensor to each result in the same pass: an RMSNorm fused with
//! the `add` that is its only reader (Gemma's post-norms before the residual add). The
//! add-then-norm form writes the residual sum `residual + x` (or `residual + rms_norm(x)`) and
//! normalises that sum in the same pass: the residual add fused with the next layer's pre-norm
//! (Llama, Qwen; Gemma with its post-norm before the add). The planner decides which to use
//! (see `fusion.rs`).

use crate::backends::webgpu::kernels::rows::{
    REDUCE, check_vector, row_workgroup, row_workgroups, rows_of,
};
use crate::backends::webgpu::kernels::source::with_wg;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms, grid_1d,
    to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::RmsNorm;
use crate::program::{TensorDecl, TensorId};

const RMS_NORM: &str = r"
// RMS normalisation over the last dim H, one workgroup per row:
// out = x / sqrt(mean(x^2) + eps) * weight (residual form: residual + that).
struct Params {
    // x: rows, y: H, z: eps (f32 bits)
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
{{WEIGHT_BINDING}}
{{RESIDUAL_BINDING}}

{{INVERSE_RMS}}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let base = row * h;
    let inv = inverse_rms(base, h, lid, bitcast<f32>(p.head.z));
    for (var j = lid; j < h; j = j + {{WG}}u) {
        out[base + j] = {{RESIDUAL}}x[base + j] * inv{{WEIGHT}};
    }
}
";

/// WGSL `inverse_rms(base, h, lid, eps)`: `1 / sqrt(mean(x^2) + eps)` over the `h` values of
/// binding `x` from `base`, summed by the workgroup (the shared tree reduction, `REDUCE`;
/// call it in workgroup-uniform control flow). The norm kernel's and the fused norm-and-rope
/// kernel's (`rope.rs`).
pub(crate) const INVERSE_RMS: &str =
    "fn inverse_rms(base: u32, h: u32, lid: u32, eps: f32) -> f32 {
    var q = 0.0;
    for (var j = lid; j < h; j = j + {{WG}}u) {
        let v = x[base + j];
        q = q + v * v;
    }
    let mean_square = reduce_sum(lid, q) / f32(h);
    return 1.0 / sqrt(mean_square + eps);
}";

/// The bindings and the scale of the weighted kernel.
const WEIGHTED: [(&str, &str); 2] = [
    (
        "{{WEIGHT_BINDING}}",
        "@group(0) @binding(2) var<storage, read_write> weight: array<f32>;\n\
         @group(0) @binding(3) var<storage, read_write> out: array<f32>;",
    ),
    ("{{WEIGHT}}", " * weight[j]"),
];
/// The same without a weight.
const UNWEIGHTED: [(&str, &str); 2] = [
    (
        "{{WEIGHT_BINDING}}",
        "@group(0) @binding(2) var<storage, read_write> out: array<f32>;",
    ),
    ("{{WEIGHT}}", ""),
];

/// RMS norm kernel, with or without its weight multiply, with or without a residual added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RmsNormKey {
    /// Whether the rows are multiplied by a weight.
    pub weighted: bool,
    /// Threads per row.
    pub wg: u32,
    /// Whether a residual tensor (the last binding) is added to each result.
    pub residual: bool,
}

impl Kernel for RmsNormKey {
    fn storage_bindings(&self) -> u32 {
        2 + u32::from(self.weighted) + u32::from(self.residual)
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 4
    }

    fn body(&self) -> String {
        let replacements = if self.weighted { WEIGHTED } else { UNWEIGHTED };
        let (residual_binding, residual) = if self.residual {
            let binding = 2 + u32::from(self.weighted) + 1;
            (
                format!(
                    "@group(0) @binding({binding}) var<storage, read_write> residual: array<f32>;"
                ),
                "residual[base + j] + ",
            )
        } else {
            (String::new(), "")
        };
        let body = replacements
            .iter()
            .fold(RMS_NORM.to_owned(), |text, (from, to)| {
                text.replace(from, to)
            })
            .replace("{{INVERSE_RMS}}", INVERSE_RMS)
            .replace("{{RESIDUAL_BINDING}}", &residual_binding)
            .replace("{{RESIDUAL}}", residual);
        with_wg(&format!("{REDUCE}\n{body}"), self.wg)
    }
}

impl GpuOp for RmsNorm {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        norm(ctx, self, None, self.out)
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        norm_kernels(self, config, false)
    }
}

/// `out = residual + rms_norm(x)` in one pass: `rms` fused with the `add` that adds its result
/// to `residual` (same shape) into `out`.
///
/// # Errors
/// As the norm's own dispatch; `InvalidProgram` when `residual` differs from the norm's shape.
pub(crate) fn norm_add(
    ctx: &PlanContext<'_>,
    rms: &RmsNorm,
    residual: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    ctx.require_f32(&[residual])?;
    if ctx.shape(residual)? != ctx.shape(rms.x)? {
        return Err(Error::invalid_program(format!(
            "rms_norm + add: residual has shape {:?}, the norm {:?}",
            ctx.shape(residual)?,
            ctx.shape(rms.x)?
        )));
    }
    norm(ctx, rms, Some(residual), out)
}

/// The kernels of [`norm_add`] for `rms` under `config`.
pub(crate) fn norm_add_kernels(rms: &RmsNorm, config: KernelConfig) -> Vec<KernelKey> {
    norm_kernels(rms, config, true)
}

fn norm_kernels(rms: &RmsNorm, config: KernelConfig, residual: bool) -> Vec<KernelKey> {
    let weighted = rms.weight.is_some();
    row_workgroups(config)
        .map(|wg| {
            KernelKey::new(RmsNormKey {
                weighted,
                wg,
                residual,
            })
        })
        .to_vec()
}

/// The norm's dispatch, writing `out` (with `residual` added where given).
fn norm(
    ctx: &PlanContext<'_>,
    rms: &RmsNorm,
    residual: Option<TensorId>,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    ctx.require_f32(&[rms.x, out])?;
    let (rows, h) = rows_of(ctx, "rms_norm", rms.x, out)?;
    if let Some(weight) = rms.weight {
        ctx.require_f32(&[weight])?;
        check_vector(ctx, "rms_norm weight", weight, h)?;
    }
    let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::new(RmsNormKey {
            weighted: rms.weight.is_some(),
            wg: row_workgroup(ctx, h),
            residual: residual.is_some(),
        }),
        uniforms: Uniforms::new()
            .vec4([
                to_u32(rows, "rows")?,
                to_u32(h, "row length")?,
                rms.eps.to_bits(),
                0,
            ])
            .finish(),
        bindings: [Some(rms.x), rms.weight, Some(out), residual]
            .into_iter()
            .flatten()
            .map(Binding::Tensor)
            .collect(),
        workgroups,
    }])
}

/// The add-then-norm kernel: per row, `sum = residual + t` with `t = x` or
/// `t = x * inverse_rms(x) (* first_weight)`, written to `sum`, then
/// `out = sum * inverse_rms(sum) (* next_weight)`. Each thread reads back only the sums it wrote
/// itself, so the row needs no storage barrier; the second mean square is of the sums as
/// stored (what the unfused norm reads).
const ADD_NORM: &str = r"
struct Params {
    // x: rows, y: H, z: the first norm's eps, w: the second norm's eps (f32 bits)
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> residual: array<f32>;
@group(0) @binding(3) var<storage, read_write> summed: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
{{WEIGHT_BINDINGS}}

{{INVERSE_RMS}}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let base = row * h;
    {{FIRST_INV}}
    var q = 0.0;
    for (var j = lid; j < h; j = j + {{WG}}u) {
        let s = residual[base + j] + x[base + j]{{FIRST_SCALE}};
        summed[base + j] = s;
        q = q + s * s;
    }
    let mean_square = reduce_sum(lid, q) / f32(h);
    let inv = 1.0 / sqrt(mean_square + bitcast<f32>(p.head.w));
    for (var j = lid; j < h; j = j + {{WG}}u) {
        out[base + j] = summed[base + j] * inv{{NEXT_SCALE}};
    }
}
";

/// The add-then-norm kernel ([`add_norm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AddNormKey {
    /// The norm before the add: `None` when the add reads `x` itself, else whether that norm
    /// multiplies by a weight.
    pub first: Option<bool>,
    /// Whether the norm of the sum multiplies by a weight.
    pub next_weighted: bool,
    /// Threads per row.
    pub wg: u32,
}

impl AddNormKey {
    /// Whether the first norm's weight is bound.
    fn first_weighted(&self) -> bool {
        self.first == Some(true)
    }
}

impl Kernel for AddNormKey {
    fn storage_bindings(&self) -> u32 {
        4 + u32::from(self.first_weighted()) + u32::from(self.next_weighted)
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 4
    }

    fn body(&self) -> String {
        let mut bindings = Vec::new();
        let mut binding = 5;
        let mut first_scale = String::new();
        if self.first.is_some() {
            first_scale.push_str(" * first_inv");
        }
        if self.first_weighted() {
            bindings.push(format!(
                "@group(0) @binding({binding}) var<storage, read_write> first_weight: array<f32>;"
            ));
            binding += 1;
            first_scale.push_str(" * first_weight[j]");
        }
        let next_scale = if self.next_weighted {
            bindings.push(format!(
                "@group(0) @binding({binding}) var<storage, read_write> next_weight: array<f32>;"
            ));
            " * next_weight[j]"
        } else {
            ""
        };
        let (inverse_rms, first_inv) = if self.first.is_some() {
            (
                INVERSE_RMS,
                "let first_inv = inverse_rms(base, h, lid, bitcast<f32>(p.head.z));",
            )
        } else {
            ("", "")
        };
        let body = ADD_NORM
            .replace("{{WEIGHT_BINDINGS}}", &bindings.join("\n"))
            .replace("{{INVERSE_RMS}}", inverse_rms)
            .replace("{{FIRST_INV}}", first_inv)
            .replace("{{FIRST_SCALE}}", &first_scale)
            .replace("{{NEXT_SCALE}}", next_scale);
        with_wg(&format!("{REDUCE}\n{body}"), self.wg)
    }
}

/// `sum = residual + (rms_norm(x) or x)` and `next.out = next(sum)` in one pass: the residual
/// add (after `first`, the norm that produces its operand, where given) fused with the norm
/// that reads its result. `x` is the first norm's input, or the add's operand without one.
///
/// # Errors
/// As the ops' own dispatches; `InvalidProgram` when `residual` differs from `x`'s shape or
/// `next` does not read `sum`.
pub(crate) fn add_norm(
    ctx: &PlanContext<'_>,
    first: Option<&RmsNorm>,
    x: TensorId,
    residual: TensorId,
    sum: TensorId,
    next: &RmsNorm,
) -> Result<Vec<Dispatch>> {
    let x = first.map_or(x, |first| first.x);
    ctx.require_f32(&[x, residual, sum, next.out])?;
    if ctx.shape(residual)? != ctx.shape(x)? || next.x != sum {
        return Err(Error::invalid_program(format!(
            "add + rms_norm: residual has shape {:?}, the add's other operand {:?}",
            ctx.shape(residual)?,
            ctx.shape(x)?
        )));
    }
    let (rows, h) = rows_of(ctx, "add + rms_norm", x, sum)?;
    rows_of(ctx, "add + rms_norm", sum, next.out)?;
    let weights: Vec<TensorId> = first
        .and_then(|first| first.weight)
        .into_iter()
        .chain(next.weight)
        .collect();
    for &weight in &weights {
        ctx.require_f32(&[weight])?;
        check_vector(ctx, "rms_norm weight", weight, h)?;
    }
    let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
        return Ok(Vec::new());
    };
    let first_eps = first.map_or(0.0, |first| first.eps);
    Ok(vec![Dispatch {
        key: KernelKey::new(AddNormKey {
            first: first.map(|first| first.weight.is_some()),
            next_weighted: next.weight.is_some(),
            wg: row_workgroup(ctx, h),
        }),
        uniforms: Uniforms::new()
            .vec4([
                to_u32(rows, "rows")?,
                to_u32(h, "row length")?,
                first_eps.to_bits(),
                next.eps.to_bits(),
            ])
            .finish(),
        bindings: [x, residual, sum, next.out]
            .into_iter()
            .chain(weights)
            .map(Binding::Tensor)
            .collect(),
        workgroups,
    }])
}

/// The kernels of [`add_norm`] under `config`.
pub(crate) fn add_norm_kernels(
    first: Option<&RmsNorm>,
    next: &RmsNorm,
    config: KernelConfig,
) -> Vec<KernelKey> {
    row_workgroups(config)
        .map(|wg| {
            KernelKey::new(AddNormKey {
                first: first.map(|first| first.weight.is_some()),
                next_weighted: next.weight.is_some(),
                wg,
            })
        })
        .to_vec()
}
