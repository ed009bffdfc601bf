//! Type conversion (`Cast`), position ranges (`Range`) and embedding lookup (`Gather`).
//!
//! Cast semantics (see `program::ops::Cast`): float -> integer truncates toward zero and saturates, NaN
//! becomes 0; integer -> integer saturates; anything -> f32 rounds to nearest.

use crate::backends::cpu::frame::{CpuOp, RunContext, Slot};
use crate::backends::cpu::ops::linear::{WeightRows, weight_rows};
use crate::backends::cpu::values::{Values, ValuesRef, filled};
use crate::error::{Error, Result};
use crate::program::ops::{Cast, Gather, Range};
use crate::program::{BlockFormat, DType};

/// Saturating conversion to every element type.
trait Element: Copy {
    fn to_f32(self) -> f32;
    fn to_i32(self) -> i32;
    fn to_i64(self) -> i64;
    fn to_u8(self) -> u8;
}

impl Element for f32 {
    fn to_f32(self) -> f32 {
        self
    }
    // `as` from float truncates toward zero, saturates and maps NaN to 0.
    fn to_i32(self) -> i32 {
        self as i32
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn to_u8(self) -> u8 {
        self as u8
    }
}

macro_rules! integer_element {
    ($t:ty) => {
        impl Element for $t {
            fn to_f32(self) -> f32 {
                self as f32
            }
            fn to_i32(self) -> i32 {
                i32::try_from(self).unwrap_or(if self > 0 { i32::MAX } else { i32::MIN })
            }
            fn to_i64(self) -> i64 {
                i64::from(self)
            }
            fn to_u8(self) -> u8 {
                u8::try_from(self).unwrap_or(if self > 0 { u8::MAX } else { 0 })
            }
        }
    };
}

integer_element!(i32);
integer_element!(i64);
integer_element!(u8);

/// `f` of each element of `x`, allocated fallibly.
fn map<T: Copy, U: Copy + Default>(x: &[T], f: impl Fn(T) -> U) -> Result<Vec<U>> {
    let mut out = filled(x.len(), U::default())?;
    for (o, &v) in out.iter_mut().zip(x) {
        *o = f(v);
    }
    Ok(out)
}

/// Validation keeps block formats to parameters read by the ops that decode them.
fn not_dense(format: BlockFormat) -> Error {
    Error::internal(format!(
        "{} reached an op that handles dense dtypes only",
        format.name()
    ))
}

fn cast_from<T: Element>(x: &[T], dtype: DType) -> Result<Values> {
    Ok(match dtype {
        DType::F32 => Values::F32(map(x, T::to_f32)?),
        DType::I32 => Values::I32(map(x, T::to_i32)?),
        DType::I64 => Values::I64(map(x, T::to_i64)?),
        DType::U8 => Values::U8(map(x, T::to_u8)?),
        DType::Block(format) => return Err(not_dense(format)),
    })
}

/// `x` converted to `dtype`.
///
/// # Errors
/// `MemoryAllocationFailed` when the result cannot be allocated.
pub fn cast(x: ValuesRef<'_>, dtype: DType) -> Result<Values> {
    match x {
        ValuesRef::F32(v) => cast_from(v, dtype),
        ValuesRef::I32(v) => cast_from(v, dtype),
        ValuesRef::I64(v) => cast_from(v, dtype),
        ValuesRef::U8(v) => cast_from(v, dtype),
        ValuesRef::Blocks(format, _) => Err(not_dense(format)),
    }
}

/// `0, 1, ..., len - 1` as `dtype` (i32, i64 or f32; validation refuses u8).
///
/// # Errors
/// `MemoryAllocationFailed` when the result cannot be allocated.
pub fn range(len: usize, dtype: DType) -> Result<Values> {
    fn fill<T: Copy + Default>(len: usize, f: impl Fn(usize) -> T) -> Result<Vec<T>> {
        let mut out = filled(len, T::default())?;
        for (i, o) in out.iter_mut().enumerate() {
            *o = f(i);
        }
        Ok(out)
    }
    Ok(match dtype {
        DType::F32 => Values::F32(fill(len, |i| i as f32)?),
        DType::I32 => Values::I32(fill(len, |i| i as i32)?),
        DType::I64 => Values::I64(fill(len, |i| i as i64)?),
        DType::U8 => Values::U8(fill(len, |i| i as u8)?),
        DType::Block(format) => return Err(not_dense(format)),
    })
}

/// Row `ids[s]` of the `[vocab, width]` `table` for every id, into `out` (`ids.len() * width`).
/// Ids are checked against `vocab` even when rows are empty (`width` 0).
///
/// # Errors
/// `InvalidArgument` naming the first id outside `0..vocab` (before anything is written);
/// `Internal` when lengths disagree.
pub fn gather(
    table: WeightRows<'_>,
    [vocab, width]: [usize; 2],
    ids: ValuesRef<'_>,
    out: &mut [f32],
) -> Result<()> {
    if out.len() != ids.len() * width || table.check(vocab, width).is_err() {
        return Err(Error::internal("gather operands disagree in length"));
    }
    let rows = checked_ids(ids, vocab)?;
    if width == 0 {
        return Ok(());
    }
    for (row, target) in rows.into_iter().zip(out.chunks_exact_mut(width)) {
        table.decode_row_into(row, width, target)?;
    }
    Ok(())
}

/// The table rows `ids` name, each checked against `vocab`.
///
/// # Errors
/// `InvalidArgument` naming the first id outside `0..vocab`; `Internal` for ids of another
/// dtype than i32 / i64.
fn checked_ids(ids: ValuesRef<'_>, vocab: usize) -> Result<Vec<usize>> {
    match ids {
        ValuesRef::I32(v) => checked_rows(v.iter().map(|&id| i64::from(id)), vocab),
        ValuesRef::I64(v) => checked_rows(v.iter().copied(), vocab),
        other => Err(Error::internal(format!(
            "gather ids are {}",
            other.dtype().name()
        ))),
    }
}

fn checked_rows(ids: impl Iterator<Item = i64>, vocab: usize) -> Result<Vec<usize>> {
    ids.enumerate()
        .map(|(position, id)| {
            usize::try_from(id)
                .ok()
                .filter(|&row| row < vocab)
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "gather: id {id} at position {position} is outside the table's 0..{vocab}"
                    ))
                })
        })
        .collect()
}

