//! The element-wise ops `Binary` (broadcasting), `Scale` and `Unary` (GELU / tanh / ReLU /
//! tanh-GELU / SiLU):
//! their kernels and their [`CpuOp`] implementations. The activations are the kernels'
//! (`webdelegate_kernels::rows`), on the worker pool when there is one and the op is large
//! enough; `tanh` stays here (`core` has none).
//!
//! A binary whose operands both have the output's shape is the kernels' `Binary` (on the pool
//! too); a broadcasting one walks the output row by row ([`for_each_row`]) with specialised
//! inner loops for the common stride patterns (both contiguous, one side a broadcast scalar),
//! which LLVM vectorises; other patterns fall back to a strided loop. `Scale` is the kernels'
//! `scale` (on the pool too).

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::walk::{Row, for_each_row};
use crate::error::{Error, Result};
use crate::program::geometry::StridedWalk;
use crate::program::ops::{Binary, BinaryOp, Scale, Unary, UnaryOp};
use webdelegate_kernels::KernelError;
use webdelegate_kernels::rows::{self, Activation, Binary as KernelBinary};

fn row_of(values: &[f32], start: usize, len: usize) -> Result<&[f32]> {
    values
        .get(start..start.saturating_add(len))
        .ok_or_else(|| Error::internal("element-wise row past the end of its operand"))
}

/// `out = a (op) b`, broadcasting `a` of `a_shape` and `b` of `b_shape` to `out_shape`.
///
/// # Errors
/// `Internal` when the shapes do not broadcast to `out_shape` or `out` has the wrong length
/// (validation and binding rule both out).
pub fn binary(
    op: BinaryOp,
    (a, a_shape): (&[f32], &[usize]),
    (b, b_shape): (&[f32], &[usize]),
    out_shape: &[usize],
    out: &mut [f32],
) -> Result<()> {
    if a_shape == out_shape && b_shape == out_shape {
        return kernel_binary(op)
            .apply(a, b, out)
            .map_err(|KernelError(why)| Error::internal(why));
    }
    let walk = StridedWalk::binary(a_shape, b_shape, out_shape)?;
    match op {
        BinaryOp::Add => binary_with(|x, y| x + y, a, b, &walk, out),
        BinaryOp::Sub => binary_with(|x, y| x - y, a, b, &walk, out),
        BinaryOp::Mul => binary_with(|x, y| x * y, a, b, &walk, out),
        BinaryOp::Div => binary_with(|x, y| x / y, a, b, &walk, out),
    }
}

/// The kernels' same-length binary for `op`.
fn kernel_binary(op: BinaryOp) -> KernelBinary {
    match op {
        BinaryOp::Add => KernelBinary::Add,
        BinaryOp::Sub => KernelBinary::Sub,
        BinaryOp::Mul => KernelBinary::Mul,
        BinaryOp::Div => KernelBinary::Div,
    }
}

fn binary_with(
    f: impl Fn(f32, f32) -> f32 + Copy,
    a: &[f32],
    b: &[f32],
    walk: &StridedWalk,
    out: &mut [f32],
) -> Result<()> {
    for_each_row(walk, [a.len(), b.len()], |row: Row<2>| {
        let target = out
            .get_mut(row.out..row.out + row.len)
            .ok_or_else(|| Error::internal("binary output is too short"))?;
        let [offset_a, offset_b] = row.offsets;
        match row.strides {
            [1, 1] => {
                let (xs, ys) = (row_of(a, offset_a, row.len)?, row_of(b, offset_b, row.len)?);
                for ((o, &x), &y) in target.iter_mut().zip(xs).zip(ys) {
                    *o = f(x, y);
                }
            }
            [1, 0] => {
                let (xs, y) = (row_of(a, offset_a, row.len)?, row_of(b, offset_b, 1)?[0]);
                for (o, &x) in target.iter_mut().zip(xs) {
                    *o = f(x, y);
                }
            }
            [0, 1] => {
                let (x, ys) = (row_of(a, offset_a, 1)?[0], row_of(b, offset_b, row.len)?);
                for (o, &y) in target.iter_mut().zip(ys) {
                    *o = f(x, y);
                }
            }
            [stride_a, stride_b] => {
                for (i, o) in target.iter_mut().enumerate() {
                    let x = a.get(offset_a + i * stride_a).copied().unwrap_or(f32::NAN);
                    let y = b.get(offset_b + i * stride_b).copied().unwrap_or(f32::NAN);
                    *o = f(x, y);
                }
            }
        }
        Ok(())
    })
}

