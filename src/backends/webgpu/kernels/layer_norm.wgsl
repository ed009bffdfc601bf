// Layer normalisation over the last dim H, one workgroup per row: the mean, then the biased
// variance of (x - mean) (two passes, so large offsets do not cancel), then
// out = (x - mean) / sqrt(var + eps) * gamma + beta.
struct Params {
    // x: rows, y: H, z: eps (f32 bits)
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> gamma: array<f32>;
@group(0) @binding(3) var<storage, read_write> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let base = row * h;
    var s = 0.0;
    for (var j = lid; j < h; j = j + {{WG}}u) {
        s = s + x[base + j];
    }
    let mean = reduce_sum(lid, s) / f32(h);
    var q = 0.0;
    for (var j = lid; j < h; j = j + {{WG}}u) {
        let d = x[base + j] - mean;
        q = q + d * d;
    }
    let variance = reduce_sum(lid, q) / f32(h);
    let inv = 1.0 / sqrt(variance + bitcast<f32>(p.head.z));
    for (var j = lid; j < h; j = j + {{WG}}u) {
        out[base + j] = (x[base + j] - mean) * inv * gamma[j] + beta[j];
    }
}
