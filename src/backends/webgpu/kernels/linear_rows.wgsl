// Linear layer, R output rows per invocation (decode, for adapters that emulate the GPU on the
// CPU): out[m, n] = x[m, :] . W[n, :] (+ bias[n]) with W decoded in the kernel
// (linear_decode.wgsl, prepended).
//
// No workgroup memory and no barriers: on SwiftShader or lavapipe the invocations of a
// workgroup run as SIMD lanes of fibers, and every barrier switches between all of them. There
// every storage load is a per-lane gather, and the activation row costs as many loads as the
// weights (four floats per weight word), so each invocation dots R weight rows (rows first + WG
// * r of its workgroup's WG * R) at once, each activation loaded once for all R. Each weight row
// is read block by block as whole words (linear_block_dot.wgsl for the formats it has, else
// the 8-value decoders). Workgroup column m = wid.z is the activation row.
// The uniforms `p`, the bindings x, w, out (and bias, gate) and x_at: linear.rs, interface.

const WG: u32 = {{WG}}u;
const R: u32 = {{R}}u;

{{DECODE_LIB}}

// Activations xb + e .. xb + e + 3 of the row at xb, zero at or past K (e < K).
fn x4(xb: u32, e: u32) -> vec4<f32> {
    let k = p.dims.z;
    if (e + 4u <= k) {
        return vec4<f32>(x_at(xb + e), x_at(xb + e + 1u), x_at(xb + e + 2u), x_at(xb + e + 3u));
    }
    var v = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c = c + 1u) {
        if (e + c < k) {
            v[c] = x_at(xb + e + c);
        }
    }
    return v;
}

// Activations i .. i + 3 (in range: block formats have K a multiple of 32).
fn xv(i: u32) -> vec4<f32> {
    return vec4<f32>(x_at(i), x_at(i + 1u), x_at(i + 2u), x_at(i + 3u));
}

// Word i of the weight binding.
fn ww(i: u32) -> u32 {
    return w[i];
}

{{ROWS_DOT}}

@compute @workgroup_size({{WG}})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n_len = p.dims.y;
    let first = flat_group(wid, nwg) * (WG * R) + lid;
    if (first >= n_len) {
        return;
    }
    let m = wid.z;
    // Rows past N read the last row again; their sums are not written.
    var rb: array<u32, R>;
    for (var r = 0u; r < R; r = r + 1u) {
        rb[r] = min(first + WG * r, n_len - 1u) * p.dims.w;
    }
    let acc = rows_dot(rb, m * p.dims.z);
    for (var r = 0u; r < R; r = r + 1u) {
        let row = first + WG * r;
        if (row < n_len) {
            out[m * p.split.y + p.split.x + row] = OutElem(acc[r]{{BIAS_ADD}});
        }
    }
}
