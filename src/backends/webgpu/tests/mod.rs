//! Kernel tests on the native GPU (Mesa lavapipe through Vulkan on a machine without one):
//! every kernel family against f64 reference loops, with the tolerance each test states, on
//! random shapes that include extents that are not multiples of any tile or workgroup size.
//!
//! Programs run through the whole backend (decode, plan, bind, execute), one small program per
//! case. They share one backend (one device); tests that count live buffers make their own.
//! No adapter is a hard failure: CI machines must install mesa-vulkan-drivers (setup.sh does).

mod buffers;
mod elementwise;
mod fusion;
mod indexing;
mod layout;
mod lifecycle;
mod limits;
mod linear;
mod matmul;
mod planning;
mod rows;
mod signals;

use crate::backends::webgpu::WebGpuBackend;
use crate::error::Result;
use crate::evalue::{EValue, Tensor};
use crate::params::MemoryProvider;
use crate::program::{Dim, ProgramBuilder};
use crate::registry::{
    BackendExecutionContext, BackendInitContext, BackendInterface, CompileSpec, FreeableBuffer,
};
use std::sync::{Arc, OnceLock};

/// The scope test parameters live in.
pub(super) const SCOPE: &str = "test";

/// A backend with a device, or a loud failure saying why there is none.
pub(super) fn new_backend() -> WebGpuBackend {
    let backend = pollster::block_on(WebGpuBackend::new());
    assert!(
        backend.is_available(),
        "no WebGPU device natively: {:?} (install mesa-vulkan-drivers for lavapipe)",
        backend.unavailable_reason()
    );
    backend
}

/// The backend shared by kernel tests.
pub(super) fn backend() -> &'static WebGpuBackend {
    static BACKEND: OnceLock<WebGpuBackend> = OnceLock::new();
    BACKEND.get_or_init(new_backend)
}

/// Fixed dims.
pub(super) fn dims(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Fixed(d as u64)).collect()
}

/// f32 values as little-endian bytes (parameter contents).
pub(super) fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// A provider holding `params` in [`SCOPE`].
pub(super) fn provider(params: &[(&str, Vec<u8>)]) -> Arc<MemoryProvider> {
    let provider = MemoryProvider::new();
    for (key, bytes) in params {
        provider.insert(SCOPE, key, bytes.clone());
    }
    Arc::new(provider)
}

/// Initialises the built program on `backend` (this one, or the CPU backend as a reference),
/// runs it once on `inputs`, destroys it, and returns its outputs.
pub(super) fn run_on(
    backend: &impl BackendInterface,
    builder: &ProgramBuilder,
    params: &[(&str, Vec<u8>)],
    inputs: Vec<Tensor>,
    specs: &[CompileSpec],
) -> Result<Vec<Tensor>> {
    let blob = builder.encode()?;
    let context = BackendInitContext::new().with_parameters(provider(params));
    let mut handle = pollster::block_on(backend.init(&context, FreeableBuffer::new(blob), specs))?;
    let outputs = builder.program().outputs.len();
    let mut args: Vec<EValue> = inputs.into_iter().map(EValue::Tensor).collect();
    let first_output = args.len();
    args.extend((0..outputs).map(|_| EValue::None));
    let result = pollster::block_on(backend.execute(
        &BackendExecutionContext::default(),
        &mut handle,
        &mut args,
    ));
    backend.destroy(handle);
    result?;
    Ok(args
        .drain(first_output..)
        .filter_map(|v| match v {
            EValue::Tensor(t) => Some(t),
            _ => None,
        })
        .collect())
}

/// [`run_on`] with the shared backend.
pub(super) fn run(
    builder: &ProgramBuilder,
    params: &[(&str, Vec<u8>)],
    inputs: Vec<Tensor>,
    specs: &[CompileSpec],
) -> Result<Vec<Tensor>> {
    run_on(backend(), builder, params, inputs, specs)
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `lo..=hi`.
    pub(super) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// Uniform in `[lo, hi)`.
    pub(super) fn f32(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }

    pub(super) fn f32s(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32(lo, hi)).collect()
    }
}

/// Asserts `|got[i] - want[i]| <= tolerance(i)` everywhere, naming the worst element.
pub(super) fn assert_close(
    what: &str,
    got: &[f32],
    want: &[f64],
    tolerance: impl Fn(usize) -> f64,
) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let excess = (f64::from(g) - w).abs() - tolerance(i);
        let bad = excess > 0.0 || g.is_nan() != w.is_nan();
        if bad && worst.is_none_or(|(_, e)| excess > e) {
            worst = Some((i, excess));
        }
    }
    if let Some((i, _)) = worst {
        panic!(
            "{what}: element {i} is {} but the reference is {} (tolerance {})",
            got[i],
            want[i],
            tolerance(i)
        );
    }
}

/// The f32 data of an output.
pub(super) fn floats(tensor: &Tensor) -> &[f32] {
    tensor.as_f32().expect("an f32 output")
}
