// Linear layer, one activation row per workgroup column (decode, M small): out[m, n] =
// x[m, :] . W[n, :] (+ bias[n]) with W decoded in the kernel (linear_decode.wgsl, prepended).
//
// A workgroup computes ROWS output rows of activation row m = wid.z, TPR threads per row. The
// activation row is staged in workgroup memory KC elements at a time (zero-padded to a
// multiple of 8); the TPR threads of a row stride over its 8-element units (thread t takes
// units t, t + TPR, ...: neighbouring threads read neighbouring bytes), each decoding 8 weights
// and dotting them with 8 staged activations; a plain workgroup reduction sums the TPR partial
// sums. The memory-bound part, the weight bytes, is read exactly once.
// The uniforms `p`, the bindings x, w, out (and bias, gate) and x_at: linear.rs, interface.

const TPR: u32 = {{TPR}}u;
const ROWS: u32 = {{ROWS}}u;
const NT: u32 = TPR * ROWS;
const KC: u32 = {{KC}}u;

var<workgroup> xs: array<vec4<f32>, {{KC4}}>;
var<workgroup> partial: array<f32, {{NT}}>;

{{DECODE_LIB}}

{{STAGE_X}}

@compute @workgroup_size({{NT}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n_len = p.dims.y;
    let k_len = p.dims.z;
    let m = wid.z;
    let row = flat_group(wid, nwg) * ROWS + lid / TPR;
    let t = lid % TPR;
    let live = row < n_len;
    let rb = min(row, n_len - 1u) * p.dims.w;
    let xb = m * k_len;
    var acc = 0.0;
    for (var k0 = 0u; k0 < k_len; k0 = k0 + KC) {
        let span = min(KC, k_len - k0);
        stage_x(xb, k0, lid);
        workgroupBarrier();
        if (live) {
            for (var u = t; u * 8u < span; u = u + TPR) {
                let d = {{DECODE}}(rb, k0 + 8u * u);
                acc = acc + dot(d.lo, xs[2u * u]) + dot(d.hi, xs[2u * u + 1u]);
            }
        }
        workgroupBarrier();
    }
    partial[lid] = acc;
    workgroupBarrier();
    if (t == 0u && live) {
        var s = 0.0;
        for (var i = 0u; i < TPR; i = i + 1u) {
            s = s + partial[lid + i];
        }
        out[m * p.split.y + p.split.x + row] = OutElem(s{{BIAS_ADD}});
    }
}
