// Element-wise dtype conversion (Cast) and position ids (Range). The body (from convert.rs)
// stores element i of `out`. On the GPU, f32 and i32 are one 32-bit word per element, u8 is widened
// to one word, and i64 is two words (low, high: its little-endian bytes).
// The uniforms `p` and the bindings (x and) out: convert.rs.

fn is_nan(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}

// Saturating i64 (low, high words) -> i32 bits.
fn i64_to_i32(lo: u32, hi: u32) -> u32 {
    let fits = (hi == 0u && lo < 0x80000000u) || (hi == 0xffffffffu && lo >= 0x80000000u);
    if (fits) {
        return lo;
    }
    return select(0x7fffffffu, 0x80000000u, bitcast<i32>(hi) < 0);
}

// Saturating i64 (low, high words) -> u8 in 0..=255.
fn i64_to_u8(lo: u32, hi: u32) -> u32 {
    if (bitcast<i32>(hi) < 0) {
        return 0u;
    }
    if (hi != 0u) {
        return 255u;
    }
    return min(lo, 255u);
}

// Truncation toward zero, saturating; NaN -> 0 (Rust's `as`).
fn f32_to_i32(v: f32) -> u32 {
    if (is_nan(v)) {
        return 0u;
    }
    if (v >= 2147483648.0) {
        return 0x7fffffffu;
    }
    if (v <= -2147483648.0) {
        return 0x80000000u;
    }
    return bitcast<u32>(i32(v));
}

fn f32_to_u8(v: f32) -> u32 {
    if (is_nan(v) || v <= 0.0) {
        return 0u;
    }
    if (v >= 255.0) {
        return 255u;
    }
    return u32(v);
}

// (low, high) words of the saturating i64 truncation of v. Above 2^31 every f32 is a multiple
// of 2^8, so t - hi * 2^32 is exact and fits a u32.
fn f32_to_i64(v: f32) -> vec2<u32> {
    if (is_nan(v)) {
        return vec2<u32>(0u, 0u);
    }
    if (v >= 9223372036854775808.0) {
        return vec2<u32>(0xffffffffu, 0x7fffffffu);
    }
    if (v <= -9223372036854775808.0) {
        return vec2<u32>(0u, 0x80000000u);
    }
    let t = trunc(v);
    if (abs(t) < 2147483648.0) {
        let s = i32(t);
        return vec2<u32>(bitcast<u32>(s), select(0u, 0xffffffffu, s < 0));
    }
    let hi = floor(t / 4294967296.0);
    let lo = t - hi * 4294967296.0;
    return vec2<u32>(u32(lo), bitcast<u32>(i32(hi)));
}
