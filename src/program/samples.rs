//! Small ready-made programs and deterministic data for benchmarks and demos, shared by the
//! native bench, the browser bench and tests of every backend.

use crate::error::Result;
use crate::program::builder::ProgramBuilder;
use crate::program::ir::{DType, Dim, Program};

/// Scope of the parameters the sample programs reference.
pub const SAMPLE_SCOPE: &str = "samples";
/// Key of the weight of [`matmul`].
pub const MATMUL_WEIGHT_KEY: &str = "matmul.weight";

/// `out [m, n] = a [m, k] @ weight`, with `weight` a parameter (`SAMPLE_SCOPE`,
/// `MATMUL_WEIGHT_KEY`) of shape `[k, n]`, or `[n, k]` when `transpose_b` (the layout of
/// PyTorch's `nn.Linear`).
///
/// # Errors
/// `InvalidArgument` when a dim does not fit the platform (it does for any benchmark size).
pub fn matmul(m: u64, k: u64, n: u64, transpose_b: bool) -> Result<Program> {
    let mut builder = ProgramBuilder::new();
    let a = builder.input("a", DType::F32, vec![Dim::Fixed(m), Dim::Fixed(k)]);
    let weight_shape = if transpose_b {
        vec![Dim::Fixed(n), Dim::Fixed(k)]
    } else {
        vec![Dim::Fixed(k), Dim::Fixed(n)]
    };
    let weight = builder.param(
        "weight",
        DType::F32,
        weight_shape,
        SAMPLE_SCOPE,
        MATMUL_WEIGHT_KEY,
    );
    let out = builder.matmul(a, weight, None, false, transpose_b)?;
    builder.set_name(out, "out")?;
    builder.output(out);
    builder.finish()
}

/// `len` deterministic pseudo-random values in `[-1, 1)` (a 64-bit LCG seeded by `seed`), so
/// that every backend and benchmark sees the same data without a dependency.
pub fn fill(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            // The top 24 bits, as a fraction in [0, 1), mapped to [-1, 1).
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            unit * 2.0 - 1.0
        })
        .collect()
}

/// `values` as little-endian bytes (how parameter providers hold f32 weights).
pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}
