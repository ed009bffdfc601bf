//! What is particular to the WebGPU backend, inside headless Chromium (SwiftShader's WebGPU, on
//! the CPU): the device and adapter report, the 32 x 32 matmul tiling (the op suite in
//! ops_webgpu.rs runs the default one), gather range checks on host and GPU, the life cycle
//! through the registry with live buffers back to zero, profiling, unaligned parameter
//! writes, subgroups requested for our device only, and the device's limits (the adapter's own, as the page's `GPUAdapter.limits` says;
//! a forced smaller binding cap enforced). Small shapes: SwiftShader is slow; big shapes live
//! in the benchmarks.
//!
//! Tolerances as in the native kernel tests: matmul 2e-6 * sum|a b| + 1e-6; casts and data
//! movement exact.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod web_script;

use std::sync::Arc;
use wasm_bindgen_test::*;
use webdelegate::backends::WebGpuBackend;
use webdelegate::params::{BufferAllocator, MemoryProvider};
use webdelegate::program::ops;
use webdelegate::program::{BinaryOp, DType, Dim, Op, ProgramBuilder, UnaryOp};
use webdelegate::registry::{
    self, Backend, BackendExecutionContext, BackendInitContext, BackendInterface, BackendOption,
    BackendOptionContext, CompileSpec, FreeableBuffer, LoadedDelegate, OptionValue,
};
use webdelegate::{EValue, ErrorCode, Result, Tensor, TensorData};

wasm_bindgen_test_configure!(run_in_browser);

const SCRIPT: &str = r#"
async function adapterLimits() {
  const adapter = await navigator.gpu.requestAdapter();
  const l = adapter.limits;
  return [l.maxBufferSize, l.maxStorageBufferBindingSize, l.maxComputeInvocationsPerWorkgroup,
          l.maxComputeWorkgroupSizeX, l.maxComputeWorkgroupSizeY,
          l.maxComputeWorkgroupStorageSize, l.maxStorageBuffersPerShaderStage];
}
// Whether the adapter has "subgroups", whether GPUAdapter.requestDevice is the browser's own
// again, and whether a device the page requests without asking for subgroups got them.
async function subgroupFacts() {
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const facts = [adapter.features.has('subgroups'),
                 String(GPUAdapter.prototype.requestDevice).includes('[native code]'),
                 device.features.has('subgroups')];
  device.destroy();
  return facts;
}
"#;

thread_local! {
    static JS: web_script::Script = web_script::Script::new(SCRIPT, &["adapterLimits", "subgroupFacts"]);
}

async fn adapter_limits() -> wasm_bindgen::JsValue {
    call_async("adapterLimits").await
}

/// The resolved value of the script's async function `name` (no arguments).
async fn call_async(name: &str) -> wasm_bindgen::JsValue {
    let js = JS.with(|js| js.call(name, &[]));
    let promise: js_sys::Promise = wasm_bindgen::JsCast::dyn_into(js).expect("a promise");
    wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .unwrap_or_else(|e| panic!("{name} rejected: {e:?}"))
}

fn dims(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Fixed(d as u64)).collect()
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

async fn backend() -> WebGpuBackend {
    let backend = WebGpuBackend::new().await;
    assert!(
        backend.is_available(),
        "no WebGPU device in Chromium: {:?}",
        backend.unavailable_reason()
    );
    backend
}

async fn run(
    backend: &WebGpuBackend,
    program: &ProgramBuilder,
    params: &[(&str, Vec<f32>)],
    inputs: Vec<Tensor>,
    specs: &[CompileSpec],
) -> Result<Vec<Tensor>> {
    let provider = MemoryProvider::new();
    for (key, data) in params {
        provider.insert(
            "web",
            key,
            data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        );
    }
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    let blob = program.encode()?;
    let mut handle = backend
        .init(&context, FreeableBuffer::new(blob), specs)
        .await?;
    let mut args: Vec<EValue> = inputs.into_iter().map(EValue::Tensor).collect();
    let first_output = args.len();
    args.extend(program.program().outputs.iter().map(|_| EValue::None));
    let outcome = backend
        .execute(&BackendExecutionContext::default(), &mut handle, &mut args)
        .await;
    backend.destroy(handle);
    outcome?;
    Ok(args
        .drain(first_output..)
        .filter_map(|v| match v {
            EValue::Tensor(t) => Some(t),
            _ => None,
        })
        .collect())
}

fn assert_close(what: &str, got: &[f32], want: &[f64], tolerance: impl Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= tolerance(i),
            "{what}: element {i} is {g}, reference {w}"
        );
    }
}

