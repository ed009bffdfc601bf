//! The seam between the WebGPU backend and the HTTP parameter provider in headless Chromium:
//! `init` resolves the encoder's parameters (tests/seam/mod.rs) through an `HttpProvider` that
//! fetches them with Range requests from nginx (another origin, with CORS) and writes each
//! response chunk straight into the backend's own GPU buffers with `GPUQueue.writeBuffer`; the
//! outputs match the CPU backend's on the same weights from a `MemoryProvider`.
//!
//! Zero-copy is shown by the load's own counters: nearly every byte went from a JavaScript chunk
//! to the queue (`bytes_written_direct`); only the few bytes carried across chunk boundaries
//! and the unaligned mask passed through wasm memory (`bytes_written_via_host`), the staging
//! pool was never used, and wasm memory did not grow by the weights' size.
//!
//! nginx is started by scripts/test-wasm.sh, which passes its URL at compile time
//! (`WEBDELEGATE_TEST_FIXTURES_URL`); the test fails, saying so, when it is missing.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod seam;

use seam::{FILE, PARAMS, SCOPE};
use std::sync::Arc;
use wasm_bindgen_test::*;
use webdelegate::backends::CpuBackend;
use webdelegate::backends::WebGpuBackend;
use webdelegate::params::http::{
    CacheMode, FetchOptions, FetchTransport, HttpProvider, HttpProviderOptions, ScopeOptions,
};
use webdelegate::registry::BackendInterface;
use webdelegate::web::edge::wasm_memory::wasm_memory_bytes;

wasm_bindgen_test_configure!(run_in_browser);

const FIXTURES_URL: Option<&str> = option_env!("WEBDELEGATE_TEST_FIXTURES_URL");

#[wasm_bindgen_test]
async fn webgpu_init_streams_parameters_over_fetch_into_its_buffers_and_matches_the_cpu() {
    let base = FIXTURES_URL.expect(
        "WEBDELEGATE_TEST_FIXTURES_URL is unset: run this test through scripts/test-wasm.sh, \
         which serves tests/fixtures with nginx",
    );
    #[allow(clippy::arc_with_non_send_sync)] // single-threaded wasm: the provider takes an Arc
    let transport = Arc::new(FetchTransport::new(FetchOptions {
        cache: CacheMode::NoStore,
        ..FetchOptions::default()
    }));
    #[allow(clippy::arc_with_non_send_sync)]
    let provider = Arc::new(HttpProvider::new(
        transport,
        HttpProviderOptions {
            max_request_size: 16 << 10,
            ..HttpProviderOptions::default()
        },
    ));
    let url = format!("{base}/{FILE}");
    provider
        .add_scope(SCOPE, &url, ScopeOptions::default())
        .await
        .unwrap_or_else(|e| panic!("the index of {url}: {e}"));

    let gpu = WebGpuBackend::new().await;
    assert!(
        gpu.is_available(),
        "no WebGPU device: {:?}",
        gpu.unavailable_reason()
    );
    let program = seam::program();
    let memory_before = wasm_memory_bytes();
    let mut handle = seam::init(&gpu, &program, provider.clone())
        .await
        .expect("WebGPU init with parameters over fetch");
    let growth = wasm_memory_bytes() - memory_before;

    let stats = provider
        .last_stats()
        .expect("init loaded through the provider");
    let data = seam::param_bytes();
    assert_eq!(stats.bytes_needed, data);
    assert!(stats.requests_planned >= 6, "{stats:?}");
    // Zero-copy: every f32 byte except those carried across a chunk boundary (at most 4 per
    // chunk, and chunks are kilobytes) went from the response's Uint8Array to writeBuffer.
    assert!(
        stats.bytes_written_direct >= seam::f32_param_bytes() * 95 / 100,
        "{stats:?}: most bytes must go straight to the GPU queue"
    );
    assert!(
        stats.bytes_written_via_host * 20 <= stats.bytes_written_direct,
        "{stats:?}"
    );
    assert_eq!(
        provider.staging_pool().peak_bytes(),
        0,
        "no chunk was copied into a staging buffer"
    );
    // Measured: 0 bytes (the heap had room). Copying the weights through wasm memory would need
    // their size at least.
    assert!(
        growth < data as f64,
        "wasm memory grew {growth} bytes while {data} bytes of parameters loaded"
    );
    let program_stats = gpu.program_stats(&handle).expect("stats");
    assert_eq!(
        program_stats.params_in_place,
        PARAMS.len() - 1,
        "f32 parameters stay in the buffers the provider streamed them into"
    );
    let gpu_outputs = seam::execute(&gpu, &mut handle).await.expect("execute");

    let cpu = CpuBackend::new();
    let memory = Arc::new(seam::memory_provider(seam::FIXTURE));
    let mut cpu_handle = seam::init(&cpu, &program, memory).await.expect("CPU init");
    let cpu_outputs = seam::execute(&cpu, &mut cpu_handle)
        .await
        .expect("CPU execute");
    cpu.destroy(cpu_handle);
    seam::assert_matches_cpu(&gpu_outputs, &cpu_outputs);

    gpu.destroy(handle);
    assert_eq!(
        gpu.live_buffers(),
        0,
        "destroy frees the parameter buffers the provider allocated too"
    );
}
