//! The kernel module's entry points (only with the `module` feature: `wasm32` with `atomics`,
//! built by `scripts/build-kernels.sh` against an imported shared memory). Each call computes
//! one worker's share of one op: the caller (the pool's JavaScript, `src/browser/cpu_threads/
//! pool.js`) has already shifted the pointers to the share's first row, element or batch.
//! Pointers are byte addresses in the shared memory; lengths are element counts.
//!
//! Every entry returns 0 when it ran, or 1 after writing its [`KernelError`]'s message as
//! `(address, length)` to the two `u32`s at `status`. A pointer of 0 means "none" for the
//! optional bias. The caller guarantees that each region lies in memory and that no two
//! workers are given overlapping outputs; the kernels check the shapes themselves.

use crate::KernelError;
use crate::blocks::{self, RowFormat};
use crate::gemm::{self, Panels, Strided};
use crate::int8_dots;
use crate::layout;
use crate::rows::{self, Activation};
use core::slice;

/// Writes `result`'s outcome for the caller.
fn report(result: Result<(), KernelError>, status: *mut u32) -> u32 {
    match result {
        Ok(()) => 0,
        Err(KernelError(message)) => {
            // SAFETY: the caller hands a status word pair it owns.
            unsafe {
                status.write(message.as_ptr() as u32);
                status.add(1).write(message.len() as u32);
            }
            1
        }
    }
}

/// Checks that `m` output rows `out_stride` apart, `rows` values each, are addressable.
fn outputs_fit(m: usize, out_stride: usize, rows: usize) -> Result<(), KernelError> {
    if m > 0
        && (m - 1)
            .checked_mul(out_stride)
            .and_then(|o| o.checked_add(rows))
            .is_none()
    {
        return Err(KernelError("outputs overflow"));
    }
    Ok(())
}

/// The elements a strided `rows x cols` view spans from its first one (0 for an empty one).
fn span(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1)
        .checked_mul(row_stride)?
        .checked_add((cols - 1).checked_mul(col_stride)?)?
        .checked_add(1)
}

/// `(m, k, n)` product rows of `c` (contiguous, `m x n`) from `a` (strided, in elements) and
/// `b` (strided, or packed by `gemm::pack_b` when `b_packed` is 1), with `scratch_len` floats
/// of packing scratch at `scratch`.
///
/// # Safety
/// Every region the dimensions and strides describe lies in memory, and `c` and `scratch`
/// are this call's alone.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn wd_gemm(
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    a_row_stride: usize,
    a_col_stride: usize,
    b: *const f32,
    b_packed: u32,
    b_row_stride: usize,
    b_col_stride: usize,
    bias: *const f32,
    c: *mut f32,
    scratch: *mut f32,
    scratch_len: usize,
    status: *mut u32,
) -> u32 {
    // SAFETY: the caller's regions (see the function's contract).
    let result = unsafe {
        gemm_at(
            (m, k, n),
            (a, a_row_stride, a_col_stride),
            (b, b_packed == 1, b_row_stride, b_col_stride),
            bias,
            c,
            (scratch, scratch_len),
        )
    };
    report(result, status)
}

