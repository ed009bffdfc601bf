//! Matrix multiplication for the CPU backend's ops: batches of a program's `matmul`
//! geometry, each one product of the blocked GEMM in `webdelegate_kernels::gemm`, and weights
//! packed once at init into that GEMM's panel order ([`PackedB`]), so executions skip packing
//! them.

use crate::error::{Error, Result};
use crate::program::geometry::MatMulGeometry;
use webdelegate_kernels::KernelError;
use webdelegate_kernels::gemm::{self, Panels, Strided};

#[cfg(test)]
use webdelegate_kernels::gemm::{KC, MC, MR, NC, NR};

/// Reusable packing buffers (kept between executions to avoid reallocating).
#[derive(Debug, Default)]
pub struct GemmScratch {
    packed_a: Vec<f32>,
    packed_b: Vec<f32>,
}

/// A `k x n` right operand packed once into the GEMM's panel order (all `NC` x `KC` panels, in
/// the order the product visits them), so products with it skip packing.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedB {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

impl GemmScratch {
    /// Bytes the packing buffers hold.
    pub fn bytes(&self) -> usize {
        (self.packed_a.capacity() + self.packed_b.capacity()) * 4
    }
}

impl PackedB {
    /// Packs `values` of stored shape `[k, n]`, or `[n, k]` when `transposed`.
    ///
    /// # Errors
    /// `Internal` when `values` is shorter than the shape.
    pub fn pack(values: &[f32], shape: [usize; 2], transposed: bool) -> Result<Self> {
        let (k, n, row_stride, col_stride) = if transposed {
            (shape[1], shape[0], 1, shape[1])
        } else {
            (shape[0], shape[1], shape[1], 1)
        };
        let view = Strided {
            data: values,
            offset: 0,
            row_stride,
            col_stride,
        };
        let mut data = Vec::new();
        data.try_reserve_exact(gemm::packed_b_len(k, n))
            .map_err(|_| {
                Error::memory_allocation_failed("a packed weight does not fit in memory")
            })?;
        data.resize(gemm::packed_b_len(k, n), 0.0);
        gemm::pack_b(view, k, n, &mut data).map_err(kernel_error)?;
        Ok(Self { k, n, data })
    }

