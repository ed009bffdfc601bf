// Linear layer for one activation row (decode on real GPUs) over a weight format with a
// whole-block dot (Q8_0, Q5_0, Q4_K, Q6_K: linear_block_dot.wgsl): out[m, n] = x[m, :] . W[n, :]
// (+ bias[n]).
//
// Memory-bound, and on a GPU what a warp's load touches matters: blocks of 34, 22 or 210 bytes
// read by one thread each put neighbouring threads 34+ bytes apart, so one load instruction
// touches many cache lines. Here a workgroup first copies its ROWS rows' next CB blocks (a
// contiguous span of each row) into workgroup memory with neighbouring threads reading
// neighbouring words, and the activations of those blocks beside them; then TPR threads per row
// dot the staged blocks (thread t takes blocks t, t + TPR, ..), reading the weights' words from
// workgroup memory; a plain workgroup reduction sums a row's partial sums. Each weight byte is
// read from storage exactly once.
// The uniforms `p`, the bindings x, w, out (and bias, gate) and x_at: linear.rs, interface.

const TPR: u32 = {{TPR}}u;
const ROWS: u32 = {{ROWS}}u;
const NT: u32 = TPR * ROWS;
// Values and bytes of one block; blocks staged per row and pass.
const BE: u32 = {{BLOCK_VALUES}}u;
const BB: u32 = {{BLOCK_BYTES}}u;
const CB: u32 = {{STAGED_BLOCKS}}u;
// Words per staged row: CB blocks starting at a 2-byte boundary.
const SW: u32 = (CB * BB) / 4u + 2u;
// One weight row per block dot.
const R: u32 = 1u;

var<workgroup> ws: array<u32, {{STAGED_WORDS}}>;
var<workgroup> xs: array<vec4<f32>, {{STAGED_X4}}>;
var<workgroup> partial: array<f32, {{NT}}>;

{{DECODE_LIB}}

// Staged activations i .. i + 3 of this pass (i a multiple of 4).
fn xv(i: u32) -> vec4<f32> {
    return xs[i >> 2u];
}

// Word i of the staged rows.
fn ww(i: u32) -> u32 {
    return ws[i];
}

{{BLOCK_DOT}}

@compute @workgroup_size({{NT}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n_len = p.dims.y;
    let k_len = p.dims.z;
    let blocks = k_len / BE;
    let m = wid.z;
    let row0 = flat_group(wid, nwg) * ROWS;
    let r = lid / TPR;
    let t = lid % TPR;
    let xb = m * k_len;
    var acc = 0.0;
    for (var c0 = 0u; c0 < blocks; c0 = c0 + CB) {
        let cb = min(CB, blocks - c0);
        let seg = cb * BB;
        // Every staged row's words (rows past N read the last row again; their sums are not
        // written): word j of row q is storage word (start >> 2) + j.
        let words = (seg + 5u) / 4u;
        for (var i = lid; i < ROWS * words; i = i + NT) {
            let q = i / words;
            let j = i % words;
            let start = min(row0 + q, n_len - 1u) * p.dims.w + c0 * BB;
            // A span starting on a word boundary needs one word less.
            if (j * 4u < (start & 3u) + seg) {
                ws[q * SW + j] = w[(start >> 2u) + j];
            }
        }
        for (var i = lid; i * 4u < cb * BE; i = i + NT) {
            let e = xb + c0 * BE + 4u * i;
            xs[i] = vec4<f32>(x_at(e), x_at(e + 1u), x_at(e + 2u), x_at(e + 3u));
        }
        workgroupBarrier();
        let start = min(row0 + r, n_len - 1u) * p.dims.w + c0 * BB;
        acc = acc + block_dot(r * SW * 4u + (start & 3u), t, cb);
        workgroupBarrier();
    }
    partial[lid] = acc;
    workgroupBarrier();
    let row = row0 + r;
    if (t == 0u && row < n_len) {
        var s = 0.0;
        for (var i = 0u; i < TPR; i = i + 1u) {
            s = s + partial[lid + i];
        }
        out[m * p.split.y + p.split.x + row] = OutElem(s{{BIAS_ADD}});
    }
}
