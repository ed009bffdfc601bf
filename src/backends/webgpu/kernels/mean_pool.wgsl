// Masked mean over the sequence, one thread per (b, h): x [B, S, H], mask [B, S] (non-zero =
// keep) -> out[b, h] = sum_s x[b, s, h] * m[b, s] / max(sum_s m[b, s], 1e-9), m in {0, 1}.
struct Params {
    // x: B, y: S, z: H
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> mask: array<{{MASK_T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

fn keep(j: u32) -> bool {
    return {{KEEP}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    let b_len = p.head.x;
    let s_len = p.head.y;
    let h_len = p.head.z;
    if (i >= b_len * h_len) {
        return;
    }
    let b = i / h_len;
    let h = i % h_len;
    var sum = 0.0;
    var count = 0.0;
    for (var s = 0u; s < s_len; s = s + 1u) {
        if (keep(b * s_len + s)) {
            sum = sum + x[(b * s_len + s) * h_len + h];
            count = count + 1.0;
        }
    }
    out[i] = sum / max(count, 1e-9);
}
