//! A MiniLM-shaped sentence encoder (6 layers, hidden 384, 12 heads, FFN 1536; random weights)
//! on the CPU backend: milliseconds per inference for batch 1 at several sequence lengths,
//! through `init`/`execute`. For comparison, onnxruntime-web's single-thread wasm EP takes about
//! 120 ms for batch 1 x 128 in Chromium on the project's reference machine (measured there, not
//! here). Prints one JSON line at the end.
//!
//! Run with `cargo bench --bench encoder_cpu`.

use std::sync::Arc;
use std::time::{Duration, Instant};
use webdelegate::backends::CpuBackend;
use webdelegate::program::{self, samples};
use webdelegate::registry::{BackendInitContext, FreeableBuffer, LoadedDelegate};
use webdelegate::{EValue, Tensor, TensorData};

fn median_ms(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    f();
    let once = start.elapsed().as_secs_f64().max(1e-6);
    let runs = ((budget.as_secs_f64() / once) as usize).clamp(5, 100);
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let shape = samples::EncoderShape::default();
    let program = samples::encoder(shape).expect("encoder");
    let provider = samples::random_parameters(&program, 7);
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    let start = Instant::now();
    let mut delegate = pollster::block_on(LoadedDelegate::init_with_backend(
        "cpu",
        Arc::new(CpuBackend::new()),
        FreeableBuffer::new(program::encode(&program).expect("blob")),
        &[],
        &context,
    ))
    .expect("init");
    let init_ms = start.elapsed().as_secs_f64() * 1e3;
    println!("MiniLM-shaped encoder on the CPU backend, single thread (init {init_ms:.0} ms)");
    let mut json = vec![format!("\"encoder_cpu_init_ms\": {init_ms:.1}")];
    for seq in [16usize, 128, 256] {
        let ids: Vec<i64> = samples::fill(seq, 3)
            .iter()
            .map(|v| ((v + 1.0) * 15000.0) as i64 % shape.vocab as i64)
            .collect();
        let tensor = |values: Vec<i64>| {
            EValue::Tensor(Tensor::new(vec![1, seq], TensorData::Int64(values)).expect("tensor"))
        };
        let mut args = vec![
            tensor(ids),
            tensor(vec![1; seq]),
            EValue::None,
            EValue::None,
        ];
        let ms = median_ms(Duration::from_secs(3), || {
            pollster::block_on(delegate.execute(&mut args)).expect("execute");
        });
        println!("  batch 1 x {seq:>3} tokens: {ms:8.2} ms");
        json.push(format!("\"encoder_cpu_ms_b1_s{seq}\": {ms:.2}"));
    }
    println!("{{{}}}", json.join(", "));
}
