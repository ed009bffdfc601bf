//! One builder method per op: each infers the output's shape and dtype, declares the output
//! tensor (named `"<op>.<op index>"`; rename it with [`ProgramBuilder::set_name`]), appends the
//! op and returns the output's id.
//!
//! Each method runs the same checks as validation ([`infer`](super::infer) and the per-op
//! dtype checks) before anything is appended, so a failed call leaves the builder unchanged.
//! Failures are `InvalidArgument` naming the op and what is wrong.

use crate::error::{Error, Result};
use crate::program::builder::ProgramBuilder;
use crate::program::infer;
use crate::program::ir::{BinaryOp, DType, Dim, Op, TensorId, UnaryOp};
use crate::program::op_check::check_op;

fn refused(op: &str, message: impl std::fmt::Display) -> Error {
    Error::invalid_argument(format!("{op}: {message}"))
}

impl ProgramBuilder {
    /// The declared shape of `id`, owned, or `InvalidArgument` naming `op`.
    fn operand_shape(&self, op: &str, id: TensorId) -> Result<Vec<Dim>> {
        self.shape_of(id)
            .map(<[Dim]>::to_vec)
            .ok_or_else(|| refused(op, format!("tensor {id} does not exist")))
    }

    fn operand_dtype(&self, op: &str, id: TensorId) -> Result<DType> {
        self.program()
            .tensors
            .get(id as usize)
            .map(|decl| decl.dtype)
            .ok_or_else(|| refused(op, format!("tensor {id} does not exist")))
    }

    /// Declares the output, appends `make(out)`, checks the op; undoes both on failure.
    fn append(
        &mut self,
        dtype: DType,
        shape: Vec<Dim>,
        make: impl FnOnce(TensorId) -> Op,
    ) -> Result<TensorId> {
        let index = self.program().ops.len();
        let out = self.tensor("", dtype, shape);
        let op = make(out);
        let name = op.name();
        if let Err(message) = check_op(&op, &self.program().tensors) {
            self.pop_tensor();
            return Err(refused(name, message));
        }
        self.rename(out, format!("{name}.{index}"));
        self.op(op);
        Ok(out)
    }

    /// Embedding lookup: `table` `[V, H]` f32, `ids` i32/i64 -> `ids.shape + [H]`.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown tensors, wrong dtypes or a table that is not 2-D.
    pub fn gather(&mut self, table: TensorId, ids: TensorId) -> Result<TensorId> {
        let shape = infer::gather(
            &self.operand_shape("gather", table)?,
            &self.operand_shape("gather", ids)?,
        )
        .map_err(|e| refused("gather", e))?;
        self.append(DType::F32, shape, |out| Op::Gather { table, ids, out })
    }

    /// `a (op) b` with broadcasting.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown tensors, non-f32 operands or shapes that do not broadcast.
    pub fn binary(&mut self, op: BinaryOp, a: TensorId, b: TensorId) -> Result<TensorId> {
        let name = Op::Binary { op, a, b, out: 0 }.name();
        let shape = infer::broadcast(&self.operand_shape(name, a)?, &self.operand_shape(name, b)?)
            .map_err(|e| refused(name, e))?;
        self.append(DType::F32, shape, |out| Op::Binary { op, a, b, out })
    }

