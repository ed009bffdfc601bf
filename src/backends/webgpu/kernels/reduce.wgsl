// Workgroup tree reductions over {{WG}} threads ({{WG}} is a power of two). Every thread of the
// workgroup must call them (they contain barriers) and receives the result.
var<workgroup> scratch: array<Acc, {{WG}}>;

fn reduce_sum(lid: u32, v: Acc) -> Acc {
    scratch[lid] = v;
    workgroupBarrier();
    for (var s = {{WG}}u / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            scratch[lid] = scratch[lid] + scratch[lid + s];
        }
        workgroupBarrier();
    }
    let r = scratch[0];
    workgroupBarrier();
    return r;
}

fn reduce_max(lid: u32, v: Acc) -> Acc {
    scratch[lid] = v;
    workgroupBarrier();
    for (var s = {{WG}}u / 2u; s > 0u; s = s >> 1u) {
        if (lid < s) {
            scratch[lid] = max(scratch[lid], scratch[lid + s]);
        }
        workgroupBarrier();
    }
    let r = scratch[0];
    workgroupBarrier();
    return r;
}
