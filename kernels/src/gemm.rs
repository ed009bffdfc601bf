//! One matrix product `c = a @ b (+ bias)`: a cache-blocked GEMM in the Goto/BLIS style.
//!
//! For each `NC`-column panel of `B` and `KC`-deep slab, `B` is packed into `NR`-wide column
//! strips (or read from a matrix packed once in that order, [`pack_b`]), then for each
//! `MC`-row block `A` is packed into `MR`-tall row strips; a fixed-size `MR x NR` micro-kernel
//! accumulates in registers over the slab and adds into `C`. Packing reads through
//! [`Strided`] views, so transposed operands cost nothing extra, and the micro-kernel's
//! fixed-size loops are what LLVM turns into SIMD (SSE natively, simd128 in the browser).
//! Edges are zero-padded in the packed strips and written back partially.
//!
//! Every operand is checked against its slice before any arithmetic, so the inner loops need
//! no per-element checks that could fail. A product over rows `r0..r1` of `a` and `c` is the
//! same call on the shifted views: a worker's share of a product is one [`gemm`] call, and
//! each output element is summed in the same order whoever computes it.

use crate::KernelError;

/// Rows of the register tile.
pub const MR: usize = 2;
/// Columns of the register tile.
pub const NR: usize = 16;
/// Depth of a packed slab.
pub const KC: usize = 256;
/// Rows of a packed `A` block (a multiple of `MR`).
pub const MC: usize = 64;
/// Columns of a packed `B` panel (a multiple of `NR`).
pub const NC: usize = 512;

/// Whether every element of a `height x width` view at `offset` with `(row, column)` strides
/// lies in `len` elements (an empty view always does).
pub fn view_fits(
    len: usize,
    offset: usize,
    (row_stride, col_stride): (usize, usize),
    (height, width): (usize, usize),
) -> bool {
    if height == 0 || width == 0 {
        return true;
    }
    (height - 1)
        .checked_mul(row_stride)
        .and_then(|r| {
            (width - 1)
                .checked_mul(col_stride)
                .and_then(|c| r.checked_add(c))
        })
        .and_then(|span| span.checked_add(offset))
        .is_some_and(|last| last < len)
}

/// A strided matrix view: element `(row, col)` is
/// `data[offset + row * row_stride + col * col_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Where element `(0, 0)` is.
    pub offset: usize,
    /// Distance between rows.
    pub row_stride: usize,
    /// Distance between columns.
    pub col_stride: usize,
}

impl Strided<'_> {
    /// Checks that every element of a `height x width` view lies in `data`.
    ///
    /// # Errors
    /// A [`KernelError`] naming `what` when one does not.
    pub fn check(
        &self,
        height: usize,
        width: usize,
        what: &'static str,
    ) -> Result<(), KernelError> {
        if view_fits(
            self.data.len(),
            self.offset,
            (self.row_stride, self.col_stride),
            (height, width),
        ) {
            Ok(())
        } else {
            Err(KernelError(what))
        }
    }

    #[inline(always)]
    fn at(&self, row: usize, col: usize) -> f32 {
        // In range: `check` covered every (row, col) this view is asked for.
        self.data
            .get(self.offset + row * self.row_stride + col * self.col_stride)
            .copied()
            .unwrap_or(0.0)
    }
}

