//! The backend's life cycle: init / execute many times with changing shapes / destroy (live
//! GPU buffers back to zero), the error codes of bad blobs, programs, parameters and arguments,
//! options, and profiling. Each test owns its backend (its own device) so buffer counts are its
//! own.

use super::planning::every_op_program;
use super::{Rng, dims, f32_bytes, new_backend, provider};
use crate::backends::webgpu::{ADAPTER_KEYS, BACKEND_KEYS, WebGpuBackend};
use crate::error::{ErrorCode, Result};
use crate::evalue::{EValue, Tensor, TensorData};
use crate::params::MemoryProvider;
use crate::program::ops;
use crate::program::{DType, Op, Program, ProgramBuilder, UnaryOp, encode};
use crate::registry::{
    BackendExecutionContext, BackendInitContext, BackendInterface, BackendOption,
    BackendOptionContext, CompileSpec, DelegateHandle, FreeableBuffer, LoadedDelegate, OptionValue,
    SharedBackend,
};
use std::sync::Arc;

fn every_op_params(rng: &mut Rng) -> Arc<MemoryProvider> {
    let provider = MemoryProvider::new();
    for (key, n) in [("table", 16 * 8), ("w", 64), ("bias", 8), ("gamma", 8)] {
        provider.insert("s", key, f32_bytes(&rng.f32s(n, -1.0, 1.0)));
    }
    Arc::new(provider)
}

fn every_op_args(rng: &mut Rng, seq: usize) -> Vec<EValue> {
    let ids: Vec<i64> = (0..seq).map(|_| rng.range(0, 15) as i64).collect();
    let mask: Vec<i64> = (0..seq)
        .map(|i| i64::from(i + 1 < seq || seq == 1))
        .collect();
    vec![
        EValue::Tensor(Tensor::new(vec![1, seq], TensorData::Int64(ids)).unwrap()),
        EValue::Tensor(Tensor::new(vec![1, seq], TensorData::Int64(mask)).unwrap()),
        EValue::None,
        EValue::None,
        EValue::None,
    ]
}

/// Properties the every-op program's outputs must have whatever the weights.
fn check_every_op_outputs(args: &[EValue], seq: usize) {
    let unit = args[2].as_tensor().unwrap();
    let norm: f32 = unit
        .as_f32()
        .unwrap()
        .iter()
        .map(|v| v * v)
        .sum::<f32>()
        .sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "unit norm {norm}");
    let probs = args[3].as_tensor().unwrap();
    assert_eq!(probs.shape(), &[1, 2, seq, seq]);
    for row in probs.as_f32().unwrap().chunks(seq) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "softmax row sums to {sum}");
    }
    let both = args[4].as_tensor().unwrap().as_f32().unwrap();
    assert_eq!(both[..8], both[8..], "concat of a row with itself");
}

fn context(provider: Arc<MemoryProvider>) -> BackendInitContext {
    BackendInitContext::new().with_parameters(provider)
}

