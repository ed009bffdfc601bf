//! Quantized weights stay quantized on the GPU: a block-format parameter takes exactly its file
//! bytes (padded to a whole word) of GPU memory, counted by the backend's live buffer bytes, and
//! a program using it runs.

use super::{SCOPE, dims, new_backend, provider};
use crate::program::ops::Linear;
use crate::program::{BlockFormat, DType, ProgramBuilder, encode};
use crate::registry::{BackendInitContext, BackendInterface, FreeableBuffer};

/// Q8_0 weights of 1 block (34 bytes: padded to 36), 2 rows of 3 blocks (204) and a Q6_K row
/// (210: padded to 212): after init the GPU holds exactly those bytes more than before, and
/// the program's parameter bytes say the same.
#[test]
fn block_parameters_take_their_file_bytes_on_the_gpu() {
    for (format, n, k) in [
        (BlockFormat::Q8_0, 1, 32),
        (BlockFormat::Q8_0, 2, 96),
        (BlockFormat::Q6_K, 1, 256),
    ] {
        let file_bytes = format.tensor_bytes(n as u64, k as u64).unwrap();
        let padded = file_bytes.next_multiple_of(4);
        // The same program over f32 weights measures what else init allocates (uniforms,
        // status and read-back buffers, the arena): the same for both.
        let f32_bytes = (n * k * 4) as u64;
        let f32_total = gpu_bytes_after_init(DType::F32, n, k, f32_bytes);
        let total = gpu_bytes_after_init(DType::Block(format), n, k, file_bytes);
        assert_eq!(
            total - (f32_total - f32_bytes),
            padded,
            "{} [{n}, {k}]: GPU bytes = file bytes {file_bytes} padded to 4",
            format.name()
        );
    }
}

/// The GPU bytes a fresh backend holds after initialising `linear(x [1, k], w [n, k])` with
/// `w` of `dtype` (`file_bytes` long); checks that destroy frees them all.
fn gpu_bytes_after_init(dtype: DType, n: usize, k: usize, file_bytes: u64) -> u64 {
    let backend = new_backend();
    let mut b = ProgramBuilder::new();
    let x = b.input("x", DType::F32, dims(&[1, k]));
    let weight = b.param("w", dtype, dims(&[n, k]), SCOPE, "w");
    let out = b
        .push(|out| Linear {
            x,
            weight,
            bias: None,
            out,
        })
        .unwrap();
    b.output(out);
    let blob = encode(b.program()).unwrap();
    let params = provider(&[("w", vec![0u8; file_bytes as usize])]);
    assert_eq!(backend.live_buffer_bytes(), 0);
    let context = BackendInitContext::new().with_parameters(params);
    let handle =
        pollster::block_on(backend.init(&context, FreeableBuffer::new(blob), &[])).unwrap();
    let stats = backend.program_stats(&handle).unwrap();
    assert!(
        stats.param_bytes == file_bytes || stats.param_bytes == file_bytes.next_multiple_of(4),
        "{stats:?}"
    );
    let live = backend.live_buffer_bytes();
    backend.destroy(handle);
    assert_eq!(backend.live_buffer_bytes(), 0, "destroy frees every buffer");
    live
}
