//! The process-wide registry, as upstream's free functions.
//!
//! Natively the table sits behind a `Mutex` (backends are `Send + Sync` there). In the browser,
//! wasm32 without threads has exactly one thread, so a thread-local table *is* the process-wide
//! one, and backends written in JavaScript (which are not `Send`) can be stored in it.
//!
//! The lock is never held while a backend runs: lookups clone the backend's `Arc` and release the
//! table first. A JavaScript backend may therefore call back into the registry from any method.

use crate::error::Result;
use crate::lifecycle::{Released, Signal};
use crate::registry::options::BackendOption;
use crate::registry::table::{
    Backend, BackendRegistry, SharedBackend, get_option_on, set_option_on,
};

#[cfg(native)]
fn with_registry<R>(f: impl FnOnce(&mut BackendRegistry) -> R) -> R {
    use std::sync::Mutex;
    static GLOBAL: Mutex<BackendRegistry> = Mutex::new(BackendRegistry::new());
    // A panic while the lock was held cannot leave the table half-updated (every mutation is
    // one `Vec::push`), so a poisoned lock is safe to keep using.
    let mut table = GLOBAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    f(&mut table)
}

#[cfg(web)]
fn with_registry<R>(f: impl FnOnce(&mut BackendRegistry) -> R) -> R {
    use std::cell::RefCell;
    thread_local! {
        static GLOBAL: RefCell<BackendRegistry> = const { RefCell::new(BackendRegistry::new()) };
    }
    GLOBAL.with(|table| f(&mut table.borrow_mut()))
}

/// Registers `backend` in the process-wide registry (upstream's `register_backend`).
///
/// # Errors
/// `Internal` when 16 backends are registered already; `InvalidArgument` when the name is taken.
pub fn register_backend(backend: Backend) -> Result<()> {
    with_registry(|table| table.register_backend(backend))
}

/// Registers `backend` unless its name is taken; `Ok(false)` when it was. The check and the
/// registration happen under one lock, so two threads racing to register the same default
/// backend both succeed (one registers, the other sees it). Not in upstream.
///
/// # Errors
/// `Internal` when the name is free but 16 backends are registered already.
pub fn register_backend_if_absent(backend: Backend) -> Result<bool> {
    with_registry(|table| {
        if table.get_backend_class(backend.name()).is_some() {
            return Ok(false);
        }
        table.register_backend(backend).map(|()| true)
    })
}

/// The backend registered under `name`, if any (upstream's `get_backend_class`).
pub fn get_backend_class(name: &str) -> Option<SharedBackend> {
    with_registry(|table| table.get_backend_class(name))
}

/// How many backends are registered (upstream's `get_num_registered_backends`).
pub fn get_num_registered_backends() -> usize {
    with_registry(|table| table.num_registered_backends())
}

/// The name of the `index`-th registered backend (upstream's `get_backend_name`).
///
/// # Errors
/// `InvalidArgument` when `index` is not below the count.
pub fn get_backend_name(index: usize) -> Result<String> {
    with_registry(|table| table.backend_name(index).map(str::to_owned))
}

/// Every registered name, in registration order.
pub fn registered_backend_names() -> Vec<String> {
    with_registry(|table| table.names())
}

/// Passes `options` to the backend named `name` (upstream's `set_option`).
///
/// # Errors
/// `NotFound` for an unknown name; otherwise the backend's own error, unchanged.
pub fn set_option(name: &str, options: &[BackendOption]) -> Result<()> {
    set_option_on(get_backend_class(name), name, options)
}

/// Asks the backend named `name` to fill in `options` (upstream's `get_option`).
///
/// # Errors
/// `NotFound` for an unknown name; otherwise the backend's own error, unchanged.
pub fn get_option(name: &str, options: &mut [BackendOption]) -> Result<()> {
    get_option_on(get_backend_class(name), name, options)
}

/// Sends `signal` to every registered backend (see `BackendInterface::notify`), in
/// registration order, and sums what they released. Not in upstream.
pub fn notify_backends(signal: Signal) -> Released {
    let backends: Vec<SharedBackend> = with_registry(|table| table.backends());
    let mut total = Released::default();
    for backend in backends {
        total.add(backend.notify(signal));
    }
    total
}