#[test]
fn init_execute_many_destroy_frees_everything() {
    let backend = Arc::new(new_backend());
    let mut rng = Rng::new(60);
    let blob = encode(&every_op_program()).unwrap();
    let ctx = context(every_op_params(&mut rng));
    let mut handle =
        pollster::block_on(backend.init(&ctx, FreeableBuffer::new(blob.clone()), &[])).unwrap();
    assert!(backend.live_buffers() >= 4, "parameters live on the GPU");
    for seq in [5, 9, 5, 16, 1, 9, 5] {
        let mut args = every_op_args(&mut rng, seq);
        pollster::block_on(backend.execute(
            &BackendExecutionContext::default(),
            &mut handle,
            &mut args,
        ))
        .unwrap();
        check_every_op_outputs(&args, seq);
    }
    let stats = backend.program_stats(&handle).unwrap();
    assert_eq!(stats.cached_plans, 4, "{stats:?}");
    assert_eq!(stats.params, 4);
    assert!(
        stats.arena_bytes > 0 && stats.arena_bytes_without_reuse > 0,
        "{stats:?}"
    );
    let mut arena = [BackendOption::new("arena_bytes", 0).unwrap()];
    backend
        .get_option(&mut BackendOptionContext::default(), &mut arena)
        .unwrap();
    assert_eq!(
        arena[0].value(),
        &OptionValue::Int(stats.arena_bytes as i64)
    );
    backend.destroy(handle);
    assert_eq!(backend.live_buffers(), 0, "destroy frees every buffer");

    // The same through the registry's delegate loader: destroy runs when the delegate drops.
    let shared: SharedBackend = backend.clone();
    let mut delegate = pollster::block_on(LoadedDelegate::init_with_backend(
        "webgpu",
        shared,
        FreeableBuffer::new(blob),
        &[],
        &ctx,
    ))
    .unwrap();
    for seq in [3, 4, 3] {
        let mut args = every_op_args(&mut rng, seq);
        pollster::block_on(delegate.execute(&mut args)).unwrap();
        check_every_op_outputs(&args, seq);
    }
    drop(delegate);
    assert_eq!(backend.live_buffers(), 0);
}

fn relu_program(n: usize) -> ProgramBuilder {
    let mut b = ProgramBuilder::new();
    b.input("x", DType::F32, dims(&[n]));
    b.tensor("y", DType::F32, dims(&[n]));
    b.op(Op::Unary(ops::Unary {
        op: UnaryOp::Relu,
        x: 0,
        out: 1,
    }))
    .output(1);
    b
}

fn init_code(
    backend: &WebGpuBackend,
    blob: Vec<u8>,
    ctx: &BackendInitContext,
    specs: &[CompileSpec],
) -> ErrorCode {
    match pollster::block_on(backend.init(ctx, FreeableBuffer::new(blob), specs)) {
        Ok(_) => panic!("init succeeded"),
        Err(e) => e.code(),
    }
}

#[test]
fn bad_blobs_programs_parameters_and_specs_give_the_right_codes() {
    let backend = new_backend();
    let none = BackendInitContext::new();
    let good = relu_program(4).encode().unwrap();
    assert_eq!(
        init_code(&backend, b"not a program".to_vec(), &none, &[]),
        ErrorCode::DelegateInvalidCompatibility
    );
    let mut future = good.clone();
    future[4] = 9;
    assert_eq!(
        init_code(&backend, future, &none, &[]),
        ErrorCode::DelegateInvalidCompatibility
    );
    assert_eq!(
        init_code(&backend, good[..good.len() - 2].to_vec(), &none, &[]),
        ErrorCode::InvalidProgram
    );
    let mut bad = relu_program(4).into_program();
    bad.ops.push(Op::Unary(ops::Unary {
        op: UnaryOp::Tanh,
        x: 7,
        out: 1,
    }));
    assert_eq!(
        init_code(&backend, encode(&bad).unwrap(), &none, &[]),
        ErrorCode::InvalidProgram
    );
    let spec = [CompileSpec::new("tile_size", "8")];
    assert_eq!(
        init_code(&backend, good.clone(), &none, &spec),
        ErrorCode::InvalidArgument
    );
    // 2^30 floats (4 GiB) cannot be bound on any device this runs on.
    let huge = relu_program(1 << 30).encode().unwrap();
    assert_eq!(
        init_code(&backend, huge, &none, &[]),
        ErrorCode::OutOfResources
    );

    // Parameters: no provider, a missing key, a length that disagrees with the declaration.
    let mut p = ProgramBuilder::new();
    p.input("x", DType::F32, dims(&[4]));
    p.param("w", DType::F32, dims(&[4]), "test", "w");
    p.tensor("y", DType::F32, dims(&[4]));
    p.op(Op::Binary(ops::Binary {
        op: crate::program::BinaryOp::Mul,
        a: 0,
        b: 1,
        out: 2,
    }))
    .output(2);
    let blob = p.encode().unwrap();
    assert_eq!(
        init_code(&backend, blob.clone(), &none, &[]),
        ErrorCode::NotFound
    );
    assert_eq!(
        init_code(
            &backend,
            blob.clone(),
            &context(provider(&[("v", vec![0; 16])])),
            &[]
        ),
        ErrorCode::NotFound
    );
    let short = context(provider(&[("w", vec![0; 12])]));
    assert_eq!(
        init_code(&backend, blob.clone(), &short, &[]),
        ErrorCode::InvalidExternalData
    );
    let other_scope = BackendInitContext::new().with_parameters(Arc::new(MemoryProvider::new()));
    assert_eq!(
        init_code(&backend, blob, &other_scope, &[]),
        ErrorCode::NotFound
    );
    assert_eq!(
        backend.live_buffers(),
        0,
        "failed inits leave nothing behind"
    );
}

