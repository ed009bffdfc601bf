// Embedding lookup: out[s, h] = table[ids[s], h] for table [V, H]. An id outside 0..V is never
// read: its row is written as zeros and the op's tag (op index + 1) is raised into `status`,
// which the host reads back with the outputs and turns into InvalidArgument.
struct Params {
    // x: output element count, y: H, z: V, w: op tag
    head: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> table: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;

// The id at position s and whether it lies in 0..V ({{IDS}}-typed ids).
fn lookup(s: u32) -> vec2<u32> {
{{ID_LOAD}}
}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = flat_group(wid, nwg) * {{WG}}u + lid;
    if (i >= p.head.x) {
        return;
    }
    let h = p.head.y;
    let s = i / h;
    let col = i % h;
    let id = lookup(s);
    if (id.y == 1u) {
        out[i] = table[id.x * h + col];
    } else {
        out[i] = 0.0;
        atomicMax(&status[0], p.head.w);
    }
}
