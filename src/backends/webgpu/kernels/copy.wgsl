// Strided copy of 32-bit words: element `i` of a logical shape (row-major) is read at
// src_offset + sum(idx[d] * src_strides[d]) and written at dst_offset + sum(idx[d] * dst_strides[d]).
// Permute, slice, concat and reshape-by-copy are all this kernel with different strides; i64
// tensors are handled by the host as an extra trailing dim of 2 words.
// The element body (after the builder's element prologue).
    var rem = i;
    var s = p.head.z;
    var t = p.head.w;
    for (var d = i32(p.head.y) - 1; d >= 0; d = d - 1) {
        let du = u32(d);
        let extent = p.shape[du >> 2u][du & 3u];
        let c = rem % extent;
        rem = rem / extent;
        s = s + c * p.src_strides[du >> 2u][du & 3u];
        t = t + c * p.dst_strides[du >> 2u][du & 3u];
    }
    dst[t] = src[s];
