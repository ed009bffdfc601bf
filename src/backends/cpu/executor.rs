//! Runs a prepared program on one set of arguments: checks and binds the arguments, runs the
//! planned ops in order, releases intermediates after their last use, and moves the results
//! into the output slots.
//!
//! Inputs and parameters are read in place (borrowed, never copied); a reshape of a borrowed
//! or dying tensor shares or moves its buffer instead of copying it.

use crate::backends::arguments::{bind_arguments, store_output};
use crate::backends::cpu::elementwise;
use crate::backends::cpu::matmul::{self, GemmScratch, PackedB, RightOperand};
use crate::backends::cpu::normalize;
use crate::backends::cpu::plan::{Plan, Step};
use crate::backends::cpu::values::{BufferPool, Element, Values, ValuesRef};
use crate::backends::cpu::{convert, layout};
use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::program::geometry::{ConcatGeometry, MatMulGeometry, SliceGeometry};
use crate::program::{BinaryOp, DType, Op, Program, TensorId};

/// A program ready to run: validated, parameters converted, plan computed.
#[derive(Debug)]
pub struct PreparedProgram {
    /// The validated program.
    pub program: Program,
    /// Parameter values, by tensor id (`None` for tensors that are not params, and for
    /// weights kept only packed).
    pub params: Vec<Option<Values>>,
    /// Weights packed for matmul, by tensor id.
    pub packed: Vec<Option<PackedB>>,
    /// What to run.
    pub plan: Plan,
}

/// State reused across executions.
#[derive(Debug, Default)]
pub struct Scratch {
    pool: BufferPool,
    gemm: GemmScratch,
}

enum Slot<'a> {
    Empty,
    Borrowed(ValuesRef<'a>),
    Owned(Values),
}

/// The tensors of one execution.
struct Frame<'a> {
    slots: Vec<Slot<'a>>,
    shapes: Vec<Vec<usize>>,
}

impl<'a> Frame<'a> {
    fn get(&self, id: TensorId) -> Result<ValuesRef<'_>> {
        match self.slots.get(id as usize) {
            Some(Slot::Borrowed(values)) => Ok(*values),
            Some(Slot::Owned(values)) => Ok(values.as_ref()),
            _ => Err(Error::internal(format!(
                "tensor {id} is read before it is computed or after it was released"
            ))),
        }
    }

    fn f32(&self, id: TensorId) -> Result<&[f32]> {
        self.get(id)?.f32()
    }

    fn typed<T: Element>(&self, id: TensorId) -> Result<&[T]> {
        T::slice(self.get(id)?)
            .ok_or_else(|| Error::internal(format!("tensor {id} has an unexpected dtype")))
    }

    fn shape(&self, id: TensorId) -> Result<&[usize]> {
        self.shapes
            .get(id as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| Error::internal(format!("tensor {id} has no bound shape")))
    }

    fn numel(&self, id: TensorId) -> Result<usize> {
        Ok(self.shape(id)?.iter().product())
    }

    fn last_dim(&self, id: TensorId) -> Result<usize> {
        self.shape(id)?
            .last()
            .copied()
            .ok_or_else(|| Error::internal(format!("tensor {id} is a scalar")))
    }

    fn take(&mut self, id: TensorId) -> Slot<'a> {
        self.slots
            .get_mut(id as usize)
            .map_or(Slot::Empty, |slot| std::mem::replace(slot, Slot::Empty))
    }
}

