// out[i] = a[ia] (op) b[ib] with NumPy broadcasting. The host coalesces dims and passes, per
// output dim, the stride of each input (0 where it broadcasts), so any rank <= 8 works.
struct Params {
    // x: element count, y: rank
    head: vec4<u32>,
    shape: array<vec4<u32>, 2>,
    a_strides: array<vec4<u32>, 2>,
    b_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    if (i >= p.head.x) {
        return;
    }
    var rem = i;
    var ia = 0u;
    var ib = 0u;
    for (var d = i32(p.head.y) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let extent = p.shape[du >> 2u][du & 3u];
        let c = rem % extent;
        rem = rem / extent;
        ia = ia + c * p.a_strides[du >> 2u][du & 3u];
        ib = ib + c * p.b_strides[du >> 2u][du & 3u];
    }
    let va = a[ia];
    let vb = b[ib];
    out[i] = {{EXPR}};
}
