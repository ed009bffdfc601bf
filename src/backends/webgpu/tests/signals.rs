//! Lifecycle signals and device loss on the native GPU: `Suspend` frees activations and plans
//! (counted in live GPU bytes) and the next execution rebuilds them; `LowMemory` also frees the
//! parameters and the next execution fetches them again exactly once; a destroyed device is
//! replaced and the program gives bit-identical results on the new one. Each test owns its
//! backend so the buffer counts are its own.

use super::planning::every_op_program;
use super::{Rng, f32_bytes, new_backend};
use crate::backends::webgpu::{LoadedProgram, WebGpuBackend};
use crate::evalue::{EValue, Tensor, TensorData};
use crate::lifecycle::Signal;
use crate::params::{
    BufferAllocator, LoadedSpan, MemoryProvider, ParameterBuffer, ParameterInfo, ParameterProvider,
    SpanRequest, StatusResult,
};
use crate::program::encode;
use crate::registry::{
    BackendExecutionContext, BackendInitContext, BackendInterface, DelegateHandle, FreeableBuffer,
    LocalBoxFuture, OptionValue,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A memory provider that counts `load` calls and the bytes they asked for.
struct CountingProvider {
    inner: MemoryProvider,
    loads: AtomicU64,
    bytes: AtomicU64,
}

impl ParameterProvider for CountingProvider {
    fn notify(&self, signal: Signal) -> StatusResult<()> {
        self.inner.notify(signal)
    }

    fn query_support(&self, scope: &str) -> bool {
        self.inner.query_support(scope)
    }

    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo> {
        self.inner.describe(scope, key)
    }

    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        let bytes: u64 = requests.iter().map(|r| r.span.length).sum();
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.inner.load(allocator, scope, requests)
    }

    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        self.inner.gather(scope, target, requests)
    }

    fn scatter<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        self.inner.scatter(source, scope, requests)
    }
}

fn counting_params(rng: &mut Rng) -> Arc<CountingProvider> {
    let inner = MemoryProvider::new();
    for (key, n) in [("table", 16 * 8), ("w", 64), ("bias", 8), ("gamma", 8)] {
        inner.insert("s", key, f32_bytes(&rng.f32s(n, -1.0, 1.0)));
    }
    Arc::new(CountingProvider {
        inner,
        loads: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    })
}

fn args(seq: usize) -> Vec<EValue> {
    let ids: Vec<i64> = (0..seq).map(|i| (i * 7 % 16) as i64).collect();
    let mask: Vec<i64> = (0..seq).map(|i| i64::from(i + 1 < seq)).collect();
    vec![
        EValue::Tensor(Tensor::new(vec![1, seq], TensorData::Int64(ids)).unwrap()),
        EValue::Tensor(Tensor::new(vec![1, seq], TensorData::Int64(mask)).unwrap()),
        EValue::None,
        EValue::None,
        EValue::None,
    ]
}

/// Every output's f32 values, as bits (results must be identical, not close).
fn run(backend: &WebGpuBackend, handle: &mut DelegateHandle, seq: usize) -> Vec<Vec<u32>> {
    let mut args = args(seq);
    pollster::block_on(backend.execute(&BackendExecutionContext::default(), handle, &mut args))
        .unwrap();
    args[2..]
        .iter()
        .map(|a| {
            let t = a.as_tensor().unwrap();
            t.as_f32().unwrap().iter().map(|v| v.to_bits()).collect()
        })
        .collect()
}

fn setup(seed: u64) -> (WebGpuBackend, Arc<CountingProvider>, DelegateHandle) {
    let backend = new_backend();
    let provider = counting_params(&mut Rng::new(seed));
    let ctx = BackendInitContext::new().with_parameters(provider.clone());
    let blob = encode(&every_op_program()).unwrap();
    let handle = pollster::block_on(backend.init(&ctx, FreeableBuffer::new(blob), &[])).unwrap();
    (backend, provider, handle)
}

fn stats(
    backend: &WebGpuBackend,
    handle: &DelegateHandle,
) -> crate::backends::webgpu::ProgramStats {
    backend.program_stats(handle).unwrap()
}