#[wasm_bindgen_test]
async fn device_and_adapter_are_reported() {
    let backend = backend().await;
    let keys = [
        "adapter.vendor",
        "adapter.architecture",
        "adapter.fallback",
        "adapter.backend",
        "limits.max_compute_invocations_per_workgroup",
        "limits.max_buffer_size",
        "features.shader_f16",
    ];
    let mut options: Vec<BackendOption> = keys
        .iter()
        .map(|k| BackendOption::new(*k, 0).unwrap())
        .collect();
    backend
        .get_option(&mut BackendOptionContext::default(), &mut options)
        .unwrap();
    let value = |i: usize| options[i].value().clone();
    assert!(
        matches!(value(0), OptionValue::String(s) if !s.is_empty()),
        "{:?}",
        value(0)
    );
    assert!(matches!(value(2), OptionValue::Bool(_)));
    assert_eq!(value(3), OptionValue::String("webgpu".into()));
    assert!(matches!(value(4), OptionValue::Int(n) if n >= 64));
    // The device asked for the adapter's limits, not the 256 MiB default.
    assert!(matches!(value(5), OptionValue::Int(n) if n >= 256 << 20));
    if value(6) == OptionValue::Bool(false) {
        let mut p = ProgramBuilder::new();
        p.input("x", DType::F32, dims(&[2]));
        p.tensor("y", DType::F32, dims(&[2]));
        p.op(Op::Unary(ops::Unary {
            op: UnaryOp::Relu,
            x: 0,
            out: 1,
        }))
        .output(1);
        let err = run(
            &backend,
            &p,
            &[],
            vec![],
            &[CompileSpec::new("precision", "f16")],
        )
        .await
        .unwrap_err();
        assert_eq!(err.code(), ErrorCode::NotSupported);
    }
}

#[wasm_bindgen_test]
async fn matmul_32x32_tiles_with_transpose_bias_and_batch_match_reference() {
    let backend = backend().await;
    let (batch, m, k, n) = (2, 33, 17, 65);
    let a = values(batch * m * k, 1);
    let b = values(n * k, 2);
    let bias = values(n, 3);
    let mut p = ProgramBuilder::new();
    p.input("a", DType::F32, dims(&[batch, m, k]));
    p.param("b", DType::F32, dims(&[n, k]), "web", "b");
    p.param("bias", DType::F32, dims(&[n]), "web", "bias");
    p.tensor("out", DType::F32, dims(&[batch, m, n]));
    p.op(Op::MatMul(ops::MatMul {
        a: 0,
        b: 1,
        bias: Some(2),
        transpose_a: false,
        transpose_b: true,
        out: 3,
    }))
    .output(3);
    let params = [("b", b.clone()), ("bias", bias.clone())];
    let specs = [CompileSpec::new("workgroup_size", "64")];
    let out = run(
        &backend,
        &p,
        &params,
        vec![Tensor::from_f32(vec![batch, m, k], a.clone()).unwrap()],
        &specs,
    )
    .await
    .unwrap();
    let mut want = Vec::new();
    let mut scale = Vec::new();
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut sum = f64::from(bias[j]);
                let mut mag = sum.abs();
                for x in 0..k {
                    let product = f64::from(a[(bi * m + i) * k + x]) * f64::from(b[j * k + x]);
                    sum += product;
                    mag += product.abs();
                }
                want.push(sum);
                scale.push(mag);
            }
        }
    }
    assert_close("matmul", out[0].as_f32().unwrap(), &want, |i| {
        2e-6 * scale[i] + 1e-6
    });
}

#[wasm_bindgen_test]
async fn gather_cast_and_permute_are_exact_and_ids_are_checked() {
    let backend = backend().await;
    let (vocab, h) = (10, 6);
    let table: Vec<f32> = (0..vocab * h).map(|i| i as f32).collect();
    let mut p = ProgramBuilder::new();
    p.param("table", DType::F32, dims(&[vocab, h]), "web", "table");
    p.input("ids", DType::I64, dims(&[2, 3]));
    p.tensor("emb", DType::F32, dims(&[2, 3, h]));
    p.tensor("t", DType::I64, dims(&[3, 2]));
    p.tensor("f", DType::F32, dims(&[3, 2]));
    p.op(Op::Gather(ops::Gather {
        table: 0,
        ids: 1,
        out: 2,
    }))
    .op(Op::Permute(ops::Permute {
        x: 1,
        perm: vec![1, 0],
        out: 3,
    }))
    .op(Op::Cast(ops::Cast { x: 3, out: 4 }))
    .output(2)
    .output(3)
    .output(4);
    let ids = vec![9i64, 0, 4, 1, 1, 7];
    let input = || Tensor::new(vec![2, 3], TensorData::Int64(ids.clone())).unwrap();
    let out = run(
        &backend,
        &p,
        &[("table", table.clone())],
        vec![input()],
        &[],
    )
    .await
    .unwrap();
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&i| table[i as usize * h..(i as usize + 1) * h].to_vec())
        .collect();
    assert_eq!(out[0].as_f32().unwrap(), want.as_slice());
    assert_eq!(out[1].data(), &TensorData::Int64(vec![9, 1, 0, 1, 4, 7]));
    assert_eq!(out[2].as_f32().unwrap(), &[9.0, 1.0, 0.0, 1.0, 4.0, 7.0]);
    let bad = Tensor::new(vec![2, 3], TensorData::Int64(vec![0, 1, 2, 3, 10, 5])).unwrap();
    let err = run(&backend, &p, &[("table", table.clone())], vec![bad], &[])
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);

    // Ids computed on the GPU are checked by the kernel.
    let mut q = ProgramBuilder::new();
    q.param("table", DType::F32, dims(&[vocab, h]), "web", "table");
    q.input("x", DType::F32, dims(&[2]));
    q.tensor("ids", DType::I32, dims(&[2]));
    q.tensor("emb", DType::F32, dims(&[2, h]));
    q.op(Op::Cast(ops::Cast { x: 1, out: 2 }))
        .op(Op::Gather(ops::Gather {
            table: 0,
            ids: 2,
            out: 3,
        }))
        .output(3);
    let err = run(
        &backend,
        &q,
        &[("table", table)],
        vec![Tensor::from_f32(vec![2], vec![1.0, 12.0]).unwrap()],
        &[],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidArgument);
}

