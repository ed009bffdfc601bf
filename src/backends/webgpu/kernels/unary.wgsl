// out[i] = f(x[i]) for f32 tensors; apply() is specialised per function (see source.rs). The
// gated form (a unary op fused with the product that reads it, see fusion.rs) binds a third
// tensor and writes out[i] = f(x[i]) * gate[i].
struct Params {
    // x: element count, y: scale (f32 bits), z: bias (f32 bits)
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
{{GATE_BINDING}}

{{ACTIVATIONS}}

fn apply(v: f32) -> f32 {
    let scale = bitcast<f32>(p.head.y);
    let bias = bitcast<f32>(p.head.z);
    return {{EXPR}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    if (i >= p.head.x) {
        return;
    }
    out[i] = apply(x[i]){{GATE}};
}