fn same_len(x: &[f32], out: &[f32]) -> Result<()> {
    if x.len() == out.len() {
        Ok(())
    } else {
        Err(Error::internal(format!(
            "element-wise op of {} elements into {}",
            x.len(),
            out.len()
        )))
    }
}

/// `out = x * scale + bias`.
///
/// # Errors
/// `Internal` when `out`'s length differs from `x`'s.
pub fn scale(x: &[f32], scale: f32, bias: f32, out: &mut [f32]) -> Result<()> {
    rows::scale(x, scale, bias, out).map_err(|KernelError(why)| Error::internal(why))
}

/// The kernels' activation for `op`, when they have one (all but `tanh`, which `core` lacks).
pub(crate) fn activation_of(op: UnaryOp) -> Option<Activation> {
    match op {
        UnaryOp::Gelu => Some(Activation::Gelu),
        UnaryOp::GeluTanh => Some(Activation::GeluTanh),
        UnaryOp::Silu => Some(Activation::Silu),
        UnaryOp::Relu => Some(Activation::Relu),
        UnaryOp::Tanh => None,
    }
}

/// `out = f(x)`.
///
/// # Errors
/// `Internal` when `out`'s length differs from `x`'s.
pub fn unary(op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()> {
    same_len(x, out)?;
    match activation_of(op) {
        Some(activation) => activation
            .apply(x, out)
            .map_err(|KernelError(why)| Error::internal(why)),
        None => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = v.tanh();
            }
            Ok(())
        }
    }
}

impl CpuOp for Binary {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        let out_shape = f.shape(self.out)?;
        if let Some(threaded) = cx.threaded
            && f.shape(self.a)? == out_shape
            && f.shape(self.b)? == out_shape
            && threaded.worth(f.numel(self.out)?)
        {
            let operands = (f.operand(self.a)?, f.operand(self.b)?);
            let op = kernel_binary(self.op);
            let out = threaded.binary(&mut cx.scratch.shared, op, operands)?;
            return Ok(Slot::Shared(out));
        }
        cx.f32_result(self.out, |f, o| {
            binary(
                self.op,
                (f.f32(self.a)?, f.shape(self.a)?),
                (f.f32(self.b)?, f.shape(self.b)?),
                f.shape(self.out)?,
                o,
            )
        })
    }
}

impl CpuOp for Scale {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        if let Some(threaded) = cx.threaded
            && threaded.worth(f.numel(self.x)?)
        {
            let (x, affine) = (f.operand(self.x)?, (self.scale, self.bias));
            let out = threaded.scale(&mut cx.scratch.shared, x, affine)?;
            return Ok(Slot::Shared(out));
        }
        cx.f32_result(self.out, |f, o| {
            scale(f.f32(self.x)?, self.scale, self.bias, o)
        })
    }
}

impl CpuOp for Unary {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        if let (Some(threaded), Some(activation)) = (cx.threaded, activation_of(self.op))
            && threaded.worth(f.numel(self.x)?)
        {
            let x = f.operand(self.x)?;
            let out = threaded.activation(&mut cx.scratch.shared, activation, x)?;
            return Ok(Slot::Shared(out));
        }
        cx.f32_result(self.out, |f, o| unary(self.op, f.f32(self.x)?, o))
    }
}
