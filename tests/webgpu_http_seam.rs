//! The seam between the WebGPU backend and the HTTP parameter provider, natively (Mesa
//! lavapipe, a real nginx): `init` resolves the encoder's parameters through an `HttpProvider`
//! whose `load` allocates the backend's own GPU buffers (its `GpuAllocator`) and streams the
//! Range responses into them; the backend binds them where they landed; the outputs match the CPU
//! backend's on the same weights from a `MemoryProvider` (tolerance in tests/seam/mod.rs); and
//! `destroy` frees every buffer, parameter buffers included. Also: the committed weights file is
//! exactly what the generator below writes, and a program whose declared shape disagrees with
//! the file fails before any byte moves.
#![cfg(not(target_arch = "wasm32"))]

mod seam;
mod support;

use seam::{FILE, PARAMS, SCOPE};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::files::{Tensor as FileTensor, write_safetensors};
use support::nginx::Nginx;
use support::{Rng, TempDir};
use webdelegate::ErrorCode;
use webdelegate::backends::CpuBackend;
use webdelegate::params::http::{HttpProvider, HttpProviderOptions, NativeTransport, ScopeOptions};
use webdelegate::program::DType;
use webdelegate::registry::BackendInterface;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Uniform in [-scale, scale).
fn uniform(rng: &mut Rng, count: usize, scale: f32) -> Vec<u8> {
    (0..count)
        .flat_map(|_| {
            let unit = (rng.next() >> 40) as f32 / (1u64 << 24) as f32;
            ((unit * 2.0 - 1.0) * scale).to_le_bytes()
        })
        .collect()
}

/// The encoder's weights: embeddings in [-1, 1), layer-norm gains near 1, weights scaled by
/// 1/sqrt(fan-in) (the head's by 4/sqrt(fan-in), so its softmax is far from uniform), small
/// biases; the mask keeps 7 tokens of the first sequence and 5 of the second.
fn generate() -> Vec<FileTensor> {
    let mut rng = Rng(0x5eed_5ea3);
    PARAMS
        .iter()
        .map(|spec| {
            let count: usize = spec.shape().iter().product();
            let fan_in = spec.shape()[0] as f32;
            let bytes = match spec.key {
                "pool.mask" => (0..count).map(|i| u8::from(i < 7 || i % 7 < 5)).collect(),
                "embeddings.word" | "embeddings.position" => uniform(&mut rng, count, 1.0),
                "embeddings.norm.weight" => uniform(&mut rng, count, 0.2)
                    .chunks(4)
                    .flat_map(|w| {
                        (1.0 + f32::from_le_bytes([w[0], w[1], w[2], w[3]])).to_le_bytes()
                    })
                    .collect(),
                "head.weight" => uniform(&mut rng, count, 4.0 / fan_in.sqrt()),
                key if key.ends_with(".weight") => uniform(&mut rng, count, 1.0 / fan_in.sqrt()),
                _ => uniform(&mut rng, count, 0.1),
            };
            FileTensor {
                name: spec.key.to_owned(),
                dtype: match spec.dtype {
                    DType::U8 => "U8",
                    _ => "F32",
                },
                shape: spec.shape().iter().map(|&d| d as u64).collect(),
                bytes,
            }
        })
        .collect()
}

#[test]
fn the_fixture_is_what_the_generator_writes() {
    let dir = TempDir::new("seam");
    let written = write_safetensors(&dir.path().join("encoder.safetensors"), &generate());
    let path = fixtures().join(FILE);
    if std::env::var_os("WEBDELEGATE_BLESS").is_some() {
        std::fs::write(&path, &written.bytes).expect("write the fixture");
    }
    assert!(
        written.bytes == seam::FIXTURE,
        "{} differs from the generator's output: rerun with WEBDELEGATE_BLESS=1 to rewrite it",
        path.display()
    );
    let first_f32 = written.index.get("embeddings.word").expect("key");
    let webdelegate::params::EntryStorage::Data { offset } = first_f32.storage else {
        panic!("data entry")
    };
    assert_eq!(offset % 4, 2, "f32 tensors start off a word boundary");
}

