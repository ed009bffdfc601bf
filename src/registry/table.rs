//! The backend table: upstream's 16-slot, registration-ordered, append-only registry.
//!
//! [`BackendRegistry`] is a value, so its semantics are tested on fresh instances; the process-wide
//! table behind [`crate::registry::register_backend`] and friends is one of these.

use crate::error::{Error, ErrorCode, Result};
use crate::registry::context::BackendOptionContext;
use crate::registry::interface::BackendInterface;
use crate::registry::options::BackendOption;
use std::sync::Arc;

/// Most backends the registry holds (upstream's `kMaxRegisteredBackends`).
pub const MAX_REGISTERED_BACKENDS: usize = 16;

/// A backend instance shared between the registry and the delegates it initialised.
pub type SharedBackend = Arc<dyn BackendInterface>;

/// A named backend instance (upstream's `Backend`).
#[derive(Clone)]
pub struct Backend {
    name: String,
    backend: SharedBackend,
}

impl Backend {
    /// Pairs a name with an instance.
    pub fn new(name: impl Into<String>, backend: SharedBackend) -> Self {
        Self {
            name: name.into(),
            backend,
        }
    }

    /// The name programs use to ask for this backend.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance.
    pub fn backend(&self) -> &SharedBackend {
        &self.backend
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// An append-only table of at most [`MAX_REGISTERED_BACKENDS`] named backends.
#[derive(Debug, Default)]
pub struct BackendRegistry {
    backends: Vec<Backend>,
}

impl BackendRegistry {
    /// An empty registry.
    pub const fn new() -> Self {
        Self {
            backends: Vec::new(),
        }
    }

    /// Adds `backend` after the ones already registered.
    ///
    /// # Errors
    /// `Internal` when the table is full (checked first, as upstream does, so a duplicate name in
    /// a full table is still `Internal`); `InvalidArgument` when the name is taken.
    pub fn register_backend(&mut self, backend: Backend) -> Result<()> {
        if self.backends.len() >= MAX_REGISTERED_BACKENDS {
            return Err(Error::new(
                ErrorCode::Internal,
                format!(
                    "backend registry is full ({MAX_REGISTERED_BACKENDS} backends); cannot register {:?}",
                    backend.name
                ),
            ));
        }
        if self.find(&backend.name).is_some() {
            return Err(Error::invalid_argument(format!(
                "a backend named {:?} is already registered",
                backend.name
            )));
        }
        self.backends.push(backend);
        Ok(())
    }

    /// The backend registered under `name`, if any (upstream's `get_backend_class`).
    pub fn get_backend_class(&self, name: &str) -> Option<SharedBackend> {
        self.find(name).map(|entry| Arc::clone(&entry.backend))
    }

    /// How many backends are registered.
    pub fn num_registered_backends(&self) -> usize {
        self.backends.len()
    }

    /// The name of the backend registered `index`-th (from 0).
    ///
    /// # Errors
    /// `InvalidArgument` when `index` is not below the count.
    pub fn backend_name(&self, index: usize) -> Result<&str> {
        self.backends.get(index).map(Backend::name).ok_or_else(|| {
            Error::invalid_argument(format!(
                "backend index {index} is out of range ({} registered)",
                self.backends.len()
            ))
        })
    }

    /// Every registered name, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.backends.iter().map(|b| b.name.clone()).collect()
    }

    /// Passes `options` to the backend named `name`.
    ///
    /// # Errors
    /// `NotFound` for an unknown name; otherwise the backend's own error, unchanged.
    pub fn set_option(&self, name: &str, options: &[BackendOption]) -> Result<()> {
        set_option_on(self.get_backend_class(name), name, options)
    }

    /// Asks the backend named `name` to fill in `options`.
    ///
    /// # Errors
    /// `NotFound` for an unknown name; otherwise the backend's own error, unchanged.
    pub fn get_option(&self, name: &str, options: &mut [BackendOption]) -> Result<()> {
        get_option_on(self.get_backend_class(name), name, options)
    }

    /// Every registered backend, in registration order.
    pub fn backends(&self) -> Vec<SharedBackend> {
        self.backends.iter().map(|e| e.backend.clone()).collect()
    }

    fn find(&self, name: &str) -> Option<&Backend> {
        self.backends.iter().find(|entry| entry.name == name)
    }
}

/// `set_option` on an already looked-up backend; shared by the table and the global functions,
/// which must not hold the table's lock while a backend runs.
pub(crate) fn set_option_on(
    backend: Option<SharedBackend>,
    name: &str,
    options: &[BackendOption],
) -> Result<()> {
    let backend = backend.ok_or_else(|| unknown_backend(name))?;
    backend.set_option(&mut BackendOptionContext::default(), options)
}

/// `get_option` on an already looked-up backend; see [`set_option_on`].
pub(crate) fn get_option_on(
    backend: Option<SharedBackend>,
    name: &str,
    options: &mut [BackendOption],
) -> Result<()> {
    let backend = backend.ok_or_else(|| unknown_backend(name))?;
    backend.get_option(&mut BackendOptionContext::default(), options)
}

/// The `NotFound` error for a name nobody registered.
pub(crate) fn unknown_backend(name: &str) -> Error {
    Error::not_found(format!("no backend named {name:?} is registered"))
}
