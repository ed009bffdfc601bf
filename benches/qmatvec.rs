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
//! Where the adapter has `timestamp-query`, WebGPU figures come twice: per execute as above
//! (on a fast GPU mostly submission and read-back, not the kernel), and per kernel: the median
//! GPU time of the linear's passes over 9 profiled executes (backend option `profiling`), and
//! of the baseline's pass, so `{key}_kernel_fraction` compares GPU time with GPU time.
//!
//! Run with `cargo bench --bench qmatvec` (a release build; for a quicker build without LTO:
//! `CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16`). Arguments filter:
//! `cpu` / `webgpu` pick a backend, a format name (`q8_0`, `q4_k`, ...) picks matrices,
//! `--quick` shortens the runs, `--json FILE` writes every number as JSON
//! (`qmatvec_{backend}_{format}_{K}x{N}[_{kernel}]_{ms,gbps,fraction,spread,runs}`, the
//! baselines' `qmatvec_{backend}_baseline_gbps`, `qmatvec_{backend}_gather_q8_0_ms`). Absolute
//! numbers depend on the machine and its load; compare fractions.

#[cfg(not(target_arch = "wasm32"))]
mod common;

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use crate::common::{Args, Record, Timing, measure, webgpu_backend};
    use std::sync::Arc;
    use std::time::Duration;
    use webdelegate::backends::WebGpuBackend;
    use webdelegate::params::MemoryProvider;
    use webdelegate::program::ops::Linear;
    use webdelegate::program::{BlockFormat, DType, Dim, ProgramBuilder};
    use webdelegate::quant::{random_blocks, random_bytes};
    use webdelegate::registry::{
        BackendInitContext, BackendInterface, BackendOption, BackendOptionContext, CompileSpec,
        FreeableBuffer, LoadedDelegate, SharedBackend,
    };
    use webdelegate::{EValue, Tensor, TensorData};

    const MATRICES: [(BlockFormat, usize, usize); 4] = [
        (BlockFormat::Q8_0, 640, 262_144),
        (BlockFormat::Q4_K, 2048, 640),
        (BlockFormat::Q6_K, 2048, 640),
        (BlockFormat::Q5_0, 2048, 640),
    ];
    /// The WebGPU GEMV kernels compared (values of the `gemv_kernel` compile spec; `subgroup`
    /// only where the device has subgroup operations).
    const GEMV_KERNELS: [&str; 5] = ["auto", "rows", "workgroup", "staged", "subgroup"];
    const BASELINE_BYTES: usize = 256 << 20;
    /// Profiled executes (or baseline passes) whose median GPU time is a kernel figure.
    const KERNEL_RUNS: usize = 9;

    /// The median of `values` (sorted in place; `None` when empty).
    fn median(values: &mut [f64]) -> Option<f64> {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied()
    }

    /// The median GPU seconds of `delegate`'s ops over [`KERNEL_RUNS`] profiled executes, or
    /// `None` where the adapter has no timestamps.
    fn kernel_seconds(
        backend: &WebGpuBackend,
        delegate: &mut LoadedDelegate,
        args: &mut [EValue],
    ) -> Option<f64> {
        let set = |on: bool| {
            let option = BackendOption::new("profiling", on).expect("option");
            backend
                .set_option(&mut BackendOptionContext::default(), &[option])
                .expect("profiling");
        };
        set(true);
        let mut seconds = Vec::with_capacity(KERNEL_RUNS);
        for _ in 0..KERNEL_RUNS {
            pollster::block_on(delegate.execute(args)).expect("execute");
            let handle = delegate.handle().expect("handle");
            let profile = WebGpuBackend::profile_of(handle).expect("profile");
            if let Some(ns) = profile.and_then(|p| p.total_gpu_ns()) {
                seconds.push(ns as f64 / 1e9);
            }
        }
        set(false);
        median(&mut seconds)
    }

    /// Prints and records a kernel-only GB/s (`{key}_kernel_gbps`) and its fraction of the
    /// baseline's kernel-only GB/s (`{key}_kernel_fraction`).
    fn report_kernel(record: &mut Record, label: &str, key: &str, bytes: usize, s: f64, base: f64) {
        let gbps = bytes as f64 / s / 1e9;
        println!(
            "{:<28} {:>10.3} ms {:>8.3} GB/s  GPU time, median of {KERNEL_RUNS}  fraction {:.3}",
            format!("{label} (kernel)"),
            s * 1e3,
            gbps,
            gbps / base
        );
        record.set(&format!("{key}_kernel_ms"), s * 1e3);
        record.set(&format!("{key}_kernel_gbps"), gbps);
        record.set(&format!("{key}_kernel_fraction"), gbps / base);
    }

    /// Times `once` (see the module docs for the run counts).
    fn timings(quick: bool, once: impl FnMut()) -> Timing {
        let (min_runs, budget) = if quick {
            (3, Duration::from_secs(3))
        } else {
            (5, Duration::from_secs(10))
        };
        measure(2, 3, min_runs * 4, budget, once)
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
            random_blocks(format, bytes, u64::from(format.ggml_id())),
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
            random_blocks(format, bytes, u64::from(format.ggml_id())),
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

    fn report_gather(record: &mut Record, label: &str, key: &str, t: Timing) {
        println!(
            "{label:<28} {:>10.3} ms  spread {:>4.0}%  ({} runs)",
            t.median * 1e3,
            t.spread() * 100.0,
            t.runs
        );
        record.timing(key, &t);
    }

    /// Prints and records one GEMV's time, GB/s (`{key}_gbps`) and fraction of `baseline`
    /// (`{key}_fraction`).
    fn report(record: &mut Record, label: &str, key: &str, bytes: usize, baseline: f64, t: Timing) {
        let gbps = bytes as f64 / t.median / 1e9;
        println!(
            "{label:<28} {:>10.3} ms {:>8.3} GB/s  spread {:>4.0}%  ({} runs)  fraction {:.3}",
            t.median * 1e3,
            gbps,
            t.spread() * 100.0,
            t.runs,
            gbps / baseline
        );
        record.timing(key, &t);
        record.set(&format!("{key}_gbps"), gbps);
        record.set(&format!("{key}_fraction"), gbps / baseline);
    }

    /// The CPU's memory bandwidth: a wrapping 16-lane sum over `BASELINE_BYTES`, in GB/s.
    fn cpu_baseline(record: &mut Record, quick: bool) -> f64 {
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
        let gbps = BASELINE_BYTES as f64 / t.median / 1e9;
        let (label, key) = ("cpu baseline (sum)", "qmatvec_cpu_baseline");
        report(record, label, key, BASELINE_BYTES, gbps, t);
        gbps
    }

    /// The adapter's read bandwidth: a plain WGSL read-and-sum over `BASELINE_BYTES`, in GB/s
    /// per submission, and (where the adapter has timestamps) per GPU time of its pass.
    fn webgpu_baseline(record: &mut Record, quick: bool) -> (f64, Option<f64>) {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle());
        let adapter =
            pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
                .expect("adapter");
        let limits = adapter.limits();
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_limits: limits.clone(),
            required_features: if timestamps {
                wgpu::Features::TIMESTAMP_QUERY
            } else {
                wgpu::Features::empty()
            },
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
        let gbps = bytes as f64 / t.median / 1e9;
        let (label, key) = ("webgpu baseline (sum)", "qmatvec_webgpu_baseline");
        report(record, label, key, bytes as usize, gbps, t);
        let kernel = timestamps.then(|| {
            let queries = device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("baseline timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolve = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("baseline resolve"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let read = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("baseline read"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let period = f64::from(queue.get_timestamp_period());
            let mut seconds: Vec<f64> = (0..KERNEL_RUNS)
                .map(|_| {
                    let mut encoder = device.create_command_encoder(&Default::default());
                    {
                        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                            label: None,
                            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                                query_set: &queries,
                                beginning_of_pass_write_index: Some(0),
                                end_of_pass_write_index: Some(1),
                            }),
                        });
                        pass.set_pipeline(&pipeline);
                        pass.set_bind_group(0, &bind, &[]);
                        pass.dispatch_workgroups(groups, 1, 1);
                    }
                    encoder.resolve_query_set(&queries, 0..2, &resolve, 0);
                    encoder.copy_buffer_to_buffer(&resolve, 0, &read, 0, 16);
                    queue.submit([encoder.finish()]);
                    read.slice(..)
                        .map_async(wgpu::MapMode::Read, |r| r.expect("map"));
                    device
                        .poll(wgpu::PollType::wait_indefinitely())
                        .expect("poll");
                    let ticks: Vec<u64> = {
                        let view = read.slice(..).get_mapped_range().expect("mapped");
                        view.chunks_exact(8)
                            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                            .collect()
                    };
                    read.unmap();
                    ticks[1].saturating_sub(ticks[0]) as f64 * period / 1e9
                })
                .collect();
            median(&mut seconds).expect("runs")
        });
        let kernel_gbps = kernel.map(|s| {
            let label = "webgpu baseline (sum)";
            report_kernel(
                record,
                label,
                key,
                bytes as usize,
                s,
                bytes as f64 / s / 1e9,
            );
            bytes as f64 / s / 1e9
        });
        (gbps, kernel_gbps)
    }

    pub fn main() {
        let args = Args::from_env();
        let quick = args.flag("--quick");
        let words = args.words(&["--json"]);
        let wanted = |name: &str| {
            let backends = ["cpu", "webgpu"];
            let of_kind: Vec<&&str> = words
                .iter()
                .filter(|a| backends.contains(a) == backends.contains(&name))
                .collect();
            of_kind.is_empty() || of_kind.iter().any(|a| a.eq_ignore_ascii_case(name))
        };
        let mut record = Record::new("qmatvec", &args);
        for name in ["cpu", "webgpu"] {
            if !wanted(name) {
                continue;
            }
            // The WebGPU backend by its type too (profiling), and the baseline's kernel GB/s.
            let mut gpu: Option<(Arc<WebGpuBackend>, f64)> = None;
            let (backend, baseline): (SharedBackend, f64) = if name == "cpu" {
                let baseline = cpu_baseline(&mut record, quick);
                (Arc::new(webdelegate::backends::CpuBackend::new()), baseline)
            } else {
                let backend = Arc::new(webgpu_backend("qmatvec", &args, &mut record));
                let (baseline, kernel) = webgpu_baseline(&mut record, quick);
                gpu = kernel.map(|k| (Arc::clone(&backend), k));
                (backend, baseline)
            };
            // The CPU backend has one GEMV; the WebGPU one is measured under each kernel.
            let kernels: &[&str] = if name == "cpu" { &[""] } else { &GEMV_KERNELS };
            let subgroups =
                record.get("features.subgroups") == Some(&serde_json::Value::Bool(true));
            for (format, k, n) in MATRICES {
                if !wanted(format.name()) {
                    continue;
                }
                for &kernel in kernels {
                    if kernel == "subgroup" && !subgroups {
                        continue;
                    }
                    let specs: Vec<CompileSpec> = (!kernel.is_empty())
                        .then(|| CompileSpec::new("gemv_kernel", kernel))
                        .into_iter()
                        .collect();
                    let (mut delegate, mut args, bytes) = gemv(&backend, format, k, n, &specs);
                    let t = timings(quick, || {
                        pollster::block_on(delegate.execute(&mut args)).expect("execute");
                    });
                    let label = format!("{name} {} {k}x{n} {kernel}", format.name());
                    let key = format!("qmatvec_{name}_{}_{k}x{n}", format.lower_name());
                    let key = if kernel.is_empty() {
                        key
                    } else {
                        format!("{key}_{kernel}")
                    };
                    report(&mut record, label.trim_end(), &key, bytes, baseline, t);
                    if let Some((gpu, base)) = &gpu
                        && let Some(s) = kernel_seconds(gpu, &mut delegate, &mut args)
                    {
                        report_kernel(&mut record, label.trim_end(), &key, bytes, s, *base);
                    }
                }
            }
            if wanted(MATRICES[0].0.name()) {
                let (mut delegate, mut args) = gather(&backend, &[]);
                let t = timings(quick, || {
                    pollster::block_on(delegate.execute(&mut args)).expect("execute");
                });
                let label = format!("{name} gather Q8_0 1 row");
                report_gather(
                    &mut record,
                    &label,
                    &format!("qmatvec_{name}_gather_q8_0"),
                    t,
                );
            }
        }
    }
}

fn main() {
    #[cfg(not(target_arch = "wasm32"))]
    native::main();
}
