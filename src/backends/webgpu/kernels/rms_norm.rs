//! `RmsNorm` on the GPU: one workgroup per row (32 threads up to 1024 elements, see `rows.rs`;
//! the builder's `row_main` prologue),
//! the mean square by the shared tree reduction, then `x * inverse_rms * weight` (or
//! `x * inverse_rms` without a weight: a kernel of its own, with one binding fewer). The
//! residual form adds a second tensor to each result in the same pass: an RMSNorm fused with
//! the `add` that is its only reader (Gemma's post-norms before the residual add). The
//! add-then-norm form writes the residual sum `residual + x` (or `residual + rms_norm(x)`) and
//! normalises that sum in the same pass: the residual add fused with the next layer's pre-norm
//! (Llama, Qwen; Gemma with its post-norm before the add). The planner decides which to use
//! (see `fusion.rs`).

use crate::backends::webgpu::kernels::TensorFloats;
use crate::backends::webgpu::kernels::rows::{
    ROW_PARAMS, check_vector, row_workgroup, row_workgroups, rows_of,
};
use crate::backends::webgpu::kernels::wgsl::fill;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, Elem, Field, GpuOp, Kernel, KernelConfig, KernelKey, PlanContext, Precision,
    Uniforms, Wgsl, grid_1d, to_u32,
};
use crate::error::{Error, Result};
use crate::program::ops::RmsNorm;
use crate::program::{TensorDecl, TensorId};

/// The norm's row body (after the builder's `row_main` prologue): out = x / sqrt(mean(x^2) +
/// eps) * weight (residual form: residual + that).
const RMS_NORM: &str = r"
    let inv = inverse_rms(base, h, lid, Acc(bitcast<f32>(p.head.z)));
    for (var j = lid; j < h; j = j + WG) {
        out[base + j] = Act({{RESIDUAL}}Acc(x[base + j]) * inv{{WEIGHT}});
    }
";

/// WGSL `inverse_rms{{S}}(base, h, lid, eps)`: `1 / sqrt(mean(x^2) + eps)` over the `h` values
/// of binding `x{{S}}` from `base`, summed by the workgroup (the builder's tree reduction; call
/// it in workgroup-uniform control flow).
const INVERSE_RMS: &str = "fn inverse_rms{{S}}(base: u32, h: u32, lid: u32, eps: Acc) -> Acc {
    var q = Acc(0.0);
    for (var j = lid; j < h; j = j + WG) {
        let v = Acc(x{{S}}[base + j]);
        q = q + v * v;
    }
    let mean_square = reduce_sum(lid, q) / Acc(h);
    return 1.0 / sqrt(mean_square + eps);
}
";

/// The norm kernel's and the fused norm-and-rope kernel's (`rope.rs`) `inverse_rms` over the
/// binding `x` + `suffix` (`inverse_rms` + `suffix`).
pub(crate) fn inverse_rms(suffix: &str) -> String {
    fill(INVERSE_RMS, &[("S", &suffix)])
}

/// RMS norm kernel, with or without its weight multiply, with or without a residual added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RmsNormKey {
    /// Whether the rows are multiplied by a weight.
    pub weighted: bool,
    /// Threads per row.
    pub wg: u32,
    /// Whether a residual tensor (the last binding) is added to each result.
    pub residual: bool,
    /// Element types.
    pub precision: Precision,
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

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&ROW_PARAMS);
        w.storage("x", Elem::Act);
        w.storage_if(self.weighted, "weight", Elem::F32);
        w.storage("out", Elem::Act);
        w.storage_if(self.residual, "residual", Elem::Act);
        w.push(&inverse_rms(""));
        let body = fill(
            RMS_NORM,
            &[
                (
                    "RESIDUAL",
                    &if self.residual {
                        "Acc(residual[base + j]) + "
                    } else {
                        ""
                    },
                ),
                (
                    "WEIGHT",
                    &if self.weighted {
                        " * Acc(weight[j])"
                    } else {
                        ""
                    },
                ),
            ],
        );
        w.reduce(self.wg);
        w.row_main(self.wg, &body);
        w
    }
}

impl GpuOp for RmsNorm {
    fn dispatches(&self, ctx: &PlanContext<'_>, _index: usize) -> Result<Vec<Dispatch>> {
        norm(ctx, self, None, self.out)
    }

