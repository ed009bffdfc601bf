//! One op with concrete shapes to its dispatches (the family planners in `kernels`), and the
//! set of kernels a program can dispatch whatever its shapes (what `init` compiles).

use crate::backends::webgpu::kernels::matmul::MatMulOperands;
use crate::backends::webgpu::kernels::rows::small_row_workgroup;
use crate::backends::webgpu::kernels::{
    self, Dispatch, KernelConfig, KernelKey, PlanContext, UnaryKind, convert, elementwise, gather,
    layout, pool, rows,
};
use crate::backends::webgpu::{alias, plan};
use crate::error::{Error, ErrorCode, Result};
use crate::program::{DType, Op, Program, TensorId, UnaryOp};

fn invalid(message: String) -> Error {
    Error::new(ErrorCode::InvalidProgram, message)
}

fn require(ctx: &PlanContext<'_>, ids: &[TensorId], dtype: DType) -> Result<()> {
    for &id in ids {
        if ctx.dtype(id)? != dtype {
            return Err(invalid(format!(
                "tensor {id} is {}, the op needs {}",
                ctx.dtype(id)?.name(),
                dtype.name()
            )));
        }
    }
    Ok(())
}

fn unary_kind(op: UnaryOp) -> UnaryKind {
    match op {
        UnaryOp::Gelu => UnaryKind::Gelu,
        UnaryOp::Tanh => UnaryKind::Tanh,
        UnaryOp::Relu => UnaryKind::Relu,
    }
}

pub(crate) fn op_dispatches(ctx: &PlanContext<'_>, index: usize, op: &Op) -> Result<Vec<Dispatch>> {
    match op {
        Op::Gather { table, ids, out } => {
            require(ctx, &[*table, *out], DType::F32)?;
            gather::gather(ctx, index + 1, *table, *ids, *out)
        }
        Op::Binary { op, a, b, out } => {
            require(ctx, &[*a, *b, *out], DType::F32)?;
            elementwise::binary(ctx, *op, *a, *b, *out)
        }
        Op::Scale {
            x,
            scale,
            bias,
            out,
        } => {
            require(ctx, &[*x, *out], DType::F32)?;
            elementwise::unary(ctx, UnaryKind::Scale, *x, *out, *scale, *bias)
        }
        Op::Unary { op, x, out } => {
            require(ctx, &[*x, *out], DType::F32)?;
            elementwise::unary(ctx, unary_kind(*op), *x, *out, 1.0, 0.0)
        }
        Op::MatMul {
            a,
            b,
            bias,
            transpose_a,
            transpose_b,
            out,
        } => {
            require(ctx, &[*a, *b, *out], DType::F32)?;
            require(ctx, bias.as_slice(), DType::F32)?;
            kernels::matmul::matmul(
                ctx,
                &MatMulOperands {
                    a: *a,
                    b: *b,
                    bias: *bias,
                    transpose_a: *transpose_a,
                    transpose_b: *transpose_b,
                    out: *out,
                },
            )
        }
        Op::LayerNorm {
            x,
            gamma,
            beta,
            eps,
            out,
        } => {
            require(ctx, &[*x, *gamma, *beta, *out], DType::F32)?;
            rows::layer_norm(ctx, *x, *gamma, *beta, *eps, *out)
        }
        Op::Softmax { x, mask, out } => {
            require(ctx, &[*x, *out], DType::F32)?;
            rows::softmax(ctx, *x, *mask, *out)
        }
        Op::Reshape { x, out } => {
            if ctx.dtype(*x)? != ctx.dtype(*out)? || ctx.numel(*x)? != ctx.numel(*out)? {
                return Err(invalid(format!(
                    "reshape of {} {:?} into {} {:?}",
                    ctx.dtype(*x)?.name(),
                    ctx.shape(*x)?,
                    ctx.dtype(*out)?.name(),
                    ctx.shape(*out)?
                )));
            }
            Ok(Vec::new())
        }
        Op::Permute { x, perm, out } => layout::permute(ctx, *x, perm, *out),
        Op::Slice {
            x,
            axis,
            start,
            end,
            out,
        } => layout::slice(ctx, *x, *axis, *start, *end, *out),
        Op::Concat { inputs, axis, out } => layout::concat(ctx, inputs, *axis, *out),
        Op::Cast { x, out } => convert::cast(ctx, *x, *out),
        Op::Range { out } => convert::range(ctx, *out),
        Op::MeanPool { x, mask, out } => {
            require(ctx, &[*x, *out], DType::F32)?;
            pool::mean_pool(ctx, *x, *mask, *out)
        }
        Op::L2Normalize { x, eps, out } => {
            require(ctx, &[*x, *out], DType::F32)?;
            rows::l2_normalize(ctx, *x, *eps, *out)
        }
    }
}

