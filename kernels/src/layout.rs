//! Data movement the worker pool runs: a permutation of up to four dims, copied by output rows
//! (every dim but the last), so any split of the rows gives the same bytes.

use crate::KernelError;
use crate::gemm::view_fits;

/// A permuted copy's geometry with both sides padded to four dims: `dims` are the output's,
/// `strides[j]` the input stride (in elements) of output dim `j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permute4 {
    /// The output's dims.
    pub dims: [usize; 4],
    /// The input's stride along each output dim.
    pub strides: [usize; 4],
}

impl Permute4 {
    /// The geometry of permuting a row-major `shape` (at most four dims) by `perm`, or `None`
    /// for more dims or a `perm` that is not a permutation of them.
    pub fn new(shape: &[usize], perm: &[u32]) -> Option<Self> {
        let rank = shape.len();
        if rank > 4 || perm.len() != rank {
            return None;
        }
        let mut seen = [false; 4];
        let mut input_strides = [0usize; 4];
        let mut stride = 1usize;
        for d in (0..rank).rev() {
            input_strides[d] = stride;
            stride = stride.checked_mul(shape[d])?;
        }
        let (mut dims, mut strides) = ([1usize; 4], [0usize; 4]);
        for (j, &p) in perm.iter().enumerate() {
            let p = p as usize;
            if p >= rank || seen[p] {
                return None;
            }
            seen[p] = true;
            dims[4 - rank + j] = shape[p];
            strides[4 - rank + j] = input_strides[p];
        }
        Some(Self { dims, strides })
    }

    /// Output rows (every dim but the last), or `None` when their count overflows.
    pub fn rows(&self) -> Option<usize> {
        self.dims[0]
            .checked_mul(self.dims[1])?
            .checked_mul(self.dims[2])
    }
}

/// Output rows `first_row..` of `geometry`'s permuted copy of `x` into `out` (whole rows of
/// `dims[3]` values).
///
/// # Errors
/// A [`KernelError`] when `out` is not whole rows, the rows run past the output, or a row
/// would read past `x`.
pub fn permute_rows<T: Copy>(
    x: &[T],
    geometry: &Permute4,
    first_row: usize,
    out: &mut [T],
) -> Result<(), KernelError> {
    let [_, d1, d2, width] = geometry.dims;
    let [s0, s1, s2, s3] = geometry.strides;
    if width == 0 {
        return Ok(());
    }
    let rows = geometry.rows();
    if !out.len().is_multiple_of(width)
        || first_row
            .checked_add(out.len() / width)
            .is_none_or(|end| rows.is_none_or(|rows| end > rows))
    {
        return Err(KernelError("permute rows run past the output"));
    }
    // `d1 * d2` cannot overflow: `rows` is their multiple and was checked above.
    let plane = d1 * d2;
    for (r, target) in out.chunks_exact_mut(width).enumerate() {
        let row = first_row + r;
        let (i2, i1, i0) = (row % d2, (row / d2) % d1, row / plane);
        let start = i0
            .checked_mul(s0)
            .zip(i1.checked_mul(s1))
            .zip(i2.checked_mul(s2))
            .and_then(|((a, b), c)| a.checked_add(b)?.checked_add(c));
        let Some(start) = start.filter(|&s| view_fits(x.len(), s, (0, s3), (1, width))) else {
            return Err(KernelError("a permute row reads past its input"));
        };
        if s3 == 1 {
            target.copy_from_slice(&x[start..start + width]);
        } else {
            for (j, o) in target.iter_mut().enumerate() {
                *o = x[start + j * s3];
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// [2, 3, 4, 5] by [0, 2, 1, 3] (attention's head split) and a full reversal, against
    /// index arithmetic, whole and in two shares.
    #[test]
    fn permutes_match_index_arithmetic_and_split_anywhere() {
        let shape = [2usize, 3, 4, 5];
        let x: Vec<u32> = (0..120).collect();
        for perm in [[0u32, 2, 1, 3], [3, 2, 1, 0], [1, 0, 3, 2]] {
            let g = Permute4::new(&shape, &perm).unwrap();
            let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p as usize]).collect();
            let mut want = Vec::new();
            for a in 0..out_shape[0] {
                for b in 0..out_shape[1] {
                    for c in 0..out_shape[2] {
                        for d in 0..out_shape[3] {
                            let mut idx = [0usize; 4];
                            for (j, v) in [a, b, c, d].into_iter().enumerate() {
                                idx[perm[j] as usize] = v;
                            }
                            want.push(x[((idx[0] * 3 + idx[1]) * 4 + idx[2]) * 5 + idx[3]]);
                        }
                    }
                }
            }
            let mut whole = std::vec![0u32; 120];
            permute_rows(&x, &g, 0, &mut whole).unwrap();
            assert_eq!(whole, want, "{perm:?}");
            let width = out_shape[3];
            let mut parts = std::vec![0u32; 120];
            let (top, bottom) = parts.split_at_mut(width * 7);
            permute_rows(&x, &g, 0, top).unwrap();
            permute_rows(&x, &g, 7, bottom).unwrap();
            assert_eq!(parts, want, "{perm:?} split");
        }
        // Fewer dims pad with leading ones.
        let g = Permute4::new(&[3, 4], &[1, 0]).unwrap();
        assert_eq!((g.dims, g.strides), ([1, 1, 4, 3], [0, 0, 1, 4]));
    }

    #[test]
    fn bad_geometry_and_lengths_are_refused() {
        assert!(Permute4::new(&[2, 3], &[0, 0]).is_none());
        assert!(Permute4::new(&[2, 3], &[0, 2]).is_none());
        assert!(Permute4::new(&[1, 1, 1, 1, 1], &[0, 1, 2, 3, 4]).is_none());
        let g = Permute4::new(&[2, 3], &[1, 0]).unwrap();
        let x = [0u8; 6];
        // Dims or strides from an untrusted caller that overflow are refused, not wrapped.
        let huge = Permute4 {
            dims: [usize::MAX, 2, 3, 1],
            strides: [1, 1, 1, 1],
        };
        assert!(huge.rows().is_none());
        assert!(permute_rows(&x, &huge, 0, &mut [0u8; 1]).is_err());
        let far = Permute4 {
            dims: [2, 1, 1, 1],
            strides: [usize::MAX, 0, 0, 1],
        };
        assert!(permute_rows(&x, &far, 0, &mut [0u8; 2]).is_err());
        assert!(permute_rows(&x, &g, 0, &mut [0u8; 5]).is_err());
        assert!(permute_rows(&x, &g, 2, &mut [0u8; 4]).is_err());
        assert!(permute_rows(&x[..5], &g, 0, &mut [0u8; 6]).is_err());
    }
}
