// The activation functions of the unary kernel (unary.wgsl) and of a linear whose input is a
// gated activation (linear.rs), written once.

// erfc(z) for z >= 0 by Abramowitz & Stegun 7.1.26: absolute error <= 1.5e-7 over [0, inf),
// before f32 rounding. Used through gelu() so that neither branch cancels catastrophically.
fn erfc_pos(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return poly * exp(-z * z);
}

// x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), the exact (erf) GELU.
fn gelu(v: f32) -> f32 {
    let y = erfc_pos(abs(v) * 0.70710678118654752);
    if (v >= 0.0) {
        return 0.5 * v * (2.0 - y);
    }
    return 0.5 * v * y;
}

// tanh without the cancellation of (e^2v - 1) / (e^2v + 1) near 0 and without overflow far from 0:
// a Taylor polynomial below |v| = 0.0625 (truncation error < 1e-12), else (1 - e^-2|v|) / (1 + e^-2|v|).
fn tanh_stable(v: f32) -> f32 {
    let a = abs(v);
    if (a < 0.0625) {
        let s = v * v;
        return v * (1.0 + s * (-0.33333333333 + s * (0.13333333333 - s * 0.053968253968)));
    }
    let t = exp(-2.0 * a);
    return sign(v) * (1.0 - t) / (1.0 + t);
}

// 1 / (1 + e^-t) from e^-|t| only (t clamped to +-88), so no intermediate overflows.
fn sigmoid_stable(t: f32) -> f32 {
    let e = exp(-min(abs(t), 88.0));
    let s = 1.0 / (1.0 + e);
    return select(e * s, s, t >= 0.0);
}

// 0.5 v (1 + tanh(u)) = v * sigmoid(2u), u = sqrt(2/pi) (v + 0.044715 v^3) from v clamped to
// +-12 (the sigmoid is saturated beyond); below -12 the true value underflows f32: -0.
fn gelu_tanh(v: f32) -> f32 {
    let c = clamp(v, -12.0, 12.0);
    let s = sigmoid_stable(1.5957691216057308 * c * (1.0 + 0.044715 * c * c));
    return select(v * s, -0.0, v < -12.0);
}

// v * sigmoid(v); below -88 the true value is under 1e-36: -0.
fn silu(v: f32) -> f32 {
    return select(v * sigmoid_stable(v), -0.0, v < -88.0);
}
