// Strided copy of 32-bit words: element `i` of a logical shape (row-major) is read at
// src_offset + sum(idx[d] * src_strides[d]) and written at dst_offset + sum(idx[d] * dst_strides[d]).
// Permute, slice, concat and reshape-by-copy are all this kernel with different strides; i64
// tensors are handled by the host as an extra trailing dim of 2 words.
struct Params {
    // x: element count, y: rank, z: src offset (words), w: dst offset (words)
    head: vec4<u32>,
    shape: array<vec4<u32>, 2>,
    src_strides: array<vec4<u32>, 2>,
    dst_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    if (i >= p.head.x) {
        return;
    }
    var rem = i;
    var s = p.head.z;
    var t = p.head.w;
    for (var d = i32(p.head.y) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let extent = p.shape[du >> 2u][du & 3u];
        let c = rem % extent;
        rem = rem / extent;
        s = s + c * p.src_strides[du >> 2u][du & 3u];
        t = t + c * p.dst_strides[du >> 2u][du & 3u];
    }
    dst[t] = src[s];
}
