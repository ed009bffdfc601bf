// Weight decoding for the linear kernels: `decode8(rb, e)` returns elements e .. e+7 (e a
// multiple of 8) of the weight row whose first byte is at byte offset rb of `w`, decoded with
// ggml's rules (src/quant.rs). `w` is the weight's raw bytes bound as array<u32>: block formats
// are only 2-byte aligned (Q5_0 22 B, Q8_0 34 B, Q6_K 210 B), so every multi-byte field is read
// with word loads and shifts (`u32_at`). Dense formats (f32, f16, bf16) take any row length:
// elements at or past K (p.dims.z) decode as 0.

struct Eight {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

// The 4 bytes starting at byte offset o (any alignment), little-endian.
fn u32_at(o: u32) -> u32 {
    let i = o >> 2u;
    let s = (o & 3u) * 8u;
    if (s == 0u) {
        return w[i];
    }
    return (w[i] >> s) | (w[i + 1u] << (32u - s));
}

fn byte_at(o: u32) -> u32 {
    return (w[o >> 2u] >> ((o & 3u) * 8u)) & 0xffu;
}

// The f16 at an even byte offset, widened.
fn half_at(o: u32) -> f32 {
    return unpack2x16float((w[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu).x;
}

// Four unsigned bytes of q as floats.
fn u8x4(q: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(0xffu));
}

// Four signed bytes of q as floats.
fn i8x4(q: u32) -> vec4<f32> {
    let v = vec4<i32>(bitcast<i32>(q << 24u), bitcast<i32>(q << 16u), bitcast<i32>(q << 8u),
        bitcast<i32>(q));
    return vec4<f32>(v >> vec4<u32>(24u));
}

fn decode8_q8_0(rb: u32, e: u32) -> Eight {
    let bb = rb + (e / 32u) * 34u;
    let d = half_at(bb);
    let o = bb + 2u + e % 32u;
    return Eight(d * i8x4(u32_at(o)), d * i8x4(u32_at(o + 4u)));
}

fn decode8_q4_0(rb: u32, e: u32) -> Eight {
    let bb = rb + (e / 32u) * 18u;
    let j = e % 32u;
    let d = half_at(bb);
    let sh = (j / 16u) * 4u;
    let o = bb + 2u + j % 16u;
    let q0 = (u32_at(o) >> sh) & 0x0f0f0f0fu;
    let q1 = (u32_at(o + 4u) >> sh) & 0x0f0f0f0fu;
    return Eight(d * (u8x4(q0) - 8.0), d * (u8x4(q1) - 8.0));
}

// Bits 0..3 of h moved to bit 4 of bytes 0..3.
fn fifth_bits(h: u32) -> u32 {
    return ((h & 1u) << 4u) | ((h & 2u) << 11u) | ((h & 4u) << 18u) | ((h & 8u) << 25u);
}

fn decode8_q5_0(rb: u32, e: u32) -> Eight {
    let bb = rb + (e / 32u) * 22u;
    let j = e % 32u;
    let d = half_at(bb);
    let qh = u32_at(bb + 2u) >> j;
    let sh = (j / 16u) * 4u;
    let o = bb + 6u + j % 16u;
    let q0 = ((u32_at(o) >> sh) & 0x0f0f0f0fu) | fifth_bits(qh);
    let q1 = ((u32_at(o + 4u) >> sh) & 0x0f0f0f0fu) | fifth_bits(qh >> 4u);
    return Eight(d * (u8x4(q0) - 16.0), d * (u8x4(q1) - 16.0));
}

// The 6-bit scale and min of sub-block sub (0..8) from the 12 packed bytes at sb.
fn k_scale_min(sb: u32, sub: u32) -> vec2<f32> {
    if (sub < 4u) {
        return vec2<f32>(f32(byte_at(sb + sub) & 63u), f32(byte_at(sb + sub + 4u) & 63u));
    }
    let packed = byte_at(sb + sub + 4u);
    let sc = (packed & 15u) | ((byte_at(sb + sub - 4u) >> 2u) & 0x30u);
    let m = (packed >> 4u) | ((byte_at(sb + sub) >> 2u) & 0x30u);
    return vec2<f32>(f32(sc), f32(m));
}

fn decode8_q4_k(rb: u32, e: u32) -> Eight {
    let bb = rb + (e / 256u) * 144u;
    let i = e % 256u;
    let sub = i / 32u;
    let sm = k_scale_min(bb + 4u, sub);
    let scale = half_at(bb) * sm.x;
    let mn = half_at(bb + 2u) * sm.y;
    let sh = (sub % 2u) * 4u;
    let o = bb + 16u + (sub / 2u) * 32u + i % 32u;
    let q0 = (u32_at(o) >> sh) & 0x0f0f0f0fu;
    let q1 = (u32_at(o + 4u) >> sh) & 0x0f0f0f0fu;
    return Eight(scale * u8x4(q0) - mn, scale * u8x4(q1) - mn);
}

fn decode8_q5_k(rb: u32, e: u32) -> Eight {
    let bb = rb + (e / 256u) * 176u;
    let i = e % 256u;
    let sub = i / 32u;
    let l = i % 32u;
    let sm = k_scale_min(bb + 4u, sub);
    let scale = half_at(bb) * sm.x;
    let mn = half_at(bb + 2u) * sm.y;
    let sh = (sub % 2u) * 4u;
    let o = bb + 48u + (sub / 2u) * 32u + l;
    let h0 = ((u32_at(bb + 16u + l) >> sub) & 0x01010101u) << 4u;
    let h1 = ((u32_at(bb + 20u + l) >> sub) & 0x01010101u) << 4u;
    let q0 = ((u32_at(o) >> sh) & 0x0f0f0f0fu) | h0;
    let q1 = ((u32_at(o + 4u) >> sh) & 0x0f0f0f0fu) | h1;
    return Eight(scale * u8x4(q0) - mn, scale * u8x4(q1) - mn);
}

fn decode8_q6_k(rb: u32, e: u32) -> Eight {
    let bb = rb + (e / 256u) * 210u;
    let i = e % 256u;
    let h = i / 128u;
    let g = (i % 128u) / 32u;
    let l = i % 32u;
    let ql = bb + 64u * h + 32u * (g % 2u) + l;
    let qh = bb + 128u + 32u * h + l;
    let lsh = (g / 2u) * 4u;
    let hsh = 2u * g;
    let q0 = ((u32_at(ql) >> lsh) & 0x0f0f0f0fu) | (((u32_at(qh) >> hsh) & 0x03030303u) << 4u);
    let q1 = ((u32_at(ql + 4u) >> lsh) & 0x0f0f0f0fu)
        | (((u32_at(qh + 4u) >> hsh) & 0x03030303u) << 4u);
    let sc = f32(bitcast<i32>(byte_at(bb + 192u + i / 16u) << 24u) >> 24u);
    let scale = half_at(bb + 208u) * sc;
    return Eight(scale * (u8x4(q0) - 32.0), scale * (u8x4(q1) - 32.0));
}

// Dense formats: element e of the row at rb, or 0 at or past K.
fn f32_at(rb: u32, e: u32) -> f32 {
    if (e >= p.dims.z) {
        return 0.0;
    }
    return bitcast<f32>(w[rb / 4u + e]);
}

fn f16_at(rb: u32, e: u32) -> f32 {
    if (e >= p.dims.z) {
        return 0.0;
    }
    return half_at(rb + 2u * e);
}

fn bf16_at(rb: u32, e: u32) -> f32 {
    if (e >= p.dims.z) {
        return 0.0;
    }
    let o = rb + 2u * e;
    return bitcast<f32>(((w[o >> 2u] >> ((o & 2u) * 8u)) & 0xffffu) << 16u);
}

fn decode8_f32(rb: u32, e: u32) -> Eight {
    if (e + 8u <= p.dims.z) {
        let i = rb / 4u + e;
        return Eight(bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u])),
            bitcast<vec4<f32>>(vec4<u32>(w[i + 4u], w[i + 5u], w[i + 6u], w[i + 7u])));
    }
    return Eight(vec4<f32>(f32_at(rb, e), f32_at(rb, e + 1u), f32_at(rb, e + 2u), f32_at(rb, e + 3u)),
        vec4<f32>(f32_at(rb, e + 4u), f32_at(rb, e + 5u), f32_at(rb, e + 6u), f32_at(rb, e + 7u)));
}

