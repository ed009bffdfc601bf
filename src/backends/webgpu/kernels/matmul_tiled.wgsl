// Batched matrix product, register-tiled (compile spec matmul_kernel = tiled, tiled32, tiled64,
// tiled128; the design: docs/decisions/0052-register-tiled-gemm.md).
//
// A workgroup of WGX x WGY invocations computes a TM x TN tile of one batch's output (TM =
// 4 WGY RQ, TN = 4 WGX CQ). It walks K in steps of TK, staging the TM x TK tile of A transposed
// (a_tile[k][m]) and the TK x TN tile of B (b_tile[k][n]) in workgroup memory as vec4s along m
// and n, each row padded by one vec4 so that the transposing stores of neighbouring invocations
// fall in different banks. Each staged vec4 is four loads of one invocation along m (or n);
// neighbouring invocations read neighbouring addresses along whichever dimension is contiguous
// in memory (k for a plain A or a transposed B, m or n otherwise). Loads past the matrix edges
// give zeros, so any M, N, K work; transposes are strides: A(m, k) = a[a_batch + m * a_sm +
// k * a_sk], B(k, n) = b[b_batch + k * b_sk + n * b_sn]; batch dims broadcast through zero
// strides (batch_bases, matmul.rs).
//
// Invocation (tx, ty) owns RQ x CQ blocks of 4 x 4 outputs: rows 4 (q WGY + ty) + 0..3 for
// q < RQ and columns 4 (q WGX + tx) + 0..3 for q < CQ, accumulated in 4 RQ CQ vec4<f32>
// registers (acc_R_Q: the invocation's row R, column block Q). The step over one k of the
// staged tiles (unrolled TK times by matmul.rs) reads RQ + CQ vec4s of workgroup
// memory and issues 4 RQ CQ vec4 fused multiply-adds. Tiles are staged in `Stage` (f32, or f16
// under precision=f16); products are accumulated in f32.
// The uniforms `p` and the bindings a, b, out (and bias): matmul.rs.

const WGX: u32 = {{WGX}}u;
const WGY: u32 = {{WGY}}u;
const TK: u32 = {{TK}}u;
// vec4s along a tile's m and n, and the padded row strides of the staged tiles.
const TM4: u32 = {{TM4}}u;
const TN4: u32 = {{TN4}}u;
const AS: u32 = TM4 + 1u;
const BS: u32 = TN4 + 1u;
const NT: u32 = WGX * WGY;

var<workgroup> a_tile: array<vec4<Stage>, {{A_TILE}}>;
var<workgroup> b_tile: array<vec4<Stage>, {{B_TILE}}>;

// A(m, k) of the batch at `base`, zero past the edges.
fn load_a(base: u32, m: u32, k: u32) -> f32 {
    if (m < p.dims.x && k < p.dims.z) {
        return f32(a[base + m * p.strides.x + k * p.strides.y]);
    }
    return 0.0;
}

// B(k, n) of the batch at `base`, zero past the edges.
fn load_b(base: u32, n: u32, k: u32) -> f32 {
    if (k < p.dims.z && n < p.dims.y) {
        return f32(b[base + k * p.strides.z + n * p.strides.w]);
    }
    return 0.0;
}

// Row `m` of the output from column `n` on: the four values of `v` that are inside it.
fn store(base: u32, m: u32, n: u32, v: vec4<f32>) {
    if (m >= p.dims.x) {
        return;
    }
    for (var j = 0u; j < 4u; j = j + 1u) {
        let gn = n + j;
        if (gn < p.dims.y) {
            out[base + m * p.dims.y + gn] = Act(v[j]{{BIAS_ADD}});
        }
    }
}

@compute @workgroup_size({{WGX}}, {{WGY}}, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
    let k_len = p.dims.z;
    let batch = wid.z;
    let bases = batch_bases(batch);
    let a_base = bases.x;
    let b_base = bases.y;
    // Which dimension neighbouring invocations walk when they stage a tile.
    let a_k_contiguous = p.strides.y == 1u;
    let b_k_contiguous = p.strides.z == 1u && p.strides.w != 1u;
    let row0 = wid.y * TM4 * 4u;
    let col0 = wid.x * TN4 * 4u;
    let tx = lid3.x;
    let ty = lid3.y;

{{ACC_DECLS}}
    for (var k0 = 0u; k0 < k_len; k0 = k0 + TK) {
{{STAGE_A}}
{{STAGE_B}}
        workgroupBarrier();
{{STEPS}}
        workgroupBarrier();
    }

    let out_base = batch * p.dims.x * p.dims.y;
{{STORES}}
}
