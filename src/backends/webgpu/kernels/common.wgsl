// Shared helpers, prepended to every kernel by kernels/mod.rs.
//
// Flat element indices come from a 1-D or 2-D grid of workgroups: when a kernel needs more than
// maxComputeWorkgroupsPerDimension groups, the host folds the count into a second dimension and
// threads past the end return early.
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.y * nwg.x + wid.x;
}

// An i64 stored as two little-endian u32 words, converted to the nearest f32 (two roundings: the
// result may be one ulp from correctly rounded for |v| >= 2^24).
fn i64_to_f32(lo: u32, hi: u32) -> f32 {
    return f32(bitcast<i32>(hi)) * 4294967296.0 + f32(lo);
}
