//! Branch-free `f32` transcendental functions and eight-lane row sums and maxima, so that loops over them vectorise (SSE natively,
//! simd128 in the browser) instead of calling libm once per element; and the two small vector
//! types the block-format dots are written in ([`F32x4`], [`U8x16`]): `core::arch::wasm32`
//! simd128 vectors in the browser, fixed-size arrays natively (which LLVM maps to SSE).
//!
//! Accuracy (checked against f64 references in the tests): `exp` within 1e-7 relative over
//! its whole range; `gelu` within 2e-6 relative for `|x| <= 8` and 4e-7 absolute everywhere.

/// `e^x`. Inputs below -87.3 give the smallest normal float (~1.2e-38) instead of 0, inputs
/// above 88 give `e^88`; NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Cody-Waite reduction x = n ln2 + r with |r| <= ln2 / 2, then Cephes' expf polynomial.
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding it rounds to an integer and leaves that integer in the low mantissa
    // bits, without a float -> int conversion (which does not vectorise on every target).
    const ROUNDER: f32 = 12_582_912.0;
    let x = x.clamp(-87.336_54, 88.0);
    let t = x * LOG2E + ROUNDER;
    let n = t - ROUNDER;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // n lies in [-126, 127], so 2^n is a normal float built from its exponent bits.
    let n_bits = (t.to_bits() as i32).wrapping_sub(0x4B40_0000);
    y * f32::from_bits((n_bits.wrapping_add(127) as u32) << 23)
}

/// `erfc(z)` for `z >= 0`, with relative accuracy in the tail (Numerical Recipes' `erfcc`
/// Chebyshev fit, relative error below 1.2e-7, evaluated with [`exp`]).
#[inline(always)]
pub fn erfc_non_negative(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let mut p = 0.170_872_77;
    p = p * t - 0.822_152_23;
    p = p * t + 1.488_515_9;
    p = p * t - 1.135_204;
    p = p * t + 0.278_868_07;
    p = p * t - 0.186_288_06;
    p = p * t + 0.096_784_18;
    p = p * t + 0.374_091_96;
    p = p * t + 1.000_023_7;
    p = p * t - 1.265_512_2;
    t * exp(p - z * z)
}

/// GELU, erf form: `x * Phi(x)` with `Phi(x) = 1 - erfc(x / sqrt 2) / 2` for `x >= 0` and
/// `erfc(-x / sqrt 2) / 2` below, so small negative outputs keep their relative accuracy.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    let half_tail = 0.5 * erfc_non_negative(x.abs() * core::f32::consts::FRAC_1_SQRT_2);
    let phi = if x >= 0.0 { 1.0 - half_tail } else { half_tail };
    x * phi
}

/// `1 / (1 + e^-t)` without overflow: `e^-|t|` only (`t` clamped to +-88, where the result
/// is 0 or 1 to f32 precision already). NaN stays NaN.
#[inline(always)]
pub fn sigmoid(t: f32) -> f32 {
    let e = exp(-t.abs().min(88.0));
    let s = 1.0 / (1.0 + e);
    if t >= 0.0 {
        s
    } else if t < 0.0 {
        e * s
    } else {
        t
    }
}

/// GELU, tanh form: `0.5 x (1 + tanh(u))` with `u = sqrt(2/pi) (x + 0.044715 x^3)`, computed
/// as `x * sigmoid(2u)` (the same function) so that nothing overflows; `x < -12` gives `-0`
/// (the true value is below the smallest f32 there), and `u` is formed from `x` clamped to
/// +-12, beyond which the sigmoid is saturated.
#[inline(always)]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let c = x.clamp(-12.0, 12.0);
    let s = sigmoid(2.0 * SQRT_2_OVER_PI * c * (1.0 + 0.044_715 * c * c));
    if x < -12.0 { -0.0 } else { x * s }
}

/// SiLU: `x * sigmoid(x)`; `x < -88` gives `-0` (the true value is below 1e-36 there).
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    if x < -88.0 { -0.0 } else { x * sigmoid(x) }
}