fn http_provider(server: &Nginx) -> Arc<HttpProvider> {
    // Small requests and chunks: the 100 KB file takes several requests, two at a time, each
    // in many chunks.
    let provider = HttpProvider::new(
        Arc::new(NativeTransport::default()),
        HttpProviderOptions {
            max_request_size: 16 << 10,
            chunk_size: 3000,
            ..HttpProviderOptions::default()
        },
    );
    let url = format!("{}/{FILE}", server.url);
    pollster::block_on(provider.add_scope(SCOPE, &url, ScopeOptions::default()))
        .expect("the weights file's index over HTTP");
    Arc::new(provider)
}

#[test]
fn webgpu_init_streams_parameters_from_nginx_and_matches_the_cpu_backend() {
    let server = Nginx::start(&fixtures());
    let provider = http_provider(&server);
    let gpu = support::gpu_backend();
    let program = seam::program();
    let mut handle = pollster::block_on(seam::init(&gpu, &program, provider.clone()))
        .expect("WebGPU init with parameters over HTTP");

    let stats = provider
        .last_stats()
        .expect("init loaded through the provider");
    let data = seam::param_bytes();
    assert_eq!(stats.bytes_needed, data);
    assert_eq!(
        stats.bytes_received, data,
        "contiguous tensors: no gap fetched"
    );
    assert!(stats.requests_planned >= 6, "{stats:?}");
    assert_eq!(stats.requests_sent, stats.requests_planned);
    let written = stats.bytes_written_via_host + stats.bytes_written_direct;
    assert!((data..data + 4).contains(&written), "{stats:?}");
    assert_eq!(
        stats.bytes_written_direct, 0,
        "natively bodies are host memory"
    );

    let program_stats = gpu.program_stats(&handle).expect("stats");
    assert_eq!(program_stats.params, PARAMS.len());
    assert_eq!(
        program_stats.params_in_place,
        PARAMS.len() - 1,
        "every f32 parameter is bound in the buffer the provider streamed it into; the u8 mask \
         is widened to words"
    );
    let gpu_outputs = pollster::block_on(seam::execute(&gpu, &mut handle)).expect("execute");

    let cpu = CpuBackend::new();
    let memory = Arc::new(seam::memory_provider(seam::FIXTURE));
    let mut cpu_handle = pollster::block_on(seam::init(&cpu, &program, memory)).expect("CPU init");
    let cpu_outputs = pollster::block_on(seam::execute(&cpu, &mut cpu_handle)).expect("execute");
    cpu.destroy(cpu_handle);
    seam::assert_matches_cpu(&gpu_outputs, &cpu_outputs);

    assert!(gpu.live_buffers() > PARAMS.len());
    gpu.destroy(handle);
    assert_eq!(
        gpu.live_buffers(),
        0,
        "destroy frees the parameter buffers the provider allocated too"
    );
}

#[test]
fn a_shape_the_file_contradicts_fails_before_loading_and_leaks_nothing() {
    let server = Nginx::start(&fixtures());
    let provider = http_provider(&server);
    let gpu = support::gpu_backend();
    let program = seam::program_with(Some(("embeddings.word", [seam::V / 2, seam::H])));
    let error = pollster::block_on(seam::init(&gpu, &program, provider.clone()))
        .expect_err("a mismatched parameter fails init");
    assert_eq!(error.code(), ErrorCode::InvalidExternalData, "{error}");
    assert!(error.message().contains("embeddings.word"), "{error}");
    assert!(provider.last_stats().is_none(), "no byte was requested");
    assert_eq!(gpu.live_buffers(), 0);

    // A scope nobody serves: NotFound, as the method loader reports a missing backend.
    let other = Arc::new(HttpProvider::new(
        Arc::new(NativeTransport::default()),
        HttpProviderOptions::default(),
    ));
    let error = pollster::block_on(seam::init(&gpu, &seam::program(), other))
        .expect_err("an unserved scope fails init");
    assert_eq!(error.code(), ErrorCode::NotFound, "{error}");
    assert_eq!(gpu.live_buffers(), 0);
}
