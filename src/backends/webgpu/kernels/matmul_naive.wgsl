// Batched matrix product, one thread per output element and no workgroup memory: the baseline
// the tiled kernel is measured against (compile spec matmul_kernel=naive). Same parameters and
// semantics as matmul_tiled.wgsl.
// The uniforms `p` and the bindings a, b, out (and bias): matmul.rs.

@compute @workgroup_size({{WGX}}, {{WGY}}, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let m_len = p.dims.x;
    let n_len = p.dims.y;
    let k_len = p.dims.z;
    let gn = gid.x;
    let gm = gid.y;
    let batch = gid.z;
    if (gm >= m_len || gn >= n_len) {
        return;
    }
    let bases = batch_bases(batch);
    let a_base = bases.x;
    let b_base = bases.y;
    var acc = 0.0;
    for (var k = 0u; k < k_len; k = k + 1u) {
        acc = fma(a[a_base + gm * p.strides.x + k * p.strides.y],
                  b[b_base + k * p.strides.z + gn * p.strides.w], acc);
    }
    out[batch * m_len * n_len + gm * n_len + gn] = acc{{BIAS_ADD}};
}
