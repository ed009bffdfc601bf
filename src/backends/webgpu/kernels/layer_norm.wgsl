    // Layer normalisation over the last dim H, one workgroup per row: the mean, then the biased
    // variance of (x - mean) (two passes, so large offsets do not cancel), then
    // out = (x - mean) / sqrt(var + eps) * gamma + beta. p.head.z: eps (f32 bits).
    var s = Acc(0.0);
    for (var j = lid; j < h; j = j + WG) {
        s = s + Acc(x[base + j]);
    }
    let mean = reduce_sum(lid, s) / Acc(h);
    var q = Acc(0.0);
    for (var j = lid; j < h; j = j + WG) {
        let d = Acc(x[base + j]) - mean;
        q = q + d * d;
    }
    let variance = reduce_sum(lid, q) / Acc(h);
    let inv = 1.0 / sqrt(variance + Acc(bitcast<f32>(p.head.z)));
    for (var j = lid; j < h; j = j + WG) {
        out[base + j] = Act((Acc(x[base + j]) - mean) * inv * Acc(gamma[j]) + Acc(beta[j]));
    }