/// One product at raw addresses: [`wd_gemm`]'s body, shared with [`wd_gemm_batches`].
///
/// # Safety
/// As [`wd_gemm`].
unsafe fn gemm_at(
    (m, k, n): (usize, usize, usize),
    (a, ar, ac): (*const f32, usize, usize),
    (b, b_packed, br, bc): (*const f32, bool, usize, usize),
    bias: *const f32,
    c: *mut f32,
    (scratch, scratch_len): (*mut f32, usize),
) -> Result<(), KernelError> {
    // SAFETY: the caller's regions (see the function's contract).
    unsafe {
        let a_len = span(m, k, ar, ac).ok_or(KernelError("matmul a overflows"))?;
        let a = Strided {
            data: slice::from_raw_parts(a, a_len),
            offset: 0,
            row_stride: ar,
            col_stride: ac,
        };
        let panels = if b_packed {
            Panels::Packed(slice::from_raw_parts(b, gemm::packed_b_len(k, n)))
        } else {
            let b_len = span(k, n, br, bc).ok_or(KernelError("matmul b overflows"))?;
            Panels::Pack(Strided {
                data: slice::from_raw_parts(b, b_len),
                offset: 0,
                row_stride: br,
                col_stride: bc,
            })
        };
        let bias = (!bias.is_null()).then(|| slice::from_raw_parts(bias, n));
        let c = slice::from_raw_parts_mut(
            c,
            m.checked_mul(n).ok_or(KernelError("matmul c overflows"))?,
        );
        let (a_need, b_need) = gemm::scratch_lens(m, k, n);
        if a_need
            .checked_add(b_need)
            .is_none_or(|need| need > scratch_len)
        {
            return Err(KernelError("matmul packing scratch is too short"));
        }
        let scratch = slice::from_raw_parts_mut(scratch, scratch_len);
        let (packed_a, packed_b) = scratch.split_at_mut(a_need);
        gemm::gemm((m, k, n), a, panels, bias, c, packed_a, packed_b)
    }
}

/// `count` whole products of one batched matmul, `(m, k, n)` each: product `i` reads `a` and
/// `b` (strided, in elements) from the element offsets `offsets[2 i]` and `offsets[2 i + 1]`
/// and writes the contiguous `m x n` block `i` of `c`, with `scratch_len` floats of packing
/// scratch at `scratch`. A worker's share is a run of whole products.
///
/// # Safety
/// As [`wd_gemm`], for every product; `offsets` holds `2 * count` values.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn wd_gemm_batches(
    count: usize,
    offsets: *const u32,
    m: usize,
    k: usize,
    n: usize,
    a: *const f32,
    a_row_stride: usize,
    a_col_stride: usize,
    b: *const f32,
    b_row_stride: usize,
    b_col_stride: usize,
    c: *mut f32,
    scratch: *mut f32,
    scratch_len: usize,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let block = m.checked_mul(n).ok_or(KernelError("matmul c overflows"))?;
        let pairs = count
            .checked_mul(2)
            .ok_or(KernelError("matmul batches overflow"))?;
        // SAFETY: the caller's regions (see the function's contract).
        unsafe {
            let offsets = slice::from_raw_parts(offsets, pairs);
            for (i, pair) in offsets.chunks_exact(2).enumerate() {
                let c_at = i
                    .checked_mul(block)
                    .ok_or(KernelError("matmul c overflows"))?;
                gemm_at(
                    (m, k, n),
                    (a.add(pair[0] as usize), a_row_stride, a_col_stride),
                    (b.add(pair[1] as usize), false, b_row_stride, b_col_stride),
                    core::ptr::null(),
                    c.add(c_at),
                    (scratch, scratch_len),
                )?;
            }
        }
        Ok(())
    })();
    report(result, status)
}

/// `out[i] = f(x[i])` for `n` values, `f` the [`Activation`] of `code`.
///
/// # Safety
/// `x` and `out` hold `n` values each (they may be the same region); no other call writes
/// this one's outputs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wd_unary(
    code: u32,
    n: usize,
    x: *const f32,
    out: *mut f32,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let activation = Activation::from_code(code).ok_or(KernelError("unknown activation"))?;
        if core::ptr::eq(x, out) {
            // In place: read each value before writing it back.
            // SAFETY: the caller's region (see the function's contract).
            let values = unsafe { slice::from_raw_parts_mut(out, n) };
            let mut lane = [0.0f32; 64];
            for chunk in values.chunks_mut(64) {
                let input = &mut lane[..chunk.len()];
                input.copy_from_slice(chunk);
                activation.apply(input, chunk)?;
            }
            return Ok(());
        }
        // SAFETY: the caller's regions (see the function's contract).
        let (x, out) = unsafe {
            (
                slice::from_raw_parts(x, n),
                slice::from_raw_parts_mut(out, n),
            )
        };
        activation.apply(x, out)
    })();
    report(result, status)
}