    /// `a + b` (see [`ProgramBuilder::binary`]).
    ///
    /// # Errors
    /// As [`ProgramBuilder::binary`].
    pub fn add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Add, a, b)
    }

    /// `a - b` (see [`ProgramBuilder::binary`]).
    ///
    /// # Errors
    /// As [`ProgramBuilder::binary`].
    pub fn sub(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Sub, a, b)
    }

    /// `a * b` (see [`ProgramBuilder::binary`]).
    ///
    /// # Errors
    /// As [`ProgramBuilder::binary`].
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Mul, a, b)
    }

    /// `a / b` (see [`ProgramBuilder::binary`]).
    ///
    /// # Errors
    /// As [`ProgramBuilder::binary`].
    pub fn div(&mut self, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.binary(BinaryOp::Div, a, b)
    }

    /// `x * scale + bias`, element-wise.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown or non-f32 `x` or non-finite constants.
    pub fn scale(&mut self, x: TensorId, scale: f32, bias: f32) -> Result<TensorId> {
        let shape = self.operand_shape("scale", x)?;
        self.append(DType::F32, shape, |out| Op::Scale {
            x,
            scale,
            bias,
            out,
        })
    }

    /// `f(x)`, element-wise.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown or non-f32 `x`.
    pub fn unary(&mut self, op: UnaryOp, x: TensorId) -> Result<TensorId> {
        let name = Op::Unary { op, x, out: 0 }.name();
        let shape = self.operand_shape(name, x)?;
        self.append(DType::F32, shape, |out| Op::Unary { op, x, out })
    }

    /// GELU, erf form (see [`ProgramBuilder::unary`]).
    ///
    /// # Errors
    /// As [`ProgramBuilder::unary`].
    pub fn gelu(&mut self, x: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Gelu, x)
    }

    /// Hyperbolic tangent (see [`ProgramBuilder::unary`]).
    ///
    /// # Errors
    /// As [`ProgramBuilder::unary`].
    pub fn tanh(&mut self, x: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Tanh, x)
    }

    /// `max(x, 0)` (see [`ProgramBuilder::unary`]).
    ///
    /// # Errors
    /// As [`ProgramBuilder::unary`].
    pub fn relu(&mut self, x: TensorId) -> Result<TensorId> {
        self.unary(UnaryOp::Relu, x)
    }

    /// Batched `a @ b` (each optionally transposed) plus an optional `[N]` bias.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown or non-f32 tensors, ranks below 2, contracted dims that
    /// differ, batch dims that do not broadcast, or a bias that is not `[N]`.
    pub fn matmul(
        &mut self,
        a: TensorId,
        b: TensorId,
        bias: Option<TensorId>,
        transpose_a: bool,
        transpose_b: bool,
    ) -> Result<TensorId> {
        let bias_shape = bias
            .map(|id| self.operand_shape("matmul", id))
            .transpose()?;
        let shape = infer::matmul(
            &self.operand_shape("matmul", a)?,
            &self.operand_shape("matmul", b)?,
            bias_shape.as_deref(),
            transpose_a,
            transpose_b,
        )
        .map_err(|e| refused("matmul", e))?;
        self.append(DType::F32, shape, |out| Op::MatMul {
            a,
            b,
            bias,
            transpose_a,
            transpose_b,
            out,
        })
    }

    /// Layer normalisation over the last dim.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown or non-f32 tensors, `gamma`/`beta` that are not `[H]`, or
    /// an `eps` that is negative or not finite.
    pub fn layer_norm(
        &mut self,
        x: TensorId,
        gamma: TensorId,
        beta: TensorId,
        eps: f32,
    ) -> Result<TensorId> {
        let shape = infer::layer_norm(
            &self.operand_shape("layer_norm", x)?,
            &self.operand_shape("layer_norm", gamma)?,
            &self.operand_shape("layer_norm", beta)?,
        )
        .map_err(|e| refused("layer_norm", e))?;
        self.append(DType::F32, shape, |out| Op::LayerNorm {
            x,
            gamma,
            beta,
            eps,
            out,
        })
    }

    /// Softmax over the last dim of `x (+ mask)`.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown or non-f32 tensors or a mask that does not broadcast to `x`.
    pub fn softmax(&mut self, x: TensorId, mask: Option<TensorId>) -> Result<TensorId> {
        let mask_shape = mask
            .map(|id| self.operand_shape("softmax", id))
            .transpose()?;
        let shape = infer::softmax(&self.operand_shape("softmax", x)?, mask_shape.as_deref())
            .map_err(|e| refused("softmax", e))?;
        self.append(DType::F32, shape, |out| Op::Softmax { x, mask, out })
    }

    /// `x` with a new shape of the same element count (for every binding of the symbols).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `x` or element counts that differ.
    pub fn reshape(&mut self, x: TensorId, shape: Vec<Dim>) -> Result<TensorId> {
        let dtype = self.operand_dtype("reshape", x)?;
        infer::reshape(&self.operand_shape("reshape", x)?, &shape)
            .map_err(|e| refused("reshape", e))?;
        self.append(dtype, shape, |out| Op::Reshape { x, out })
    }

    /// `x` with its dims reordered (`out` dim `i` is `x` dim `perm[i]`).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `x` or a `perm` that is not a permutation.
    pub fn permute(&mut self, x: TensorId, perm: Vec<u32>) -> Result<TensorId> {
        let dtype = self.operand_dtype("permute", x)?;
        let shape = infer::permute(&self.operand_shape("permute", x)?, &perm)
            .map_err(|e| refused("permute", e))?;
        self.append(dtype, shape, |out| Op::Permute { x, perm, out })
    }

    /// Elements `start..end` of `x` along `axis` (`end` `None`: to the end).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `x`, an axis out of range or bounds past a fixed extent.
    pub fn slice(
        &mut self,
        x: TensorId,
        axis: u32,
        start: u64,
        end: Option<u64>,
    ) -> Result<TensorId> {
        let dtype = self.operand_dtype("slice", x)?;
        let shape = infer::slice(&self.operand_shape("slice", x)?, axis, start, end)
            .map_err(|e| refused("slice", e))?;
        self.append(dtype, shape, |out| Op::Slice {
            x,
            axis,
            start,
            end,
            out,
        })
    }

    /// Concatenation of `inputs` along `axis`.
    ///
    /// # Errors
    /// `InvalidArgument` for no inputs, unknown tensors, mixed dtypes, or shapes that differ
    /// outside `axis`.
    pub fn concat(&mut self, inputs: Vec<TensorId>, axis: u32) -> Result<TensorId> {
        let first = *inputs
            .first()
            .ok_or_else(|| refused("concat", "needs at least one input"))?;
        let dtype = self.operand_dtype("concat", first)?;
        let shapes = inputs
            .iter()
            .map(|&id| self.operand_shape("concat", id))
            .collect::<Result<Vec<_>>>()?;
        let views: Vec<&[Dim]> = shapes.iter().map(Vec::as_slice).collect();
        let shape = infer::concat(&views, axis).map_err(|e| refused("concat", e))?;
        self.append(dtype, shape, |out| Op::Concat { inputs, axis, out })
    }

    /// `x` converted to `dtype`.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `x`.
    pub fn cast(&mut self, x: TensorId, dtype: DType) -> Result<TensorId> {
        let shape = self.operand_shape("cast", x)?;
        self.append(dtype, shape, |out| Op::Cast { x, out })
    }

    /// `0, 1, ..., extent - 1` as a 1-D tensor of `dtype` (i32, i64 or f32).
    ///
    /// # Errors
    /// `InvalidArgument` for another dtype.
    pub fn range(&mut self, extent: Dim, dtype: DType) -> Result<TensorId> {
        self.append(dtype, vec![extent], |out| Op::Range { out })
    }

    /// Masked mean over the sequence: `x` `[B, S, H]`, `mask` `[B, S]` -> `[B, H]`.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown tensors, wrong dtypes or shapes.
    pub fn mean_pool(&mut self, x: TensorId, mask: TensorId) -> Result<TensorId> {
        let shape = infer::mean_pool(
            &self.operand_shape("mean_pool", x)?,
            &self.operand_shape("mean_pool", mask)?,
        )
        .map_err(|e| refused("mean_pool", e))?;
        self.append(DType::F32, shape, |out| Op::MeanPool { x, mask, out })
    }

    /// `x / max(||x||, eps)` over the last dim.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown or non-f32 `x`, a scalar `x`, or a bad `eps`.
    pub fn l2_normalize(&mut self, x: TensorId, eps: f32) -> Result<TensorId> {
        let shape = infer::last_axis(&self.operand_shape("l2_normalize", x)?)
            .map_err(|e| refused("l2_normalize", e))?;
        self.append(DType::F32, shape, |out| Op::L2Normalize { x, eps, out })
    }
}
