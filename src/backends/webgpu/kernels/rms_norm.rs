//! `RmsNorm` on the GPU: one workgroup per row (32 threads up to 1024 elements, see `rows.rs`),
//! the mean square by the shared tree reduction, then `x * inverse_rms * weight` (or
//! `x * inverse_rms` without a weight: a kernel of its own, with one binding fewer).

use crate::backends::webgpu::kernels::rows::{
    REDUCE, check_vector, row_workgroup, row_workgroups, rows_of,
};
use crate::backends::webgpu::kernels::source::with_wg;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Uniforms, grid_1d,
    to_u32,
};
use crate::error::Result;
use crate::program::TensorDecl;
use crate::program::ops::RmsNorm;

const RMS_NORM: &str = r"
// RMS normalisation over the last dim H, one workgroup per row:
// out = x / sqrt(mean(x^2) + eps) * weight.
struct Params {
    // x: rows, y: H, z: eps (f32 bits)
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
{{WEIGHT_BINDING}}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let base = row * h;
    var q = 0.0;
    for (var j = lid; j < h; j = j + {{WG}}u) {
        let v = x[base + j];
        q = q + v * v;
    }
    let mean_square = reduce_sum(lid, q) / f32(h);
    let inv = 1.0 / sqrt(mean_square + bitcast<f32>(p.head.z));
    for (var j = lid; j < h; j = j + {{WG}}u) {
        out[base + j] = x[base + j] * inv{{WEIGHT}};
    }
}
";

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

/// RMS norm kernel, with or without its weight multiply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RmsNormKey {
    /// Whether the rows are multiplied by a weight.
    pub weighted: bool,
    /// Threads per row.
    pub wg: u32,
}

impl Kernel for RmsNormKey {
    fn storage_bindings(&self) -> u32 {
        2 + u32::from(self.weighted)
    }

    fn invocations(&self) -> u32 {
        self.wg
    }

    fn workgroup_storage_bytes(&self) -> u32 {
        self.wg * 4
    }

    fn body(&self) -> String {
        let replacements = if self.weighted { WEIGHTED } else { UNWEIGHTED };
        let body = replacements
            .iter()
            .fold(RMS_NORM.to_owned(), |text, (from, to)| {
                text.replace(from, to)
            });
        with_wg(&format!("{REDUCE}\n{body}"), self.wg)
    }
}

impl GpuOp for RmsNorm {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        ctx.require_f32(&[self.x, self.out])?;
        let (rows, h) = rows_of(ctx, "rms_norm", self.x, self.out)?;
        if let Some(weight) = self.weight {
            ctx.require_f32(&[weight])?;
            check_vector(ctx, "rms_norm weight", weight, h)?;
        }
        let Some(workgroups) = grid_1d(rows, ctx.max_workgroups)? else {
            return Ok(Vec::new());
        };
        Ok(vec![Dispatch {
            key: KernelKey::new(RmsNormKey {
                weighted: self.weight.is_some(),
                wg: row_workgroup(ctx, h),
            }),
            uniforms: Uniforms::new()
                .vec4([
                    to_u32(rows, "rows")?,
                    to_u32(h, "row length")?,
                    self.eps.to_bits(),
                    0,
                ])
                .finish(),
            bindings: [Some(self.x), self.weight, Some(self.out)]
                .into_iter()
                .flatten()
                .map(Binding::Tensor)
                .collect(),
            workgroups,
        }])
    }

    fn kernels(&self, _tensors: &[TensorDecl], config: KernelConfig) -> Vec<KernelKey> {
        let weighted = self.weight.is_some();
        row_workgroups(config)
            .map(|wg| KernelKey::new(RmsNormKey { weighted, wg }))
            .to_vec()
    }
}
