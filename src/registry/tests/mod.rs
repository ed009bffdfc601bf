//! Registry semantics, case by case, against `docs/semantics.md` (the table here, the delegate
//! loader in `delegate.rs`).
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

mod delegate;
