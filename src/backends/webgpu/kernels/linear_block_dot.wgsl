// Block dots of R weight rows with one activation row, for the GEMV kernels (after
// linear_decode.wgsl): rows_dot_<fmt>(rb, xb, b0, b1, bs)[r] sums, over the blocks
// b = b0, b0 + bs, .. < b1 of the row whose byte 0 is rb[r], each block's dot with activations
// xv(xb + values of block b ..). The kernel including this file defines `xv(i)`, activations
// i .. i + 3 (i a multiple of 4), and `ww(i)`, word i of the weights: both from storage in the
// rows GEMV (linear_rows.wgsl), both from workgroup memory in the staged GEMV
// (linear_gemv_staged.wgsl, where ww(i) is word i of the staged rows). Each activation vector is
// loaded once for all R rows; each block's bytes are read once, as whole words: blocks of 34,
// 22 and 210 bytes lie at 2-byte alignment, so a block at byte bb ≡ 2 (mod 4) takes its fields
// from pairs of neighbouring words (the `select`s). Every weight is decoded to exactly the
// value `crate::quant` gives (the same products and differences, in f32), then multiplied by
// its activation; only the order of the sum differs.

// Word t of the field starting at word i (a: aligned) or half a word past it (not a).
fn w2(i: u32, t: u32, a: bool) -> u32 {
    let lo = ww(i + t);
    return select((lo >> 16u) | (ww(i + t + 1u) << 16u), lo, a);
}

// The four bytes of v.
fn bytes4(v: u32) -> vec4<u32> {
    return (vec4<u32>(v) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu);
}

// Q8_0: d (f16) then 32 int8 quants; value = q * d.
fn rows_dot_q8_0(rb: array<u32, R>, xb: u32, b0: u32, b1: u32, bs: u32) -> array<f32, R> {
    var acc: array<f32, R>;
    for (var b = b0; b < b1; b = b + bs) {
        let xo = xb + 32u * b;
        var i: array<u32, R>;
        var a: array<bool, R>;
        var d: array<f32, R>;
        var prev: array<u32, R>;
        for (var r = 0u; r < R; r = r + 1u) {
            let bb = rb[r] + 34u * b;
            i[r] = bb >> 2u;
            // a: d is the low half of word i and the quants start half a word later; else d
            // is its high half and the quants are the aligned words i + 1 ..
            a[r] = (bb & 2u) == 0u;
            prev[r] = ww(i[r]);
            d[r] = unpack2x16float(select(prev[r] >> 16u, prev[r] & 0xffffu, a[r])).x;
        }
        for (var t = 0u; t < 8u; t = t + 1u) {
            let xt = xv(xo + 4u * t);
            for (var r = 0u; r < R; r = r + 1u) {
                let next = ww(i[r] + 1u + t);
                let q = select(next, (prev[r] >> 16u) | (next << 16u), a[r]);
                acc[r] = acc[r] + dot(d[r] * i8x4(q), xt);
                prev[r] = next;
            }
        }
    }
    return acc;
}

// Q5_0: d (f16), qh (32 fifth bits), 16 bytes of nibbles; value = d * (q - 16).
fn rows_dot_q5_0(rb: array<u32, R>, xb: u32, b0: u32, b1: u32, bs: u32) -> array<f32, R> {
    var acc: array<f32, R>;
    for (var b = b0; b < b1; b = b + bs) {
        let xo = xb + 32u * b;
        var i: array<u32, R>;
        var a: array<bool, R>;
        var d: array<f32, R>;
        var qh: array<u32, R>;
        var prev: array<u32, R>;
        for (var r = 0u; r < R; r = r + 1u) {
            let bb = rb[r] + 22u * b;
            i[r] = bb >> 2u;
            a[r] = (bb & 2u) == 0u;
            let w0 = ww(i[r]);
            prev[r] = ww(i[r] + 1u);
            d[r] = unpack2x16float(select(w0 >> 16u, w0 & 0xffffu, a[r])).x;
            qh[r] = select(prev[r], (w0 >> 16u) | (prev[r] << 16u), a[r]);
        }
        for (var t = 0u; t < 4u; t = t + 1u) {
            // Bytes 4t .. 4t + 3 of the nibbles: values 4t .. (low) and 16 + 4t .. (high).
            let x_lo = xv(xo + 4u * t);
            let x_hi = xv(xo + 16u + 4u * t);
            for (var r = 0u; r < R; r = r + 1u) {
                let next = ww(i[r] + 2u + t);
                let qs = select(next, (prev[r] >> 16u) | (next << 16u), a[r]);
                prev[r] = next;
                let lo = (qs & 0x0f0f0f0fu) | fifth_bits(qh[r] >> (4u * t));
                let hi = ((qs >> 4u) & 0x0f0f0f0fu) | fifth_bits(qh[r] >> (16u + 4u * t));
                acc[r] = acc[r] + dot(d[r] * (u8x4(lo) - 16.0), x_lo)
                    + dot(d[r] * (u8x4(hi) - 16.0), x_hi);
            }
        }
    }
    return acc;
}