#[wasm_bindgen_test]
async fn lifecycle_through_the_registry_frees_every_buffer() {
    // The registry shares backends through `Arc`; in single-threaded wasm nothing crosses threads.
    #[allow(clippy::arc_with_non_send_sync)]
    let backend = Arc::new(backend().await);
    registry::register_backend(Backend::new("webgpu-lifecycle", backend.clone())).unwrap();
    let mut b = ProgramBuilder::new();
    let seq = b.symbol("seq");
    b.input("x", DType::F32, vec![Dim::Fixed(2), seq]);
    b.param("w", DType::F32, dims(&[1]), "web", "w");
    b.tensor("y", DType::F32, vec![Dim::Fixed(2), seq]);
    b.tensor("z", DType::F32, vec![Dim::Fixed(2), seq]);
    b.op(Op::Binary(ops::Binary {
        op: BinaryOp::Mul,
        a: 0,
        b: 1,
        out: 2,
    }))
    .op(Op::Softmax(ops::Softmax {
        x: 2,
        mask: None,
        out: 3,
    }))
    .output(3);
    let provider = MemoryProvider::new();
    provider.insert("web", "w", 2.0f32.to_le_bytes().to_vec());
    let context = BackendInitContext::new().with_parameters(Arc::new(provider));
    let mut delegate = LoadedDelegate::init(
        "webgpu-lifecycle",
        FreeableBuffer::new(b.encode().unwrap()),
        &[],
        &context,
    )
    .await
    .unwrap();
    for s in [3usize, 8, 3, 1] {
        let mut args = vec![
            EValue::Tensor(Tensor::from_f32(vec![2, s], values(2 * s, s as u32)).unwrap()),
            EValue::None,
        ];
        delegate.execute(&mut args).await.unwrap();
        let out = args[1].as_tensor().unwrap();
        assert_eq!(out.shape(), &[2, s]);
        for row in out.as_f32().unwrap().chunks(s) {
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        }
    }
    assert!(backend.live_buffers() > 0);
    drop(delegate);
    assert_eq!(backend.live_buffers(), 0);
}

#[wasm_bindgen_test]
async fn profiling_times_each_op_when_timestamps_exist() {
    let backend = backend().await;
    backend
        .set_option(
            &mut BackendOptionContext::default(),
            &[BackendOption::new("profiling", true).unwrap()],
        )
        .unwrap();
    let mut p = ProgramBuilder::new();
    p.input("x", DType::F32, dims(&[4, 8]));
    p.tensor("r", DType::F32, dims(&[8, 4]));
    p.tensor("y", DType::F32, dims(&[8, 4]));
    p.op(Op::Reshape(ops::Reshape { x: 0, out: 1 }))
        .op(Op::Unary(ops::Unary {
            op: UnaryOp::Tanh,
            x: 1,
            out: 2,
        }))
        .output(2);
    let mut handle = backend
        .init(
            &BackendInitContext::new(),
            FreeableBuffer::new(p.encode().unwrap()),
            &[],
        )
        .await
        .unwrap();
    let mut args = vec![
        EValue::Tensor(Tensor::from_f32(vec![4, 8], values(32, 9)).unwrap()),
        EValue::None,
    ];
    backend
        .execute(&BackendExecutionContext::default(), &mut handle, &mut args)
        .await
        .unwrap();
    let profile = backend.last_profile(&handle).unwrap().unwrap();
    assert_eq!(profile.ops.len(), 2);
    assert_eq!(profile.ops[0].dispatches, 0, "reshape is a view");
    let mut has = [BackendOption::new("features.timestamp_query", false).unwrap()];
    backend
        .get_option(&mut BackendOptionContext::default(), &mut has)
        .unwrap();
    assert_eq!(
        OptionValue::Bool(profile.timestamps),
        has[0].value().clone()
    );
    if profile.timestamps {
        assert!(profile.ops[1].gpu_ns.is_some());
    }
    backend.destroy(handle);
}

