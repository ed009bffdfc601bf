//! Matrix multiplication: a cache-blocked GEMM in the Goto/BLIS style.
//!
//! For each `NC`-column panel of `B` and `KC`-deep slab, `B` is packed into `NR`-wide column
//! strips, then for each `MC`-row block `A` is packed into `MR`-tall row strips; a fixed-size
//! `MR x NR` micro-kernel accumulates in registers over the slab and adds into `C`. Packing
//! reads through the [`MatMulGeometry`] strides, so transposed operands cost nothing extra, and
//! the micro-kernel's fixed-size loops are what LLVM turns into SIMD (SSE natively, simd128 in
//! the browser). Edges are zero-padded in the packed strips and written back partially.
//!
//! Every operand offset is checked against its slice before any arithmetic, so the inner loops
//! need no per-element checks that could fail.
//!
//! A right operand that is a weight (a parameter used only as `b` of matmuls) is packed once at
//! init into the same panel order ([`PackedB`]), so executions skip packing it.

use crate::error::{Error, Result};
use crate::program::geometry::MatMulGeometry;

/// Rows of the register tile.
pub const MR: usize = 2;
/// Columns of the register tile.
pub const NR: usize = 16;
/// Depth of a packed slab.
const KC: usize = 256;
/// Rows of a packed `A` block (a multiple of `MR`).
const MC: usize = 64;
/// Columns of a packed `B` panel (a multiple of `NR`).
const NC: usize = 512;

/// Reusable packing buffers (kept between executions to avoid reallocating).
#[derive(Debug, Default)]
pub struct GemmScratch {
    packed_a: Vec<f32>,
    packed_b: Vec<f32>,
}

/// A strided matrix view: element `(row, col)` is `data[offset + row * rows + col * cols]`.
#[derive(Clone, Copy)]
struct View<'a> {
    data: &'a [f32],
    offset: usize,
    rows: usize,
    cols: usize,
}

impl View<'_> {
    /// Checks that every element of a `height x width` view lies in `data`.
    fn check(&self, height: usize, width: usize, what: &str) -> Result<()> {
        if height == 0 || width == 0 {
            return Ok(());
        }
        let last = (height - 1)
            .checked_mul(self.rows)
            .and_then(|r| {
                (width - 1)
                    .checked_mul(self.cols)
                    .and_then(|c| r.checked_add(c))
            })
            .and_then(|span| span.checked_add(self.offset));
        match last {
            Some(last) if last < self.data.len() => Ok(()),
            _ => Err(Error::internal(format!(
                "matmul operand {what} is too short for its geometry"
            ))),
        }
    }

    #[inline(always)]
    fn at(&self, row: usize, col: usize) -> f32 {
        // In range: `check` covered every (row, col) this view is asked for.
        self.data
            .get(self.offset + row * self.rows + col * self.cols)
            .copied()
            .unwrap_or(0.0)
    }
}

/// A `k x n` right operand packed once into the GEMM's panel order (all `NC` x `KC` panels, in
/// the order the product visits them), so products with it skip packing.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedB {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

