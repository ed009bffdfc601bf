//! The method loader's rules: init / execute / destroy, failures, runtime specs, partial loads.

use super::*;
fn input_output(values: Vec<f32>) -> Vec<EValue> {
    let shape = vec![values.len()];
    vec![
        EValue::Tensor(Tensor::from_f32(shape, values).unwrap()),
        EValue::None,
    ]
}

#[test]
fn delegate_lifecycle_init_execute_many_destroy_once() {
    let backend = shared(CountingBackend::default());
    let context = BackendInitContext::new().with_method_name("forward");
    let mut delegate = block_on(LoadedDelegate::init_with_backend(
        "counting",
        backend.clone(),
        FreeableBuffer::new(vec![3]),
        &[],
        &context,
    ))
    .unwrap();
    for round in 0..5 {
        let mut args = input_output(vec![1.0, round as f32]);
        block_on(delegate.execute(&mut args)).unwrap();
        assert_eq!(
            args[1].as_tensor().unwrap().as_f32().unwrap(),
            &[4.0, round as f32 + 3.0]
        );
    }
    assert_eq!(backend.executes.load(Ordering::SeqCst), 5);
    assert!(backend.destroyed.lock().unwrap().is_empty());
    drop(delegate);
    assert_eq!(
        *backend.destroyed.lock().unwrap(),
        [3],
        "destroy got init's handle, once"
    );
    assert_eq!(backend.inits.load(Ordering::SeqCst), 1);
}