// Q4_K: d, dmin (f16), 12 bytes of 6-bit scales and mins, 128 bytes of nibbles (always
// 4-aligned: 144-byte blocks); value = (d * sc) * q - dmin * m per 32-value sub-block.
fn rows_dot_q4_k(rb: array<u32, R>, xb: u32, b0: u32, b1: u32, bs: u32) -> array<f32, R> {
    var acc: array<f32, R>;
    for (var b = b0; b < b1; b = b + bs) {
        let xo = xb + 256u * b;
        var i: array<u32, R>;
        var dd: array<vec2<f32>, R>;
        var s0: array<vec4<u32>, R>;
        var s1: array<vec4<u32>, R>;
        var s2: array<vec4<u32>, R>;
        for (var r = 0u; r < R; r = r + 1u) {
            i[r] = (rb[r] + 144u * b) >> 2u;
            dd[r] = unpack2x16float(ww(i[r]));
            s0[r] = bytes4(ww(i[r] + 1u));
            s1[r] = bytes4(ww(i[r] + 2u));
            s2[r] = bytes4(ww(i[r] + 3u));
        }
        for (var c = 0u; c < 4u; c = c + 1u) {
            // Chunk c: 32 bytes whose low nibbles are sub-block 2c, high nibbles 2c + 1
            // (k_scale_min in linear_decode.wgsl: sub-blocks 0..3 from the low six bits of
            // bytes 0..7, 4..7 from bytes 8..11 and the top bits of bytes 0..7).
            let j = (2u * c) % 4u;
            var sc: array<vec2<f32>, R>;
            var mn: array<vec2<f32>, R>;
            for (var r = 0u; r < R; r = r + 1u) {
                let lo = vec2<u32>(s0[r][j], s0[r][j + 1u]);
                let ml = vec2<u32>(s1[r][j], s1[r][j + 1u]);
                let pk = vec2<u32>(s2[r][j], s2[r][j + 1u]);
                let low6 = vec2<u32>(63u);
                let scale = select((pk & vec2<u32>(15u)) | ((lo >> vec2<u32>(6u)) << vec2<u32>(4u)),
                    lo & low6, c < 2u);
                let mins = select((pk >> vec2<u32>(4u)) | ((ml >> vec2<u32>(6u)) << vec2<u32>(4u)),
                    ml & low6, c < 2u);
                sc[r] = dd[r].x * vec2<f32>(scale);
                mn[r] = dd[r].y * vec2<f32>(mins);
            }
            let xc = xo + 64u * c;
            for (var t = 0u; t < 8u; t = t + 1u) {
                let x_lo = xv(xc + 4u * t);
                let x_hi = xv(xc + 32u + 4u * t);
                for (var r = 0u; r < R; r = r + 1u) {
                    let q = ww(i[r] + 4u + 8u * c + t);
                    let lo = u8x4(q & 0x0f0f0f0fu);
                    let hi = u8x4((q >> 4u) & 0x0f0f0f0fu);
                    acc[r] = acc[r] + dot(sc[r].x * lo - mn[r].x, x_lo)
                        + dot(sc[r].y * hi - mn[r].y, x_hi);
                }
            }
        }
    }
    return acc;
}

// Byte n (0..3) of v as a signed integer, in f32.
fn i8_at(v: u32, n: u32) -> f32 {
    return f32(bitcast<i32>(v << (24u - 8u * n)) >> 24u);
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales, d (f16); value =
// (d * sc) * (q - 32) per 16 values.
fn rows_dot_q6_k(rb: array<u32, R>, xb: u32, b0: u32, b1: u32, bs: u32) -> array<f32, R> {
    var acc: array<f32, R>;
    for (var b = b0; b < b1; b = b + bs) {
        let xo = xb + 256u * b;
        var i: array<u32, R>;
        var a: array<bool, R>;
        var d: array<f32, R>;
        for (var r = 0u; r < R; r = r + 1u) {
            let bb = rb[r] + 210u * b;
            i[r] = bb >> 2u;
            a[r] = (bb & 2u) == 0u;
            let dw = ww(i[r] + 52u);
            d[r] = unpack2x16float(select(dw >> 16u, dw & 0xffffu, a[r])).x;
        }
        for (var h = 0u; h < 2u; h = h + 1u) {
            // Scales 8h .. 8h + 7: words 48 + 2h (four) and 49 + 2h (four) of the block.
            var sw0: array<u32, R>;
            var sw1: array<u32, R>;
            for (var r = 0u; r < R; r = r + 1u) {
                sw0[r] = w2(i[r], 48u + 2u * h, a[r]);
                sw1[r] = w2(i[r], 49u + 2u * h, a[r]);
            }
            for (var t = 0u; t < 8u; t = t + 1u) {
                // Values 128h + 32g + 4t .. + 3 for g = 0..3, scale index 8h + 2g + t / 4.
                let xl = xo + 128u * h + 4u * t;
                let x0 = xv(xl);
                let x1 = xv(xl + 32u);
                let x2 = xv(xl + 64u);
                let x3 = xv(xl + 96u);
                let k = t / 4u;
                for (var r = 0u; r < R; r = r + 1u) {
                    let ql_a = w2(i[r], 16u * h + t, a[r]);
                    let ql_b = w2(i[r], 16u * h + 8u + t, a[r]);
                    let qh = w2(i[r], 32u + 8u * h + t, a[r]);
                    let q0 = (ql_a & 0x0f0f0f0fu) | ((qh & 0x03030303u) << 4u);
                    let q1 = (ql_b & 0x0f0f0f0fu) | (((qh >> 2u) & 0x03030303u) << 4u);
                    let q2 = ((ql_a >> 4u) & 0x0f0f0f0fu) | (((qh >> 4u) & 0x03030303u) << 4u);
                    let q3 = ((ql_b >> 4u) & 0x0f0f0f0fu) | (((qh >> 6u) & 0x03030303u) << 4u);
                    let dr = d[r];
                    acc[r] = acc[r] + dot((dr * i8_at(sw0[r], k)) * (u8x4(q0) - 32.0), x0)
                        + dot((dr * i8_at(sw0[r], 2u + k)) * (u8x4(q1) - 32.0), x1)
                        + dot((dr * i8_at(sw1[r], k)) * (u8x4(q2) - 32.0), x2)
                        + dot((dr * i8_at(sw1[r], 2u + k)) * (u8x4(q3) - 32.0), x3);
                }
            }
        }
    }
    return acc;
}
