//! What a backend is told about the call it serves (upstream's `BackendInitContext`,
//! `BackendExecutionContext` and `BackendOptionContext`).
//!
//! Upstream's contexts also carry allocators and an event tracer; here memory is owned by Rust
//! values and profiling is a backend option, so those have no counterpart. Upstream's named data
//! map is the parameter provider here: programs reference weights by (scope, key) and the
//! backend asks the provider in the init context for them.

use crate::params::SharedProvider;
use crate::registry::options::{BackendOption, LoadBackendOptionsMap};

/// What `init` knows besides the blob and compile specs.
#[derive(Clone, Default)]
pub struct BackendInitContext {
    method_name: Option<String>,
    runtime_specs: Vec<BackendOption>,
    parameters: Option<SharedProvider>,
}

impl std::fmt::Debug for BackendInitContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendInitContext")
            .field("method_name", &self.method_name)
            .field("runtime_specs", &self.runtime_specs)
            .field("parameters", &self.parameters.is_some())
            .finish()
    }
}

impl BackendInitContext {
    /// A context with no method name and no runtime specs.
    pub fn new() -> Self {
        Self::default()
    }

    /// A context whose runtime specs are `backend_id`'s entry in `load_options` (empty when it
    /// has none), as upstream's method loader builds it.
    pub fn for_backend(
        backend_id: &str,
        method_name: Option<&str>,
        load_options: &LoadBackendOptionsMap,
    ) -> Self {
        Self {
            method_name: method_name.map(str::to_owned),
            runtime_specs: load_options.get_options(backend_id).to_vec(),
            parameters: None,
        }
    }

    /// Sets the method name.
    pub fn with_method_name(mut self, method_name: impl Into<String>) -> Self {
        self.method_name = Some(method_name.into());
        self
    }

    /// Sets the runtime specs.
    pub fn with_runtime_specs(mut self, runtime_specs: Vec<BackendOption>) -> Self {
        self.runtime_specs = runtime_specs;
        self
    }

    /// Sets the parameter provider the program's weights come from.
    pub fn with_parameters(mut self, parameters: SharedProvider) -> Self {
        self.parameters = Some(parameters);
        self
    }

    /// The name of the method being loaded, if known.
    pub fn method_name(&self) -> Option<&str> {
        self.method_name.as_deref()
    }

    /// The parameter provider, if the caller gave one (upstream's named data map).
    pub fn parameters(&self) -> Option<&SharedProvider> {
        self.parameters.as_ref()
    }

    /// Load-time options the user gave this backend for this program.
    pub fn runtime_specs(&self) -> &[BackendOption] {
        &self.runtime_specs
    }
}

/// What `execute` knows besides the handle and arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendExecutionContext {
    method_name: Option<String>,
}

impl BackendExecutionContext {
    /// A context for the method `method_name` (if known).
    pub fn new(method_name: Option<&str>) -> Self {
        Self {
            method_name: method_name.map(str::to_owned),
        }
    }

    /// The name of the method being executed, if known.
    pub fn method_name(&self) -> Option<&str> {
        self.method_name.as_deref()
    }
}

/// Passed to `set_option` / `get_option`; empty, as upstream's is today.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackendOptionContext {}