fn decode8_f16(rb: u32, e: u32) -> Eight {
    if (e + 8u <= p.dims.z) {
        let o = rb + 2u * e;
        let a = unpack2x16float(u32_at(o));
        let b = unpack2x16float(u32_at(o + 4u));
        let c = unpack2x16float(u32_at(o + 8u));
        let d = unpack2x16float(u32_at(o + 12u));
        return Eight(vec4<f32>(a, b), vec4<f32>(c, d));
    }
    return Eight(vec4<f32>(f16_at(rb, e), f16_at(rb, e + 1u), f16_at(rb, e + 2u), f16_at(rb, e + 3u)),
        vec4<f32>(f16_at(rb, e + 4u), f16_at(rb, e + 5u), f16_at(rb, e + 6u), f16_at(rb, e + 7u)));
}

fn bf16_pair(v: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xffff0000u));
}

fn decode8_bf16(rb: u32, e: u32) -> Eight {
    if (e + 8u <= p.dims.z) {
        let o = rb + 2u * e;
        return Eight(vec4<f32>(bf16_pair(u32_at(o)), bf16_pair(u32_at(o + 4u))),
            vec4<f32>(bf16_pair(u32_at(o + 8u)), bf16_pair(u32_at(o + 12u))));
    }
    return Eight(vec4<f32>(bf16_at(rb, e), bf16_at(rb, e + 1u), bf16_at(rb, e + 2u), bf16_at(rb, e + 3u)),
        vec4<f32>(bf16_at(rb, e + 4u), bf16_at(rb, e + 5u), bf16_at(rb, e + 6u), bf16_at(rb, e + 7u)));
}