/// Every kernel `program` can dispatch under `config`, whatever the shapes: what `init`
/// compiles (row kernels in both their short-row and configured workgroup sizes). A unit test
/// checks that plans never use a kernel outside this set.
pub(crate) fn kernel_keys(program: &Program, config: KernelConfig) -> Vec<KernelKey> {
    let wg = config.workgroup_size;
    let dtype = |id: TensorId| program.tensors.get(id as usize).map(|t| t.dtype);
    let mut keys = Vec::new();
    for op in &program.ops {
        let key = match op {
            Op::Gather { ids, .. } => dtype(*ids).map(|ids| KernelKey::Gather { ids, wg }),
            Op::Binary { op, .. } => Some(KernelKey::Binary { op: *op, wg }),
            Op::Scale { .. } => Some(KernelKey::Unary {
                op: UnaryKind::Scale,
                wg,
            }),
            Op::Unary { op, .. } => Some(KernelKey::Unary {
                op: unary_kind(*op),
                wg,
            }),
            Op::MatMul { bias, .. } => Some(KernelKey::MatMul {
                kernel: config.matmul,
                bias: bias.is_some(),
                f16: config.f16 && config.matmul != kernels::MatMulKernel::Naive,
            }),
            Op::LayerNorm { .. } => Some(KernelKey::LayerNorm { wg }),
            Op::Softmax { mask, .. } => Some(KernelKey::Softmax {
                mask: mask.and_then(dtype),
                wg,
            }),
            Op::Reshape { .. } => None,
            Op::Permute { .. } | Op::Slice { .. } | Op::Concat { .. } => {
                Some(KernelKey::Copy { wg })
            }
            Op::Cast { x, out } => match (dtype(*x), dtype(*out)) {
                (Some(from), Some(to)) => Some(KernelKey::Cast { from, to, wg }),
                _ => None,
            },
            Op::Range { out } => dtype(*out).map(|to| KernelKey::Range { to, wg }),
            Op::MeanPool { mask, .. } => dtype(*mask).map(|mask| KernelKey::MeanPool { mask, wg }),
            Op::L2Normalize { .. } => Some(KernelKey::L2Normalize { wg }),
        };
        let small = small_row_workgroup(wg);
        let variants = match key {
            Some(KernelKey::LayerNorm { .. }) => vec![KernelKey::LayerNorm { wg: small }],
            Some(KernelKey::L2Normalize { .. }) => vec![KernelKey::L2Normalize { wg: small }],
            Some(KernelKey::Softmax { mask, .. }) => vec![KernelKey::Softmax { mask, wg: small }],
            _ => Vec::new(),
        };
        for key in key.into_iter().chain(variants) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    let shadow_copy = plan::param_slots(program)
        .and_then(|slots| {
            let roots = plan::storage_roots(program, &slots)?;
            Ok(alias::shadow_kernel(
                program,
                &alias::storage_keys(&slots, &roots),
                wg,
            ))
        })
        .ok()
        .flatten();
    keys.extend(shadow_copy.filter(|key| !keys.contains(key)));
    keys
}
