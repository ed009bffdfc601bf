// Linear layer for many activation rows (prefill): out[m, n] = x[m, :] . W[n, :] (+ bias[n]),
// tiled through workgroup memory, with W decoded in the kernel (linear_decode.wgsl, prepended).
//
// A workgroup of WGX x WGY threads computes a TM x TN tile of out (TM = WGY * RM, TN = WGX * 4):
// it walks K in steps of TK (32: one Q8_0/Q4_0/Q5_0 block, one K-quant sub-block), staging TM x
// TK activations and a TK x TN tile of weights *decoded once* into workgroup memory (zero past
// the edges), which all TM rows then reuse; each thread accumulates RM rows x 4 columns in vec4
// registers (thread (lx, ly) owns rows ly + i * WGY and columns 4 lx .. 4 lx + 3).
// The uniforms `p`, the bindings x, w, out (and bias, gate) and x_at: linear.rs, interface.

const WGX: u32 = {{WGX}}u;
const WGY: u32 = {{WGY}}u;
const RM: u32 = {{RM}}u;
const TK: u32 = 32u;
const TM: u32 = WGY * RM;
const TN: u32 = WGX * 4u;
const NT: u32 = WGX * WGY;

var<workgroup> x_tile: array<f32, {{X_TILE}}>;
var<workgroup> w_tile: array<vec4<f32>, {{W_TILE4}}>;

{{DECODE_LIB}}

@compute @workgroup_size({{WGX}}, {{WGY}}, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let m_len = p.dims.x;
    let n_len = p.dims.y;
    let k_len = p.dims.z;
    let row0 = wid.y * TM;
    let col0 = wid.x * TN;
    let lx = lid3.x;
    let ly = lid3.y;

    var acc: array<vec4<f32>, {{RM}}>;
    for (var i = 0u; i < RM; i = i + 1u) {
        acc[i] = vec4<f32>(0.0);
    }

    for (var k0 = 0u; k0 < k_len; k0 = k0 + TK) {
        for (var e = li; e < TM * TK; e = e + NT) {
            let r = e / TK;
            let c = e % TK;
            let gm = row0 + r;
            let gk = k0 + c;
            var v = 0.0;
            if (gm < m_len && gk < k_len) {
                v = x_at(gm * k_len + gk);
            }
            x_tile[c * TM + r] = v;
        }
        // TN weight rows x TK / 8 units of 8 decoded values.
        for (var u = li; u < TN * (TK / 8u); u = u + NT) {
            let c = u / (TK / 8u);
            let part = u % (TK / 8u);
            let gn = col0 + c;
            let e = k0 + 8u * part;
            var d = Eight(vec4<f32>(0.0), vec4<f32>(0.0));
            if (gn < n_len && e < k_len) {
                d = {{DECODE}}(gn * p.dims.w, e);
            }
            let base = 8u * part * WGX + c / 4u;
            for (var i = 0u; i < 4u; i = i + 1u) {
                w_tile[base + i * WGX][c % 4u] = d.lo[i];
                w_tile[base + (i + 4u) * WGX][c % 4u] = d.hi[i];
            }
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk = kk + 1u) {
            let bv = w_tile[kk * WGX + lx];
            for (var i = 0u; i < RM; i = i + 1u) {
                acc[i] = fma(vec4<f32>(x_tile[kk * TM + ly + i * WGY]), bv, acc[i]);
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < RM; i = i + 1u) {
        let gm = row0 + ly + i * WGY;
        if (gm >= m_len) {
            continue;
        }
        for (var j = 0u; j < 4u; j = j + 1u) {
            let gn = col0 + lx * 4u + j;
            if (gn < n_len) {
                out[gm * p.split.y + p.split.x + gn] = OutElem(acc[i][j]{{BIAS_ADD}});
            }
        }
    }
}
