//! Checks one op against the declarations of the tensors it touches: input and output dtypes,
//! attribute values, and that the declared output shape is the shape [`infer`](super::infer)
//! computes.
//!
//! Callers have already checked that every tensor id is in range; this module still looks ids
//! up with `get` so that a broken caller gets an error, not a panic.

use crate::program::infer::{self, InferResult, shape_text};
use crate::program::ir::{DType, Dim, Op, TensorDecl, TensorId};

/// A tensor's declaration, looked up for an op.
struct Operand<'a> {
    role: &'static str,
    id: TensorId,
    decl: &'a TensorDecl,
}

impl Operand<'_> {
    fn shape(&self) -> &[Dim] {
        &self.decl.shape
    }

    fn describe(&self) -> String {
        format!("{} (tensor {} {:?})", self.role, self.id, self.decl.name)
    }

    fn expect_dtype(&self, allowed: &[DType]) -> InferResult<()> {
        if allowed.contains(&self.decl.dtype) {
            return Ok(());
        }
        let names: Vec<&str> = allowed.iter().map(|d| d.name()).collect();
        Err(format!(
            "{} is {}, expected {}",
            self.describe(),
            self.decl.dtype.name(),
            names.join(" or ")
        ))
    }
}

const FLOAT: &[DType] = &[DType::F32];
const IDS: &[DType] = &[DType::I32, DType::I64];
const MASK: &[DType] = &[DType::U8, DType::I32, DType::I64, DType::F32];
const RANGE: &[DType] = &[DType::I32, DType::I64, DType::F32];

fn operand<'a>(
    tensors: &'a [TensorDecl],
    role: &'static str,
    id: TensorId,
) -> InferResult<Operand<'a>> {
    let decl = tensors
        .get(id as usize)
        .ok_or_else(|| format!("{role} names tensor {id}, which does not exist"))?;
    Ok(Operand { role, id, decl })
}

fn expect_shape(out: &Operand<'_>, computed: &[Dim]) -> InferResult<()> {
    if out.shape() == computed {
        return Ok(());
    }
    Err(format!(
        "{} is declared {}, but the op computes {}",
        out.describe(),
        shape_text(out.shape()),
        shape_text(computed)
    ))
}

fn expect_same_dtype(out: &Operand<'_>, x: &Operand<'_>) -> InferResult<()> {
    out.expect_dtype(&[x.decl.dtype])
}

fn expect_constant(what: &str, value: f32, non_negative: bool) -> InferResult<()> {
    if !value.is_finite() || (non_negative && value < 0.0) {
        let kind = if non_negative {
            "finite and >= 0"
        } else {
            "finite"
        };
        return Err(format!("{what} is {value}, expected {kind}"));
    }
    Ok(())
}