#[test]
fn suspend_frees_activations_and_resume_rebuilds_them_lazily() {
    let (backend, provider, mut handle) = setup(1);
    let before = run(&backend, &mut handle, 9);
    let live = backend.live_buffer_bytes();
    let arena = stats(&backend, &handle).arena_bytes;
    assert!(arena > 0);

    let released = backend.notify(Signal::Suspend);
    assert!(released.gpu_bytes >= arena, "{released:?} < arena {arena}");
    assert_eq!(backend.live_buffer_bytes(), live - released.gpu_bytes);
    let suspended = stats(&backend, &handle);
    assert_eq!((suspended.arena_bytes, suspended.cached_plans), (0, 0));
    assert!(suspended.params_resident, "Suspend keeps the parameters");
    // A second Suspend is the same suspend: nothing more to release.
    assert_eq!(backend.notify(Signal::Suspend).gpu_bytes, 0);

    // Executing while suspended works, and leaves nothing transient behind.
    assert_eq!(run(&backend, &mut handle, 9), before);
    assert_eq!(stats(&backend, &handle).arena_bytes, 0);
    assert_eq!(backend.live_buffer_bytes(), live - released.gpu_bytes);

    backend.notify(Signal::Resume);
    assert_eq!(
        stats(&backend, &handle).arena_bytes,
        0,
        "rebuilt lazily, not at Resume"
    );
    assert_eq!(run(&backend, &mut handle, 9), before);
    assert_eq!(stats(&backend, &handle).arena_bytes, arena);
    assert_eq!(backend.live_buffer_bytes(), live);
    assert_eq!(
        provider.loads.load(Ordering::Relaxed),
        1,
        "no parameter refetch"
    );
    backend.destroy(handle);
    assert_eq!(backend.live_buffers(), 0);
}

#[test]
fn low_memory_frees_parameters_and_the_next_execute_fetches_them_once() {
    let (backend, provider, mut handle) = setup(2);
    let before = run(&backend, &mut handle, 5);
    let loaded_bytes = provider.bytes.load(Ordering::Relaxed);
    let param_bytes = stats(&backend, &handle).param_bytes;
    assert!(param_bytes > 0);

    let released = backend.notify(Signal::LowMemory);
    assert!(
        released.gpu_bytes >= param_bytes,
        "{released:?} < parameters {param_bytes}"
    );
    let after = stats(&backend, &handle);
    assert!(!after.params_resident);
    assert_eq!((after.params, after.param_loads), (0, 1));

    assert_eq!(run(&backend, &mut handle, 5), before);
    assert_eq!(run(&backend, &mut handle, 5), before);
    assert_eq!(
        provider.loads.load(Ordering::Relaxed),
        2,
        "fetched again once"
    );
    assert_eq!(provider.bytes.load(Ordering::Relaxed), 2 * loaded_bytes);
    let reloaded = stats(&backend, &handle);
    assert!(reloaded.params_resident);
    assert_eq!(
        (reloaded.param_bytes, reloaded.param_loads),
        (param_bytes, 2)
    );
    backend.destroy(handle);
    assert_eq!(backend.live_buffers(), 0);
}

#[test]
fn a_signal_during_execute_is_applied_when_the_execution_ends() {
    // Natively an execution completes within one poll, so the window is opened by hand: the
    // state is checked out exactly as `execute` does while its commands are in flight.
    let (backend, provider, mut handle) = setup(3);
    let before = run(&backend, &mut handle, 7);
    let live = backend.live_buffer_bytes();
    let program = handle.downcast_mut::<LoadedProgram>().unwrap();
    let resident = program.slot.checkout();
    assert!(resident.params.is_some() && resident.arena.is_some());
    let released = backend.notify(Signal::LowMemory);
    assert_eq!(
        released.gpu_bytes, 0,
        "nothing is pulled from under a running execution"
    );
    assert_eq!(backend.live_buffer_bytes(), live);
    program.slot.checkin(resident);
    let after = stats(&backend, &handle);
    assert!(!after.params_resident, "the release applied at check-in");
    assert_eq!(after.arena_bytes, 0);
    assert!(backend.live_buffer_bytes() < live);
    assert_eq!(run(&backend, &mut handle, 7), before);
    assert_eq!(provider.loads.load(Ordering::Relaxed), 2);
}