/// `out = softmax(x + mask)` over `rows` rows of `width` values, row `first_row` of the op
/// first: the mask (0 for none) is `mask_count` rows of `width`, row `r` of the op adding mask
/// row `(r / mask_period) % mask_count` (the kernels' `MaskRows`).
///
/// # Safety
/// `x` and `out` hold `rows * width` values and do not overlap, the mask holds
/// `mask_count * width`; no other call writes this one's outputs.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn wd_softmax(
    rows: usize,
    width: usize,
    x: *const f32,
    mask: *const f32,
    mask_period: usize,
    mask_count: usize,
    first_row: usize,
    out: *mut f32,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let len = rows
            .checked_mul(width)
            .ok_or(KernelError("softmax rows overflow"))?;
        let mask_len = mask_count
            .checked_mul(width)
            .ok_or(KernelError("softmax mask overflows"))?;
        // SAFETY: the caller's regions (see the function's contract).
        unsafe {
            let mask = (!mask.is_null()).then(|| rows::MaskRows {
                values: slice::from_raw_parts(mask, mask_len),
                period: mask_period,
                count: mask_count,
            });
            let x = slice::from_raw_parts(x, len);
            let out = slice::from_raw_parts_mut(out, len);
            rows::masked_softmax_rows(x, mask, first_row, width, out)
        }
    })();
    report(result, status)
}

/// `out[i] = a[i] (op) b[i]` for `n` values, `op` the [`rows::Binary`] of `code`.
///
/// # Safety
/// `a`, `b` and `out` hold `n` values each; no other call writes this one's outputs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wd_binary(
    code: u32,
    n: usize,
    a: *const f32,
    b: *const f32,
    out: *mut f32,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let op = rows::Binary::from_code(code).ok_or(KernelError("unknown binary op"))?;
        // SAFETY: the caller's regions (see the function's contract).
        let (a, b, out) = unsafe {
            (
                slice::from_raw_parts(a, n),
                slice::from_raw_parts(b, n),
                slice::from_raw_parts_mut(out, n),
            )
        };
        op.apply(a, b, out)
    })();
    report(result, status)
}

/// `out[i] = x[i] * scale + bias` for `n` values; `scale` and `bias` are f32 bit patterns.
///
/// # Safety
/// `x` and `out` hold `n` values each and do not overlap; no other call writes the outputs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wd_scale(
    n: usize,
    x: *const f32,
    out: *mut f32,
    scale: u32,
    bias: u32,
    status: *mut u32,
) -> u32 {
    // SAFETY: the caller's regions (see the function's contract).
    let (x, out) = unsafe {
        (
            slice::from_raw_parts(x, n),
            slice::from_raw_parts_mut(out, n),
        )
    };
    let result = rows::scale(x, f32::from_bits(scale), f32::from_bits(bias), out);
    report(result, status)
}

/// Layer norm of `rows` rows of `width` values at `x` into `out`, with `width` values each of
/// `gamma` and `beta`; `eps` is an f32 bit pattern.
///
/// # Safety
/// `x` and `out` hold `rows * width` values and do not overlap; no other call writes the
/// outputs.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn wd_layer_norm(
    rows: usize,
    width: usize,
    x: *const f32,
    gamma: *const f32,
    beta: *const f32,
    eps: u32,
    out: *mut f32,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let len = rows
            .checked_mul(width)
            .ok_or(KernelError("layer_norm rows overflow"))?;
        // SAFETY: the caller's regions (see the function's contract).
        unsafe {
            rows::layer_norm_rows(
                slice::from_raw_parts(x, len),
                (
                    slice::from_raw_parts(gamma, width),
                    slice::from_raw_parts(beta, width),
                ),
                f32::from_bits(eps),
                slice::from_raw_parts_mut(out, len),
            )
        }
    })();
    report(result, status)
}

