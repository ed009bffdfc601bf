//! Registry semantics, case by case, against SEMANTICS.md.
//!
//! Table behaviour is tested on fresh [`BackendRegistry`] values. The process-wide table is shared
//! by every test in this binary and has no unregister, so tests that touch it use unique names and
//! together register far fewer than 16 backends.

use super::*;
use crate::error::{Error, ErrorCode, Result};
use crate::evalue::{EValue, Tensor};
use pollster::block_on;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A backend that adds a constant (from the blob's first byte) to a float tensor, and counts
/// every call so tests can check what the loader did.
#[derive(Default)]
struct CountingBackend {
    unavailable: bool,
    fail_init: bool,
    inits: AtomicUsize,
    executes: AtomicUsize,
    destroyed: Mutex<Vec<u8>>,
    last_runtime_specs: Mutex<Vec<BackendOption>>,
    option_error: Option<ErrorCode>,
    verbose: AtomicBool,
}

struct AddState {
    addend: u8,
}

impl BackendInterface for CountingBackend {
    fn is_available(&self) -> bool {
        !self.unavailable
    }

    fn init<'a>(
        &'a self,
        context: &'a BackendInitContext,
        mut processed: FreeableBuffer,
        _compile_specs: &'a [CompileSpec],
    ) -> LocalBoxFuture<'a, Result<DelegateHandle>> {
        Box::pin(async move {
            self.inits.fetch_add(1, Ordering::SeqCst);
            *self.last_runtime_specs.lock().unwrap() = context.runtime_specs().to_vec();
            if self.fail_init {
                return Err(Error::new(
                    ErrorCode::DelegateInvalidCompatibility,
                    "test blob",
                ));
            }
            let addend = *processed
                .data()
                .first()
                .ok_or_else(|| Error::new(ErrorCode::InvalidProgram, "empty blob"))?;
            processed.free();
            Ok(DelegateHandle::new(AddState { addend }))
        })
    }

    fn execute<'a>(
        &'a self,
        _context: &'a BackendExecutionContext,
        handle: &'a mut DelegateHandle,
        args: &'a mut [EValue],
    ) -> LocalBoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.executes.fetch_add(1, Ordering::SeqCst);
            let addend = handle
                .downcast_ref::<AddState>()
                .ok_or_else(|| Error::new(ErrorCode::DelegateInvalidHandle, "foreign handle"))?
                .addend;
            let [input, output] = args else {
                return Err(Error::invalid_argument("expected [input, output]"));
            };
            let values = input
                .as_tensor()
                .and_then(Tensor::as_f32)
                .ok_or_else(|| Error::invalid_argument("input must be float32"))?;
            let result = values.iter().map(|v| v + f32::from(addend)).collect();
            *output = EValue::Tensor(Tensor::from_f32(
                input.as_tensor().unwrap().shape().to_vec(),
                result,
            )?);
            Ok(())
        })
    }

    fn set_option(&self, _: &mut BackendOptionContext, options: &[BackendOption]) -> Result<()> {
        if let Some(code) = self.option_error {
            return Err(Error::new(code, "backend refuses options"));
        }
        for option in options {
            if option.key() == "verbose" {
                match option.value() {
                    OptionValue::Bool(flag) => self.verbose.store(*flag, Ordering::SeqCst),
                    _ => return Err(Error::invalid_argument("verbose is a bool")),
                }
            }
        }
        Ok(())
    }

    fn get_option(
        &self,
        _: &mut BackendOptionContext,
        options: &mut [BackendOption],
    ) -> Result<()> {
        if let Some(code) = self.option_error {
            return Err(Error::new(code, "backend refuses options"));
        }
        for option in options {
            match option.key() {
                "verbose" => option.set_value(self.verbose.load(Ordering::SeqCst))?,
                "inits" => option.set_value(self.inits.load(Ordering::SeqCst) as i64)?,
                "name" => option.set_value("counting")?,
                _ => {}
            }
        }
        Ok(())
    }

    fn destroy(&self, handle: DelegateHandle) {
        let addend = handle
            .downcast_ref::<AddState>()
            .map_or(u8::MAX, |s| s.addend);
        self.destroyed.lock().unwrap().push(addend);
    }
}