/// The device has subgroups where the page's adapter has them (SwiftShader's has, subgroups of
/// 4), although wgpu does not request the feature itself: `features.subgroups` says so; the
/// wrapper that added it to wgpu's `requestDevice` call is gone afterwards, so a device the
/// page requests without asking gets no subgroups.
#[wasm_bindgen_test]
async fn subgroups_are_requested_for_our_device_only() {
    let backend = backend().await;
    let facts = js_sys::Array::from(&call_async("subgroupFacts").await);
    let fact = |i: u32| facts.get(i).as_bool().expect("a bool");
    let (adapter_has, restored, page_device_has) = (fact(0), fact(1), fact(2));
    let mut option = [BackendOption::new("features.subgroups", false).unwrap()];
    backend
        .get_option(&mut BackendOptionContext::default(), &mut option)
        .unwrap();
    assert_eq!(option[0].value(), &OptionValue::Bool(adapter_has));
    assert!(adapter_has, "Chromium's SwiftShader adapter has subgroups");
    assert!(
        restored,
        "GPUAdapter.prototype.requestDevice is the browser's own again"
    );
    assert!(
        !page_device_has,
        "a device requested without subgroups has none"
    );
}

#[wasm_bindgen_test]
async fn unaligned_parameter_writes_land_exactly() {
    let backend = backend().await;
    let buffer = backend.allocator().unwrap().allocate(23, "web").unwrap();
    let bytes: Vec<u8> = (1..=23).collect();
    for (start, end) in [(0, 3), (3, 10), (10, 11), (11, 23), (5, 7)] {
        buffer.write(start as u64, &bytes[start..end]).unwrap();
    }
    assert_eq!(buffer.read(0, 23).await.unwrap(), bytes);
    assert_eq!(buffer.read(6, 5).await.unwrap(), bytes[6..11]);
}

fn int_option(backend: &WebGpuBackend, key: &str) -> i64 {
    let mut options = [BackendOption::new(key, 0).unwrap()];
    backend
        .get_option(&mut BackendOptionContext::default(), &mut options)
        .unwrap();
    match options[0].value() {
        OptionValue::Int(n) => *n,
        other => panic!("{key}: {other:?}"),
    }
}

/// `y = relu(x)` over `n` floats.
fn relu(n: usize) -> ProgramBuilder {
    let mut p = ProgramBuilder::new();
    p.input("x", DType::F32, dims(&[n]));
    p.tensor("y", DType::F32, dims(&[n]));
    p.op(Op::Unary(ops::Unary {
        op: UnaryOp::Relu,
        x: 0,
        out: 1,
    }))
    .output(1);
    p
}

#[wasm_bindgen_test]
async fn the_device_has_the_adapters_limits_and_a_forced_cap_is_enforced() {
    let backend = backend().await;
    let page: Vec<f64> = js_sys::Array::from(&adapter_limits().await)
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let keys = [
        "limits.max_buffer_size",
        "limits.max_storage_buffer_binding_size",
        "limits.max_compute_invocations_per_workgroup",
        "limits.max_compute_workgroup_size_x",
        "limits.max_compute_workgroup_size_y",
        "limits.max_compute_workgroup_storage_size",
        "limits.max_storage_buffers_per_shader_stage",
    ];
    for (key, adapter) in keys.iter().zip(&page) {
        assert_eq!(int_option(&backend, key) as f64, *adapter, "{key}");
    }
    assert_eq!(
        int_option(&backend, "adapter_limits.max_storage_buffer_binding_size") as f64,
        page[1]
    );

    let cap = 64 << 10;
    let option = BackendOption::new("max_storage_binding_bytes", cap).unwrap();
    backend
        .set_option(&mut BackendOptionContext::default(), &[option])
        .unwrap();
    let n = 16 << 10;
    let x = Tensor::from_f32(vec![n], vec![1.0; n]).unwrap();
    run(&backend, &relu(n), &[], vec![x], &[]).await.unwrap();
    assert_eq!(
        int_option(&backend, "limits.max_storage_buffer_binding_size"),
        cap
    );
    let x = Tensor::from_f32(vec![n + 1], vec![1.0; n + 1]).unwrap();
    let error = run(&backend, &relu(n + 1), &[], vec![x], &[])
        .await
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::OutOfResources, "{error}");
}
