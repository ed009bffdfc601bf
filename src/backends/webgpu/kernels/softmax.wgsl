// Softmax over the last dim H of x (+ mask, broadcast), one workgroup per row, stable:
// m = max(v), s = sum(exp(v - m)), out = exp(v - m) / s. The mask element for x's flat index i
// is found by decomposing i over x's (coalesced) shape with the mask's broadcast strides.
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

fn value(i: u32) -> Acc {
    return Acc(x[i]){{MASK_ADD}};
}
