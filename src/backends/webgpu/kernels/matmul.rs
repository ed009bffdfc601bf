//! Batched matmul: shapes, transposes as strides, batch broadcasting, and the grid.

use crate::backends::webgpu::kernels::elementwise::broadcast_strides;
use crate::backends::webgpu::kernels::source::matmul_geometry;
use crate::backends::webgpu::kernels::{
    Binding, Dispatch, KernelKey, MatMulKernel, PlanContext, Uniforms, coalesce, to_u32,
};
use crate::error::{Error, ErrorCode, Result};
use crate::program::TensorId;

/// Most batch dims (after coalescing) the matmul kernels take.
pub(crate) const MAX_BATCH_DIMS: usize = 4;

/// The operands of one matmul op.
pub(crate) struct MatMulOperands {
    /// Left operand `[..., M, K]` (`[..., K, M]` when `transpose_a`).
    pub a: TensorId,
    /// Right operand `[..., K, N]` (`[..., N, K]` when `transpose_b`).
    pub b: TensorId,
    /// Optional `[N]` bias.
    pub bias: Option<TensorId>,
    /// Whether `a` is stored transposed.
    pub transpose_a: bool,
    /// Whether `b` is stored transposed.
    pub transpose_b: bool,
    /// Output `batch + [M, N]`.
    pub out: TensorId,
}

fn invalid(message: String) -> Error {
    Error::new(ErrorCode::InvalidProgram, message)
}

fn split_matrix(shape: &[usize], what: &str) -> Result<(Vec<usize>, usize, usize)> {
    match shape {
        [batch @ .., rows, cols] => Ok((batch.to_vec(), *rows, *cols)),
        _ => Err(invalid(format!(
            "matmul: {what} has rank {}, needs at least 2",
            shape.len()
        ))),
    }
}

fn vec4_of(values: &[usize], pad: u32, what: &str) -> Result<[u32; 4]> {
    let mut packed = [pad; 4];
    for (slot, &value) in packed.iter_mut().zip(values) {
        *slot = to_u32(value, what)?;
    }
    Ok(packed)
}

/// Plans one matmul with the program's matmul kernel.
///
/// # Errors
/// `InvalidProgram` for shapes that do not multiply or do not match `out`; `NotSupported` for
/// more than four batch dims after coalescing; `OutOfResources` for grids over the device limit.
pub(crate) fn matmul(ctx: &PlanContext<'_>, op: &MatMulOperands) -> Result<Vec<Dispatch>> {
    let (a_batch, a_rows, a_cols) = split_matrix(ctx.shape(op.a)?, "a")?;
    let (b_batch, b_rows, b_cols) = split_matrix(ctx.shape(op.b)?, "b")?;
    let (m, k) = if op.transpose_a {
        (a_cols, a_rows)
    } else {
        (a_rows, a_cols)
    };
    let (kb, n) = if op.transpose_b {
        (b_cols, b_rows)
    } else {
        (b_rows, b_cols)
    };
    if k != kb {
        return Err(invalid(format!("matmul: inner dims differ ({k} and {kb})")));
    }
    let (out_batch, out_m, out_n) = split_matrix(ctx.shape(op.out)?, "out")?;
    if (out_m, out_n) != (m, n) {
        return Err(invalid(format!(
            "matmul: out is [.., {out_m}, {out_n}], the product is [.., {m}, {n}]"
        )));
    }
    if let Some(bias) = op.bias
        && ctx.shape(bias)? != [n]
    {
        return Err(invalid(format!(
            "matmul: bias has shape {:?}, expected [{n}]",
            ctx.shape(bias)?
        )));
    }
    // A linear layer ([..., M, K] x [K, N] with one B for every batch): the batches of A are
    // consecutive rows, so fold them into M. One tall product fills the tiles that per-batch
    // products of a few rows each (e.g. 8 sentences x 14 tokens) would leave mostly empty.
    let b_batches: usize = b_batch.iter().product();
    let (out_batch, m) = if !op.transpose_a && b_batches == 1 && !a_batch.is_empty() {
        let rows = a_batch.iter().product::<usize>() * m;
        (Vec::new(), rows)
    } else {
        (out_batch, m)
    };
    let a_batch = if out_batch.is_empty() {
        Vec::new()
    } else {
        a_batch
    };
    let b_batch = if out_batch.is_empty() {
        Vec::new()
    } else {
        b_batch
    };
    let a_matrix = m * k;
    let b_matrix = k * n;
    let a_strides: Vec<usize> = broadcast_strides(&a_batch, &out_batch)?
        .into_iter()
        .map(|s| s * a_matrix)
        .collect();
    let b_strides: Vec<usize> = broadcast_strides(&b_batch, &out_batch)?
        .into_iter()
        .map(|s| s * b_matrix)
        .collect();
    let (batch_shape, batch_strides) = coalesce(&out_batch, &[a_strides, b_strides]);
    if batch_shape.len() > MAX_BATCH_DIMS {
        return Err(Error::new(
            ErrorCode::NotSupported,
            format!(
                "matmul: {} batch dims after coalescing; the WebGPU kernel takes {MAX_BATCH_DIMS}",
                batch_shape.len()
            ),
        ));
    }
    let batch: usize = out_batch.iter().product();
    if batch == 0 || m == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let (wgx, wgy, rm, rn, _) = matmul_geometry(ctx.config.matmul);
    let groups = [
        n.div_ceil((wgx * rn) as usize),
        m.div_ceil((wgy * rm) as usize),
        batch,
    ];
    let mut workgroups = [0u32; 3];
    for (slot, count) in workgroups.iter_mut().zip(groups) {
        *slot = u32::try_from(count)
            .ok()
            .filter(|&c| c <= ctx.max_workgroups)
            .ok_or_else(|| {
                Error::new(
                    ErrorCode::OutOfResources,
                    format!(
                        "matmul [{batch} x {m} x {k} x {n}] needs {count} workgroups in one \
                         dimension; the device allows {}",
                        ctx.max_workgroups
                    ),
                )
            })?;
    }
    let (a_sm, a_sk) = if op.transpose_a { (1, m) } else { (k, 1) };
    let (b_sk, b_sn) = if op.transpose_b { (1, k) } else { (n, 1) };
    let uniforms = Uniforms::new()
        .vec4([
            to_u32(m, "M")?,
            to_u32(n, "N")?,
            to_u32(k, "K")?,
            to_u32(batch_shape.len(), "batch rank")?,
        ])
        .vec4(vec4_of(&[a_sm, a_sk, b_sk, b_sn], 0, "matmul stride")?)
        .vec4(vec4_of(&batch_shape, 1, "batch dim")?)
        .vec4(vec4_of(&batch_strides[0], 0, "batch stride")?)
        .vec4(vec4_of(&batch_strides[1], 0, "batch stride")?)
        .finish();
    let mut bindings = vec![
        Binding::Tensor(op.a),
        Binding::Tensor(op.b),
        Binding::Tensor(op.out),
    ];
    bindings.extend(op.bias.map(Binding::Tensor));
    Ok(vec![Dispatch {
        key: KernelKey::MatMul {
            kernel: ctx.config.matmul,
            bias: op.bias.is_some(),
            f16: ctx.config.f16 && ctx.config.matmul != MatMulKernel::Naive,
        },
        uniforms,
        bindings,
        workgroups,
    }])
}
