// Embedding lookup from a block-format table (a GGUF token embedding as stored): out[s, h] =
// decode(table row ids[s])[h] for a table [V, H], each thread decoding 8 consecutive values of
// one output row with linear_decode.wgsl (prepended; the table is its `w`). An id outside 0..V
// is never read: its row is written as zeros and the op's tag is raised into `status`, which
// the host turns into InvalidArgument.
struct Params {
    // x: 8-value units in out, y: units per row, z: V, w: op tag
    head: vec4<u32>,
    // x: first table row bound (a table larger than one binding is bound and run by row
    // ranges), y: rows bound, z: H (the decoder's row length), w: bytes per table row
    dims: vec4<u32>,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> status: array<atomic<u32>>;

{{DECODE_LIB}}

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
    let h = p.dims.z;
    let s = i / p.head.y;
    let e = (i % p.head.y) * 8u;
    let id = lookup(s);
    var d = Eight(vec4<f32>(0.0), vec4<f32>(0.0));
    if (id.y == 1u) {
        // Rows outside this dispatch's range are another dispatch's to write.
        if (id.x < p.dims.x || id.x - p.dims.x >= p.dims.y) {
            return;
        }
        d = {{DECODE}}((id.x - p.dims.x) * p.dims.w, e);
    } else {
        // Out of the whole table: the first range's dispatch writes zeros and flags it.
        if (p.dims.x != 0u) {
            return;
        }
        atomicMax(&status[0], p.head.w);
    }
    let base = s * h + e;
    for (var j = 0u; j < 4u; j = j + 1u) {
        if (e + j < h) {
            out[base + j] = d.lo[j];
        }
        if (e + 4u + j < h) {
            out[base + 4u + j] = d.hi[j];
        }
    }
}
