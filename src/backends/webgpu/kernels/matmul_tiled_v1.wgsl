// Batched matrix product, tiled through workgroup memory: the first tiled kernel, kept as the
// baseline the register-tiled one (matmul_tiled.wgsl) is measured against (compile spec
// matmul_kernel=tiled_v1).
//
// A workgroup of WGX x WGY threads computes a TM x TN tile of one batch's output (TM = WGY * RM,
// TN = WGX * 4): it walks K in steps of TK, staging a TM x TK tile of A and a TK x TN tile of B in
// workgroup memory (zero-filled past the matrix edges, so any M, N, K work), and each thread
// accumulates RM rows x 4 columns in vec4 registers: thread (lx, ly) owns rows ly + i * WGY and
// columns 4 lx .. 4 lx + 3 of the tile. Transposes are strides: A(m, k) = a[a_batch + m * a_sm +
// k * a_sk], B(k, n) = b[b_batch + k * b_sk + n * b_sn]. Batch dims (up to 4, coalesced by the
// host) broadcast through zero strides (batch_bases, matmul.rs). Tiles are staged in f32, or in f16 under the
// precision=f16 spec (products are still accumulated in f32).
// The uniforms `p` and the bindings a, b, out (and bias): matmul.rs.

const WGX: u32 = {{WGX}}u;
const WGY: u32 = {{WGY}}u;
const RM: u32 = {{RM}}u;
const RN: u32 = {{RN}}u;
const TK: u32 = {{TK}}u;
const TM: u32 = WGY * RM;
const TN: u32 = WGX * RN;
const NT: u32 = WGX * WGY;

var<workgroup> a_tile: array<Stage, {{A_TILE}}>;
var<workgroup> b_tile: array<vec4<Stage>, {{B_TILE4}}>;

@compute @workgroup_size({{WGX}}, {{WGY}}, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let m_len = p.dims.x;
    let n_len = p.dims.y;
    let k_len = p.dims.z;
    let batch = wid.z;

    let bases = batch_bases(batch);
    let a_base = bases.x;
    let b_base = bases.y;

    let a_m_contiguous = p.strides.x == 1u && p.strides.y != 1u;
    let b_k_contiguous = p.strides.z == 1u && p.strides.w != 1u;
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
            // Neighbouring threads read neighbouring addresses: along k, or along m when A is
            // stored transposed (k strided).
            var r = e / TK;
            var c = e % TK;
            if (a_m_contiguous) {
                r = e % TM;
                c = e / TM;
            }
            let gm = row0 + r;
            let gk = k0 + c;
            var v = 0.0;
            if (gm < m_len && gk < k_len) {
                v = a[a_base + gm * p.strides.x + gk * p.strides.y];
            }
            a_tile[c * TM + r] = Stage(v);
        }
        for (var e = li; e < TK * TN; e = e + NT) {
            // Along n, or along k when B is stored transposed (a linear layer's [N, K] weight).
            var r = e / TN;
            var c = e % TN;
            if (b_k_contiguous) {
                r = e % TK;
                c = e / TK;
            }
            let gk = k0 + r;
            let gn = col0 + c;
            var v = 0.0;
            if (gk < k_len && gn < n_len) {
                v = b[b_base + gk * p.strides.z + gn * p.strides.w];
            }
            b_tile[r * WGX + c / 4u][c % 4u] = Stage(v);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk = kk + 1u) {
            let bv = vec4<f32>(b_tile[kk * WGX + lx]);
            for (var i = 0u; i < RM; i = i + 1u) {
                acc[i] = fma(vec4<f32>(f32(a_tile[kk * TM + ly + i * WGY])), bv, acc[i]);
            }
        }
        workgroupBarrier();
    }

    let out_base = batch * m_len * n_len;
    for (var i = 0u; i < RM; i = i + 1u) {
        let gm = row0 + ly + i * WGY;
        if (gm >= m_len) {
            continue;
        }
        for (var j = 0u; j < 4u; j = j + 1u) {
            let gn = col0 + lx * 4u + j;
            if (gn < n_len) {
                out[out_base + gm * n_len + gn] = acc[i][j]{{BIAS_ADD}};
            }
        }
    }
}