fn execute(
    backend: &WebGpuBackend,
    handle: &mut DelegateHandle,
    args: &mut [EValue],
) -> Result<()> {
    pollster::block_on(backend.execute(&BackendExecutionContext::default(), handle, args))
}

#[test]
fn execute_refuses_bad_arguments_and_foreign_handles() {
    let backend = new_backend();
    let mut b = ProgramBuilder::new();
    let n = b.symbol("n");
    b.input("x", DType::F32, vec![n]);
    b.input("z", DType::F32, vec![n]);
    b.tensor("y", DType::F32, vec![n]);
    b.op(Op::Binary(ops::Binary {
        op: crate::program::BinaryOp::Add,
        a: 0,
        b: 1,
        out: 2,
    }))
    .output(2);
    let blob = b.encode().unwrap();
    let mut handle = pollster::block_on(backend.init(
        &BackendInitContext::new(),
        FreeableBuffer::new(blob),
        &[],
    ))
    .unwrap();
    let f = |n: usize| EValue::Tensor(Tensor::from_f32(vec![n], vec![1.0; n]).unwrap());
    let cases: Vec<Vec<EValue>> = vec![
        vec![f(3), f(3)],
        vec![f(3), f(4), EValue::None],
        vec![f(3), EValue::Int(3), EValue::None],
        vec![
            f(2),
            EValue::Tensor(Tensor::new(vec![2], TensorData::Int32(vec![1, 2])).unwrap()),
            EValue::None,
        ],
        vec![
            EValue::Tensor(Tensor::from_f32(vec![1, 2], vec![0.0; 2]).unwrap()),
            f(2),
            EValue::None,
        ],
    ];
    for mut args in cases {
        let err = execute(&backend, &mut handle, &mut args).unwrap_err();
        assert_eq!(err.code(), ErrorCode::InvalidArgument, "{err}");
    }
    let mut ok = vec![f(3), f(3), EValue::None];
    execute(&backend, &mut handle, &mut ok).unwrap();
    assert_eq!(ok[2].as_tensor().unwrap().as_f32().unwrap(), &[2.0; 3]);
    let mut foreign = DelegateHandle::new(7u32);
    let err = execute(&backend, &mut foreign, &mut ok).unwrap_err();
    assert_eq!(err.code(), ErrorCode::DelegateInvalidHandle);
    assert_eq!(
        backend.program_stats(&foreign).unwrap_err().code(),
        ErrorCode::DelegateInvalidHandle
    );
    backend.destroy(handle);
    assert_eq!(backend.live_buffers(), 0);
}