/// Output rows `first_row..first_row + rows` of a permuted copy of the `x_len` values at `x`:
/// output dims `[_, d1, d2, d3]`, input strides `s0..s3` along them (the kernels'
/// `Permute4`); `out` is the share's first output row.
///
/// # Safety
/// `x` holds `x_len` values and `out` `rows * d3`, not overlapping; no other call writes the
/// outputs.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn wd_permute(
    rows: usize,
    first_row: usize,
    d1: usize,
    d2: usize,
    d3: usize,
    s0: usize,
    s1: usize,
    s2: usize,
    s3: usize,
    x: *const f32,
    x_len: usize,
    out: *mut f32,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        if d1 == 0 || d2 == 0 {
            return Ok(());
        }
        let d0 = first_row
            .checked_add(rows)
            .zip(d1.checked_mul(d2))
            .map(|(end, plane)| end.div_ceil(plane))
            .ok_or(KernelError("permute rows overflow"))?;
        let geometry = layout::Permute4 {
            dims: [d0, d1, d2, d3],
            strides: [s0, s1, s2, s3],
        };
        let len = rows
            .checked_mul(d3)
            .ok_or(KernelError("permute rows overflow"))?;
        // SAFETY: the caller's regions (see the function's contract).
        unsafe {
            layout::permute_rows(
                slice::from_raw_parts(x, x_len),
                &geometry,
                first_row,
                slice::from_raw_parts_mut(out, len),
            )
        }
    })();
    report(result, status)
}

/// `rows` weight rows of `format` (a `RowFormat::code`) at `weights`, each of `k`
/// values, dotted with each of the `m` activation rows at `x` (`k` values each): activation
/// row `i`, weight row `r` lands at `out[i * out_stride + r]`, plus `bias[r]`.
///
/// # Safety
/// Every region lies in memory, and no other call writes the outputs this one does.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn wd_dot_rows(
    format: u32,
    rows: usize,
    k: usize,
    m: usize,
    weights: *const u8,
    x: *const f32,
    bias: *const f32,
    out: *mut f32,
    out_stride: usize,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let format = RowFormat::from_code(format).ok_or(KernelError("unknown block format"))?;
        if !k.is_multiple_of(format.block_elements()) {
            return Err(KernelError("a block-format row is not whole blocks"));
        }
        let bytes = (k / format.block_elements())
            .checked_mul(format.block_bytes())
            .and_then(|row| row.checked_mul(rows))
            .ok_or(KernelError("block-format rows overflow"))?;
        let values = m
            .checked_mul(k)
            .ok_or(KernelError("activations overflow"))?;
        outputs_fit(m, out_stride, rows)?;
        // SAFETY: the caller's regions (see the function's contract).
        unsafe {
            let weights = slice::from_raw_parts(weights, bytes);
            let x = slice::from_raw_parts(x, values);
            let bias = (!bias.is_null()).then(|| slice::from_raw_parts(bias, rows));
            blocks::dot_rows_each(format, weights, k, x, bias, |i, r, value| {
                // In range: i < m, r < rows, checked above; disjoint from other calls'.
                out.add(i * out_stride + r).write(value);
            })
        }
    })();
    report(result, status)
}

/// The addresses of the quants, scales and sums of `m` activation rows of `k` values quantized
/// to int8 in the region at `at` (`int8_dots::Int8Layout`); `None` when `k` is not whole blocks
/// or the region would overflow.
fn int8_parts(at: usize, m: usize, k: usize) -> Option<(usize, usize, usize)> {
    let layout = int8_dots::Int8Layout::new(m, k)?;
    at.checked_add(layout.bytes)?;
    Some((at, at + layout.scales, at + layout.sums))
}

/// Bytes of `m` activation rows of `k` values quantized to int8 (see `wd_quantize_rows`); 0
/// when `k` is not whole blocks of 32 or the size overflows.
#[unsafe(no_mangle)]
pub extern "C" fn wd_int8_rows_bytes(m: usize, k: usize) -> usize {
    int8_dots::Int8Layout::new(m, k).map_or(0, |layout| layout.bytes)
}

