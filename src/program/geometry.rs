//! Concrete index geometry of the ops whose element addressing is not trivial (broadcasting,
//! matmul batching and transposes, permutes, slices, concats), computed from *bound* shapes.
//!
//! Both backends use these, so they agree on how an op walks memory: the CPU backend loops over
//! them, the WebGPU backend passes them to its kernels as uniforms. Shapes are expected to be
//! ones that validation and [`bind_shapes`](super::bind_shapes) accepted; anything inconsistent
//! still yields an `Internal` error rather than a panic.

use crate::error::{Error, Result};

/// Row-major strides of `shape`, in elements.
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut stride = 1usize;
    for (slot, &extent) in strides.iter_mut().zip(shape).rev() {
        *slot = stride;
        stride = stride.saturating_mul(extent);
    }
    strides
}

/// Strides of `operand` (right-aligned against `out`), 0 along broadcast dims.
///
/// # Errors
/// `Internal` when `operand` does not broadcast to `out`.
pub fn broadcast_strides(operand: &[usize], out: &[usize]) -> Result<Vec<usize>> {
    let offset = out
        .len()
        .checked_sub(operand.len())
        .ok_or_else(|| Error::internal(format!("{operand:?} has more dims than {out:?}")))?;
    let own = contiguous_strides(operand);
    let mut strides = vec![0; out.len()];
    for (axis, (&extent, &stride)) in operand.iter().zip(&own).enumerate() {
        let target = out[offset + axis];
        strides[offset + axis] = if extent == target {
            stride
        } else if extent == 1 {
            0
        } else {
            return Err(Error::internal(format!(
                "{operand:?} does not broadcast to {out:?}"
            )));
        };
    }
    Ok(strides)
}

/// The broadcast shape of two concrete shapes.
///
/// # Errors
/// `Internal` when they do not broadcast.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    (0..rank)
        .map(|axis| {
            let from_right = rank - axis;
            let da = a.len().checked_sub(from_right).map_or(1, |i| a[i]);
            let db = b.len().checked_sub(from_right).map_or(1, |i| b[i]);
            match (da, db) {
                (x, y) if x == y => Ok(x),
                (1, y) => Ok(y),
                (x, 1) => Ok(x),
                _ => Err(Error::internal(format!("{a:?} and {b:?} do not broadcast"))),
            }
        })
        .collect()
}

/// A walk over a row-major output with one strided view per operand, adjacent dims merged
/// where every operand allows it (so the innermost loop is as long as possible).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StridedWalk {
    /// Extents of the (merged) output dims; never empty (a scalar walks `[1]`).
    pub shape: Vec<usize>,
    /// Per operand, its stride along each merged dim (0 = broadcast).
    pub strides: Vec<Vec<usize>>,
}

impl StridedWalk {
    /// Merges dims of `shape` where every operand's strides are contiguous across them, and
    /// drops dims of extent 1.
    pub fn new(shape: &[usize], operands: Vec<Vec<usize>>) -> Self {
        let mut merged_shape: Vec<usize> = Vec::with_capacity(shape.len());
        let mut merged: Vec<Vec<usize>> = vec![Vec::with_capacity(shape.len()); operands.len()];
        for (axis, &extent) in shape.iter().enumerate() {
            if extent == 1 {
                continue;
            }
            let mergeable = merged_shape.last().is_some()
                && operands.iter().zip(&merged).all(|(strides, done)| {
                    done.last()
                        .is_some_and(|&outer| outer == strides[axis].saturating_mul(extent))
                });
            if mergeable {
                if let Some(last) = merged_shape.last_mut() {
                    *last *= extent;
                }
                for (strides, done) in operands.iter().zip(merged.iter_mut()) {
                    if let Some(last) = done.last_mut() {
                        *last = strides[axis];
                    }
                }
            } else {
                merged_shape.push(extent);
                for (strides, done) in operands.iter().zip(merged.iter_mut()) {
                    done.push(strides[axis]);
                }
            }
        }
        if merged_shape.is_empty() {
            merged_shape.push(if shape.contains(&0) { 0 } else { 1 });
            for done in &mut merged {
                done.push(0);
            }
        }
        Self {
            shape: merged_shape,
            strides: merged,
        }
    }

    /// The walk of `out = a (op) b` with broadcasting.
    ///
    /// # Errors
    /// `Internal` when the shapes do not broadcast to `out`.
    pub fn binary(a: &[usize], b: &[usize], out: &[usize]) -> Result<Self> {
        Ok(Self::new(
            out,
            vec![broadcast_strides(a, out)?, broadcast_strides(b, out)?],
        ))
    }