/// Where [`gemm`] gets its `B` panels.
#[derive(Clone, Copy, Debug)]
pub enum Panels<'a> {
    /// Packed during the product from this view (into the caller's `packed_b` scratch).
    Pack(Strided<'a>),
    /// Packed once up front by [`pack_b`] (`packed_b_len(k, n)` values).
    Packed(&'a [f32]),
}

/// Values in a `k x n` right operand packed by [`pack_b`].
pub fn packed_b_len(k: usize, n: usize) -> usize {
    let mut len = 0;
    for jc in (0..n).step_by(NC) {
        let nc = (n - jc).min(NC);
        len += k * nc.div_ceil(NR) * NR;
    }
    len
}

/// The scratch a `m x k` by `k x n` product needs: `(packed_a, packed_b)` lengths (the
/// second only when `B` is packed during the product).
pub fn scratch_lens(m: usize, k: usize, n: usize) -> (usize, usize) {
    let kc_max = k.min(KC);
    (
        kc_max * m.min(MC).div_ceil(MR) * MR,
        kc_max * n.min(NC).div_ceil(NR) * NR,
    )
}

/// Packs the whole `k x n` view `b` into `out` (`packed_b_len(k, n)` values) in the order
/// [`gemm`] visits its panels.
///
/// # Errors
/// A [`KernelError`] when `b` is too short for `k x n` or `out` has the wrong length.
pub fn pack_b(b: Strided<'_>, k: usize, n: usize, out: &mut [f32]) -> Result<(), KernelError> {
    b.check(k, n, "matmul operand b is too short for its geometry")?;
    if out.len() != packed_b_len(k, n) {
        return Err(KernelError("packed matmul operand has the wrong length"));
    }
    let mut start = 0;
    for jc in (0..n).step_by(NC) {
        let nc = (n - jc).min(NC);
        for pc in (0..k).step_by(KC) {
            let kc = (k - pc).min(KC);
            let len = kc * nc.div_ceil(NR) * NR;
            pack_b_panel(b, pc, kc, jc, nc, &mut out[start..start + len]);
            start += len;
        }
    }
    Ok(())
}

/// One product `c (m x n, contiguous) = a @ b + bias`, with the caller's packing scratch
/// (at least [`scratch_lens`]).
///
/// # Errors
/// A [`KernelError`] when an operand, `bias`, `c` or the scratch is too short, or a packed
/// `b` does not match `k x n`.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    (m, k, n): (usize, usize, usize),
    a: Strided<'_>,
    b: Panels<'_>,
    bias: Option<&[f32]>,
    c: &mut [f32],
    packed_a: &mut [f32],
    packed_b: &mut [f32],
) -> Result<(), KernelError> {
    a.check(m, k, "matmul operand a is too short for its geometry")?;
    match b {
        Panels::Pack(view) => view.check(k, n, "matmul operand b is too short for its geometry")?,
        Panels::Packed(data) if data.len() == packed_b_len(k, n) => {}
        Panels::Packed(_) => {
            return Err(KernelError(
                "packed matmul operand does not fit the product",
            ));
        }
    }
    if m.checked_mul(n) != Some(c.len()) {
        return Err(KernelError("matmul output has the wrong length"));
    }
    if bias.is_some_and(|bias| bias.len() != n) {
        return Err(KernelError("matmul bias has the wrong length"));
    }
    let (a_len, b_len) = scratch_lens(m, k, n);
    if packed_a.len() < a_len || (matches!(b, Panels::Pack(_)) && packed_b.len() < b_len) {
        return Err(KernelError("matmul packing scratch is too short"));
    }
    for row in c.chunks_exact_mut(n.max(1)) {
        match bias {
            Some(bias) => row.copy_from_slice(bias),
            None => row.fill(0.0),
        }
    }
    if m == 0 || n == 0 || k == 0 {
        return Ok(());
    }
    let mut packed_offset = 0;
    for jc in (0..n).step_by(NC) {
        let nc = (n - jc).min(NC);
        for pc in (0..k).step_by(KC) {
            let kc = (k - pc).min(KC);
            let len = kc * nc.div_ceil(NR) * NR;
            let panel: &[f32] = match b {
                Panels::Pack(view) => {
                    pack_b_panel(view, pc, kc, jc, nc, &mut packed_b[..len]);
                    &packed_b[..len]
                }
                Panels::Packed(data) => {
                    let panel = &data[packed_offset..packed_offset + len];
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
fn pack_b_panel(b: Strided<'_>, pc: usize, kc: usize, jc: usize, nc: usize, packed: &mut [f32]) {
    for (strip, chunk) in packed
        .chunks_exact_mut(kc * NR)
        .take(nc.div_ceil(NR))
        .enumerate()
    {
        let j0 = jc + strip * NR;
        let width = (nc - strip * NR).min(NR);
        for (p, dst) in chunk.chunks_exact_mut(NR).enumerate() {
            if b.col_stride == 1 && width == NR {
                let start = b.offset + (pc + p) * b.row_stride + j0;
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
fn pack_a(a: Strided<'_>, ic: usize, mc: usize, pc: usize, kc: usize, packed: &mut [f32]) {
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
            let row_start = a.offset + (i0 + i) * a.row_stride + pc * a.col_stride;
            match (a.col_stride == 1)
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
