//! Native matmul benchmark on the WebGPU backend (Mesa lavapipe, or whatever GPU wgpu finds):
//! GFLOP/s of the default register-tiled kernel (`matmul_kernel = tiled`), of the first tiled
//! kernel (`tiled_v1`, the baseline it replaced) and of the naive one-thread-per-output kernel,
//! measured in the same run, for 384x384x384, 128x384x1536 and 1536x384x128 (M x K x N), and
//! their ratios.
//!
//! Each execution runs `REPEATS` independent matmuls, each an output (read back); times are wall-clock over whole executions after a warm-up, so they
//! include submission and read-back. The kernels are measured in alternating rounds and the
//! best round of each is reported: on a shared, noisy machine that is the least disturbed one. Run with `cargo bench --bench matmul`; pass `--quick` for
//! fewer iterations, `--shape MxKxN` (repeatable) to measure other shapes instead, `--kernel
//! NAME` to measure another `matmul_kernel` value (e.g. `tiled64`) in the place of `tiled`, `--json FILE`
//! to write the numbers as JSON (`matmul_{M}x{K}x{N}_{tiled,tiled_v1,naive}_gflops`,
//! `..._ratio` (tiled / naive), `..._tiled_over_v1`).
//! Ratios are the result: absolute numbers depend on the machine and its load.

#[cfg(not(target_arch = "wasm32"))]
mod common;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use crate::common::{Args, Record, webgpu_backend};
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use webdelegate::backends::WebGpuBackend;
    use webdelegate::params::MemoryProvider;
    use webdelegate::program::{DType, Dim, Op, ProgramBuilder, ops};
    use webdelegate::registry::{
        BackendExecutionContext, BackendInitContext, BackendInterface, CompileSpec, DelegateHandle,
        FreeableBuffer,
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

    /// One initialised matmul program and its arguments.
    struct Fixture<'a> {
        backend: &'a WebGpuBackend,
        handle: Option<DelegateHandle>,
        args: Vec<EValue>,
        flops: f64,
    }

    impl<'a> Fixture<'a> {
        /// `REPEATS` matmuls of `[m, k] x [k, n]` initialised with `specs`.
        fn new(
            backend: &'a WebGpuBackend,
            (m, k, n): (usize, usize, usize),
            specs: &[CompileSpec],
        ) -> Self {
            let fixed = |d: &[usize]| d.iter().map(|&x| Dim::Fixed(x as u64)).collect::<Vec<_>>();
            let mut b = ProgramBuilder::new();
            let a = b.input("a", DType::F32, fixed(&[m, k]));
            let w = b.param("b", DType::F32, fixed(&[k, n]), "bench", "b");
            for r in 0..REPEATS {
                let out = b.tensor(&format!("out{r}"), DType::F32, fixed(&[m, n]));
                b.op(Op::MatMul(ops::MatMul {
                    a,
                    b: w,
                    bias: None,
                    transpose_a: false,
                    transpose_b: false,
                    out,
                }))
                .output(out);
            }
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
            let handle =
                pollster::block_on(backend.init(&context, FreeableBuffer::new(blob), specs))
                    .expect("init");
            let input = Tensor::from_f32(vec![m, k], values(m * k, 1)).expect("input");
            let mut fixture = Self {
                backend,
                handle: Some(handle),
                args: std::iter::once(EValue::Tensor(input))
                    .chain((0..REPEATS).map(|_| EValue::None))
                    .collect(),
                flops: 2.0 * (m * k * n * REPEATS) as f64,
            };
            fixture.execute();
            fixture.execute();
            fixture
        }

        fn execute(&mut self) {
            let handle = self.handle.as_mut().expect("handle");
            let exec = BackendExecutionContext::default();
            pollster::block_on(self.backend.execute(&exec, handle, &mut self.args))
                .expect("execute");
        }

        /// GFLOP/s over executions for at least `budget` (and at least 2 executions).
        fn gflops(&mut self, budget: Duration) -> f64 {
            let start = Instant::now();
            let mut iterations = 0u32;
            while iterations < 2 || start.elapsed() < budget {
                self.execute();
                iterations += 1;
            }
            self.flops * f64::from(iterations) / start.elapsed().as_secs_f64() / 1e9
        }
    }

    impl Drop for Fixture<'_> {
        fn drop(&mut self) {
            if let Some(handle) = self.handle.take() {
                self.backend.destroy(handle);
            }
        }
    }

    /// `MxKxN`.
    fn parse_shape(text: &str) -> (usize, usize, usize) {
        let dims: Vec<usize> = text
            .split('x')
            .map(|d| {
                d.parse()
                    .unwrap_or_else(|_| panic!("--shape {text}: not MxKxN"))
            })
            .collect();
        match dims[..] {
            [m, k, n] if m * k * n > 0 => (m, k, n),
            _ => panic!("--shape {text}: not MxKxN"),
        }
    }

    pub fn main() {
        let args = Args::from_env();
        let quick = args.flag("--quick");
        let (rounds, budget) = if quick {
            (2, Duration::from_millis(250))
        } else {
            (5, Duration::from_millis(600))
        };
        let shapes: Vec<(usize, usize, usize)> = match args.values("--shape") {
            given if given.is_empty() => SHAPES.to_vec(),
            given => given.into_iter().map(parse_shape).collect(),
        };
        let mut record = Record::new("matmul", &args);
        let backend = webgpu_backend("matmul", &args, &mut record);
        println!(
            "best of {rounds} alternating rounds of {} ms per kernel",
            budget.as_millis()
        );
        println!(
            "{:>16} {:>14} {:>14} {:>14} {:>12} {:>12}",
            "M x K x N", "tiled GFLOP/s", "v1 GFLOP/s", "naive GFLOP/s", "tiled/naive", "tiled/v1"
        );
        let tiled_spec = [CompileSpec::new(
            "matmul_kernel",
            args.value("--kernel").unwrap_or("tiled"),
        )];
        let v1_spec = [CompileSpec::new("matmul_kernel", "tiled_v1")];
        let naive_spec = [CompileSpec::new("matmul_kernel", "naive")];
        for shape in shapes {
            let mut tiled = Fixture::new(&backend, shape, &tiled_spec);
            let mut v1 = Fixture::new(&backend, shape, &v1_spec);
            let mut naive = Fixture::new(&backend, shape, &naive_spec);
            let (mut best_tiled, mut best_v1, mut best_naive) = (0.0f64, 0.0f64, 0.0f64);
            // Alternating rounds see the same machine load; the best round is the least disturbed.
            for _ in 0..rounds {
                best_tiled = best_tiled.max(tiled.gflops(budget));
                best_v1 = best_v1.max(v1.gflops(budget));
                best_naive = best_naive.max(naive.gflops(budget));
            }
            let (m, k, n) = shape;
            let name = format!("{m}x{k}x{n}");
            println!(
                "{name:>16} {best_tiled:>14.2} {best_v1:>14.2} {best_naive:>14.2} {:>12.2} {:>12.2}",
                best_tiled / best_naive,
                best_tiled / best_v1
            );
            record.set(&format!("matmul_{name}_tiled_gflops"), best_tiled);
            record.set(&format!("matmul_{name}_tiled_v1_gflops"), best_v1);
            record.set(&format!("matmul_{name}_naive_gflops"), best_naive);
            record.set(&format!("matmul_{name}_ratio"), best_tiled / best_naive);
            record.set(
                &format!("matmul_{name}_tiled_over_v1"),
                best_tiled / best_v1,
            );
        }
    }
}

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    native::main();
}
