//! Appending ops with their output inferred: [`ProgramBuilder::push`] takes any op whose
//! definition infers its output (see [`OpDef::infer`]), declares the output tensor (named
//! `"<op>.<op index>"`; rename it with [`ProgramBuilder::set_name`]), appends the op and returns
//! the output's id. The named methods below are shorthands for the ops the model builders use;
//! a new op needs none (`b.push(|out| RmsNorm { x, weight: Some(w), eps, out })`).
//!
//! Every append runs the same checks as validation (the op's [`OpDef::check`]) before anything
//! is appended, so a failed call leaves the builder unchanged. Failures are `InvalidArgument`
//! naming the op and what is wrong.

use crate::error::{Error, Result};
use crate::program::builder::ProgramBuilder;
use crate::program::ops::support::Operands;
use crate::program::ops::{
    Binary, BinaryOp, Cast, Concat, Gather, L2Normalize, LayerNorm, MatMul, MeanPool, Op, OpDef,
    Permute, Range, Reshape, Scale, Slice, Softmax, Unary, UnaryOp,
};
use crate::program::tensor::{DType, Dim, TensorId};

fn refused(op: &str, message: impl std::fmt::Display) -> Error {
    Error::invalid_argument(format!("{op}: {message}"))
}

impl ProgramBuilder {
    /// Declares the output, appends `make(out)`, checks the op; undoes both on failure.
    fn append<O: OpDef + Into<Op>>(
        &mut self,
        dtype: DType,
        shape: Vec<Dim>,
        make: impl FnOnce(TensorId) -> O,
    ) -> Result<TensorId> {
        let index = self.program().ops.len();
        let out = self.tensor("", dtype, shape);
        let op = make(out);
        let name = op.name();
        if let Err(message) = op.check(&Operands::new(&self.program().tensors)) {
            self.pop_tensor();
            return Err(refused(name, message));
        }
        self.rename(out, format!("{name}.{index}"));
        self.op(op.into());
        Ok(out)
    }

    /// Appends `make(out)` with `out` a new tensor of the dtype and shape the op infers from
    /// its inputs, and returns `out`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the op for unknown tensors, wrong dtypes, shapes or attributes,
    /// and for ops whose output is the program's choice (reshape, cast, range: use their
    /// methods).
    pub fn push<O: OpDef + Into<Op>>(
        &mut self,
        make: impl FnOnce(TensorId) -> O,
    ) -> Result<TensorId> {
        let next = TensorId::try_from(self.program().tensors.len())
            .map_err(|_| Error::invalid_argument("too many tensors"))?;
        let op = make(next);
        let (dtype, shape) = op
            .infer(&Operands::new(&self.program().tensors))
            .map_err(|e| refused(op.name(), e))?;
        self.append(dtype, shape, |_| op)
    }

    /// Embedding lookup: `table` `[V, H]` f32, `ids` i32/i64 -> `ids.shape + [H]`.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown tensors, wrong dtypes or a table that is not 2-D.
    pub fn gather(&mut self, table: TensorId, ids: TensorId) -> Result<TensorId> {
        self.push(|out| Gather { table, ids, out })
    }

    /// `a (op) b` with broadcasting.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown tensors, non-f32 operands or shapes that do not broadcast.
    pub fn binary(&mut self, op: BinaryOp, a: TensorId, b: TensorId) -> Result<TensorId> {
        self.push(|out| Binary { op, a, b, out })
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
        self.push(|out| Scale {
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
        self.push(|out| Unary { op, x, out })
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
        self.push(|out| MatMul {
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
        self.push(|out| LayerNorm {
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
        self.push(|out| Softmax { x, mask, out })
    }

    /// `x` with a new shape of the same element count (for every binding of the symbols).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `x` or element counts that differ.
    pub fn reshape(&mut self, x: TensorId, shape: Vec<Dim>) -> Result<TensorId> {
        let dtype = self.operand_dtype("reshape", x)?;
        self.append(dtype, shape, |out| Reshape { x, out })
    }

    /// `x` with its dims reordered (`out` dim `i` is `x` dim `perm[i]`).
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `x` or a `perm` that is not a permutation.
    pub fn permute(&mut self, x: TensorId, perm: Vec<u32>) -> Result<TensorId> {
        self.push(|out| Permute { x, perm, out })
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
        self.push(|out| Slice {
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
        self.push(|out| Concat { inputs, axis, out })
    }

    /// `x` converted to `dtype`.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown `x`.
    pub fn cast(&mut self, x: TensorId, dtype: DType) -> Result<TensorId> {
        let shape = self
            .shape_of(x)
            .map(<[Dim]>::to_vec)
            .ok_or_else(|| refused("cast", format!("tensor {x} does not exist")))?;
        self.append(dtype, shape, |out| Cast { x, out })
    }

    /// `0, 1, ..., extent - 1` as a 1-D tensor of `dtype` (i32, i64 or f32).
    ///
    /// # Errors
    /// `InvalidArgument` for another dtype.
    pub fn range(&mut self, extent: Dim, dtype: DType) -> Result<TensorId> {
        self.append(dtype, vec![extent], |out| Range { out })
    }

    /// Masked mean over the sequence: `x` `[B, S, H]`, `mask` `[B, S]` -> `[B, H]`.
    ///
    /// # Errors
    /// `InvalidArgument` for unknown tensors, wrong dtypes or shapes.
    pub fn mean_pool(&mut self, x: TensorId, mask: TensorId) -> Result<TensorId> {
        self.push(|out| MeanPool { x, mask, out })
    }

    /// `x / max(||x||, eps)` over the last dim.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown or non-f32 `x`, a scalar `x`, or a bad `eps`.
    pub fn l2_normalize(&mut self, x: TensorId, eps: f32) -> Result<TensorId> {
        self.push(|out| L2Normalize { x, eps, out })
    }

    fn operand_dtype(&self, op: &str, id: TensorId) -> Result<DType> {
        self.program()
            .tensors
            .get(id as usize)
            .map(|decl| decl.dtype)
            .ok_or_else(|| refused(op, format!("tensor {id} does not exist")))
    }
}
