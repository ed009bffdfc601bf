//! Data movement: permute, slice, concat (reshape moves nothing; the executor shares or moves
//! the buffer). Generic over the element type, so every dtype takes the same path.

use crate::backends::cpu::walk::{Row, for_each_row};
use crate::error::{Error, Result};
use crate::program::geometry::{ConcatGeometry, SliceGeometry, StridedWalk};

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
