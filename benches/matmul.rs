//! Native matmul benchmark on the WebGPU backend (Mesa lavapipe, or whatever GPU wgpu finds):
//! GFLOP/s of the tiled kernel and of the naive one-thread-per-output kernel, measured in the
//! same run, for 384x384x384, 128x384x1536 and 1536x384x128 (M x K x N), and their ratio.
//!
//! Each execution runs `REPEATS` independent matmuls and reads back one output, so the
//! read-back is amortised; times are wall-clock over whole executions after a warm-up, so they
//! include submission and read-back. Run with `cargo bench --bench matmul`; pass `--quick` for
//! fewer iterations. Ratios are the result: absolute numbers depend on the machine and its load.

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use webdelegate::backends::webgpu::WebGpuBackend;
    use webdelegate::params::MemoryProvider;
    use webdelegate::program::{DType, Dim, Op, ProgramBuilder};
    use webdelegate::registry::{
        BackendExecutionContext, BackendInitContext, BackendInterface, CompileSpec, FreeableBuffer,
    };
    use webdelegate::{EValue, Tensor};

    const SHAPES: [(usize, usize, usize); 3] =
        [(384, 384, 384), (128, 384, 1536), (1536, 384, 128)];
    const REPEATS: usize = 4;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// GFLOP/s of `[m, k] x [k, n]` with `specs`, timed for at least `budget`.
    fn measure(
        backend: &WebGpuBackend,
        (m, k, n): (usize, usize, usize),
        specs: &[CompileSpec],
        budget: Duration,
    ) -> f64 {
        let fixed = |d: &[usize]| d.iter().map(|&x| Dim::Fixed(x as u64)).collect::<Vec<_>>();
        let mut b = ProgramBuilder::new();
        let a = b.input("a", DType::F32, fixed(&[m, k]));
        let w = b.param("b", DType::F32, fixed(&[k, n]), "bench", "b");
        let mut last = a;
        for r in 0..REPEATS {
            last = b.tensor(&format!("out{r}"), DType::F32, fixed(&[m, n]));
            b.op(Op::MatMul {
                a,
                b: w,
                bias: None,
                transpose_a: false,
                transpose_b: false,
                out: last,
            });
        }
        b.output(last);
        let provider = MemoryProvider::new();
        provider.insert(
            "bench",
            "b",
            values(k * n, 2)
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        let context = BackendInitContext::new().with_parameters(Arc::new(provider));
        let blob = b.encode().expect("encode");
        let mut handle =
            pollster::block_on(backend.init(&context, FreeableBuffer::new(blob), specs))
                .expect("init");
        let mut args = vec![
            EValue::Tensor(Tensor::from_f32(vec![m, k], values(m * k, 1)).expect("input")),
            EValue::None,
        ];
        let exec = BackendExecutionContext::default();
        let mut run = |args: &mut Vec<EValue>| {
            pollster::block_on(backend.execute(&exec, &mut handle, args)).expect("execute");
        };
        run(&mut args);
        run(&mut args);
        let start = Instant::now();
        let mut iterations = 0u32;
        while iterations < 3 || start.elapsed() < budget {
            run(&mut args);
            iterations += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        backend.destroy(handle);
        2.0 * (m * k * n * REPEATS) as f64 * f64::from(iterations) / seconds / 1e9
    }

    pub fn main() {
        let quick = std::env::args().any(|a| a == "--quick");
        let budget = Duration::from_millis(if quick { 300 } else { 2000 });
        let backend = pollster::block_on(WebGpuBackend::new());
        assert!(
            backend.is_available(),
            "no GPU adapter: {:?}",
            backend.unavailable_reason()
        );
        let adapter = backend.adapter().unwrap_or_default();
        println!(
            "webgpu matmul on {} ({}, {})",
            adapter.description, adapter.backend, adapter.architecture
        );
        println!(
            "{:>16} {:>14} {:>14} {:>12}",
            "M x K x N", "tiled GFLOP/s", "naive GFLOP/s", "tiled/naive"
        );
        let naive = [CompileSpec::new("matmul_kernel", "naive")];
        for shape in SHAPES {
            let tiled = measure(&backend, shape, &[], budget);
            let baseline = measure(&backend, shape, &naive, budget);
            let (m, k, n) = shape;
            println!(
                "{:>16} {tiled:>14.2} {baseline:>14.2} {:>12.2}",
                format!("{m}x{k}x{n}"),
                tiled / baseline
            );
        }
    }
}

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    native::main();
}