/// `(sin t, cos t)`: Cody-Waite reduction by `pi / 2` (three-part constant, exact products
/// for `|t| < 2^15`; accurate to the f32 angle's own rounding well beyond), then Cephes'
/// `sinf`/`cosf` polynomials on `[-pi/4, pi/4]`: within ~1.2e-7 absolute for `|t| <= 1e5`.
/// Finite and within `[-1, 1]` for every finite `t`. The WebGPU RoPE kernel runs the same
/// steps.
#[inline(always)]
pub fn sin_cos(t: f32) -> (f32, f32) {
    const TWO_OVER_PI: f32 = core::f32::consts::FRAC_2_PI;
    const P1: f32 = 1.570_312_5;
    const P2: f32 = 4.837_513e-4;
    const P3: f32 = 7.549_79e-8;
    let q = floor(t * TWO_OVER_PI + 0.5);
    // Clamped (to pi/4 plus the slack of a rounded q): beyond |t| ~ 1e5 the products are no longer exact, and a huge angle (a position
    // near 2^31) must still give values in [-1, 1], if not accurate ones.
    let r = (((t - q * P1) - q * P2) - q * P3).clamp(-0.8, 0.8);
    let z = r * r;
    let sin = r + r * z * (-1.666_665_5e-1 + z * (8.332_161e-3 + z * -1.951_529_6e-4));
    let cos = 1.0 - 0.5 * z + z * z * (4.166_664_6e-2 + z * (-1.388_731_6e-3 + z * 2.443_315_7e-5));
    // The quadrant q mod 4, from the float (exact for |q| < 2^24; any value beyond is fine).
    let quadrant = (q - 4.0 * floor(q * 0.25)) as u32;
    match quadrant {
        0 => (sin, cos),
        1 => (cos, -sin),
        2 => (-sin, -cos),
        _ => (-cos, sin),
    }
}

/// The correctly rounded square root, as `f32::sqrt` (which `core` does not have): the
/// hardware instruction on `wasm32` with simd128 (one lane of `f32x4.sqrt`; the scalar
/// intrinsic is unstable) and on `x86_64`; elsewhere Newton's method in f64 from the
/// exponent-halved guess, rounded once to f32 (f64 has more than twice f32's precision, so the
/// rounding is the correct one once the iteration has converged).
#[inline(always)]
pub fn sqrt(x: f32) -> f32 {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use core::arch::wasm32::{f32x4_extract_lane, f32x4_splat, f32x4_sqrt};
        f32x4_extract_lane::<0>(f32x4_sqrt(f32x4_splat(x)))
    }
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_cvtss_f32, _mm_set_ss, _mm_sqrt_ss};
        // SAFETY: SSE is part of the x86_64 baseline.
        unsafe { _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(x))) }
    }
    #[cfg(not(any(
        all(target_arch = "wasm32", target_feature = "simd128"),
        target_arch = "x86_64"
    )))]
    {
        if !(x > 0.0) || x == f32::INFINITY {
            // 0, -0, +inf are their own roots; negatives and NaN give NaN.
            return if x >= 0.0 { x } else { f32::NAN };
        }
        let v = f64::from(x);
        let mut r = f64::from_bits(((v.to_bits() >> 1) + (1023u64 << 51)) & !0);
        for _ in 0..6 {
            r = 0.5 * (r + v / r);
        }
        r as f32
    }
}

/// `x` rounded toward minus infinity, exactly as `f32::floor` (which `core` does not have): a
/// float of magnitude `2^23` or more, an infinity and NaN are their own floor.
#[inline(always)]
pub fn floor(x: f32) -> f32 {
    if x.abs() < 8_388_608.0 {
        let truncated = x as i32 as f32;
        if truncated > x {
            truncated - 1.0
        } else if truncated == x {
            x // keeps the sign of -0.0
        } else {
            truncated
        }
    } else {
        x
    }
}

/// Independent accumulators of the row sums (LLVM vectorises them, since float addition is
/// not reassociated on its own; they are also more accurate than one running sum).
pub const LANES: usize = 8;

/// `sum f(x)` over `xs`, in eight lanes.
#[inline(always)]
pub fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (slot, &x) in acc.iter_mut().zip(chunk) {
            *slot += f(x);
        }
    }
    let mut total = tail.iter().map(|&x| f(x)).sum::<f32>();
    for value in acc {
        total += value;
    }
    total
}

