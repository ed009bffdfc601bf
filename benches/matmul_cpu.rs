//! CPU matmul throughput: the CPU backend (blocked GEMM, through `init`/`execute`) against a
//! naive triple loop measured in the same run. Prints GFLOP/s per shape and the ratio, then one
//! JSON line (`{"matmul_gflops_cpu_384": ..., ...}`).
//!
//! Run with `cargo bench --bench matmul_cpu`. Timings are medians of repeated runs; the ratio
//! (blocked / naive) is the number to compare across machines.

use std::sync::Arc;
use std::time::{Duration, Instant};
use webdelegate::backends::CpuBackend;
use webdelegate::params::MemoryProvider;
use webdelegate::program::{self, samples};
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};
use webdelegate::{EValue, Tensor};

/// The naive kernel: for each output element, one dot product with a strided column of `b`.
fn naive_matmul(a: &[f32], b: &[f32], out: &mut [f32], m: usize, k: usize, n: usize) {
    for i in 0..m {
        for j in 0..n {
            let mut sum = 0.0f32;
            for p in 0..k {
                sum += a[i * k + p] * b[p * n + j];
            }
            out[i * n + j] = sum;
        }
    }
}

/// Median seconds per call of `f`, over enough calls to fill about `budget`.
fn median_seconds(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    f();
    let once = start.elapsed().as_secs_f64().max(1e-6);
    let runs = ((budget.as_secs_f64() / once) as usize).clamp(3, 200);
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn backend_gflops(m: usize, k: usize, n: usize, transpose_b: bool) -> f64 {
    let program = samples::matmul(m as u64, k as u64, n as u64, transpose_b).expect("program");
    let blob = program::encode(&program).expect("blob");
    let provider = MemoryProvider::new();
    provider.insert(
        samples::SAMPLE_SCOPE,
        samples::MATMUL_WEIGHT_KEY,
        samples::f32_bytes(&samples::fill(k * n, 2)),
    );
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    let mut delegate = pollster::block_on(LoadedDelegate::init_with_backend(
        "cpu",
        Arc::new(CpuBackend::new()),
        FreeableBuffer::new(blob),
        &[],
        &context,
    ))
    .expect("init");
    let a = Tensor::from_f32(vec![m, k], samples::fill(m * k, 1)).expect("input");
    let mut args = vec![EValue::Tensor(a), EValue::None];
    let seconds = median_seconds(Duration::from_millis(1500), || {
        pollster::block_on(delegate.execute(&mut args)).expect("execute");
    });
    2.0 * (m * k * n) as f64 / seconds / 1e9
}

fn naive_gflops(m: usize, k: usize, n: usize) -> f64 {
    let a = samples::fill(m * k, 1);
    let b = samples::fill(k * n, 2);
    let mut out = vec![0.0; m * n];
    let seconds = median_seconds(Duration::from_millis(1500), || {
        naive_matmul(&a, &b, &mut out, m, k, n);
        std::hint::black_box(&mut out);
    });
    2.0 * (m * k * n) as f64 / seconds / 1e9
}

fn main() {
    let shapes = [(384, 384, 384), (128, 384, 1536), (1536, 384, 128)];
    let mut json = Vec::new();
    println!("CPU matmul, single thread (GFLOP/s; ratio = blocked / naive, same run)");
    println!(
        "{:>18} {:>10} {:>12} {:>10} {:>8}",
        "m x k x n", "blocked", "blocked(B^T)", "naive", "ratio"
    );
    for (m, k, n) in shapes {
        let blocked = backend_gflops(m, k, n, false);
        let blocked_t = backend_gflops(m, k, n, true);
        let naive = naive_gflops(m, k, n);
        println!(
            "{:>18} {blocked:>10.2} {blocked_t:>12.2} {naive:>10.2} {:>8.1}",
            format!("{m}x{k}x{n}"),
            blocked / naive
        );
        let tag = if (m, k, n) == (384, 384, 384) {
            "384".to_owned()
        } else {
            format!("{m}x{k}x{n}")
        };
        json.push(format!("\"matmul_gflops_cpu_{tag}\": {blocked:.3}"));
        json.push(format!("\"matmul_gflops_cpu_naive_{tag}\": {naive:.3}"));
        json.push(format!(
            "\"matmul_blocked_over_naive_cpu_{tag}\": {:.3}",
            blocked / naive
        ));
    }
    println!("{{{}}}", json.join(", "));
}
