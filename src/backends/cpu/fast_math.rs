//! Branch-free `f32` transcendental functions and eight-lane row sums and maxima, so that loops over them vectorise (SSE natively,
//! simd128 in the browser) instead of calling libm once per element.
//!
//! Accuracy (checked against f64 references in the tests): `exp` within 1e-7 relative over
//! its whole range; `gelu` within 2e-6 relative for `|x| <= 8` and 4e-7 absolute everywhere.

use crate::error::{Error, Result};

/// `e^x`. Inputs below -87.3 give the smallest normal float (~1.2e-38) instead of 0, inputs
/// above 88 give `e^88`; NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    // Cody-Waite reduction x = n ln2 + r with |r| <= ln2 / 2, then Cephes' expf polynomial.
    const LOG2E: f32 = std::f32::consts::LOG2_E;
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
    let half_tail = 0.5 * erfc_non_negative(x.abs() * std::f32::consts::FRAC_1_SQRT_2);
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
    const TWO_OVER_PI: f32 = std::f32::consts::FRAC_2_PI;
    const P1: f32 = 1.570_312_5;
    const P2: f32 = 4.837_513e-4;
    const P3: f32 = 7.549_79e-8;
    let q = (t * TWO_OVER_PI + 0.5).floor();
    // Clamped (to pi/4 plus the slack of a rounded q): beyond |t| ~ 1e5 the products are no longer exact, and a huge angle (a position
    // near 2^31) must still give values in [-1, 1], if not accurate ones.
    let r = (((t - q * P1) - q * P2) - q * P3).clamp(-0.8, 0.8);
    let z = r * r;
    let sin = r + r * z * (-1.666_665_5e-1 + z * (8.332_161e-3 + z * -1.951_529_6e-4));
    let cos = 1.0 - 0.5 * z + z * z * (4.166_664_6e-2 + z * (-1.388_731_6e-3 + z * 2.443_315_7e-5));
    // The quadrant q mod 4, from the float (exact for |q| < 2^24; any value beyond is fine).
    let quadrant = (q - 4.0 * (q * 0.25).floor()) as u32;
    match quadrant {
        0 => (sin, cos),
        1 => (cos, -sin),
        2 => (-sin, -cos),
        _ => (-cos, sin),
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

/// Checks that `len` elements are whole rows of `width`.
///
/// # Errors
/// `Internal` when they are not.
pub fn rows_of(len: usize, width: usize, what: &str) -> Result<()> {
    if width == 0 || len.is_multiple_of(width) {
        Ok(())
    } else {
        Err(Error::internal(format!(
            "{what}: {len} elements are not whole rows of {width}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
