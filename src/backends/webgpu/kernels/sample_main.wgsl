// The row body of sample.wgsl (after the builder's row prologue).
    let v = h;
    if (v == 0u) {
        if (lid == 0u) {
            out[row] = NONE;
        }
        return;
    }
    // Step 2-3: k (1 when greedy), from the knobs.
    if (lid == 0u) {
        let temperature = knobs[4u * row];
        let top_k = knobs[4u * row + 1u];
        var k = K_MAX;
        if (!is_nan(top_k) && top_k >= 1.0) {
            k = max(u32(min(top_k, f32(K_MAX))), 1u);
        }
        k = min(k, v);
        if (is_nan(temperature) || !(temperature > 0.0)) {
            k = 1u;
        }
        shared_sel = vec4<u32>(k, 0u, 0u, 0u);
    }
    let k = workgroupUniformLoad(&shared_sel).x;

    if (k == 1u) {
        // Greedy: the Argmax op's reduction.
        var key = 0u;
        var index = NONE;
        for (var j = lid; j < v; j = j + WG) {
            let kj = order_key(logits[base + j]);
            if (kj > key || index == NONE) {
                key = kj;
                index = j;
            }
        }
        cand_key[lid] = key;
        cand_index[lid] = index;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (lid < s) {
                let kb = cand_key[lid + s];
                let ib = cand_index[lid + s];
                if (ib != NONE && (cand_index[lid] == NONE
                    || better(kb, ib, cand_key[lid], cand_index[lid]))) {
                    cand_key[lid] = kb;
                    cand_index[lid] = ib;
                }
            }
            workgroupBarrier();
        }
        if (lid == 0u) {
            out[row] = cand_index[0];
        }
        return;
    }

    // Radix select of the k-th largest key: prefix/mask of the bits fixed so far, and the rank
    // of the wanted key among the elements matching the prefix.
    var prefix = 0u;
    var mask = 0u;
    var remaining = k;
    var ties = 0u;
    for (var round = 0u; round < 4u; round = round + 1u) {
        let shift = 24u - 8u * round;
        for (var b = lid; b < 256u; b = b + WG) {
            atomicStore(&hist[b], 0u);
        }
        workgroupBarrier();
        // Runs of one bin are counted locally first: most logits share the top key byte,
        // and one atomic per element on one address would serialise the whole row.
        var run_bin = 0u;
        var run_count = 0u;
        for (var j = lid; j < v; j = j + WG) {
            let kj = order_key(logits[base + j]);
            if ((kj & mask) == prefix) {
                let bin = (kj >> shift) & 255u;
                if (run_count > 0u && bin != run_bin) {
                    atomicAdd(&hist[run_bin], run_count);
                    run_count = 0u;
                }
                run_bin = bin;
                run_count = run_count + 1u;
            }
        }
        if (run_count > 0u) {
            atomicAdd(&hist[run_bin], run_count);
        }
        workgroupBarrier();
        if (lid == 0u) {
            let found = pick_bin(remaining, true);
            shared_sel = vec4<u32>(prefix | (found.x << shift), found.y, found.z, 0u);
        }
        let chosen = workgroupUniformLoad(&shared_sel);
        prefix = chosen.x;
        remaining = chosen.y;
        ties = chosen.z;
        mask = mask | (255u << shift);
    }
    let threshold = prefix;

    // The `remaining` lowest indices among the `ties` elements whose key is the threshold.
    var last_index = NONE;
    if (ties > remaining) {
        let bits = 32u - countLeadingZeros(v - 1u);
        let passes = (bits + 7u) / 8u;
        var index_prefix = 0u;
        var index_mask = 0u;
        var rank = remaining;
        for (var round = 0u; round < passes; round = round + 1u) {
            let shift = 8u * (passes - 1u - round);
            for (var b = lid; b < 256u; b = b + WG) {
                atomicStore(&hist[b], 0u);
            }
            workgroupBarrier();
            var run_bin = 0u;
            var run_count = 0u;
            for (var j = lid; j < v; j = j + WG) {
                if ((j & index_mask) == index_prefix && order_key(logits[base + j]) == threshold) {
                    let bin = (j >> shift) & 255u;
                    if (run_count > 0u && bin != run_bin) {
                        atomicAdd(&hist[run_bin], run_count);
                        run_count = 0u;
                    }
                    run_bin = bin;
                    run_count = run_count + 1u;
                }
            }
            if (run_count > 0u) {
                atomicAdd(&hist[run_bin], run_count);
            }
            workgroupBarrier();
            if (lid == 0u) {
                let found = pick_bin(rank, false);
                shared_sel = vec4<u32>(index_prefix | (found.x << shift), found.y, 0u, 0u);
            }
            let chosen = workgroupUniformLoad(&shared_sel);
            index_prefix = chosen.x;
            rank = chosen.y;
            index_mask = index_mask | (255u << shift);
        }
        last_index = index_prefix;
    }

    // Collect exactly k candidates (any order), pad the sort's power-of-two span.
    var span = 1u;
    while (span < k) {
        span = span << 1u;
    }
    if (lid == 0u) {
        atomicStore(&collected, 0u);
    }
    for (var i = k + lid; i < span; i = i + WG) {
        cand_key[i] = 0u;
        cand_index[i] = NONE;
    }
    workgroupBarrier();
    for (var j = lid; j < v; j = j + WG) {
        let kj = order_key(logits[base + j]);
        if (kj > threshold || (kj == threshold && j <= last_index)) {
            let slot = atomicAdd(&collected, 1u);
            if (slot < k) {
                cand_key[slot] = kj;
                cand_index[slot] = j;
            }
        }
    }
    workgroupBarrier();

    // Bitonic sort of the span, best first.
    for (var size = 2u; size <= span; size = size << 1u) {
        for (var stride = size >> 1u; stride > 0u; stride = stride >> 1u) {
            for (var i = lid; i < span; i = i + WG) {
                let l = i ^ stride;
                if (l > i) {
                    let first_wins = better(cand_key[i], cand_index[i], cand_key[l], cand_index[l]);
                    let best_first = (i & size) == 0u;
                    if (first_wins != best_first) {
                        let tk = cand_key[i];
                        let ti = cand_index[i];
                        cand_key[i] = cand_key[l];
                        cand_index[i] = cand_index[l];
                        cand_key[l] = tk;
                        cand_index[l] = ti;
                    }
                }
            }
            workgroupBarrier();
        }
    }

    // Steps 3-6 on one thread, in rank order (the CPU's order of summation).
    if (lid == 0u) {
        let top_key = cand_key[0];
        if (top_key == POS_INF_KEY || top_key == NEG_INF_KEY) {
            out[row] = cand_index[0];
            return;
        }
        let temperature = knobs[4u * row];
        let top_p = knobs[4u * row + 2u];
        var u = knobs[4u * row + 3u];
        if (is_nan(u) || !(u > 0.0)) {
            u = 0.0;
        }
        u = min(u, 1.0);
        let top = logits[base + min(cand_index[0], v - 1u)];
        // The weights replace the keys (as f32 bits).
        var total = 0.0;
        for (var j = 0u; j < k; j = j + 1u) {
            var w = 1.0;
            if (j > 0u) {
                let d = (logits[base + min(cand_index[j], v - 1u)] - top) / temperature;
                w = select(exp(d), 0.0, cand_key[j] == NEG_INF_KEY || is_nan(d) || !(d >= -87.0));
            }
            cand_key[j] = bitcast<u32>(w);
            total = total + w;
        }
        var kept = k;
        var mass = total;
        if (!is_nan(top_p) && top_p < 1.0) {
            let needed = top_p * total;
            var running = 0.0;
            for (var j = 0u; j < k; j = j + 1u) {
                running = running + bitcast<f32>(cand_key[j]);
                if (running >= needed) {
                    kept = j + 1u;
                    mass = running;
                    break;
                }
            }
        }
        let goal = u * mass;
        var running = 0.0;
        var chosen = cand_index[kept - 1u];
        for (var j = 0u; j < kept; j = j + 1u) {
            running = running + bitcast<f32>(cand_key[j]);
            if (running > goal) {
                chosen = cand_index[j];
                break;
            }
        }
        out[row] = chosen;
    }