impl CpuOp for Gather {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let dims = match *cx.frame.shape(self.table)? {
            [vocab, width] => [vocab, width],
            _ => return Err(Error::internal("gather table is not 2-D")),
        };
        if let Some(threaded) = cx.threaded.filter(|t| t.has_blocks(self.table)) {
            // The table lives only in the worker pool's shared memory.
            return cx.f32_result(self.out, |f, o| {
                let [vocab, width] = dims;
                if o.len() != f.numel(self.ids)? * width {
                    return Err(Error::internal("gather operands disagree in length"));
                }
                let rows = checked_ids(f.get(self.ids)?, vocab)?;
                if width == 0 {
                    return Ok(());
                }
                let (format, bytes) = threaded.read_rows(self.table, &rows, width)?;
                let table = WeightRows::Blocks(format, &bytes);
                for (row, target) in o.chunks_exact_mut(width).enumerate() {
                    table.decode_row_into(row, width, target)?;
                }
                Ok(())
            });
        }
        cx.f32_result(self.out, |f, o| {
            gather(weight_rows(f, self.table)?, dims, f.get(self.ids)?, o)
        })
    }
}

impl CpuOp for Cast {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let dtype = cx.declared_dtype(self.out)?;
        Ok(Slot::Owned(cast(cx.frame.get(self.x)?, dtype)?))
    }
}

impl CpuOp for Range {
    fn run<'a>(&self, cx: &mut RunContext<'_, 'a>) -> Result<Slot<'a>> {
        let len = cx.frame.numel(self.out)?;
        Ok(Slot::Owned(range(len, cx.declared_dtype(self.out)?)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_checks_ids_even_for_empty_rows() {
        let mut out = [];
        gather(
            WeightRows::F32(&[]),
            [5, 0],
            ValuesRef::I64(&[0, 4]),
            &mut out,
        )
        .unwrap();
        let error =
            gather(WeightRows::F32(&[]), [5, 0], ValuesRef::I64(&[5]), &mut out).unwrap_err();
        assert_eq!(error.code(), crate::error::ErrorCode::InvalidArgument);
        let mut out = [0.0; 2];
        let error = gather(
            WeightRows::F32(&[1.0, 2.0]),
            [1, 2],
            ValuesRef::I32(&[-1]),
            &mut out,
        )
        .unwrap_err();
        assert!(error.message().contains("id -1 at position 0"), "{error}");
        assert!(
            gather(
                WeightRows::F32(&[1.0]),
                [1, 2],
                ValuesRef::I32(&[0]),
                &mut out
            )
            .is_err()
        );
    }

    #[test]
    fn casts_saturate_and_ranges_count() {
        let cast_u8 = cast(ValuesRef::I32(&[-3, 7, 300]), DType::U8).unwrap();
        assert_eq!(cast_u8, Values::U8(vec![0, 7, 255]));
        let cast_i32 = cast(ValuesRef::F32(&[f32::INFINITY, -2.9, f32::NAN]), DType::I32).unwrap();
        assert_eq!(cast_i32, Values::I32(vec![i32::MAX, -2, 0]));
        assert_eq!(
            range(3, DType::F32).unwrap(),
            Values::F32(vec![0.0, 1.0, 2.0])
        );
    }
}