#[test]
fn a_destroyed_device_is_replaced_and_results_are_identical() {
    let (backend, provider, mut handle) = setup(4);
    let before = run(&backend, &mut handle, 9);
    assert!(backend.destroy_device());
    assert_eq!(run(&backend, &mut handle, 9), before);
    let after = stats(&backend, &handle);
    assert_eq!(after.device_recoveries, 1);
    assert_eq!(after.param_loads, 2);
    assert_eq!(provider.loads.load(Ordering::Relaxed), 2);
    let mut generation =
        [crate::registry::BackendOption::new("device_generation", OptionValue::Int(0)).unwrap()];
    backend
        .get_option(
            &mut crate::registry::BackendOptionContext::default(),
            &mut generation,
        )
        .unwrap();
    assert_eq!(generation[0].value(), &OptionValue::Int(2));
    // A new program initialises on the new device too.
    let ctx = BackendInitContext::new().with_parameters(counting_params(&mut Rng::new(4)));
    let blob = encode(&every_op_program()).unwrap();
    let mut second =
        pollster::block_on(backend.init(&ctx, FreeableBuffer::new(blob), &[])).unwrap();
    assert_eq!(run(&backend, &mut second, 9), before);
    backend.destroy(handle);
    backend.destroy(second);
    assert_eq!(backend.live_buffers(), 0);
}

#[test]
fn a_program_that_cannot_move_to_a_new_device_fails_with_invalid_state() {
    let (backend, _provider, mut handle) = setup(5);
    run(&backend, &mut handle, 3);
    assert!(backend.destroy_device());
    let program = handle.downcast_mut::<LoadedProgram>().unwrap();
    // Wait for wgpu to report the loss, as the next execute would find it.
    let _ = program.ctx.device.poll(wgpu::PollType::wait_indefinitely());
    assert!(program.ctx.lost().is_some(), "the device reports its loss");
    let no_device = Err(crate::error::Error::invalid_state("no adapter"));
    let error = pollster::block_on(program.recover(no_device)).unwrap_err();
    assert_eq!(error.code(), crate::error::ErrorCode::InvalidState);
    assert!(
        error.message().contains("was lost") && error.message().contains("no adapter"),
        "{error}"
    );
}

fn string_option(backend: &WebGpuBackend, key: &str) -> OptionValue {
    let mut read = [crate::registry::BackendOption::new(key, "").unwrap()];
    backend
        .get_option(&mut Default::default(), &mut read)
        .unwrap();
    read[0].value().clone()
}

#[test]
fn a_new_power_preference_takes_effect_at_the_first_init_without_live_programs() {
    let (backend, provider, mut first) = setup(6);
    let want = run(&backend, &mut first, 3);
    backend
        .set_option(
            &mut Default::default(),
            &[crate::registry::BackendOption::new("power_preference", "low-power").unwrap()],
        )
        .unwrap();
    let device_generation = |backend: &WebGpuBackend| {
        let mut read = [crate::registry::BackendOption::new("device_generation", 0).unwrap()];
        backend
            .get_option(&mut Default::default(), &mut read)
            .unwrap();
        read[0].value().clone()
    };
    let init = || {
        let ctx = BackendInitContext::new().with_parameters(provider.clone());
        let blob = encode(&every_op_program()).unwrap();
        pollster::block_on(backend.init(&ctx, FreeableBuffer::new(blob), &[])).unwrap()
    };
    // A program is alive on the current device: a second one joins it there.
    let second = init();
    assert_eq!(device_generation(&backend), OptionValue::Int(1));
    assert_eq!(
        string_option(&backend, "device_power_preference"),
        OptionValue::String("none".into())
    );
    backend.destroy(first);
    backend.destroy(second);
    // None alive: the next init acquires a device with the new preference.
    let mut third = init();
    assert_eq!(device_generation(&backend), OptionValue::Int(2));
    assert_eq!(
        string_option(&backend, "device_power_preference"),
        OptionValue::String("low-power".into())
    );
    assert_eq!(
        run(&backend, &mut third, 3),
        want,
        "same results on the new device"
    );
    backend.destroy(third);
    assert_eq!(backend.live_buffers(), 0);
}

