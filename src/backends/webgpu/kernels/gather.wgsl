// Embedding lookup: out[s, h] = table[ids[s], h] for table [V, H]. An id outside 0..V is never
// read: its row is written as zeros and the op's tag (op index + 1) is raised into `status`,
// which the host reads back with the outputs and turns into InvalidArgument.
// The element body (after the builder's element prologue); lookup(s): gather.rs.
    let h = p.head.y;
    let s = i / h;
    let col = i % h;
    let id = lookup(s);
    if (id.y == 1u) {
        out[i] = Act(table[id.x * h + col]);
    } else {
        out[i] = Act(0.0);
        atomicMax(&status[0], p.head.w);
    }
