// Softmax over the last dim H of x (+ mask, broadcast), one workgroup per row, stable:
// m = max(v), s = sum(exp(v - m)), out = exp(v - m) / s. The mask element for x's flat index i
// is found by decomposing i over x's (coalesced) shape with the mask's broadcast strides.
struct Params {
    // x: rows, y: H, z: rank of the mask view (0 = no mask), w: -inf (f32 bits)
    head: vec4<u32>,
    shape: array<vec4<u32>, 2>,
    mask_strides: array<vec4<u32>, 2>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
{{MASK_DECL}}

fn mask_index(i: u32) -> u32 {
    var rem = i;
    var m = 0u;
    for (var d = i32(p.head.z) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let extent = p.shape[du >> 2u][du & 3u];
        let c = rem % extent;
        rem = rem / extent;
        m = m + c * p.mask_strides[du >> 2u][du & 3u];
    }
    return m;
}

fn value(i: u32) -> f32 {
    return x[i]{{MASK_ADD}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = flat_group(wid, nwg);
    if (row >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let base = row * h;
    // -inf, passed in from the host (a const -inf is a WGSL error). Threads without elements
    // keep it, so they never raise the maximum; a row of -inf gives NaN, as the plain formula.
    var m = bitcast<f32>(p.head.w);
    for (var j = lid; j < h; j = j + {{WG}}u) {
        m = max(m, value(base + j));
    }
    let row_max = reduce_max(lid, m);
    var s = 0.0;
    for (var j = lid; j < h; j = j + {{WG}}u) {
        s = s + exp(value(base + j) - row_max);
    }
    let total = reduce_sum(lid, s);
    for (var j = lid; j < h; j = j + {{WG}}u) {
        out[base + j] = exp(value(base + j) - row_max) / total;
    }
}
