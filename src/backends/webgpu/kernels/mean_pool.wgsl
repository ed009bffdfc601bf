// Masked mean over the sequence, one thread per (b, h): x [B, S, H], mask [B, S] (non-zero =
// keep) -> out[b, h] = sum_s x[b, s, h] * m[b, s] / max(sum_s m[b, s], 1e-9), m in {0, 1}.
// The element body (after the builder's element prologue, i < B * H); keep(j): pool.rs.
    let s_len = p.head.y;
    let h_len = p.head.z;
    let b = i / h_len;
    let h = i % h_len;
    var sum = 0.0;
    var count = 0.0;
    for (var s = 0u; s < s_len; s = s + 1u) {
        if (keep(b * s_len + s)) {
            sum = sum + x[(b * s_len + s) * h_len + h];
            count = count + 1.0;
        }
    }
    out[i] = sum / max(count, 1e-9);