/// Checks `op` against `tensors`.
///
/// # Errors
/// A message naming the operand and what is wrong with it.
pub fn check_op(op: &Op, tensors: &[TensorDecl]) -> InferResult<()> {
    let get = |role, id| operand(tensors, role, id);
    let out = get("out", op.output())?;
    match op {
        Op::Gather { table, ids, .. } => {
            let (table, ids) = (get("table", *table)?, get("ids", *ids)?);
            table.expect_dtype(FLOAT)?;
            ids.expect_dtype(IDS)?;
            out.expect_dtype(FLOAT)?;
            expect_shape(&out, &infer::gather(table.shape(), ids.shape())?)
        }
        Op::Binary { a, b, .. } => {
            let (a, b) = (get("a", *a)?, get("b", *b)?);
            for operand in [&a, &b, &out] {
                operand.expect_dtype(FLOAT)?;
            }
            expect_shape(&out, &infer::broadcast(a.shape(), b.shape())?)
        }
        Op::Scale { x, scale, bias, .. } => {
            let x = get("x", *x)?;
            expect_constant("scale", *scale, false)?;
            expect_constant("bias", *bias, false)?;
            x.expect_dtype(FLOAT)?;
            out.expect_dtype(FLOAT)?;
            expect_shape(&out, x.shape())
        }
        Op::Unary { x, .. } => {
            let x = get("x", *x)?;
            x.expect_dtype(FLOAT)?;
            out.expect_dtype(FLOAT)?;
            expect_shape(&out, x.shape())
        }
        Op::MatMul {
            a,
            b,
            bias,
            transpose_a,
            transpose_b,
            ..
        } => {
            let (a, b) = (get("a", *a)?, get("b", *b)?);
            let bias = bias.map(|id| get("bias", id)).transpose()?;
            for operand in [Some(&a), Some(&b), bias.as_ref(), Some(&out)]
                .into_iter()
                .flatten()
            {
                operand.expect_dtype(FLOAT)?;
            }
            let computed = infer::matmul(
                a.shape(),
                b.shape(),
                bias.as_ref().map(Operand::shape),
                *transpose_a,
                *transpose_b,
            )?;
            expect_shape(&out, &computed)
        }
        Op::LayerNorm {
            x,
            gamma,
            beta,
            eps,
            ..
        } => {
            let (x, gamma, beta) = (get("x", *x)?, get("gamma", *gamma)?, get("beta", *beta)?);
            expect_constant("eps", *eps, true)?;
            for operand in [&x, &gamma, &beta, &out] {
                operand.expect_dtype(FLOAT)?;
            }
            expect_shape(
                &out,
                &infer::layer_norm(x.shape(), gamma.shape(), beta.shape())?,
            )
        }
        Op::Softmax { x, mask, .. } => {
            let x = get("x", *x)?;
            let mask = mask.map(|id| get("mask", id)).transpose()?;
            for operand in [Some(&x), mask.as_ref(), Some(&out)].into_iter().flatten() {
                operand.expect_dtype(FLOAT)?;
            }
            expect_shape(
                &out,
                &infer::softmax(x.shape(), mask.as_ref().map(Operand::shape))?,
            )
        }
        Op::Reshape { x, .. } => {
            let x = get("x", *x)?;
            expect_same_dtype(&out, &x)?;
            infer::reshape(x.shape(), out.shape())
        }
        Op::Permute { x, perm, .. } => {
            let x = get("x", *x)?;
            expect_same_dtype(&out, &x)?;
            expect_shape(&out, &infer::permute(x.shape(), perm)?)
        }
        Op::Slice {
            x,
            axis,
            start,
            end,
            ..
        } => {
            let x = get("x", *x)?;
            expect_same_dtype(&out, &x)?;
            expect_shape(&out, &infer::slice(x.shape(), *axis, *start, *end)?)
        }
        Op::Concat { inputs, axis, .. } => {
            let mut shapes = Vec::with_capacity(inputs.len());
            for id in inputs {
                let input = get("input", *id)?;
                expect_same_dtype(&input, &out)?;
                shapes.push(input.decl.shape.as_slice());
            }
            expect_shape(&out, &infer::concat(&shapes, *axis)?)
        }
        Op::Cast { x, .. } => {
            let x = get("x", *x)?;
            expect_shape(&out, x.shape())
        }
        Op::Range { .. } => {
            out.expect_dtype(RANGE)?;
            if out.shape().len() != 1 {
                return Err(format!(
                    "{} is {}, expected one dim",
                    out.describe(),
                    shape_text(out.shape())
                ));
            }
            Ok(())
        }
        Op::MeanPool { x, mask, .. } => {
            let (x, mask) = (get("x", *x)?, get("mask", *mask)?);
            x.expect_dtype(FLOAT)?;
            mask.expect_dtype(MASK)?;
            out.expect_dtype(FLOAT)?;
            expect_shape(&out, &infer::mean_pool(x.shape(), mask.shape())?)
        }
        Op::L2Normalize { x, eps, .. } => {
            let x = get("x", *x)?;
            expect_constant("eps", *eps, true)?;
            x.expect_dtype(FLOAT)?;
            out.expect_dtype(FLOAT)?;
            expect_shape(&out, &infer::last_axis(x.shape())?)
        }
    }
}