/// `w . x` in eight lanes (the shorter length wins).
#[inline]
pub fn lane_dot(w: &[f32], x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (wc, xc) = (w.chunks_exact(LANES), x.chunks_exact(LANES));
    let tail: f32 = wc
        .remainder()
        .iter()
        .zip(xc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (wl, xl) in wc.zip(xc) {
        for ((slot, &a), &b) in acc.iter_mut().zip(wl).zip(xl) {
            *slot += a * b;
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `max xs` in eight lanes (NaN elements are skipped here; they still poison the softmax sum).
#[inline(always)]
pub fn lane_max(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (slot, &x) in acc.iter_mut().zip(chunk) {
            *slot = slot.max(x);
        }
    }
    tail.iter()
        .chain(acc.iter())
        .fold(f32::NEG_INFINITY, |m, &x| m.max(x))
}

/// An f16 bit pattern widened to f32 exactly: normals and subnormals by one multiply by
/// `2^112` (exact: a power of two), infinities and NaN by their exponent.
#[inline(always)]
pub fn half_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let rest = u32::from(h & 0x7fff);
    let magnitude = if rest >= 0x7c00 {
        f32::from_bits(0x7f80_0000 | ((rest & 0x3ff) << 13))
    } else {
        f32::from_bits(rest << 13) * f32::from_bits((127 + 112) << 23)
    };
    f32::from_bits(magnitude.to_bits() | sign)
}

/// Four `f32` lanes: a simd128 vector in the browser, an array natively.
#[derive(Clone, Copy, Debug)]
pub struct F32x4(lanes::F4);

/// Sixteen `u8` lanes (bytes of a weight block): a simd128 vector in the browser, an array
/// natively.
#[derive(Clone, Copy, Debug)]
pub struct U8x16(lanes::B16);

/// Four `i32` lanes (integer dot products of a weight block's quants): a simd128 vector in the
/// browser, an array natively.
#[derive(Clone, Copy, Debug)]
pub struct I32x4(lanes::I4);

#[allow(clippy::should_implement_trait)]
impl I32x4 {
    /// Lane-wise wrapping `self + o`.
    #[inline(always)]
    pub fn add(self, o: Self) -> Self {
        Self(lanes::i_add(self.0, o.0))
    }

    /// The lanes converted to f32 (exactly, below `2^24`).
    #[inline(always)]
    pub fn to_f32(self) -> F32x4 {
        F32x4(lanes::i_to_f32(self.0))
    }

    /// Lane `j` is the wrapping sum of `v[j]`'s four lanes (a transpose and three adds).
    #[inline(always)]
    pub fn lane_sums(v: [Self; 4]) -> Self {
        Self(lanes::i_lane_sums(v.map(|v| v.0)))
    }
}

// Named lane operations rather than operator traits: the block decoders read as the sequence of
// vector instructions they are.
#[allow(clippy::should_implement_trait)]
impl F32x4 {
    /// Every lane `v`.
    #[inline(always)]
    pub fn splat(v: f32) -> Self {
        Self(lanes::f_splat(v))
    }

    /// Four f16 bit patterns widened to f32 exactly, lane by lane as [`half_to_f32`].
    #[inline(always)]
    pub fn from_halves(h: [u16; 4]) -> Self {
        Self(lanes::f_from_halves(h))
    }

    /// `values[0..4]` (`values` must hold at least 4).
    #[inline(always)]
    pub fn load(values: &[f32]) -> Self {
        let v: &[f32; 4] = values[..4].try_into().expect("four values");
        Self(lanes::f_load(v))
    }

    /// Lane-wise `self + o`.
    #[inline(always)]
    pub fn add(self, o: Self) -> Self {
        Self(lanes::f_add(self.0, o.0))
    }

    /// Lane-wise `self - o`.
    #[inline(always)]
    pub fn sub(self, o: Self) -> Self {
        Self(lanes::f_sub(self.0, o.0))
    }

    /// Lane-wise `self * o` (rounded once: never fused with a following add).
    #[inline(always)]
    pub fn mul(self, o: Self) -> Self {
        Self(lanes::f_mul(self.0, o.0))
    }

    /// The four lanes.
    #[inline(always)]
    pub fn to_array(self) -> [f32; 4] {
        lanes::f_lanes(self.0)
    }

    /// `(l0 + l1) + (l2 + l3)`.
    #[inline(always)]
    pub fn sum(self) -> f32 {
        let [a, b, c, d] = lanes::f_lanes(self.0);
        (a + b) + (c + d)
    }
}

#[allow(clippy::should_implement_trait)]
impl U8x16 {
    /// Every lane `v`.
    #[inline(always)]
    pub fn splat(v: u8) -> Self {
        Self(lanes::b_splat(v))
    }

    /// `bytes[0..16]` (`bytes` must hold at least 16).
    #[inline(always)]
    pub fn load(bytes: &[u8]) -> Self {
        let b: &[u8; 16] = bytes[..16].try_into().expect("sixteen bytes");
        Self(lanes::b_load(b))
    }

    /// Byte `j` is `value` where bit `j` of `bits` is set, else 0.
    #[inline(always)]
    pub fn from_bits(bits: u16, value: u8) -> Self {
        Self(lanes::b_from_bits(bits, value))
    }

    /// Lane-wise `self & o`.
    #[inline(always)]
    pub fn and(self, o: Self) -> Self {
        Self(lanes::b_and(self.0, o.0))
    }

    /// Lane-wise `self | o`.
    #[inline(always)]
    pub fn or(self, o: Self) -> Self {
        Self(lanes::b_or(self.0, o.0))
    }

    /// Lane-wise logical `self >> n` (`n < 8`).
    #[inline(always)]
    pub fn shr(self, n: u32) -> Self {
        Self(lanes::b_shr(self.0, n))
    }

    /// Lane-wise `self << n` (`n < 8`, bits shifted out are lost).
    #[inline(always)]
    pub fn shl(self, n: u32) -> Self {
        Self(lanes::b_shl(self.0, n))
    }

    /// Lane-wise wrapping `self - v`.
    #[inline(always)]
    pub fn sub(self, v: u8) -> Self {
        Self(lanes::b_sub(self.0, v))
    }

    /// The lanes as unsigned integers, converted exactly: lanes 0..4, 4..8, 8..12, 12..16.
    #[inline(always)]
    pub fn to_f32_unsigned(self) -> [F32x4; 4] {
        lanes::b_to_f32(self.0, false).map(F32x4)
    }

    /// The lanes as two's-complement `i8`, converted exactly: lanes 0..4, 4..8, 8..12, 12..16.
    #[inline(always)]
    pub fn to_f32_signed(self) -> [F32x4; 4] {
        lanes::b_to_f32(self.0, true).map(F32x4)
    }

    /// The lanes as two's-complement `i8` times `q` (16 values), summed in integers: lane `j`
    /// holds the products of lanes `2j, 2j + 1, 2j + 8, 2j + 9` (simd128's
    /// `i32x4.dot_i16x8_s` over each half, the halves added).
    #[inline(always)]
    pub fn dot_i16(self, q: &[i16]) -> I32x4 {
        let q: &[i16; 16] = q[..16].try_into().expect("sixteen quants");
        I32x4(lanes::b_dot_i16(self.0, q))
    }
}

/// simd128 in the browser (`core::arch::wasm32`; the loads are safe `u8x16`/`f32x4`
/// constructors over a checked array, which LLVM emits as one `v128.load`).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod lanes {
    use core::arch::wasm32::{
        f32x4, f32x4_add, f32x4_convert_i32x4, f32x4_extract_lane, f32x4_mul, f32x4_splat,
        f32x4_sub, i8x16_eq, i8x16_shl, i8x16_splat, i8x16_sub, i8x16_swizzle,
        i16x8_extend_high_i8x16, i16x8_extend_high_u8x16, i16x8_extend_low_i8x16,
        i16x8_extend_low_u8x16, i32x4_extend_high_i16x8, i32x4_extend_high_u16x8,
        i32x4_extend_low_i16x8, i32x4_extend_low_u16x8, i32x4_gt, i32x4_shl, i32x4_shuffle, u8x16,
        u8x16_shr, u8x16_splat, u16x8_splat, u32x4, u32x4_splat, v128, v128_and, v128_bitselect,
        v128_or,
    };
    use core::arch::wasm32::{i32x4_add, i32x4_dot_i16x8, v128_load};

    pub type F4 = v128;
    pub type B16 = v128;
    pub type I4 = v128;

    #[inline(always)]
    pub fn i_add(a: I4, b: I4) -> I4 {
        i32x4_add(a, b)
    }
    #[inline(always)]
    pub fn i_to_f32(a: I4) -> F4 {
        f32x4_convert_i32x4(a)
    }
    #[inline(always)]
    pub fn i_lane_sums([a, b, c, d]: [I4; 4]) -> I4 {
        // [a0 + a2, b0 + b2, a1 + a3, b1 + b3] and the same for c, d; then their halves.
        let ab = i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(a, b),
            i32x4_shuffle::<2, 6, 3, 7>(a, b),
        );
        let cd = i32x4_add(
            i32x4_shuffle::<0, 4, 1, 5>(c, d),
            i32x4_shuffle::<2, 6, 3, 7>(c, d),
        );
        i32x4_add(
            i32x4_shuffle::<0, 1, 4, 5>(ab, cd),
            i32x4_shuffle::<2, 3, 6, 7>(ab, cd),
        )
    }
    #[inline(always)]
    pub fn f_from_halves(h: [u16; 4]) -> F4 {
        // half_to_f32 on four lanes: magnitude bits shifted into an f32's, times 2^112 for
        // normals and subnormals; the all-ones exponent (infinities, NaN) rebuilt as f32's.
        let h = u32x4(h[0].into(), h[1].into(), h[2].into(), h[3].into());
        let rest = v128_and(h, u32x4_splat(0x7fff));
        let sign = i32x4_shl(v128_and(h, u32x4_splat(0x8000)), 16);
        let finite = f32x4_mul(
            i32x4_shl(rest, 13),
            f32x4_splat(f32::from_bits((127 + 112) << 23)),
        );
        let special = v128_or(
            u32x4_splat(0x7f80_0000),
            i32x4_shl(v128_and(rest, u32x4_splat(0x3ff)), 13),
        );
        let magnitude = v128_bitselect(special, finite, i32x4_gt(rest, u32x4_splat(0x7bff)));
        v128_or(magnitude, sign)
    }
    #[inline(always)]
    pub fn b_dot_i16(a: B16, q: &[i16; 16]) -> I4 {
        // SAFETY: two unaligned 16-byte loads inside the 32-byte array.
        let (lo, hi) = unsafe {
            let at = q.as_ptr();
            (v128_load(at.cast()), v128_load(at.add(8).cast()))
        };
        i32x4_add(
            i32x4_dot_i16x8(i16x8_extend_low_i8x16(a), lo),
            i32x4_dot_i16x8(i16x8_extend_high_i8x16(a), hi),
        )
    }

    #[inline(always)]
    pub fn f_splat(v: f32) -> F4 {
        f32x4_splat(v)
    }
    #[inline(always)]
    pub fn f_load(v: &[f32; 4]) -> F4 {
        f32x4(v[0], v[1], v[2], v[3])
    }
    #[inline(always)]
    pub fn f_add(a: F4, b: F4) -> F4 {
        f32x4_add(a, b)
    }
    #[inline(always)]
    pub fn f_sub(a: F4, b: F4) -> F4 {
        f32x4_sub(a, b)
    }
    #[inline(always)]
    pub fn f_mul(a: F4, b: F4) -> F4 {
        f32x4_mul(a, b)
    }
    #[inline(always)]
    pub fn f_lanes(a: F4) -> [f32; 4] {
        [
            f32x4_extract_lane::<0>(a),
            f32x4_extract_lane::<1>(a),
            f32x4_extract_lane::<2>(a),
            f32x4_extract_lane::<3>(a),
        ]
    }
    #[inline(always)]
    pub fn b_splat(v: u8) -> B16 {
        u8x16_splat(v)
    }
    #[inline(always)]
    pub fn b_load(b: &[u8; 16]) -> B16 {
        u8x16(
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
            b[14], b[15],
        )
    }
    #[inline(always)]
    pub fn b_from_bits(bits: u16, value: u8) -> B16 {
        // Byte j of the first 8 lanes is the low byte of bits, of the last 8 the high byte;
        // then each lane keeps its own bit and widens it to a whole byte.
        let spread = i8x16_swizzle(
            u16x8_splat(bits),
            u8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        );
        let select = u8x16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
        v128_and(
            i8x16_eq(v128_and(spread, select), select),
            u8x16_splat(value),
        )
    }
    #[inline(always)]
    pub fn b_and(a: B16, b: B16) -> B16 {
        v128_and(a, b)
    }
    #[inline(always)]
    pub fn b_or(a: B16, b: B16) -> B16 {
        v128_or(a, b)
    }
    #[inline(always)]
    pub fn b_shr(a: B16, n: u32) -> B16 {
        u8x16_shr(a, n)
    }
    #[inline(always)]
    pub fn b_shl(a: B16, n: u32) -> B16 {
        i8x16_shl(a, n)
    }
    #[inline(always)]
    pub fn b_sub(a: B16, v: u8) -> B16 {
        i8x16_sub(a, i8x16_splat(v as i8))
    }
    /// int8 (or uint8) -> i16x8 -> i32x4 -> f32x4.
    #[inline(always)]
    pub fn b_to_f32(a: B16, signed: bool) -> [F4; 4] {
        let (lo, hi) = if signed {
            (i16x8_extend_low_i8x16(a), i16x8_extend_high_i8x16(a))
        } else {
            (i16x8_extend_low_u8x16(a), i16x8_extend_high_u8x16(a))
        };
        let words = if signed {
            [
                i32x4_extend_low_i16x8(lo),
                i32x4_extend_high_i16x8(lo),
                i32x4_extend_low_i16x8(hi),
                i32x4_extend_high_i16x8(hi),
            ]
        } else {
            [
                i32x4_extend_low_u16x8(lo),
                i32x4_extend_high_u16x8(lo),
                i32x4_extend_low_u16x8(hi),
                i32x4_extend_high_u16x8(hi),
            ]
        };
        words.map(|w| f32x4_convert_i32x4(w))
    }
}