    fn kernels(
        &self,
        _tensors: &[TensorDecl],
        config: KernelConfig,
        floats: &TensorFloats,
    ) -> Vec<KernelKey> {
        norm_kernels(self, config, false, floats)
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
pub(crate) fn norm_add_kernels(
    rms: &RmsNorm,
    config: KernelConfig,
    floats: &TensorFloats,
) -> Vec<KernelKey> {
    norm_kernels(rms, config, true, floats)
}

fn norm_kernels(
    rms: &RmsNorm,
    config: KernelConfig,
    residual: bool,
    floats: &TensorFloats,
) -> Vec<KernelKey> {
    let weighted = rms.weight.is_some();
    let precision = floats.precision(rms.x, Precision::F32);
    row_workgroups(config)
        .map(|wg| {
            KernelKey::new(RmsNormKey {
                weighted,
                wg,
                residual,
                precision,
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
            precision: ctx.precision(rms.x, Precision::F32),
        }),
        uniforms: Uniforms::new(&ROW_PARAMS)
            .vec4(
                "head",
                [
                    to_u32(rows, "rows")?,
                    to_u32(h, "row length")?,
                    rms.eps.to_bits(),
                    0,
                ],
            )
            .finish()?,
        bindings: [Some(rms.x), rms.weight, Some(out), residual]
            .into_iter()
            .flatten()
            .map(Binding::Tensor)
            .collect(),
        workgroups,
    }])
}

/// The add-then-norm kernel's uniform block.
const ADD_NORM_PARAMS: [Field; 1] = [Field::vec4(
    "head",
    "x: rows, y: H, z: the first norm's eps, w: the second norm's eps (f32 bits)",
)];

/// The add-then-norm kernel's row body: per row, `sum = residual + t` with `t = x` or
/// `t = x * inverse_rms(x) (* first_weight)`, written to `sum`, then
/// `out = sum * inverse_rms(sum) (* next_weight)`. Each thread reads back only the sums it wrote
/// itself, so the row needs no storage barrier; the second mean square is of the sums as
/// stored (what the unfused norm reads).
const ADD_NORM: &str = r"
    {{FIRST_INV}}
    var q = Acc(0.0);
    for (var j = lid; j < h; j = j + WG) {
        let s = Act(Acc(residual[base + j]) + Acc(x[base + j]){{FIRST_SCALE}});
        summed[base + j] = s;
        q = q + Acc(s) * Acc(s);
    }
    let mean_square = reduce_sum(lid, q) / Acc(h);
    let inv = 1.0 / sqrt(mean_square + Acc(bitcast<f32>(p.head.w)));
    for (var j = lid; j < h; j = j + WG) {
        out[base + j] = Act(Acc(summed[base + j]) * inv{{NEXT_SCALE}});
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
    /// Element types.
    pub precision: Precision,
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

    fn wgsl(&self) -> Wgsl {
        let mut w = Wgsl::new(self.precision);
        w.uniforms(&ADD_NORM_PARAMS);
        w.storage("x", Elem::Act);
        w.storage("residual", Elem::Act);
        w.storage("summed", Elem::Act);
        w.storage("out", Elem::Act);
        w.storage_if(self.first_weighted(), "first_weight", Elem::F32);
        w.storage_if(self.next_weighted, "next_weight", Elem::F32);
        let mut first_scale = String::new();
        let mut first_inv = "";
        if self.first.is_some() {
            w.push(&inverse_rms(""));
            first_scale.push_str(" * first_inv");
            first_inv = "let first_inv = inverse_rms(base, h, lid, Acc(bitcast<f32>(p.head.z)));";
        }
        if self.first_weighted() {
            first_scale.push_str(" * Acc(first_weight[j])");
        }
        let next_scale = if self.next_weighted {
            " * Acc(next_weight[j])"
        } else {
            ""
        };
        let body = fill(
            ADD_NORM,
            &[
                ("FIRST_INV", &first_inv),
                ("FIRST_SCALE", &first_scale),
                ("NEXT_SCALE", &next_scale),
            ],
        );
        w.reduce(self.wg);
        w.row_main(self.wg, &body);
        w
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
            precision: ctx.precision(x, Precision::F32),
        }),
        uniforms: Uniforms::new(&ADD_NORM_PARAMS)
            .vec4(
                "head",
                [
                    to_u32(rows, "rows")?,
                    to_u32(h, "row length")?,
                    first_eps.to_bits(),
                    next.eps.to_bits(),
                ],
            )
            .finish()?,
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
    x: TensorId,
    config: KernelConfig,
    floats: &TensorFloats,
) -> Vec<KernelKey> {
    let precision = floats.precision(x, Precision::F32);
    row_workgroups(config)
        .map(|wg| {
            KernelKey::new(AddNormKey {
                first: first.map(|first| first.weight.is_some()),
                next_weighted: next.weight.is_some(),
                wg,
                precision,
            })
        })
        .to_vec()
}
