// out[i] = f(x[i]) for f32 tensors; apply() is specialised per function (see source.rs). The
// gated form (a unary op fused with the product that reads it, see fusion.rs) binds a third
// tensor and writes out[i] = f(x[i]) * gate[i].
struct Params {
    // x: element count, y: scale (f32 bits), z: bias (f32 bits)
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
{{GATE_BINDING}}

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

fn apply(v: f32) -> f32 {
    let scale = bitcast<f32>(p.head.y);
    let bias = bitcast<f32>(p.head.z);
    return {{EXPR}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    if (i >= p.head.x) {
        return;
    }
    out[i] = apply(x[i]){{GATE}};
}
