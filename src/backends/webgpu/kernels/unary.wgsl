// out[i] = f(x[i]); apply() is specialised per function (elementwise.rs). The gated form (a
// unary op fused with the product that reads it, see fusion.rs) binds a third tensor and
// writes out[i] = f(x[i]) * gate[i]. p.head: x: element count, y: scale, z: bias (f32 bits).
fn apply(v: f32) -> f32 {
    let scale = bitcast<f32>(p.head.y);
    let bias = bitcast<f32>(p.head.z);
    return {{EXPR}};
}