#[test]
fn options_report_the_device_and_refuse_unknown_keys() {
    let backend = new_backend();
    let mut ctx = BackendOptionContext::default();
    let mut options: Vec<BackendOption> = ADAPTER_KEYS
        .iter()
        .chain(&BACKEND_KEYS)
        .map(|k| BackendOption::new(*k, false).unwrap())
        .collect();
    backend.get_option(&mut ctx, &mut options).unwrap();
    let value = |key: &str| {
        options
            .iter()
            .find(|o| o.key() == key)
            .unwrap()
            .value()
            .clone()
    };
    assert_eq!(value("available"), OptionValue::Bool(true));
    assert_eq!(
        value("adapter.backend"),
        OptionValue::String("vulkan".into())
    );
    assert!(
        matches!(value("limits.max_compute_invocations_per_workgroup"), OptionValue::Int(n) if n >= 256)
    );
    assert!(matches!(value("limits.max_buffer_size"), OptionValue::Int(n) if n >= 256 << 20));
    assert!(matches!(value("adapter.vendor"), OptionValue::String(s) if !s.is_empty()));
    assert!(matches!(value("adapter.fallback"), OptionValue::Bool(_)));
    assert_eq!(value("profiling"), OptionValue::Bool(false));

    let mut unknown = [BackendOption::new("adapter.colour", 0).unwrap()];
    assert_eq!(
        backend
            .get_option(&mut ctx, &mut unknown)
            .unwrap_err()
            .code(),
        ErrorCode::InvalidArgument
    );
    let set = |key: &str, value: OptionValue| {
        backend.set_option(
            &mut BackendOptionContext::default(),
            &[BackendOption::new(key, value).unwrap()],
        )
    };
    assert_eq!(
        set("turbo", OptionValue::Bool(true)).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        set("profiling", OptionValue::Int(1)).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        set("power_preference", "fast".into()).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
    set("power_preference", "low-power".into()).unwrap();
    set("profiling", OptionValue::Bool(true)).unwrap();
    let mut read = [
        BackendOption::new("power_preference", "").unwrap(),
        BackendOption::new("profiling", false).unwrap(),
    ];
    backend.get_option(&mut ctx, &mut read).unwrap();
    assert_eq!(read[0].value(), &OptionValue::String("low-power".into()));
    assert_eq!(read[1].value(), &OptionValue::Bool(true));
    // The new preference applies to the next acquisition.
    pollster::block_on(backend.reacquire()).unwrap();
    assert!(backend.is_available());
}

#[test]
fn profiling_reports_per_op_gpu_times() {
    let backend = new_backend();
    let mut rng = Rng::new(61);
    let blob = encode(&every_op_program()).unwrap();
    let ctx = context(every_op_params(&mut rng));
    let mut handle =
        pollster::block_on(backend.init(&ctx, FreeableBuffer::new(blob), &[])).unwrap();
    execute(&backend, &mut handle, &mut every_op_args(&mut rng, 7)).unwrap();
    assert_eq!(
        backend.last_profile(&handle).unwrap(),
        None,
        "profiling is off by default"
    );
    backend
        .set_option(
            &mut BackendOptionContext::default(),
            &[BackendOption::new("profiling", true).unwrap()],
        )
        .unwrap();
    let mut args = every_op_args(&mut rng, 7);
    execute(&backend, &mut handle, &mut args).unwrap();
    check_every_op_outputs(&args, 7);
    let profile = backend.last_profile(&handle).unwrap().unwrap();
    let program: Program = every_op_program();
    assert_eq!(profile.ops.len(), program.ops.len());
    assert!(profile.timestamps, "lavapipe has timestamp queries");
    for op in &profile.ops {
        assert_eq!(op.gpu_ns.is_some(), op.dispatches > 0, "{op:?}");
    }
    assert!(profile.total_gpu_ns().unwrap() > 0);
    // A profile survives the next plan being built, and the program still runs correctly.
    let mut args = every_op_args(&mut rng, 12);
    execute(&backend, &mut handle, &mut args).unwrap();
    check_every_op_outputs(&args, 12);
    assert_eq!(
        pollster::block_on(backend.reacquire()).unwrap_err().code(),
        ErrorCode::InvalidState,
        "cannot swap the device under a live program"
    );
    backend.destroy(handle);
    assert_eq!(backend.live_buffers(), 0);
}