    /// The reduction length and the columns: `(k, n)`.
    #[cfg(web)]
    pub fn dims(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// The packed values, in panel order.
    #[cfg(web)]
    pub fn values(&self) -> &[f32] {
        &self.data
    }

    /// Bytes the packed values hold.
    pub fn bytes(&self) -> usize {
        self.data.capacity() * 4
    }
}

/// The right operand of a product.
#[derive(Clone, Copy, Debug)]
pub enum RightOperand<'a> {
    /// Elements addressed through the geometry's `b` strides.
    Values(&'a [f32]),
    /// A matrix packed by [`PackedB::pack`], shared by every batch.
    Packed(&'a PackedB),
}

/// A kernel's refusal as the runtime's error (validation and binding rule these out).
pub(crate) fn kernel_error(error: KernelError) -> Error {
    Error::internal(error.0)
}

/// `out = a @ b (+ bias)` for every batch of `geometry`; `out` is contiguous
/// `batch x m x n`.
///
/// # Errors
/// `Internal` when an operand or `out` is too short for the geometry, or a packed `b` does not
/// match it (validation and binding rule both out).
pub fn matmul(
    a: &[f32],
    b: RightOperand<'_>,
    bias: Option<&[f32]>,
    geometry: &MatMulGeometry,
    out: &mut [f32],
    scratch: &mut GemmScratch,
) -> Result<()> {
    let (m, k, n) = (geometry.m, geometry.k, geometry.n);
    let block = m * n;
    if out.len() != block * geometry.batch_count() {
        return Err(Error::internal("matmul output has the wrong length"));
    }
    let (a_len, b_len) = gemm::scratch_lens(m, k, n);
    let GemmScratch { packed_a, packed_b } = scratch;
    packed_a.resize(a_len, 0.0);
    if let RightOperand::Values(_) = b {
        packed_b.resize(b_len, 0.0);
    }
    for (batch, c) in out.chunks_exact_mut(block.max(1)).enumerate() {
        let (offset_a, offset_b) = geometry.batch_offsets(batch);
        let view_a = Strided {
            data: a,
            offset: offset_a,
            row_stride: geometry.a_row_stride,
            col_stride: geometry.a_col_stride,
        };
        let panels = match b {
            RightOperand::Values(data) => Panels::Pack(Strided {
                data,
                offset: offset_b,
                row_stride: geometry.b_row_stride,
                col_stride: geometry.b_col_stride,
            }),
            RightOperand::Packed(packed) if packed.k == k && packed.n == n && offset_b == 0 => {
                Panels::Packed(&packed.data)
            }
            RightOperand::Packed(_) => {
                return Err(Error::internal(
                    "packed matmul operand does not fit the product",
                ));
            }
        };
        gemm::gemm((m, k, n), view_a, panels, bias, c, packed_a, packed_b).map_err(kernel_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::samples::fill;

    /// Plain triple loop in f64 over the same geometry.
    fn naive(a: &[f32], b: &[f32], bias: Option<&[f32]>, g: &MatMulGeometry) -> Vec<f64> {
        let mut out = Vec::new();
        for batch in 0..g.batch_count() {
            let (oa, ob) = g.batch_offsets(batch);
            for i in 0..g.m {
                for j in 0..g.n {
                    let mut sum = bias.map_or(0.0, |bias| f64::from(bias[j]));
                    for p in 0..g.k {
                        sum += f64::from(a[oa + i * g.a_row_stride + p * g.a_col_stride])
                            * f64::from(b[ob + p * g.b_row_stride + j * g.b_col_stride]);
                    }
                    out.push(sum);
                }
            }
        }
        out
    }

    fn check(a_shape: &[usize], b_shape: &[usize], ta: bool, tb: bool, with_bias: bool) {
        let g = MatMulGeometry::new(a_shape, b_shape, ta, tb).unwrap();
        let a = fill(a_shape.iter().product(), 1);
        let b = fill(b_shape.iter().product(), 2);
        let bias = fill(g.n, 3);
        let bias = with_bias.then_some(bias.as_slice());
        let mut out = vec![f32::NAN; g.batch_count() * g.m * g.n];
        let mut scratch = GemmScratch::default();
        matmul(
            &a,
            RightOperand::Values(&b),
            bias,
            &g,
            &mut out,
            &mut scratch,
        )
        .unwrap();
        let want = naive(&a, &b, bias, &g);
        if let [rows, cols] = *b_shape {
            // The same product with `b` packed once up front must give identical bits.
            let packed = PackedB::pack(&b, [rows, cols], tb).unwrap();
            let mut again = vec![f32::NAN; out.len()];
            let right = RightOperand::Packed(&packed);
            matmul(&a, right, bias, &g, &mut again, &mut scratch).unwrap();
            assert_eq!(again, out, "{a_shape:?} x {b_shape:?} packed");
        }
        for (index, (&got, &want)) in out.iter().zip(&want).enumerate() {
            let tolerance = 1e-5 * (g.k as f64).sqrt() * (1.0 + want.abs());
            assert!(
                (f64::from(got) - want).abs() <= tolerance,
                "{a_shape:?} x {b_shape:?} ta={ta} tb={tb}: element {index} is {got}, want {want}"
            );
        }
    }

    #[test]
    fn blocked_product_matches_naive_across_edges() {
        // Sizes straddling MR, NR, MC, KC and NC.
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 7),
            (MR, 17, NR),
            (MR + 1, 300, NR + 3),
            (MC + 5, KC + 9, 2 * NR + 1),
            (70, 260, NC + 20),
        ] {
            for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
                let a_shape = if ta { [k, m] } else { [m, k] };
                let b_shape = if tb { [n, k] } else { [k, n] };
                check(&a_shape, &b_shape, ta, tb, (m + n) % 2 == 0);
            }
        }
    }

    #[test]
    fn batches_broadcast_and_fold() {
        check(&[2, 3, 5, 4], &[2, 3, 4, 6], false, false, true);
        check(&[2, 5, 4], &[6, 4], false, true, true);
        check(&[5, 4], &[3, 4, 6], false, false, false);
        check(&[2, 1, 4, 5], &[1, 3, 6, 4], true, true, false);
    }

    #[test]
    fn empty_dims_give_bias_or_zeros() {
        let mut scratch = GemmScratch::default();
        let g = MatMulGeometry::new(&[2, 0], &[0, 3], false, false).unwrap();
        let mut out = vec![f32::NAN; 6];
        let none = RightOperand::Values(&[]);
        matmul(
            &[],
            none,
            Some(&[1.0, 2.0, 3.0]),
            &g,
            &mut out,
            &mut scratch,
        )
        .unwrap();
        assert_eq!(out, vec![1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let g = MatMulGeometry::new(&[0, 4], &[4, 3], false, false).unwrap();
        let b = RightOperand::Values(&[0.0; 12]);
        matmul(&[], b, None, &g, &mut [], &mut scratch).unwrap();
    }

    #[test]
    fn short_operands_are_errors_not_panics() {
        let g = MatMulGeometry::new(&[2, 3], &[3, 2], false, false).unwrap();
        let mut out = vec![0.0; 4];
        let mut scratch = GemmScratch::default();
        let b = RightOperand::Values(&[0.0; 6]);
        let short_b = RightOperand::Values(&[0.0; 5]);
        assert!(matmul(&[0.0; 5], b, None, &g, &mut out, &mut scratch).is_err());
        assert!(matmul(&[0.0; 6], short_b, None, &g, &mut out, &mut scratch).is_err());
        assert!(matmul(&[0.0; 6], b, None, &g, &mut out[..3], &mut scratch).is_err());
        assert!(matmul(&[0.0; 6], b, Some(&[0.0]), &g, &mut out, &mut scratch).is_err());
        // A packed operand of another shape is refused.
        let packed = PackedB::pack(&[0.0; 6], [2, 3], false).unwrap();
        let right = RightOperand::Packed(&packed);
        assert!(matmul(&[0.0; 6], right, None, &g, &mut out, &mut scratch).is_err());
        assert!(PackedB::pack(&[0.0; 5], [2, 3], false).is_err());
    }
}
