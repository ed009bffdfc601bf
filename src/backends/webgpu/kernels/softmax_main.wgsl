    // -inf, passed in from the host (a const -inf is a WGSL error). Threads without elements
    // keep it, so they never raise the maximum; a row of -inf gives NaN, as the plain formula.
    var m = Acc(bitcast<f32>(p.head.w));
    for (var j = lid; j < h; j = j + WG) {
        m = max(m, value(base + j));
    }
    let row_max = reduce_max(lid, m);
    var s = Acc(0.0);
    for (var j = lid; j < h; j = j + WG) {
        s = s + exp(value(base + j) - row_max);
    }
    let total = reduce_sum(lid, s);
    for (var j = lid; j < h; j = j + WG) {
        out[base + j] = Act(exp(value(base + j) - row_max) / total);
    }