    /// The walk that reads `x` permuted by `perm` into a contiguous output.
    ///
    /// # Errors
    /// `Internal` when `perm` is not a permutation of `x`'s dims.
    pub fn permute(x: &[usize], perm: &[u32]) -> Result<Self> {
        let strides = contiguous_strides(x);
        let mut out_shape = Vec::with_capacity(perm.len());
        let mut out_strides = Vec::with_capacity(perm.len());
        for &axis in perm {
            let axis = axis as usize;
            match (x.get(axis), strides.get(axis)) {
                (Some(&extent), Some(&stride)) => {
                    out_shape.push(extent);
                    out_strides.push(stride);
                }
                _ => return Err(Error::internal(format!("bad permutation {perm:?}"))),
            }
        }
        Ok(Self::new(&out_shape, vec![out_strides]))
    }
}

/// How a (batched, possibly transposed, broadcast) matmul addresses its operands.
///
/// `A(i, p)` of batch `t` is `a[a_offset(t) + i * a_row_stride + p * a_col_stride]`; likewise
/// `B(p, j)`; the output of batch `t` is the contiguous `m x n` block at `t * m * n`. When `b`
/// is shared by every batch and `a` is not transposed, the batches fold into `m` (one large
/// product instead of many small ones).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatMulGeometry {
    /// Output batch extents (empty after folding).
    pub batch_shape: Vec<usize>,
    /// `a`'s stride along each batch dim (0 = broadcast).
    pub a_batch_strides: Vec<usize>,
    /// `b`'s stride along each batch dim (0 = broadcast).
    pub b_batch_strides: Vec<usize>,
    /// Rows of each product.
    pub m: usize,
    /// Contracted extent.
    pub k: usize,
    /// Columns of each product.
    pub n: usize,
    /// Stride between rows `i` of `A`.
    pub a_row_stride: usize,
    /// Stride between columns `p` of `A`.
    pub a_col_stride: usize,
    /// Stride between rows `p` of `B`.
    pub b_row_stride: usize,
    /// Stride between columns `j` of `B`.
    pub b_col_stride: usize,
}

impl MatMulGeometry {
    /// The geometry of `a @ b` for bound shapes.
    ///
    /// # Errors
    /// `Internal` when the shapes do not fit (validation rules that out).
    pub fn new(a: &[usize], b: &[usize], transpose_a: bool, transpose_b: bool) -> Result<Self> {
        let bad = || Error::internal(format!("matmul of {a:?} and {b:?} does not fit"));
        let a_split = a.len().checked_sub(2).ok_or_else(bad)?;
        let b_split = b.len().checked_sub(2).ok_or_else(bad)?;
        let (a_batch, a_mat) = a.split_at(a_split);
        let (b_batch, b_mat) = b.split_at(b_split);
        let (rows_a, cols_a) = (a_mat[0], a_mat[1]);
        let (rows_b, cols_b) = (b_mat[0], b_mat[1]);
        let (m, k, a_row_stride, a_col_stride) = if transpose_a {
            (cols_a, rows_a, 1, cols_a)
        } else {
            (rows_a, cols_a, cols_a, 1)
        };
        let (k_b, n, b_row_stride, b_col_stride) = if transpose_b {
            (cols_b, rows_b, 1, cols_b)
        } else {
            (rows_b, cols_b, cols_b, 1)
        };
        if k != k_b {
            return Err(bad());
        }
        let batch_shape = broadcast_shape(a_batch, b_batch)?;
        let scale = |strides: Vec<usize>, block: usize| -> Vec<usize> {
            strides.into_iter().map(|s| s * block).collect()
        };
        let a_batch_strides = scale(broadcast_strides(a_batch, &batch_shape)?, rows_a * cols_a);
        let b_batch_strides = scale(broadcast_strides(b_batch, &batch_shape)?, rows_b * cols_b);
        let mut geometry = Self {
            batch_shape,
            a_batch_strides,
            b_batch_strides,
            m,
            k,
            n,
            a_row_stride,
            a_col_stride,
            b_row_stride,
            b_col_stride,
        };
        geometry.fold_batches(transpose_a);
        Ok(geometry)
    }

