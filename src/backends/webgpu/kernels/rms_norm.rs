//! `RmsNorm` on the GPU: one workgroup per row (32 threads up to 1024 elements, see `rows.rs`),
//! the mean square by the shared tree reduction, then `x * inverse_rms * weight` (or
//! `x * inverse_rms` without a weight: a kernel of its own, with one binding fewer). The
//! residual form adds a second tensor to each result in the same pass: an RMSNorm fused with
//! the `add` that is its only reader (Gemma's post-norms before the residual add; the planner
//! decides, see `fusion.rs`).

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
