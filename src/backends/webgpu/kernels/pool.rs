//! Masked mean pooling over the sequence (sentence-transformers' pooling).

use crate::backends::webgpu::kernels::{
    Binding, Dispatch, KernelKey, PlanContext, Uniforms, to_u32,
};
use crate::error::{Error, ErrorCode, Result};
use crate::program::TensorId;

/// `out[b, h]` = mean of `x[b, s, h]` over the positions `s` where `mask[b, s]` is non-zero.
///
/// # Errors
/// `InvalidProgram` unless `x` is `[B, S, H]`, `mask` `[B, S]` and `out` `[B, H]`;
/// `OutOfResources` for grids too large.
pub(crate) fn mean_pool(
    ctx: &PlanContext<'_>,
    x: TensorId,
    mask: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let [b, s, h] = *ctx.shape(x)? else {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!(
                "mean_pool: x has shape {:?}, expected [B, S, H]",
                ctx.shape(x)?
            ),
        ));
    };
    if ctx.shape(mask)? != [b, s] || ctx.shape(out)? != [b, h] {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!(
                "mean_pool: mask {:?} / out {:?} do not match x [{b}, {s}, {h}]",
                ctx.shape(mask)?,
                ctx.shape(out)?
            ),
        ));
    }
    let Some(workgroups) = ctx.grid_for_threads(b * h)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::MeanPool {
            mask: ctx.dtype(mask)?,
            wg: ctx.config.workgroup_size,
        },
        uniforms: Uniforms::new()
            .vec4([
                to_u32(b, "batch")?,
                to_u32(s, "sequence")?,
                to_u32(h, "hidden")?,
                0,
            ])
            .finish(),
        bindings: vec![
            Binding::Tensor(x),
            Binding::Tensor(mask),
            Binding::Tensor(out),
        ],
        workgroups,
    }])
}