    /// Folds the batch into `m` when `b` is shared and `a`'s batches are consecutive row blocks.
    fn fold_batches(&mut self, transpose_a: bool) {
        if transpose_a || self.batch_shape.is_empty() {
            return;
        }
        let b_shared = self.b_batch_strides.iter().all(|&s| s == 0);
        let block = self.m * self.k;
        let a_contiguous = contiguous_strides(&self.batch_shape)
            .iter()
            .zip(&self.a_batch_strides)
            .zip(&self.batch_shape)
            .all(|((&c, &s), &extent)| extent == 1 || s == c * block);
        if b_shared && a_contiguous {
            self.m *= self.batch_count();
            self.batch_shape.clear();
            self.a_batch_strides.clear();
            self.b_batch_strides.clear();
        }
    }

    /// Number of products (1 after folding).
    pub fn batch_count(&self) -> usize {
        self.batch_shape.iter().product()
    }

    /// Offsets of batch `index`'s `A` and `B` within `a` and `b`.
    pub fn batch_offsets(&self, index: usize) -> (usize, usize) {
        let mut rest = index;
        let (mut a_offset, mut b_offset) = (0, 0);
        for ((&extent, &a_stride), &b_stride) in self
            .batch_shape
            .iter()
            .zip(&self.a_batch_strides)
            .zip(&self.b_batch_strides)
            .rev()
        {
            let position = rest % extent.max(1);
            rest /= extent.max(1);
            a_offset += position * a_stride;
            b_offset += position * b_stride;
        }
        (a_offset, b_offset)
    }
}

/// A slice along one axis as `outer` blocks of `extent` rows of `inner` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceGeometry {
    /// Product of the dims before the axis.
    pub outer: usize,
    /// The axis extent of the input.
    pub extent: usize,
    /// Product of the dims after the axis.
    pub inner: usize,
    /// First index taken along the axis.
    pub start: usize,
    /// Number of indices taken.
    pub len: usize,
}

impl SliceGeometry {
    /// The geometry of slicing `x` along `axis` from `start` to `end` (`None` = the extent).
    ///
    /// # Errors
    /// `Internal` for an axis out of range or bounds past the extent.
    pub fn new(x: &[usize], axis: u32, start: u64, end: Option<u64>) -> Result<Self> {
        let axis = axis as usize;
        let extent = *x
            .get(axis)
            .ok_or_else(|| Error::internal(format!("slice axis {axis} of {x:?}")))?;
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        let end = end.map_or(extent, |e| usize::try_from(e).unwrap_or(usize::MAX));
        if start > end || end > extent {
            return Err(Error::internal(format!(
                "slice {start}..{end} of extent {extent}"
            )));
        }
        Ok(Self {
            outer: x[..axis].iter().product(),
            extent,
            inner: x[axis + 1..].iter().product(),
            start,
            len: end - start,
        })
    }
}

/// A concatenation along one axis: `outer` blocks, in each the inputs' `extents[i] * inner`
/// elements one after another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConcatGeometry {
    /// Product of the dims before the axis.
    pub outer: usize,
    /// Product of the dims after the axis.
    pub inner: usize,
    /// Each input's extent along the axis.
    pub extents: Vec<usize>,
}