/// Runs `prepared` on `args` (inputs, then output slots).
///
/// # Errors
/// `InvalidArgument` for bad arguments or out-of-range gather ids; `Internal` if an invariant
/// validation established does not hold.
pub fn execute(
    prepared: &PreparedProgram,
    scratch: &mut Scratch,
    args: &mut [EValue],
) -> Result<()> {
    let program = &prepared.program;
    let bound = bind_arguments(program, args)?;
    let (inputs, outputs) = args.split_at_mut(program.inputs.len());
    let mut frame = Frame {
        slots: (0..program.tensors.len()).map(|_| Slot::Empty).collect(),
        shapes: bound.shapes,
    };
    for (id, values) in prepared.params.iter().enumerate() {
        if let (Some(values), Some(slot)) = (values, frame.slots.get_mut(id)) {
            *slot = Slot::Borrowed(values.as_ref());
        }
    }
    for (value, &id) in inputs.iter().zip(&program.inputs) {
        let data = value
            .as_tensor()
            .and_then(|tensor| ValuesRef::from_tensor_data(tensor.data()))
            .ok_or_else(|| Error::internal("input changed type after binding"))?;
        if let Some(slot) = frame.slots.get_mut(id as usize) {
            *slot = Slot::Borrowed(data);
        }
    }
    for step in &prepared.plan.steps {
        let op = program
            .ops
            .get(step.op)
            .ok_or_else(|| Error::internal("plan names a missing op"))?;
        let result = run_op(prepared, op, step, &mut frame, scratch)?;
        if let Some(slot) = frame.slots.get_mut(op.output() as usize) {
            *slot = result;
        }
        for &id in &step.release {
            if let Slot::Owned(values) = frame.take(id) {
                scratch.pool.recycle(values);
            }
        }
    }
    for (position, (slot, &id)) in outputs.iter_mut().zip(&program.outputs).enumerate() {
        let used_again = program.outputs[position + 1..].contains(&id);
        let values = match frame.take(id) {
            Slot::Owned(values) if !used_again => values,
            Slot::Owned(values) => {
                let copy = values.clone();
                if let Some(target) = frame.slots.get_mut(id as usize) {
                    *target = Slot::Owned(values);
                }
                copy
            }
            Slot::Borrowed(values) => {
                if let Some(target) = frame.slots.get_mut(id as usize) {
                    *target = Slot::Borrowed(values);
                }
                values.to_owned()
            }
            Slot::Empty => {
                return Err(Error::internal(format!(
                    "output {position} was not computed"
                )));
            }
        };
        store_output(slot, frame.shape(id)?.to_vec(), values.into_tensor_data())?;
    }
    Ok(())
}

/// An f32 result of `len` elements filled by `kernel`.
fn f32_result(
    pool: &mut BufferPool,
    len: usize,
    kernel: impl FnOnce(&mut [f32]) -> Result<()>,
) -> Result<Slot<'static>> {
    let mut out = pool.take(len)?;
    kernel(&mut out)?;
    Ok(Slot::Owned(Values::F32(out)))
}

fn run_op<'a>(
    prepared: &PreparedProgram,
    op: &Op,
    step: &Step,
    frame: &mut Frame<'a>,
    scratch: &mut Scratch,
) -> Result<Slot<'a>> {
    let program = &prepared.program;
    let out = op.output();
    let len = frame.numel(out)?;
    let pool = &mut scratch.pool;
    let f = &*frame;
    match op {
        Op::Gather { table, ids, .. } => {
            let dims = match *f.shape(*table)? {
                [vocab, width] => [vocab, width],
                _ => return Err(Error::internal("gather table is not 2-D")),
            };
            f32_result(pool, len, |o| {
                convert::gather(f.f32(*table)?, dims, f.get(*ids)?, o)
            })
        }
        Op::Binary { op, a, b, .. } => f32_result(pool, len, |o| {
            elementwise::binary(
                *op,
                (f.f32(*a)?, f.shape(*a)?),
                (f.f32(*b)?, f.shape(*b)?),
                f.shape(out)?,
                o,
            )
        }),
        Op::Scale { x, scale, bias, .. } => f32_result(pool, len, |o| {
            elementwise::scale(f.f32(*x)?, *scale, *bias, o)
        }),
        Op::Unary { op, x, .. } => {
            f32_result(pool, len, |o| elementwise::unary(*op, f.f32(*x)?, o))
        }
        Op::MatMul {
            a,
            b,
            bias,
            transpose_a,
            transpose_b,
            ..
        } => {
            let geometry =
                MatMulGeometry::new(f.shape(*a)?, f.shape(*b)?, *transpose_a, *transpose_b)?;
            let bias = bias.map(|id| f.f32(id)).transpose()?;
            let right = match prepared.packed.get(*b as usize) {
                Some(Some(packed)) => RightOperand::Packed(packed),
                _ => RightOperand::Values(f.f32(*b)?),
            };
            let gemm = &mut scratch.gemm;
            f32_result(pool, len, |o| {
                matmul::matmul(f.f32(*a)?, right, bias, &geometry, o, gemm)
            })
        }
        Op::LayerNorm {
            x,
            gamma,
            beta,
            eps,
            ..
        } => f32_result(pool, len, |o| {
            normalize::layer_norm(f.f32(*x)?, f.f32(*gamma)?, f.f32(*beta)?, *eps, o)
        }),
        Op::Softmax { x, mask, .. } => {
            let width = f.last_dim(out)?;
            f32_result(pool, len, |o| {
                match mask {
                    Some(mask) => elementwise::binary(
                        BinaryOp::Add,
                        (f.f32(*x)?, f.shape(*x)?),
                        (f.f32(*mask)?, f.shape(*mask)?),
                        f.shape(out)?,
                        o,
                    )?,
                    None => o.copy_from_slice(f.f32(*x)?),
                }
                normalize::softmax_in_place(o, width)
            })
        }
        Op::Reshape { x, .. } => Ok(reshape(frame, step, *x)),
        Op::Permute { x, perm, .. } => {
            typed_result(f.get(*x)?.dtype(), pool, len, Kernel::Permute(f, *x, perm))
        }
        Op::Slice {
            x,
            axis,
            start,
            end,
            ..
        } => {
            let geometry = SliceGeometry::new(f.shape(*x)?, *axis, *start, *end)?;
            typed_result(
                f.get(*x)?.dtype(),
                pool,
                len,
                Kernel::Slice(f, *x, &geometry),
            )
        }
        Op::Concat { inputs, axis, .. } => {
            let shapes = inputs
                .iter()
                .map(|&id| f.shape(id))
                .collect::<Result<Vec<_>>>()?;
            let geometry = ConcatGeometry::new(&shapes, *axis)?;
            let dtype = f.get(*inputs.first().unwrap_or(&out))?.dtype();
            typed_result(dtype, pool, len, Kernel::Concat(f, inputs, &geometry))
        }
        Op::Cast { x, .. } => {
            let dtype = declared_dtype(program, out)?;
            Ok(Slot::Owned(convert::cast(f.get(*x)?, dtype)?))
        }
        Op::Range { .. } => Ok(Slot::Owned(convert::range(
            len,
            declared_dtype(program, out)?,
        )?)),
        Op::MeanPool { x, mask, .. } => {
            let dims = match *f.shape(*x)? {
                [batch, seq, hidden] => [batch, seq, hidden],
                _ => return Err(Error::internal("mean_pool input is not 3-D")),
            };
            f32_result(pool, len, |o| {
                normalize::mean_pool(f.f32(*x)?, f.get(*mask)?, dims, o)
            })
        }
        Op::L2Normalize { x, eps, .. } => {
            let width = f.last_dim(*x)?;
            f32_result(pool, len, |o| {
                normalize::l2_normalize(f.f32(*x)?, width, *eps, o)
            })
        }
    }
}

