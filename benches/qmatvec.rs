//! Native quantized-GEMV benchmark (the `qmatvec` suite's shapes, off the browser): one
//! `linear` of `x [1, K]` times a `[N, K]` block-format weight, on the CPU backend and on the
//! WebGPU backend (Mesa lavapipe on machines without a GPU, or whatever adapter wgpu finds),
//! each WebGPU GEMV kernel forced in turn with the `gemv_kernel` compile spec.
//!
//! Matrices (as `bench/suites/qmatvec.mjs`): Q8_0 K=640 x N=262144 (Gemma 3's tied lm_head,
//! 178 MB) and Q4_K, Q6_K, Q5_0 with K=2048 x N=640. Weights are random bytes with ordinary f16
//! scales. Each figure is the median time of one execute (submission, the kernel and the
//! `[1, N]` read-back) over at least 5 timed runs after 2 warm-ups (at least 3 and about 10 s
//! for the slowest), with the spread `(max - min) / median`; GB/s = weight bytes / median.
//! Baselines measured in the same run: for the CPU a 16-lane sum over a 256 MiB buffer, for
//! WebGPU a plain WGSL read-and-sum (vec4<u32> loads, grid-stride) over 256 MiB on a device of
//! its own; `fraction` is GB/s over the baseline (the browser suite's figure of merit). Last,
//! the embedding lookup of the same Q8_0 table: `gather` of one row (ms per execute).
//!
//! Run with `cargo bench --bench qmatvec` (a release build; for a quicker build without LTO:
//! `CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16`). Arguments filter:
//! `cpu` / `webgpu` pick a backend, a format name (`q8_0`, `q4_k`, ...) picks matrices,
//! `--quick` shortens the runs. Absolute numbers depend on the machine and its load; compare
//! fractions.

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    use webdelegate::backends::webgpu::WebGpuBackend;
    use webdelegate::params::MemoryProvider;
    use webdelegate::program::ops::Linear;
    use webdelegate::program::{BlockFormat, DType, Dim, ProgramBuilder};
    use webdelegate::registry::{
        BackendInitContext, BackendInterface, CompileSpec, FreeableBuffer, LoadedDelegate,
        SharedBackend,
    };
    use webdelegate::{EValue, Tensor, TensorData};

    const MATRICES: [(BlockFormat, usize, usize); 4] = [
        (BlockFormat::Q8_0, 640, 262_144),
        (BlockFormat::Q4_K, 2048, 640),
        (BlockFormat::Q6_K, 2048, 640),
        (BlockFormat::Q5_0, 2048, 640),
    ];
    /// The WebGPU GEMV kernels compared (values of the `gemv_kernel` compile spec).
    const GEMV_KERNELS: [&str; 3] = ["auto", "rows", "workgroup"];
    const BASELINE_BYTES: usize = 256 << 20;

    fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut bytes = Vec::with_capacity(len + 8);
        while bytes.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bytes.extend_from_slice(&state.to_le_bytes());
        }
        bytes.truncate(len);
        bytes
    }

    /// Random blocks whose f16 scales are ordinary (about 0.008 .. 0.11 in magnitude).
    fn random_blocks(format: BlockFormat, len: usize) -> Vec<u8> {
        let mut bytes = random_bytes(len, u64::from(format.ggml_id()));
        let scales: &[usize] = match format {
            BlockFormat::Q4_0 | BlockFormat::Q5_0 | BlockFormat::Q8_0 => &[0],
            BlockFormat::Q4_K | BlockFormat::Q5_K => &[0, 2],
            BlockFormat::Q6_K => &[208],
            BlockFormat::F16 | BlockFormat::BF16 => &[],
        };
        for block in bytes.chunks_exact_mut(format.block_bytes()) {
            for &at in scales {
                block[at + 1] = 0x20 | (block[at + 1] & 0x8f);
            }
        }
        bytes
    }

    /// Median, min and max seconds of `once` (see the module docs for the run counts).
    fn timings(quick: bool, mut once: impl FnMut()) -> (f64, f64, f64, usize) {
        once();
        once();
        let (min_runs, budget) = if quick {
            (3, Duration::from_secs(3))
        } else {
            (5, Duration::from_secs(10))
        };
        let start = Instant::now();
        let mut times = Vec::new();
        while times.len() < 3 || (times.len() < min_runs * 4 && start.elapsed() < budget) {
            let t0 = Instant::now();
            once();
            times.push(t0.elapsed().as_secs_f64());
            if times.len() >= min_runs && start.elapsed() >= budget {
                break;
            }
        }
        times.sort_by(f64::total_cmp);
        (
            times[times.len() / 2],
            times[0],
            *times.last().expect("runs"),
            times.len(),
        )
    }

    /// One GEMV program initialised on `backend` with `specs`, and its arguments.
    fn gemv(
        backend: &SharedBackend,
        format: BlockFormat,
        k: usize,
        n: usize,
        specs: &[CompileSpec],
    ) -> (LoadedDelegate, Vec<EValue>, usize) {
        let bytes = format.tensor_bytes(n as u64, k as u64).expect("bytes") as usize;
        let fixed = |d: &[usize]| d.iter().map(|&x| Dim::Fixed(x as u64)).collect::<Vec<_>>();
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, fixed(&[1, k]));
        let weight = b.param("w", DType::Block(format), fixed(&[n, k]), "bench", "w");
        let out = b
            .push(|out| Linear {
                x,
                weight,
                bias: None,
                out,
            })
            .expect("linear");
        b.output(out);
        let provider = MemoryProvider::new();
        provider.insert_described(
            "bench",
            "w",
            random_blocks(format, bytes),
            Some(format.name().into()),
            Some(vec![n as u64, k as u64]),
        );
        let context = BackendInitContext::new().with_parameters(Arc::new(provider));
        let blob = b.encode().expect("encode");
        let delegate = pollster::block_on(LoadedDelegate::init_with_backend(
            "bench",
            Arc::clone(backend),
            FreeableBuffer::new(blob),
            specs,
            &context,
        ))
        .expect("init");
        let values: Vec<f32> = random_bytes(k, 7)
            .iter()
            .map(|&b| f32::from(b) / 128.0 - 1.0)
            .collect();
        let input = Tensor::from_f32(vec![1, k], values).expect("input");
        (delegate, vec![EValue::Tensor(input), EValue::None], bytes)
    }

    /// `gather` of one row from the Q8_0 lm_head table, initialised on `backend`.
    fn gather(backend: &SharedBackend, specs: &[CompileSpec]) -> (LoadedDelegate, Vec<EValue>) {
        let (format, k, n) = MATRICES[0];
        let bytes = format.tensor_bytes(n as u64, k as u64).expect("bytes") as usize;
        let fixed = |d: &[usize]| d.iter().map(|&x| Dim::Fixed(x as u64)).collect::<Vec<_>>();
        let mut b = ProgramBuilder::new();
        let ids = b.input("ids", DType::I32, fixed(&[1]));
        let table = b.param("w", DType::Block(format), fixed(&[n, k]), "bench", "w");
        let out = b.gather(table, ids).expect("gather");
        b.output(out);
        let provider = MemoryProvider::new();
        provider.insert_described(
            "bench",
            "w",
            random_blocks(format, bytes),
            Some(format.name().into()),
            Some(vec![n as u64, k as u64]),
        );
        let context = BackendInitContext::new().with_parameters(Arc::new(provider));
        let delegate = pollster::block_on(LoadedDelegate::init_with_backend(
            "bench",
            Arc::clone(backend),
            FreeableBuffer::new(b.encode().expect("encode")),
            specs,
            &context,
        ))
        .expect("init");
        let input = Tensor::new(vec![1], TensorData::Int32(vec![n as i32 - 7])).expect("ids");
        (delegate, vec![EValue::Tensor(input), EValue::None])
    }

    fn report_gather(label: &str, (median, min, max, runs): (f64, f64, f64, usize)) {
        println!(
            "{label:<28} {:>10.3} ms  spread {:>4.0}%  ({runs} runs)",
            median * 1e3,
            (max - min) / median * 100.0
        );
    }

    fn report(
        label: &str,
        bytes: usize,
        baseline: f64,
        (median, min, max, runs): (f64, f64, f64, usize),
    ) {
        let gbps = bytes as f64 / median / 1e9;
        println!(
            "{label:<28} {:>10.3} ms {:>8.3} GB/s  spread {:>4.0}%  ({runs} runs)  fraction {:.3}",
            median * 1e3,
            gbps,
            (max - min) / median * 100.0,
            gbps / baseline
        );
    }

    /// The CPU's memory bandwidth: a wrapping 16-lane sum over `BASELINE_BYTES`, in GB/s.
    fn cpu_baseline(quick: bool) -> f64 {
        let words: Vec<u32> = (0..BASELINE_BYTES / 4)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761))
            .collect();
        let mut sink = 0u32;
        let t = timings(quick, || {
            let mut lanes = [0u32; 16];
            for chunk in words.chunks_exact(16) {
                for (lane, &w) in lanes.iter_mut().zip(chunk) {
                    *lane = lane.wrapping_add(w);
                }
            }
            sink ^= lanes.iter().fold(0, |a: u32, &b| a.wrapping_add(b));
        });
        std::hint::black_box(sink);
        let gbps = BASELINE_BYTES as f64 / t.0 / 1e9;
        report("cpu baseline (sum)", BASELINE_BYTES, gbps, t);
        gbps
    }

    /// The adapter's read bandwidth: a plain WGSL read-and-sum over `BASELINE_BYTES`, in GB/s.
    fn webgpu_baseline(quick: bool) -> f64 {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter =
            pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
                .expect("adapter");
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .expect("device");
        let bytes = (BASELINE_BYTES as u64)
            .min(limits.max_storage_buffer_binding_size)
            .min(limits.max_buffer_size)
            / 16
            * 16;
        let data = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("baseline data"),
            size: bytes,
            usage: wgpu::BufferUsages::STORAGE,
            // Zero-filled: the sum's value does not matter, only reading every byte.
            mapped_at_creation: false,
        });
        let groups = 4096u32;
        let out = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("baseline out"),
            size: u64::from(groups) * 256 * 4,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let code = format!(
            "@group(0) @binding(0) var<storage, read> data: array<vec4<u32>>;
             @group(0) @binding(1) var<storage, read_write> out: array<u32>;
             @compute @workgroup_size(256)
             fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
               var acc = vec4<u32>(0u);
               for (var i = gid.x; i < {}u; i = i + {}u) {{ acc = acc + data[i]; }}
               out[gid.x] = acc.x + acc.y + acc.z + acc.w;
             }}",
            bytes / 16,
            groups * 256
        );
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("baseline"),
            source: wgpu::ShaderSource::Wgsl(code.into()),
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("baseline"),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: data.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: out.as_entire_binding(),
                },
            ],
        });
        let t = timings(quick, || {
            let mut encoder = device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(&pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(groups, 1, 1);
            }
            queue.submit([encoder.finish()]);
            device
                .poll(wgpu::PollType::wait_indefinitely())
                .expect("poll");
        });
        let gbps = bytes as f64 / t.0 / 1e9;
        report("webgpu baseline (sum)", bytes as usize, gbps, t);
        gbps
    }

    pub fn main() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let quick = args.iter().any(|a| a == "--quick");
        let wanted = |name: &str| {
            let named: Vec<&String> = args
                .iter()
                .filter(|a| !a.starts_with('-') && a.as_str() != "--bench")
                .collect();
            let backends = ["cpu", "webgpu"];
            let of_kind: Vec<&&String> = named
                .iter()
                .filter(|a| backends.contains(&a.as_str()) == backends.contains(&name))
                .collect();
            of_kind.is_empty() || of_kind.iter().any(|a| a.eq_ignore_ascii_case(name))
        };
        if wanted("cpu") {
            let baseline = cpu_baseline(quick);
            let cpu: SharedBackend = Arc::new(webdelegate::backends::cpu::CpuBackend::new());
            for (format, k, n) in MATRICES {
                if !wanted(format.name()) {
                    continue;
                }
                let (mut delegate, mut args, bytes) = gemv(&cpu, format, k, n, &[]);
                let t = timings(quick, || {
                    pollster::block_on(delegate.execute(&mut args)).expect("execute");
                });
                report(
                    &format!("cpu {} {k}x{n}", format.name()),
                    bytes,
                    baseline,
                    t,
                );
            }
            if wanted(MATRICES[0].0.name()) {
                let (mut delegate, mut args) = gather(&cpu, &[]);
                let t = timings(quick, || {
                    pollster::block_on(delegate.execute(&mut args)).expect("execute");
                });
                report_gather("cpu gather Q8_0 1 row", t);
            }
        }
        if wanted("webgpu") {
            let backend = pollster::block_on(WebGpuBackend::new());
            assert!(
                backend.is_available(),
                "no GPU adapter: {:?}",
                backend.unavailable_reason()
            );
            let adapter = backend.adapter().unwrap_or_default();
            println!(
                "webgpu on {} ({}, {}, fallback {})",
                adapter.description, adapter.backend, adapter.architecture, adapter.fallback
            );
            let baseline = webgpu_baseline(quick);
            let gpu: SharedBackend = Arc::new(backend);
            for (format, k, n) in MATRICES {
                if !wanted(format.name()) {
                    continue;
                }
                for kernel in GEMV_KERNELS {
                    let specs = [CompileSpec::new("gemv_kernel", kernel)];
                    let (mut delegate, mut args, bytes) = gemv(&gpu, format, k, n, &specs);
                    let t = timings(quick, || {
                        pollster::block_on(delegate.execute(&mut args)).expect("execute");
                    });
                    report(
                        &format!("webgpu {} {k}x{n} {kernel}", format.name()),
                        bytes,
                        baseline,
                        t,
                    );
                }
            }
            if wanted(MATRICES[0].0.name()) {
                let (mut delegate, mut args) = gather(&gpu, &[]);
                let t = timings(quick, || {
                    pollster::block_on(delegate.execute(&mut args)).expect("execute");
                });
                report_gather("webgpu gather Q8_0 1 row", t);
            }
        }
    }
}

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    native::main();
}
