// Shared helpers, prepended to every kernel by kernels/mod.rs.
//
// Flat element indices come from a 1-D or 2-D grid of workgroups: when a kernel needs more than
// maxComputeWorkgroupsPerDimension groups, the host folds the count into a second dimension and
// threads past the end return early.
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// An i64 stored as two little-endian u32 words, converted to f32: exactly rounded when it fits
// an i32, else through two roundings (within one ulp of the correctly rounded value).
fn i64_to_f32(lo: u32, hi: u32) -> f32 {
    let fits_i32 = (hi == 0u && lo < 0x80000000u) || (hi == 0xffffffffu && lo >= 0x80000000u);
    if (fits_i32) {
        return f32(bitcast<i32>(lo));
    }
    return f32(bitcast<i32>(hi)) * 4294967296.0 + f32(lo);
}