/// Portable lanes (natively: fixed-size loops LLVM vectorises to SSE).
#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
mod lanes {
    pub type F4 = [f32; 4];
    pub type B16 = [u8; 16];
    pub type I4 = [i32; 4];

    #[inline(always)]
    pub fn i_add(a: I4, b: I4) -> I4 {
        core::array::from_fn(|l| a[l].wrapping_add(b[l]))
    }
    #[inline(always)]
    pub fn i_to_f32(a: I4) -> F4 {
        a.map(|v| v as f32)
    }
    #[inline(always)]
    pub fn i_lane_sums(v: [I4; 4]) -> I4 {
        v.map(|v| v.iter().fold(0i32, |s, &l| s.wrapping_add(l)))
    }
    #[inline(always)]
    pub fn f_from_halves(h: [u16; 4]) -> F4 {
        h.map(super::half_to_f32)
    }
    #[inline(always)]
    pub fn b_dot_i16(a: B16, q: &[i16; 16]) -> I4 {
        core::array::from_fn(|j| {
            [2 * j, 2 * j + 1, 2 * j + 8, 2 * j + 9]
                .into_iter()
                .map(|i| i32::from(a[i] as i8) * i32::from(q[i]))
                .sum()
        })
    }

    #[inline(always)]
    pub fn f_splat(v: f32) -> F4 {
        [v; 4]
    }
    #[inline(always)]
    pub fn f_load(v: &[f32; 4]) -> F4 {
        *v
    }
    #[inline(always)]
    pub fn f_add(a: F4, b: F4) -> F4 {
        core::array::from_fn(|l| a[l] + b[l])
    }
    #[inline(always)]
    pub fn f_sub(a: F4, b: F4) -> F4 {
        core::array::from_fn(|l| a[l] - b[l])
    }
    #[inline(always)]
    pub fn f_mul(a: F4, b: F4) -> F4 {
        core::array::from_fn(|l| a[l] * b[l])
    }
    #[inline(always)]
    pub fn f_lanes(a: F4) -> [f32; 4] {
        a
    }
    #[inline(always)]
    pub fn b_splat(v: u8) -> B16 {
        [v; 16]
    }
    #[inline(always)]
    pub fn b_load(b: &[u8; 16]) -> B16 {
        *b
    }
    #[inline(always)]
    pub fn b_from_bits(bits: u16, value: u8) -> B16 {
        // Branch-free, so that LLVM vectorises it.
        core::array::from_fn(|j| ((bits >> j) & 1) as u8 * value)
    }
    #[inline(always)]
    pub fn b_and(a: B16, b: B16) -> B16 {
        core::array::from_fn(|l| a[l] & b[l])
    }
    #[inline(always)]
    pub fn b_or(a: B16, b: B16) -> B16 {
        core::array::from_fn(|l| a[l] | b[l])
    }
    #[inline(always)]
    pub fn b_shr(a: B16, n: u32) -> B16 {
        core::array::from_fn(|l| a[l] >> n)
    }
    #[inline(always)]
    pub fn b_shl(a: B16, n: u32) -> B16 {
        core::array::from_fn(|l| a[l] << n)
    }
    #[inline(always)]
    pub fn b_sub(a: B16, v: u8) -> B16 {
        core::array::from_fn(|l| a[l].wrapping_sub(v))
    }
    #[inline(always)]
    pub fn b_to_f32(a: B16, signed: bool) -> [F4; 4] {
        core::array::from_fn(|g| {
            core::array::from_fn(|l| {
                let b = a[4 * g + l];
                if signed {
                    f32::from(b as i8)
                } else {
                    f32::from(b)
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    #[test]
    fn halves_widen_exactly() {
        for h in 0..=u16::MAX {
            let want = half::f16::from_bits(h).to_f32();
            let got = half_to_f32(h);
            if want.is_nan() {
                assert!(got.is_nan(), "{h:#x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{h:#x}");
            }
        }
    }

    #[test]
    fn floor_is_f32_floor() {
        // Magnitudes from 1e-3 to 1e9, each with neighbours, halves and both signs.
        let mut x = 1.0e-3f32;
        while x < 1.0e9 {
            for v in [x, x + 0.5, x - 0.25, x.next_up(), x.next_down(), x.round()] {
                for v in [v, -v] {
                    assert_eq!(floor(v).to_bits(), v.floor().to_bits(), "{v}");
                }
            }
            x *= 1.37;
        }
        for v in [
            f32::INFINITY,
            f32::NEG_INFINITY,
            8_388_607.5,
            -8_388_607.5,
            0.0,
        ] {
            assert_eq!(floor(v).to_bits(), v.floor().to_bits(), "{v}");
        }
        assert!(floor(f32::NAN).is_nan());
    }

    /// erfc in f64: the power series of erf below 2.5, a continued fraction above.
    fn erfc_reference(z: f64) -> f64 {
        if z < 2.5 {
            let (mut sum, mut term, mut n) = (0.0, z, 0.0f64);
            loop {
                let t = term / (2.0 * n + 1.0);
                sum += t;
                if t.abs() < 1e-18 {
                    break;
                }
                n += 1.0;
                term *= -z * z / n;
            }
            return 1.0 - sum * 2.0 / std::f64::consts::PI.sqrt();
        }
        let mut fraction = z;
        for k in (1..80).rev() {
            fraction = z + (f64::from(k) / 2.0) / fraction;
        }
        (-z * z).exp() / std::f64::consts::PI.sqrt() / fraction
    }

    #[test]
    fn exp_is_accurate_and_saturates() {
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            assert!(
                (got - want).abs() <= 1.5e-7 * want,
                "exp({x}) = {got}, want {want}"
            );
            x += 0.013_7;
        }
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1.0e4) < 1.2e-38);
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(f32::NEG_INFINITY) < 1.2e-38);
    }

    #[test]
    fn gelu_is_accurate_in_both_tails() {
        assert!((erfc_reference(1.0) - 0.157_299_207_050_285).abs() < 1e-14);
        let mut x = -8.0f32;
        while x < 8.0 {
            let xd = f64::from(x);
            let z = xd.abs() / std::f64::consts::SQRT_2;
            let want = if xd >= 0.0 {
                xd * (1.0 - 0.5 * erfc_reference(z))
            } else {
                xd * 0.5 * erfc_reference(z)
            };
            let got = f64::from(gelu(x));
            assert!(
                (got - want).abs() <= 2e-6 * want.abs() + 4e-7,
                "gelu({x}) = {got}, want {want}"
            );
            x += 0.000_913;
        }
        assert_eq!(gelu(0.0), 0.0);
        assert!(gelu(f32::NAN).is_nan());
        assert!(gelu(-200.0).abs() < 1e-30);
        assert_eq!(gelu(200.0), 200.0);
    }

    #[test]
    fn gelu_tanh_and_silu_match_f64_and_never_overflow() {
        let mut x = -30.0f32;
        while x < 30.0 {
            let xd = f64::from(x);
            let u = (2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044_715 * xd.powi(3));
            let want = 0.5 * xd * (1.0 + u.tanh());
            let got = f64::from(gelu_tanh(x));
            assert!(
                (got - want).abs() <= 2e-6 * want.abs() + 1e-7,
                "gelu_tanh({x}) = {got}, want {want}"
            );
            let want = xd / (1.0 + (-xd).exp());
            let got = f64::from(silu(x));
            assert!(
                (got - want).abs() <= 2e-6 * want.abs() + 1e-7,
                "silu({x}) = {got}, want {want}"
            );
            x += 0.001_37;
        }
        for f in [gelu_tanh as fn(f32) -> f32, silu] {
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(f32::MAX), f32::MAX);
            assert_eq!(f(-f32::MAX), 0.0);
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert!(f(f32::NAN).is_nan());
        }
    }

    #[test]
    fn vector_lanes_match_scalar_arithmetic() {
        let bytes: Vec<u8> = (0..16u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(200))
            .collect();
        let v = U8x16::load(&bytes);
        let lanes = |v: U8x16| -> Vec<f32> {
            v.to_f32_unsigned()
                .iter()
                .flat_map(|f| {
                    let [a, b, c, d] = lanes::f_lanes(f.0);
                    [a, b, c, d]
                })
                .collect()
        };
        let want =
            |f: &dyn Fn(u8) -> u8| bytes.iter().map(|&b| f32::from(f(b))).collect::<Vec<_>>();
        assert_eq!(lanes(v), want(&|b| b));
        assert_eq!(lanes(v.and(U8x16::splat(0x0f))), want(&|b| b & 0x0f));
        assert_eq!(lanes(v.shr(4)), want(&|b| b >> 4));
        assert_eq!(lanes(v.shl(3)), want(&|b| b << 3));
        assert_eq!(lanes(v.sub(32)), want(&|b| b.wrapping_sub(32)));
        assert_eq!(lanes(v.or(U8x16::splat(0x81))), want(&|b| b | 0x81));
        let signed: Vec<f32> = v
            .to_f32_signed()
            .iter()
            .flat_map(|f| lanes::f_lanes(f.0))
            .collect();
        let want_signed: Vec<f32> = bytes.iter().map(|&b| f32::from(b as i8)).collect();
        assert_eq!(signed, want_signed);
        let bits = 0b1010_0110_0001_1001u16;
        let spread = lanes(U8x16::from_bits(bits, 0x10));
        for (j, &s) in spread.iter().enumerate() {
            assert_eq!(s, if bits >> j & 1 == 1 { 16.0 } else { 0.0 }, "bit {j}");
        }
        let x = F32x4::load(&[1.5, -2.0, 3.25, 4.0, 99.0]);
        let y = x.mul(F32x4::splat(2.0)).sub(F32x4::splat(1.0)).add(x);
        assert_eq!(lanes::f_lanes(y.0), [3.5, -7.0, 8.75, 11.0]);
        assert_eq!(y.sum(), (3.5 - 7.0) + (8.75 + 11.0));
    }

    #[test]
    fn sin_cos_is_accurate_over_rope_angles() {
        let mut t = -5000.0f32;
        while t < 5000.0 {
            let (s, c) = sin_cos(t);
            let (ws, wc) = f64::from(t).sin_cos();
            assert!(
                (f64::from(s) - ws).abs() < 2.5e-7 && (f64::from(c) - wc).abs() < 2.5e-7,
                "sin_cos({t}) = ({s}, {c}), want ({ws}, {wc})"
            );
            t += 0.0917;
        }
        let (s, c) = sin_cos(2.1e9);
        assert!(s.is_finite() && c.is_finite() && s.abs() <= 1.0 && c.abs() <= 1.0);
    }

    #[test]
    fn sqrt_is_std_sqrt_bit_for_bit() {
        let mut x = 1e-30f32;
        while x < 1e30 {
            for v in [x, x * 1.000_001, x * 1.7] {
                assert_eq!(sqrt(v).to_bits(), v.sqrt().to_bits(), "sqrt({v})");
            }
            x *= 1.37;
        }
        for v in [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::MIN_POSITIVE,
            1e-45,
            4.0,
            2.0,
        ] {
            assert_eq!(sqrt(v).to_bits(), v.sqrt().to_bits(), "sqrt({v})");
        }
        assert!(sqrt(-1.0).is_nan() && sqrt(f32::NAN).is_nan());
    }
}
