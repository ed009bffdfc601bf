//! Element-wise f32 ops: unary functions, `Scale`, and broadcasting binary ops.

use crate::backends::webgpu::kernels::{
    Binding, Dispatch, KernelKey, PlanContext, UnaryKind, Uniforms, coalesce, contiguous_strides,
    to_u32,
};
use crate::error::{Error, ErrorCode, Result};
use crate::program::{BinaryOp, TensorId};

/// `out = f(x)` (with `scale`/`bias` used by [`UnaryKind::Scale`]).
///
/// # Errors
/// `InvalidProgram` when `x` and `out` differ in size; `OutOfResources` for grids too large.
pub(crate) fn unary(
    ctx: &PlanContext<'_>,
    op: UnaryKind,
    x: TensorId,
    out: TensorId,
    scale: f32,
    bias: f32,
) -> Result<Vec<Dispatch>> {
    let n = ctx.numel(out)?;
    if ctx.numel(x)? != n {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!("{op:?}: input has {} elements, output {n}", ctx.numel(x)?),
        ));
    }
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    let uniforms = Uniforms::new()
        .vec4([
            to_u32(n, "element count")?,
            scale.to_bits(),
            bias.to_bits(),
            0,
        ])
        .finish();
    Ok(vec![Dispatch {
        key: KernelKey::Unary {
            op,
            wg: ctx.config.workgroup_size,
        },
        uniforms,
        bindings: vec![Binding::Tensor(x), Binding::Tensor(out)],
        workgroups,
    }])
}

/// Strides of `input` viewed with `out_shape` under NumPy broadcasting: right-aligned, 0 where
/// the input's extent is 1 (or the dim is missing).
///
/// # Errors
/// `InvalidProgram` when the shapes do not broadcast.
pub(crate) fn broadcast_strides(input: &[usize], out_shape: &[usize]) -> Result<Vec<usize>> {
    if input.len() > out_shape.len() {
        return Err(broadcast_error(input, out_shape));
    }
    let own = contiguous_strides(input);
    let lead = out_shape.len() - input.len();
    let mut strides = vec![0usize; out_shape.len()];
    for (d, &extent) in input.iter().enumerate() {
        let target = out_shape[lead + d];
        if extent == target {
            strides[lead + d] = if extent == 1 { 0 } else { own[d] };
        } else if extent != 1 {
            return Err(broadcast_error(input, out_shape));
        }
    }
    Ok(strides)
}

fn broadcast_error(input: &[usize], out_shape: &[usize]) -> Error {
    Error::new(
        ErrorCode::InvalidProgram,
        format!("shape {input:?} does not broadcast to {out_shape:?}"),
    )
}

/// `out = a (op) b` with broadcasting.
///
/// # Errors
/// `InvalidProgram` when the shapes do not broadcast to `out`; `NotSupported` when more than
/// eight dims remain after coalescing.
pub(crate) fn binary(
    ctx: &PlanContext<'_>,
    op: BinaryOp,
    a: TensorId,
    b: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let out_shape = ctx.shape(out)?;
    let a_strides = broadcast_strides(ctx.shape(a)?, out_shape)?;
    let b_strides = broadcast_strides(ctx.shape(b)?, out_shape)?;
    let n = ctx.numel(out)?;
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    let (shape, strides) = coalesce(out_shape, &[a_strides, b_strides]);
    let uniforms = Uniforms::new()
        .vec4([
            to_u32(n, "element count")?,
            to_u32(shape.len(), "rank")?,
            0,
            0,
        ])
        .dims8(&shape, "broadcast shape")?
        .dims8(&strides[0], "broadcast strides")?
        .dims8(&strides[1], "broadcast strides")?
        .finish();
    Ok(vec![Dispatch {
        key: KernelKey::Binary {
            op,
            wg: ctx.config.workgroup_size,
        },
        uniforms,
        bindings: vec![Binding::Tensor(a), Binding::Tensor(b), Binding::Tensor(out)],
        workgroups,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_strides_follow_numpy() {
        assert_eq!(
            broadcast_strides(&[3, 4], &[2, 3, 4]).unwrap(),
            vec![0, 4, 1]
        );
        assert_eq!(broadcast_strides(&[4], &[2, 3, 4]).unwrap(), vec![0, 0, 1]);
        assert_eq!(
            broadcast_strides(&[2, 1, 4], &[2, 3, 4]).unwrap(),
            vec![4, 0, 1]
        );
        assert_eq!(broadcast_strides(&[], &[5]).unwrap(), vec![0]);
        assert_eq!(
            broadcast_strides(&[3], &[2, 4]).unwrap_err().code(),
            ErrorCode::InvalidProgram
        );
        assert!(broadcast_strides(&[1, 2, 3], &[2, 3]).is_err());
    }
}
