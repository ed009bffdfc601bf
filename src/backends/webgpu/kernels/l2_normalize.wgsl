    // x / max(||x||_2, eps) over the last dim H, one workgroup per row. p.head.z: eps (f32
    // bits).
    var q = Acc(0.0);
    for (var j = lid; j < h; j = j + WG) {
        let v = Acc(x[base + j]);
        q = q + v * v;
    }
    let norm = sqrt(reduce_sum(lid, q));
    let denom = max(norm, Acc(bitcast<f32>(p.head.z)));
    for (var j = lid; j < h; j = j + WG) {
        out[base + j] = Act(Acc(x[base + j]) / denom);
    }
