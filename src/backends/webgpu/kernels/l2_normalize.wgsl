// x / max(||x||_2, eps) over the last dim H, one workgroup per row.
struct Params {
    // x: rows, y: H, z: eps (f32 bits)
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let base = row * h;
    var q = 0.0;
    for (var j = lid; j < h; j = j + {{WG}}u) {
        let v = x[base + j];
        q = q + v * v;
    }
    let norm = sqrt(reduce_sum(lid, q));
    let denom = max(norm, bitcast<f32>(p.head.z));
    for (var j = lid; j < h; j = j + {{WG}}u) {
        out[base + j] = x[base + j] / denom;
    }
}