/// `y = attention(q, k, v)` of one head over a KV cache of 4 positions (D = 2), one row per
/// execution.
fn state_program() -> crate::program::Program {
    use crate::program::ops::Attention;
    use crate::program::{DType, Dim, ProgramBuilder};
    let mut b = ProgramBuilder::new();
    let f = |n: u64| Dim::Fixed(n);
    let q = b.input("q", DType::F32, vec![f(1), f(1), f(2)]);
    let k = b.input("k", DType::F32, vec![f(1), f(1), f(2)]);
    let v = b.input("v", DType::F32, vec![f(1), f(1), f(2)]);
    let positions = b.input("positions", DType::I32, vec![f(1)]);
    let k_cache = b.state("k_cache", DType::F32, vec![f(4), f(1), f(2)]);
    let v_cache = b.state("v_cache", DType::F32, vec![f(4), f(1), f(2)]);
    let out = b
        .push(|out| Attention {
            q,
            k,
            v,
            k_cache,
            v_cache,
            positions,
            scale: 1.0,
            window: 0,
            softcap: 0.0,
            out,
        })
        .unwrap();
    b.output(out);
    b.finish().unwrap()
}

/// One attention step at `position` with value row `[value, value]` (q = k = 0: equal weights,
/// so the output is the mean of the values stored so far).
fn state_step(
    backend: &WebGpuBackend,
    handle: &mut DelegateHandle,
    position: i32,
    value: f32,
) -> crate::error::Result<Vec<f32>> {
    let tensor =
        |values: Vec<f32>| EValue::Tensor(Tensor::from_f32(vec![1, 1, 2], values).unwrap());
    let mut args = vec![
        tensor(vec![0.0, 0.0]),
        tensor(vec![0.0, 0.0]),
        tensor(vec![value, value]),
        EValue::Tensor(Tensor::new(vec![1], TensorData::Int32(vec![position])).unwrap()),
        EValue::None,
    ];
    pollster::block_on(backend.execute(&BackendExecutionContext::default(), handle, &mut args))?;
    Ok(args[4].as_tensor().unwrap().as_f32().unwrap().to_vec())
}

#[test]
fn state_survives_signals_is_lost_with_the_device_and_reset_brings_it_back() {
    state_across_signals(&[]);
}

/// The same with the attention split (the plan's scratch buffer and a combine dispatch): the
/// scratch follows the plan through the signals and the device loss, and destroy frees it.
#[test]
fn split_attention_state_across_signals_and_its_scratch_is_freed() {
    state_across_signals(&[crate::registry::CompileSpec::new("attention_splits", "4")]);
}

fn state_across_signals(specs: &[crate::registry::CompileSpec]) {
    let backend = new_backend();
    let blob = encode(&state_program()).unwrap();
    let mut handle = pollster::block_on(backend.init(
        &BackendInitContext::new(),
        FreeableBuffer::new(blob),
        specs,
    ))
    .unwrap();
    let state_bytes = stats(&backend, &handle).state_bytes;
    assert_eq!(state_bytes, 2 * 4 * 2 * 4, "two caches of 4 x 1 x 2 f32");
    assert_eq!(
        state_step(&backend, &mut handle, 0, 2.0).unwrap(),
        [2.0, 2.0]
    );
    backend.notify(Signal::Suspend);
    backend.notify(Signal::Resume);
    backend.notify(Signal::LowMemory);
    let after = stats(&backend, &handle);
    assert!(after.states_resident, "LowMemory keeps state by default");
    assert_eq!(after.state_bytes, state_bytes);
    // Mean of 2 and 4: the cache row from before the signals is still there.
    assert_eq!(
        state_step(&backend, &mut handle, 1, 4.0).unwrap(),
        [3.0, 3.0]
    );

    assert!(backend.destroy_device());
    let error = state_step(&backend, &mut handle, 2, 6.0).unwrap_err();
    assert_eq!(
        error.code(),
        crate::error::ErrorCode::InvalidState,
        "{error}"
    );
    assert!(error.message().contains("dropped"), "{error}");
    assert!(!stats(&backend, &handle).states_resident);
    backend.reset_state(&mut handle).unwrap();
    let after = stats(&backend, &handle);
    assert!(after.states_resident);
    assert_eq!(after.device_recoveries, 1);
    assert_eq!(
        state_step(&backend, &mut handle, 0, 8.0).unwrap(),
        [8.0, 8.0]
    );
    backend.destroy(handle);
    assert_eq!(
        backend.live_buffers(),
        0,
        "destroy frees the state buffers too"
    );
}