impl ConcatGeometry {
    /// The geometry of concatenating `inputs` along `axis`.
    ///
    /// # Errors
    /// `Internal` for no inputs or an axis out of range.
    pub fn new(inputs: &[&[usize]], axis: u32) -> Result<Self> {
        let axis = axis as usize;
        let first = inputs
            .first()
            .ok_or_else(|| Error::internal("concat without inputs"))?;
        if axis >= first.len() || inputs.iter().any(|shape| shape.len() != first.len()) {
            return Err(Error::internal(format!("concat axis {axis} of {first:?}")));
        }
        Ok(Self {
            outer: first[..axis].iter().product(),
            inner: first[axis + 1..].iter().product(),
            extents: inputs.iter().map(|shape| shape[axis]).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strides_and_broadcast() {
        assert_eq!(contiguous_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert_eq!(contiguous_strides(&[]), Vec::<usize>::new());
        assert_eq!(
            broadcast_strides(&[3, 1], &[2, 3, 4]).unwrap(),
            vec![0, 1, 0]
        );
        assert!(broadcast_strides(&[3, 2], &[2, 3, 4]).is_err());
        assert!(broadcast_strides(&[1, 1, 1, 1], &[2]).is_err());
        assert_eq!(broadcast_shape(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
        assert!(broadcast_shape(&[2], &[3]).is_err());
    }

    #[test]
    fn walks_merge_contiguous_dims() {
        // Same shape: one long inner loop.
        let walk = StridedWalk::binary(&[2, 3, 4], &[2, 3, 4], &[2, 3, 4]).unwrap();
        assert_eq!(walk.shape, vec![24]);
        assert_eq!(walk.strides, vec![vec![1], vec![1]]);
        // Row bias: b repeats every 4 elements.
        let walk = StridedWalk::binary(&[2, 3, 4], &[4], &[2, 3, 4]).unwrap();
        assert_eq!(walk.shape, vec![6, 4]);
        assert_eq!(walk.strides, vec![vec![4, 1], vec![0, 1]]);
        // Column broadcast.
        let walk = StridedWalk::binary(&[2, 3, 1], &[2, 3, 4], &[2, 3, 4]).unwrap();
        assert_eq!(walk.shape, vec![6, 4]);
        assert_eq!(walk.strides, vec![vec![1, 0], vec![4, 1]]);
        // Scalars.
        let walk = StridedWalk::binary(&[], &[], &[]).unwrap();
        assert_eq!(walk.shape, vec![1]);
        // Transpose of the last two dims of [2, 3, 4]: out [2, 4, 3].
        let walk = StridedWalk::permute(&[2, 3, 4], &[0, 2, 1]).unwrap();
        assert_eq!(walk.shape, vec![2, 4, 3]);
        assert_eq!(walk.strides, vec![vec![12, 1, 4]]);
        // Identity permutation merges to one dim.
        let walk = StridedWalk::permute(&[2, 3, 4], &[0, 1, 2]).unwrap();
        assert_eq!(walk.shape, vec![24]);
        assert!(StridedWalk::permute(&[2, 3], &[0, 5]).is_err());
    }

    #[test]
    fn matmul_geometry_folds_shared_weights() {
        let g = MatMulGeometry::new(&[2, 5, 8], &[3, 8], false, true).unwrap();
        assert_eq!((g.m, g.k, g.n), (10, 8, 3));
        assert_eq!(g.batch_count(), 1);
        assert_eq!((g.a_row_stride, g.a_col_stride), (8, 1));
        assert_eq!((g.b_row_stride, g.b_col_stride), (1, 8));

        // Attention-style batched product: no folding.
        let g = MatMulGeometry::new(&[2, 3, 5, 4], &[2, 3, 4, 5], false, false).unwrap();
        assert_eq!(g.batch_count(), 6);
        assert_eq!(g.batch_offsets(4), (4 * 20, 4 * 20));

        // Broadcast a over b's batch.
        let g = MatMulGeometry::new(&[5, 4], &[3, 4, 6], false, false).unwrap();
        assert_eq!(g.batch_count(), 3);
        assert_eq!(g.batch_offsets(2), (0, 2 * 24));

        // Transposed a: no folding.
        let g = MatMulGeometry::new(&[2, 4, 5], &[4, 6], true, false).unwrap();
        assert_eq!((g.m, g.k, g.batch_count()), (5, 4, 2));
        assert_eq!((g.a_row_stride, g.a_col_stride), (1, 5));
        assert!(MatMulGeometry::new(&[2, 4], &[5, 6], false, false).is_err());
    }

    #[test]
    fn slice_and_concat_geometry() {
        let s = SliceGeometry::new(&[2, 5, 3], 1, 1, Some(4)).unwrap();
        assert_eq!(
            (s.outer, s.extent, s.inner, s.start, s.len),
            (2, 5, 3, 1, 3)
        );
        assert!(SliceGeometry::new(&[2, 5], 1, 4, Some(6)).is_err());
        assert!(SliceGeometry::new(&[2, 5], 2, 0, None).is_err());
        let c = ConcatGeometry::new(&[&[2, 1, 3], &[2, 4, 3]], 1).unwrap();
        assert_eq!((c.outer, c.inner, c.extents.clone()), (2, 3, vec![1, 4]));
        assert!(ConcatGeometry::new(&[], 0).is_err());
        assert!(ConcatGeometry::new(&[&[2], &[2, 3]], 0).is_err());
    }

    #[test]
    fn broadcast_strides_follow_numpy() {
        // Moved from the WebGPU backend's copy of this helper, which this one replaced.
        assert_eq!(
            broadcast_strides(&[3, 4], &[2, 3, 4]).unwrap(),
            vec![0, 4, 1]
        );
        assert_eq!(broadcast_strides(&[4], &[2, 3, 4]).unwrap(), vec![0, 0, 1]);
        assert_eq!(
            broadcast_strides(&[2, 1, 4], &[2, 3, 4]).unwrap(),
            vec![4, 0, 1]
        );
        assert_eq!(broadcast_strides(&[], &[5]).unwrap(), vec![0]);
        assert!(broadcast_strides(&[3], &[2, 4]).is_err());
        assert!(broadcast_strides(&[1, 2, 3], &[2, 3]).is_err());
    }
}