fn shared(backend: CountingBackend) -> Arc<CountingBackend> {
    Arc::new(backend)
}

fn named(name: &str, backend: &Arc<CountingBackend>) -> Backend {
    Backend::new(name, Arc::clone(backend) as SharedBackend)
}

fn code_of<T: std::fmt::Debug>(result: Result<T>) -> ErrorCode {
    result.unwrap_err().code()
}

#[test]
fn registers_in_order_and_finds_by_name() {
    let mut registry = BackendRegistry::new();
    let backend = shared(CountingBackend::default());
    registry
        .register_backend(named("webgpu", &backend))
        .unwrap();
    registry.register_backend(named("cpu", &backend)).unwrap();
    assert_eq!(registry.num_registered_backends(), 2);
    assert_eq!(registry.backend_name(0).unwrap(), "webgpu");
    assert_eq!(registry.backend_name(1).unwrap(), "cpu");
    assert_eq!(registry.names(), ["webgpu", "cpu"]);
    assert!(registry.get_backend_class("cpu").is_some());
    assert!(
        registry.get_backend_class("CPU").is_none(),
        "lookup is exact, like strcmp"
    );
    assert!(registry.get_backend_class("").is_none());
}

#[test]
fn backend_name_out_of_range_is_invalid_argument() {
    let mut registry = BackendRegistry::new();
    assert_eq!(
        code_of(registry.backend_name(0)),
        ErrorCode::InvalidArgument
    );
    registry
        .register_backend(named("a", &shared(CountingBackend::default())))
        .unwrap();
    assert_eq!(
        code_of(registry.backend_name(1)),
        ErrorCode::InvalidArgument
    );
    assert_eq!(
        code_of(registry.backend_name(usize::MAX)),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn duplicate_name_is_invalid_argument_and_changes_nothing() {
    let mut registry = BackendRegistry::new();
    let first = shared(CountingBackend::default());
    let second = shared(CountingBackend::default());
    registry.register_backend(named("dup", &first)).unwrap();
    assert_eq!(
        code_of(registry.register_backend(named("dup", &second))),
        ErrorCode::InvalidArgument
    );
    assert_eq!(registry.num_registered_backends(), 1);
    let found = registry.get_backend_class("dup").unwrap();
    let first_dyn: SharedBackend = first;
    assert!(
        Arc::ptr_eq(&found, &first_dyn),
        "the first registration stays"
    );
}

#[test]
fn full_table_is_internal_checked_before_duplicates() {
    let mut registry = BackendRegistry::new();
    let backend = shared(CountingBackend::default());
    for index in 0..MAX_REGISTERED_BACKENDS {
        registry
            .register_backend(named(&format!("b{index}"), &backend))
            .unwrap();
    }
    assert_eq!(registry.num_registered_backends(), 16);
    assert_eq!(
        code_of(registry.register_backend(named("new", &backend))),
        ErrorCode::Internal
    );
    // A duplicate name in a full table is still Internal: fullness is checked first.
    assert_eq!(
        code_of(registry.register_backend(named("b0", &backend))),
        ErrorCode::Internal
    );
    assert_eq!(registry.num_registered_backends(), 16);
    assert_eq!(registry.backend_name(15).unwrap(), "b15");
}

#[test]
fn options_by_name_reach_the_backend_or_are_not_found() {
    let mut registry = BackendRegistry::new();
    let backend = shared(CountingBackend::default());
    registry.register_backend(named("opt", &backend)).unwrap();

    let verbose = [BackendOption::new("verbose", true).unwrap()];
    assert_eq!(
        code_of(registry.set_option("missing", &verbose)),
        ErrorCode::NotFound
    );
    registry.set_option("opt", &verbose).unwrap();

    let mut wanted = [
        BackendOption::new("verbose", false).unwrap(),
        BackendOption::new("inits", 0).unwrap(),
        BackendOption::new("name", "").unwrap(),
        BackendOption::new("unknown", 5).unwrap(),
    ];
    assert_eq!(
        code_of(registry.get_option("missing", &mut wanted)),
        ErrorCode::NotFound
    );
    registry.get_option("opt", &mut wanted).unwrap();
    assert_eq!(wanted[0].value(), &OptionValue::Bool(true));
    assert_eq!(wanted[1].value(), &OptionValue::Int(0));
    assert_eq!(wanted[2].value(), &OptionValue::String("counting".into()));
    assert_eq!(
        wanted[3].value(),
        &OptionValue::Int(5),
        "untouched by the backend"
    );
}

#[test]
fn backend_option_errors_pass_through_unchanged() {
    let mut registry = BackendRegistry::new();
    let backend = shared(CountingBackend {
        option_error: Some(ErrorCode::InvalidState),
        ..CountingBackend::default()
    });
    registry
        .register_backend(named("strict", &backend))
        .unwrap();
    let mut options = [BackendOption::new("k", 1).unwrap()];
    let set = registry.set_option("strict", &options).unwrap_err();
    assert_eq!(set.code(), ErrorCode::InvalidState);
    assert_eq!(set.message(), "backend refuses options");
    assert_eq!(
        code_of(registry.get_option("strict", &mut options)),
        ErrorCode::InvalidState
    );
}

#[test]
fn default_option_methods_accept_everything() {
    struct Minimal;
    impl BackendInterface for Minimal {
        fn is_available(&self) -> bool {
            true
        }
        fn init<'a>(
            &'a self,
            _: &'a BackendInitContext,
            _: FreeableBuffer,
            _: &'a [CompileSpec],
        ) -> LocalBoxFuture<'a, Result<DelegateHandle>> {
            Box::pin(async { Ok(DelegateHandle::new(())) })
        }
        fn execute<'a>(
            &'a self,
            _: &'a BackendExecutionContext,
            _: &'a mut DelegateHandle,
            _: &'a mut [EValue],
        ) -> LocalBoxFuture<'a, Result<()>> {
            Box::pin(async { Ok(()) })
        }
    }
    let mut registry = BackendRegistry::new();
    registry
        .register_backend(Backend::new("min", Arc::new(Minimal)))
        .unwrap();
    let mut options = [BackendOption::new("x", "y").unwrap()];
    registry.set_option("min", &options).unwrap();
    registry.get_option("min", &mut options).unwrap();
    assert_eq!(options[0].value(), &OptionValue::String("y".into()));
}

