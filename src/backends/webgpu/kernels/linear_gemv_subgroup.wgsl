// Linear layer, one activation row per workgroup column (decode, M small), summed by subgroup
// operations: out[m, n] = x[m, :] . W[n, :] (+ bias[n]) with W decoded in the kernel
// (linear_decode.wgsl, prepended).
//
// A workgroup computes ROWS output rows of activation row m = wid.z. Each subgroup is a team
// that owns whole rows: WGSL does not say which invocations share a subgroup, so nothing here
// assumes it. A team numbers its active lanes itself (subgroupExclusiveAdd of 1, and their
// count by subgroupAdd: right for any subgroup size and for partly filled subgroups) and takes
// a team number from a workgroup counter; after one barrier the count of teams is known, and
// team t takes rows t, t + teams, ... The activation row is staged in workgroup memory KC
// elements at a time (zero-padded to a multiple of 8; once for all rows when K <= KC); the
// lanes of a team stride over its row's 8-value units (lane l takes units l, l + lanes, ...:
// neighbouring lanes read neighbouring bytes), each decoding 8 weights and dotting them with 8
// staged activations, and subgroupAdd sums the row. Every barrier and subgroup operation sits in
// control flow that is uniform across the workgroup. The weight bytes are read exactly once.
// The uniforms `p`, the bindings x, w, out (and bias, gate) and x_at: linear.rs, interface.

const ROWS: u32 = {{ROWS}}u;
const NT: u32 = {{NT}}u;
const KC: u32 = {{KC}}u;

var<workgroup> xs: array<vec4<f32>, {{KC4}}>;
// Team numbers handed out, then (read once by all) how many teams there are.
var<workgroup> tickets: atomic<u32>;
var<workgroup> team_total: u32;

{{DECODE_LIB}}

{{STAGE_X}}

@compute @workgroup_size({{NT}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n_len = p.dims.y;
    let k_len = p.dims.z;
    let m = wid.z;
    let xb = m * k_len;
    let lane = subgroupExclusiveAdd(1u);
    let lanes = subgroupAdd(1u);
    var ticket = 0u;
    if (lane == 0u) {
        ticket = atomicAdd(&tickets, 1u);
    }
    let team = subgroupMax(ticket);
    workgroupBarrier();
    if (lid == 0u) {
        team_total = atomicLoad(&tickets);
    }
    let teams = workgroupUniformLoad(&team_total);
    let first = flat_group(wid, nwg) * ROWS;
    let passes = (k_len + KC - 1u) / KC;
    for (var i = 0u; i * teams < ROWS; i = i + 1u) {
        let slot = team + i * teams;
        let row = first + slot;
        let live = slot < ROWS && row < n_len;
        let rb = min(row, n_len - 1u) * p.dims.w;
        var acc = 0.0;
        for (var step = 0u; step < passes; step = step + 1u) {
            let k0 = step * KC;
            if (i == 0u || passes > 1u) {
                if (passes > 1u) {
                    workgroupBarrier();
                }
                stage_x(xb, k0, lid);
                workgroupBarrier();
            }
            if (live) {
                let span = min(KC, k_len - k0);
                for (var u = lane; u * 8u < span; u = u + lanes) {
                    let d = {{DECODE}}(rb, k0 + 8u * u);
                    acc = acc + dot(d.lo, xs[2u * u]) + dot(d.hi, xs[2u * u + 1u]);
                }
            }
        }
        let s = subgroupAdd(acc);
        if (lane == 0u && live) {
            out[m * p.split.y + p.split.x + row] = OutElem(s{{BIAS_ADD}});
        }
    }
}
