    // out[i] = a[ia] (op) b[ib] with NumPy broadcasting. The host coalesces dims and passes,
    // per output dim, the stride of each input (0 where it broadcasts), so any rank <= 8 works.
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
    let va = f32(a[ia]);
    let vb = f32(b[ib]);
    out[i] = OutElem({{EXPR}});