#[test]
fn execute_errors_come_from_the_backend() {
    let backend = shared(CountingBackend::default());
    let mut delegate = block_on(LoadedDelegate::init_with_backend(
        "counting",
        backend.clone(),
        FreeableBuffer::new(vec![1]),
        &[],
        &BackendInitContext::new(),
    ))
    .unwrap();
    let mut wrong = vec![EValue::Int(1), EValue::None];
    assert_eq!(
        code_of(block_on(delegate.execute(&mut wrong))),
        ErrorCode::InvalidArgument
    );
    let mut too_few = vec![EValue::None];
    assert_eq!(
        code_of(block_on(delegate.execute(&mut too_few))),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn failed_init_never_calls_destroy() {
    let backend = shared(CountingBackend {
        fail_init: true,
        ..CountingBackend::default()
    });
    let error = block_on(LoadedDelegate::init_with_backend(
        "failing",
        backend.clone(),
        FreeableBuffer::new(vec![1]),
        &[],
        &BackendInitContext::new(),
    ))
    .unwrap_err();
    assert_eq!(
        error.code(),
        ErrorCode::DelegateInvalidCompatibility,
        "init's own code"
    );
    assert_eq!(backend.inits.load(Ordering::SeqCst), 1);
    assert!(backend.destroyed.lock().unwrap().is_empty());
}

#[test]
fn unavailable_or_unknown_backend_is_not_found_and_init_is_not_called() {
    let backend = shared(CountingBackend {
        unavailable: true,
        ..CountingBackend::default()
    });
    let error = block_on(LoadedDelegate::init_with_backend(
        "offline",
        backend.clone(),
        FreeableBuffer::new(vec![1]),
        &[],
        &BackendInitContext::new(),
    ))
    .unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotFound);
    assert_eq!(backend.inits.load(Ordering::SeqCst), 0);
    let unknown = block_on(LoadedDelegate::init(
        "delegate-test-nobody",
        FreeableBuffer::new(vec![1]),
        &[],
        &BackendInitContext::new(),
    ))
    .unwrap_err();
    assert_eq!(unknown.code(), ErrorCode::NotFound);
}

#[test]
fn runtime_specs_reach_init_through_the_load_options_map() {
    let backend = shared(CountingBackend::default());
    register_backend(named("delegate-test-specs", &backend)).unwrap();
    let mut load_options = LoadBackendOptionsMap::new();
    let specs = vec![BackendOption::new("precision", "f32").unwrap()];
    load_options
        .set_options("delegate-test-specs", &specs)
        .unwrap();
    load_options
        .set_options("someone-else", &[BackendOption::new("x", 1).unwrap()])
        .unwrap();
    let context =
        BackendInitContext::for_backend("delegate-test-specs", Some("forward"), &load_options);
    let delegate = block_on(LoadedDelegate::init(
        "delegate-test-specs",
        FreeableBuffer::new(vec![2]),
        &[],
        &context,
    ))
    .unwrap();
    assert_eq!(*backend.last_runtime_specs.lock().unwrap(), specs);
    assert_eq!(delegate.backend_id(), "delegate-test-specs");
}

#[test]
fn a_method_gives_each_delegate_its_own_backends_runtime_specs() {
    let first = shared(CountingBackend::default());
    let second = shared(CountingBackend::default());
    register_backend(named("method-specs-a", &first)).unwrap();
    register_backend(named("method-specs-b", &second)).unwrap();
    let a_specs = vec![BackendOption::new("threads", 2).unwrap()];
    let mut load_options = LoadBackendOptionsMap::new();
    load_options
        .set_options("method-specs-a", &a_specs)
        .unwrap();
    let entry = |id: &str| DelegateEntry {
        backend_id: Some(id.to_owned()),
        processed: FreeableBuffer::new(vec![1]),
        compile_specs: Vec::new(),
    };
    let method = block_on(MethodDelegates::load_with_options(
        vec![entry("method-specs-a"), entry("method-specs-b")],
        Some("forward"),
        &load_options,
        None,
    ))
    .unwrap();
    assert_eq!(method.len(), 2);
    assert_eq!(*first.last_runtime_specs.lock().unwrap(), a_specs);
    assert!(
        second.last_runtime_specs.lock().unwrap().is_empty(),
        "a backend without an entry gets no runtime specs"
    );
}

#[test]
fn method_load_failure_destroys_only_initialised_delegates() {
    let good = shared(CountingBackend::default());
    let bad = shared(CountingBackend {
        fail_init: true,
        ..CountingBackend::default()
    });
    register_backend(named("method-test-good", &good)).unwrap();
    register_backend(named("method-test-bad", &bad)).unwrap();
    let entry = |id: Option<&str>, byte: u8| DelegateEntry {
        backend_id: id.map(str::to_owned),
        processed: FreeableBuffer::new(vec![byte]),
        compile_specs: vec![],
    };
    let context = BackendInitContext::new();

    let error = block_on(MethodDelegates::load(
        vec![
            entry(Some("method-test-good"), 1),
            entry(Some("method-test-good"), 2),
            entry(Some("method-test-bad"), 3),
            entry(Some("method-test-good"), 4),
        ],
        &context,
    ))
    .unwrap_err();
    assert_eq!(error.code(), ErrorCode::DelegateInvalidCompatibility);
    assert_eq!(
        good.inits.load(Ordering::SeqCst),
        2,
        "loading stops at the failure"
    );
    let mut destroyed = good.destroyed.lock().unwrap().clone();
    destroyed.sort_unstable();
    assert_eq!(destroyed, [1, 2]);
    assert!(bad.destroyed.lock().unwrap().is_empty());

    let missing_id = block_on(MethodDelegates::load(
        vec![entry(Some("method-test-good"), 5), entry(None, 6)],
        &context,
    ))
    .unwrap_err();
    assert_eq!(missing_id.code(), ErrorCode::InvalidProgram);
    assert!(good.destroyed.lock().unwrap().contains(&5));

    let mut method = block_on(MethodDelegates::load(
        vec![entry(Some("method-test-good"), 7)],
        &context,
    ))
    .unwrap();
    assert_eq!(method.len(), 1);
    let mut args = input_output(vec![1.0]);
    block_on(method.execute(0, &mut args)).unwrap();
    assert_eq!(args[1].as_tensor().unwrap().as_f32().unwrap(), &[8.0]);
    assert_eq!(
        code_of(block_on(method.execute(1, &mut args))),
        ErrorCode::Internal
    );
}