#[test]
fn global_registry_functions_follow_the_table() {
    let backend = shared(CountingBackend::default());
    let before = get_num_registered_backends();
    register_backend(named("global-registry-test", &backend)).unwrap();
    assert_eq!(
        code_of(register_backend(named("global-registry-test", &backend))),
        ErrorCode::InvalidArgument
    );
    assert!(get_backend_class("global-registry-test").is_some());
    assert!(get_num_registered_backends() > before);
    let names = registered_backend_names();
    let index = names
        .iter()
        .position(|n| n == "global-registry-test")
        .unwrap();
    assert_eq!(get_backend_name(index).unwrap(), "global-registry-test");
    assert_eq!(
        code_of(get_backend_name(MAX_REGISTERED_BACKENDS)),
        ErrorCode::InvalidArgument
    );
    set_option(
        "global-registry-test",
        &[BackendOption::new("verbose", true).unwrap()],
    )
    .unwrap();
    let mut read = [BackendOption::new("verbose", false).unwrap()];
    get_option("global-registry-test", &mut read).unwrap();
    assert_eq!(read[0].value(), &OptionValue::Bool(true));
    assert_eq!(
        code_of(set_option("global-nobody", &[])),
        ErrorCode::NotFound
    );
    assert_eq!(
        code_of(get_option("global-nobody", &mut read)),
        ErrorCode::NotFound
    );
}

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
