//! Data movement: `Reshape` (moves nothing: it shares a borrowed buffer, moves a dying one and
//! copies only one still needed elsewhere), `Permute`, `Slice`, `Concat`. Generic over the
//! element type, so every dtype takes the same path; on the worker pool, an f32 permute of up
//! to four dims is the kernels' `permute_rows`.

use crate::backends::cpu::frame::{CpuOp, Frame, RunContext, Slot};
use crate::backends::cpu::values::{BufferPool, Element, Values};
use crate::backends::cpu::walk::{Row, for_each_row};
use crate::error::{Error, Result};
use crate::program::geometry::{ConcatGeometry, SliceGeometry, StridedWalk};
use crate::program::ops::{Concat, Permute, Reshape, Slice};
use crate::program::{DType, TensorId};
use webdelegate_kernels::layout::Permute4;

/// Copies `x` (of shape `x_shape`) permuted by `perm` into `out`.
///
/// # Errors
/// `Internal` when `perm` or the lengths do not fit (validation rules that out).
pub fn permute<T: Copy>(x: &[T], x_shape: &[usize], perm: &[u32], out: &mut [T]) -> Result<()> {
    if out.len() != x.len() {
        return Err(Error::internal("permute output has the wrong length"));
    }
    let walk = StridedWalk::permute(x_shape, perm)?;
    for_each_row(&walk, [x.len()], |row: Row<1>| {
        let target = out
            .get_mut(row.out..row.out + row.len)
            .ok_or_else(|| Error::internal("permute output is too short"))?;
        let [offset] = row.offsets;
        match row.strides {
            [1] => {
                let source = x
                    .get(offset..offset + row.len)
                    .ok_or_else(|| Error::internal("permute row past the end"))?;
                target.copy_from_slice(source);
            }
            [stride] => {
                let source = x
                    .get(offset..)
                    .ok_or_else(|| Error::internal("permute row past the end"))?;
                for (o, &v) in target.iter_mut().zip(source.iter().step_by(stride.max(1))) {
                    *o = v;
                }
            }
        }
        Ok(())
    })
}

/// Copies the slice `geometry` describes from `x` into `out`.
///
/// # Errors
/// `Internal` when the lengths do not fit the geometry.
pub fn slice<T: Copy>(x: &[T], geometry: &SliceGeometry, out: &mut [T]) -> Result<()> {
    let SliceGeometry {
        outer,
        extent,
        inner,
        start,
        len,
    } = *geometry;
    if x.len() != outer * extent * inner || out.len() != outer * len * inner {
        return Err(Error::internal("slice operands disagree with the geometry"));
    }
    let block = len * inner;
    if block == 0 {
        return Ok(());
    }
    for (o, target) in out.chunks_exact_mut(block).enumerate() {
        let from = (o * extent + start) * inner;
        target.copy_from_slice(&x[from..from + block]);
    }
    Ok(())
}

/// Concatenates `inputs` as `geometry` describes into `out`.
///
/// # Errors
/// `Internal` when the lengths do not fit the geometry.
pub fn concat<T: Copy>(inputs: &[&[T]], geometry: &ConcatGeometry, out: &mut [T]) -> Result<()> {
    let ConcatGeometry {
        outer,
        inner,
        ref extents,
    } = *geometry;
    if inputs.len() != extents.len()
        || inputs
            .iter()
            .zip(extents)
            .any(|(input, &extent)| input.len() != outer * extent * inner)
        || out.len() != outer * inner * extents.iter().sum::<usize>()
    {
        return Err(Error::internal(
            "concat operands disagree with the geometry",
        ));
    }
    let mut position = 0;
    for o in 0..outer {
        for (input, &extent) in inputs.iter().zip(extents) {
            let block = extent * inner;
            out[position..position + block].copy_from_slice(&input[o * block..(o + 1) * block]);
            position += block;
        }
    }
    Ok(())
}

impl CpuOp for Reshape {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let frame = &mut *cx.frame;
        Ok(match frame.slots.get(self.x as usize) {
            Some(Slot::Borrowed(values)) => Slot::Borrowed(*values),
            Some(Slot::Owned(values)) if !cx.step.release.contains(&self.x) => {
                Slot::Owned(values.clone())
            }
            Some(Slot::Shared(values)) if !cx.step.release.contains(&self.x) => {
                Slot::Owned(Values::F32(values.host()?.to_vec()))
            }
            Some(Slot::Owned(_) | Slot::Shared(_)) => frame.take(self.x),
            _ => Slot::Empty,
        })
    }
}

impl CpuOp for Permute {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        if let Some(threaded) = cx.threaded
            && cx.declared_dtype(self.x)? == DType::F32
            && threaded.worth(f.numel(self.x)?)
            && let Some(geometry) = Permute4::new(f.shape(self.x)?, &self.perm)
        {
            let x = f.operand(self.x)?;
            let out = threaded.permute(&mut cx.scratch.shared, x, &geometry)?;
            return Ok(Slot::Shared(out));
        }
        let kernel = Kernel::Permute(f, self.x, &self.perm);
        let (dtype, len) = (f.get(self.x)?.dtype(), f.numel(self.out)?);
        typed_result(dtype, &mut cx.scratch.pool, len, kernel)
    }
}

impl CpuOp for Slice {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        let geometry = SliceGeometry::new(f.shape(self.x)?, self.axis, self.start, self.end)?;
        let (dtype, len) = (f.get(self.x)?.dtype(), f.numel(self.out)?);
        let kernel = Kernel::Slice(f, self.x, &geometry);
        typed_result(dtype, &mut cx.scratch.pool, len, kernel)
    }
}

impl CpuOp for Concat {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let f = &*cx.frame;
        let shapes = self
            .inputs
            .iter()
            .map(|&id| f.shape(id))
            .collect::<Result<Vec<_>>>()?;
        let geometry = ConcatGeometry::new(&shapes, self.axis)?;
        let dtype = f.get(*self.inputs.first().unwrap_or(&self.out))?.dtype();
        let len = f.numel(self.out)?;
        let kernel = Kernel::Concat(f, &self.inputs, &geometry);
        typed_result(dtype, &mut cx.scratch.pool, len, kernel)
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
        DType::Block(format) => Err(Error::internal(format!(
            "{} reached a layout op (validation allows dense dtypes only)",
            format.name()
        ))),
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
            permute(frame.typed::<T>(x)?, frame.shape(x)?, perm, &mut out)?
        }
        Kernel::Slice(frame, x, geometry) => slice(frame.typed::<T>(x)?, geometry, &mut out)?,
        Kernel::Concat(frame, inputs, geometry) => {
            let parts = inputs
                .iter()
                .map(|&id| frame.typed::<T>(id))
                .collect::<Result<Vec<_>>>()?;
            concat(&parts, geometry, &mut out)?;
        }
    }
    Ok(Slot::Owned(T::wrap(out)))
}