/// The declared dtype of `id` (the result dtype of cast and range).
fn declared_dtype(program: &Program, id: TensorId) -> Result<DType> {
    program
        .tensors
        .get(id as usize)
        .map(|decl| decl.dtype)
        .ok_or_else(|| Error::internal(format!("tensor {id} is not declared")))
}

/// A reshape shares a borrowed buffer, moves a dying one, and copies only a buffer that is
/// still needed elsewhere.
fn reshape<'a>(frame: &mut Frame<'a>, step: &Step, x: TensorId) -> Slot<'a> {
    match frame.slots.get(x as usize) {
        Some(Slot::Borrowed(values)) => Slot::Borrowed(*values),
        Some(Slot::Owned(values)) if !step.release.contains(&x) => Slot::Owned(values.clone()),
        Some(Slot::Owned(_)) => frame.take(x),
        _ => Slot::Empty,
    }
}

/// A dtype-generic layout kernel and its operands.
enum Kernel<'f, 'a> {
    Permute(&'f Frame<'a>, TensorId, &'f [u32]),
    Slice(&'f Frame<'a>, TensorId, &'f SliceGeometry),
    Concat(&'f Frame<'a>, &'f [TensorId], &'f ConcatGeometry),
}

fn typed_result(
    dtype: DType,
    pool: &mut BufferPool,
    len: usize,
    kernel: Kernel<'_, '_>,
) -> Result<Slot<'static>> {
    match dtype {
        DType::F32 => run_typed::<f32>(pool, len, kernel),
        DType::I32 => run_typed::<i32>(pool, len, kernel),
        DType::I64 => run_typed::<i64>(pool, len, kernel),
        DType::U8 => run_typed::<u8>(pool, len, kernel),
    }
}

fn run_typed<T: Element>(
    pool: &mut BufferPool,
    len: usize,
    kernel: Kernel<'_, '_>,
) -> Result<Slot<'static>> {
    let mut out = T::zeroed(pool, len)?;
    match kernel {
        Kernel::Permute(frame, x, perm) => {
            layout::permute(frame.typed::<T>(x)?, frame.shape(x)?, perm, &mut out)?
        }
        Kernel::Slice(frame, x, geometry) => {
            layout::slice(frame.typed::<T>(x)?, geometry, &mut out)?
        }
        Kernel::Concat(frame, inputs, geometry) => {
            let parts = inputs
                .iter()
                .map(|&id| frame.typed::<T>(id))
                .collect::<Result<Vec<_>>>()?;
            layout::concat(&parts, geometry, &mut out)?;
        }
    }
    Ok(Slot::Owned(T::wrap(out)))
}
