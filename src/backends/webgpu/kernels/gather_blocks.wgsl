// Embedding lookup from a block-format table (a GGUF token embedding as stored): out[s, h] =
// decode(table row ids[s])[h] for a table [V, H], each thread decoding 8 consecutive values of
// one output row with linear_decode.wgsl (prepended; the table is its `w`). An id outside 0..V
// is never read: its row is written as zeros and the op's tag is raised into `status`, which
// the host turns into InvalidArgument.
// The element body (after the builder's element prologue); lookup(s): gather.rs.
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
            out[base + j] = Act(d.lo[j]);
        }
        if (e + 4u + j < h) {
            out[base + 4u + j] = Act(d.hi[j]);
        }
    }