/// Quantizes activation rows `first_row..first_row + rows` of the `m` rows of `k` values at
/// `x` (already shifted to `first_row`) into the int8 region at `quantized` (laid out for all
/// `m` rows).
///
/// # Safety
/// `x` holds `rows * k` values and `quantized` `wd_int8_rows_bytes(m, k)` bytes (4-byte
/// aligned); no other call writes this one's rows.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wd_quantize_rows(
    rows: usize,
    k: usize,
    x: *const f32,
    quantized: *mut u8,
    m: usize,
    first_row: usize,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let (quants, scales, sums) = int8_parts(quantized as usize, m, k)
            .ok_or(KernelError("quantized activations overflow"))?;
        let end = first_row
            .checked_add(rows)
            .filter(|&end| end <= m)
            .ok_or(KernelError("quantized rows run past the activations"))?;
        let (values, blocks) = (
            (end - first_row) * k,
            (end - first_row) * k / int8_dots::BLOCK,
        );
        let (v0, b0) = (first_row * k, first_row * k / int8_dots::BLOCK);
        // SAFETY: the caller's regions (see the function's contract); the parts lie inside.
        unsafe {
            int8_dots::quantize_rows(
                slice::from_raw_parts(x, values),
                slice::from_raw_parts_mut((quants as *mut i16).add(v0), values),
                slice::from_raw_parts_mut((scales as *mut f32).add(b0), blocks),
                slice::from_raw_parts_mut((sums as *mut f32).add(b0), blocks),
            )
        }
    })();
    report(result, status)
}

/// As `wd_dot_rows`, the `m` activation rows read quantized to int8 from the region at
/// `quantized` (written by `wd_quantize_rows`).
///
/// # Safety
/// As `wd_dot_rows`; `quantized` holds `wd_int8_rows_bytes(m, k)` bytes, 4-byte aligned.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn wd_dot_rows_int8(
    format: u32,
    rows: usize,
    k: usize,
    m: usize,
    weights: *const u8,
    quantized: *const u8,
    bias: *const f32,
    out: *mut f32,
    out_stride: usize,
    status: *mut u32,
) -> u32 {
    let result = (|| {
        let format = RowFormat::from_code(format).ok_or(KernelError("unknown block format"))?;
        let row_bytes = wd_row_bytes(format.code(), k);
        let bytes = row_bytes
            .checked_mul(rows)
            .filter(|_| row_bytes > 0)
            .ok_or(KernelError("block-format rows overflow"))?;
        let (quants, scales, sums) = int8_parts(quantized as usize, m, k)
            .ok_or(KernelError("quantized activations overflow"))?;
        outputs_fit(m, out_stride, rows)?;
        let blocks = m * k / int8_dots::BLOCK;
        // SAFETY: the caller's regions (see the function's contract).
        unsafe {
            let weights = slice::from_raw_parts(weights, bytes);
            let xs = int8_dots::Int8Rows {
                quants: slice::from_raw_parts(quants as *const i16, m * k),
                scales: slice::from_raw_parts(scales as *const f32, blocks),
                sums: slice::from_raw_parts(sums as *const f32, blocks),
            };
            let bias = (!bias.is_null()).then(|| slice::from_raw_parts(bias, rows));
            int8_dots::dot_rows_each(format, weights, k, &xs, bias, |i, r, value| {
                // In range: i < m, r < rows, checked above; disjoint from other calls'.
                out.add(i * out_stride + r).write(value);
            })
        }
    })();
    report(result, status)
}

/// The packing scratch (floats) one worker needs for an `m x k` by `k x n` product.
#[unsafe(no_mangle)]
pub extern "C" fn wd_gemm_scratch_len(m: usize, k: usize, n: usize) -> usize {
    let (a, b) = gemm::scratch_lens(m, k, n);
    a.saturating_add(b)
}

/// Bytes of one row of `k` values in `format` (a `RowFormat::code`); 0 for an unknown format
/// or a `k` that is not whole blocks.
#[unsafe(no_mangle)]
pub extern "C" fn wd_row_bytes(format: u32, k: usize) -> usize {
    match RowFormat::from_code(format) {
        Some(format) if k.is_multiple_of(format.block_elements()) => {
            k / format.block_elements() * format.block_bytes()
        }
        _ => 0,
    }
}

/// The packed length (floats) of a `k x n` right operand.
#[unsafe(no_mangle)]
pub extern "C" fn wd_packed_b_len(k: usize, n: usize) -> usize {
    gemm::packed_b_len(k, n)
}

/// A kernel that panics (a bug: every length is checked first) traps instead of unwinding.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}
