//! Embedding gather. Ids that are program inputs are range-checked on the host before anything
//! is dispatched (see `execute.rs`); ids computed on the GPU are checked by the kernel, which
//! never reads out of bounds and raises the op's tag in the status word instead.

use crate::backends::webgpu::kernels::{
    Binding, Dispatch, KernelKey, PlanContext, Uniforms, to_u32,
};
use crate::error::{Error, ErrorCode, Result};
use crate::program::{DType, TensorId};

/// `out = table[ids]`; `tag` (op index + 1) identifies the op in the status word.
///
/// # Errors
/// `InvalidProgram` for a table that is not `[V, H]`, float ids, or an `out` that is not
/// `ids.shape + [H]`; `OutOfResources` for grids or tags too large.
pub(crate) fn gather(
    ctx: &PlanContext<'_>,
    tag: usize,
    table: TensorId,
    ids: TensorId,
    out: TensorId,
) -> Result<Vec<Dispatch>> {
    let [vocab, hidden] = *ctx.shape(table)? else {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!(
                "gather: table has shape {:?}, expected [V, H]",
                ctx.shape(table)?
            ),
        ));
    };
    let ids_dtype = ctx.dtype(ids)?;
    if ids_dtype == DType::F32 {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            "gather: ids must be integers, got f32",
        ));
    }
    let mut expected = ctx.shape(ids)?.to_vec();
    expected.push(hidden);
    if ctx.shape(out)? != expected.as_slice() {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!(
                "gather: out has shape {:?}, expected {expected:?}",
                ctx.shape(out)?
            ),
        ));
    }
    let n = ctx.numel(out)?;
    let Some(workgroups) = ctx.grid_for_threads(n)? else {
        return Ok(Vec::new());
    };
    Ok(vec![Dispatch {
        key: KernelKey::Gather {
            ids: ids_dtype,
            wg: ctx.config.workgroup_size,
        },
        uniforms: Uniforms::new()
            .vec4([
                to_u32(n, "element count")?,
                to_u32(hidden, "embedding width")?,
                to_u32(vocab, "vocabulary size")?,
                to_u32(tag, "op tag")?,
            ])
            .finish(),
        bindings: vec![
            Binding::Tensor(table),
            Binding::Tensor(ids),
            Binding::Tensor(out),
            Binding::Status,
        ],
        workgroups,
    }])
}