impl PackedB {
    /// Packs `values` of stored shape `[k, n]`, or `[n, k]` when `transposed`.
    ///
    /// # Errors
    /// `Internal` when `values` is shorter than the shape.
    pub fn pack(values: &[f32], shape: [usize; 2], transposed: bool) -> Result<Self> {
        let (k, n, rows, cols) = if transposed {
            (shape[1], shape[0], 1, shape[1])
        } else {
            (shape[0], shape[1], shape[1], 1)
        };
        let view = View {
            data: values,
            offset: 0,
            rows,
            cols,
        };
        view.check(k, n, "b")?;
        let mut data = Vec::new();
        for jc in (0..n).step_by(NC) {
            let nc = (n - jc).min(NC);
            for pc in (0..k).step_by(KC) {
                let kc = (k - pc).min(KC);
                let start = data.len();
                data.resize(start + kc * nc.div_ceil(NR) * NR, 0.0);
                pack_b(view, pc, kc, jc, nc, &mut data[start..]);
            }
        }
        Ok(Self { k, n, data })
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

/// Where `gemm` gets its `B` panels.
#[derive(Clone, Copy)]
enum Panels<'a> {
    Pack(View<'a>),
    Packed(&'a PackedB),
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
    if let Some(bias) = bias
        && bias.len() != n
    {
        return Err(Error::internal("matmul bias has the wrong length"));
    }
    for (batch, c) in out.chunks_exact_mut(block.max(1)).enumerate() {
        let (offset_a, offset_b) = geometry.batch_offsets(batch);
        let view_a = View {
            data: a,
            offset: offset_a,
            rows: geometry.a_row_stride,
            cols: geometry.a_col_stride,
        };
        view_a.check(m, k, "a")?;
        let panels = match b {
            RightOperand::Values(data) => {
                let view_b = View {
                    data,
                    offset: offset_b,
                    rows: geometry.b_row_stride,
                    cols: geometry.b_col_stride,
                };
                view_b.check(k, n, "b")?;
                Panels::Pack(view_b)
            }
            RightOperand::Packed(packed) if packed.k == k && packed.n == n && offset_b == 0 => {
                Panels::Packed(packed)
            }
            RightOperand::Packed(_) => {
                return Err(Error::internal(
                    "packed matmul operand does not fit the product",
                ));
            }
        };
        gemm(m, k, n, view_a, panels, bias, c, scratch)?;
    }
    Ok(())
}

/// One product `c (m x n, contiguous) = a @ b + bias`.
#[allow(clippy::too_many_arguments)]
fn gemm(
    m: usize,
    k: usize,
    n: usize,
    a: View<'_>,
    b: Panels<'_>,
    bias: Option<&[f32]>,
    c: &mut [f32],
    scratch: &mut GemmScratch,
) -> Result<()> {
    for row in c.chunks_exact_mut(n.max(1)) {
        match bias {
            Some(bias) => row.copy_from_slice(bias),
            None => row.fill(0.0),
        }
    }
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let kc_max = k.min(KC);
    let nc_max = n.min(NC).div_ceil(NR) * NR;
    let mc_max = m.min(MC).div_ceil(MR) * MR;
    let GemmScratch { packed_a, packed_b } = scratch;
    if let Panels::Pack(_) = b {
        packed_b.resize(kc_max * nc_max, 0.0);
    }
    packed_a.resize(kc_max * mc_max, 0.0);
    let mut packed_offset = 0;
    for jc in (0..n).step_by(NC) {
        let nc = (n - jc).min(NC);
        for pc in (0..k).step_by(KC) {
            let kc = (k - pc).min(KC);
            let panel: &[f32] = match b {
                Panels::Pack(view) => {
                    pack_b(view, pc, kc, jc, nc, packed_b);
                    packed_b
                }
                Panels::Packed(packed) => {
                    let len = kc * nc.div_ceil(NR) * NR;
                    let panel = packed
                        .data
                        .get(packed_offset..packed_offset + len)
                        .ok_or_else(|| Error::internal("packed matmul operand is too short"))?;
                    packed_offset += len;
                    panel
                }
            };
            for ic in (0..m).step_by(MC) {
                let mc = (m - ic).min(MC);
                pack_a(a, ic, mc, pc, kc, packed_a);
                macro_tile(packed_a, panel, kc, (ic, mc), (jc, nc), n, c);
            }
        }
    }
    Ok(())
}

/// Packs `B[pc..pc+kc, jc..jc+nc]` as `NR`-wide strips: strip `s`, depth `p`, column `j` at
/// `s * kc * NR + p * NR + j`, zero beyond `nc`.
fn pack_b(b: View<'_>, pc: usize, kc: usize, jc: usize, nc: usize, packed: &mut [f32]) {
    for (strip, chunk) in packed
        .chunks_exact_mut(kc * NR)
        .take(nc.div_ceil(NR))
        .enumerate()
    {
        let j0 = jc + strip * NR;
        let width = (nc - strip * NR).min(NR);
        for (p, dst) in chunk.chunks_exact_mut(NR).enumerate() {
            if b.cols == 1 && width == NR {
                let start = b.offset + (pc + p) * b.rows + j0;
                if let Some(src) = b.data.get(start..start + NR) {
                    dst.copy_from_slice(src);
                    continue;
                }
            }
            for (j, slot) in dst.iter_mut().enumerate() {
                *slot = if j < width { b.at(pc + p, j0 + j) } else { 0.0 };
            }
        }
    }
}

/// Packs `A[ic..ic+mc, pc..pc+kc]` as `MR`-tall strips: strip `s`, depth `p`, row `i` at
/// `s * kc * MR + p * MR + i`, zero beyond `mc`.
fn pack_a(a: View<'_>, ic: usize, mc: usize, pc: usize, kc: usize, packed: &mut [f32]) {
    for (strip, chunk) in packed
        .chunks_exact_mut(kc * MR)
        .take(mc.div_ceil(MR))
        .enumerate()
    {
        let i0 = ic + strip * MR;
        let height = (mc - strip * MR).min(MR);
        for i in 0..MR {
            if i >= height {
                for p in 0..kc {
                    chunk[p * MR + i] = 0.0;
                }
                continue;
            }
            let row_start = a.offset + (i0 + i) * a.rows + pc * a.cols;
            match (a.cols == 1)
                .then(|| a.data.get(row_start..row_start + kc))
                .flatten()
            {
                Some(src) => {
                    for (p, &value) in src.iter().enumerate() {
                        chunk[p * MR + i] = value;
                    }
                }
                None => {
                    for p in 0..kc {
                        chunk[p * MR + i] = a.at(i0 + i, pc + p);
                    }
                }
            }
        }
    }
}

/// Runs the micro-kernel over every `MR x NR` tile of the block and adds into `c`.
fn macro_tile(
    packed_a: &[f32],
    packed_b: &[f32],
    kc: usize,
    (ic, mc): (usize, usize),
    (jc, nc): (usize, usize),
    n: usize,
    c: &mut [f32],
) {
    for (strip_b, b_strip) in packed_b
        .chunks_exact(kc * NR)
        .take(nc.div_ceil(NR))
        .enumerate()
    {
        let j0 = jc + strip_b * NR;
        let width = (nc - strip_b * NR).min(NR);
        for (strip_a, a_strip) in packed_a
            .chunks_exact(kc * MR)
            .take(mc.div_ceil(MR))
            .enumerate()
        {
            let i0 = ic + strip_a * MR;
            let height = (mc - strip_a * MR).min(MR);
            let tile = micro_kernel(a_strip, b_strip);
            for (i, tile_row) in tile.iter().enumerate().take(height) {
                let start = (i0 + i) * n + j0;
                if let Some(c_row) = c.get_mut(start..start + width) {
                    for (dst, &value) in c_row.iter_mut().zip(tile_row) {
                        *dst += value;
                    }
                }
            }
        }
    }
}

/// `sum_p a[p] (outer) b[p]` over a packed `A` strip (`kc x MR`) and `B` strip (`kc x NR`).
#[inline(always)]
fn micro_kernel(a_strip: &[f32], b_strip: &[f32]) -> [[f32; NR]; MR] {
    let mut acc = [[0.0f32; NR]; MR];
    for (a_col, b_row) in a_strip.chunks_exact(MR).zip(b_strip.chunks_exact(NR)) {
        let (Ok(a_col), Ok(b_row)) = (<&[f32; MR]>::try_from(a_col), <&[f32; NR]>::try_from(b_row))
        else {
            continue;
        };
        for i in 0..MR {
            let a_value = a_col[i];
            for j in 0..NR {
                acc[i][j] += a_value * b_row[j];
            }
        }
    }
    acc
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
