//! What a backend is told about the call it serves (upstream's `BackendInitContext`,
//! `BackendExecutionContext` and `BackendOptionContext`).
//!
//! Upstream's contexts also carry allocators and an event tracer; here memory is owned by Rust
//! values and profiling is a backend option, so those have no counterpart. Upstream's named data
//! map is the parameter provider here: programs reference weights by (scope, key) and the
//! backend asks the provider in the init context for them.

use crate::error::{Error, Result};
use crate::params::SharedProvider;
use crate::registry::named_data::NamedDataMap;
use crate::registry::options::{BackendOption, LoadBackendOptionsMap};

/// What `init` knows besides the blob and compile specs.
#[derive(Clone, Default)]
pub struct BackendInitContext {
    method_name: Option<String>,
    runtime_specs: Vec<BackendOption>,
    parameters: Option<SharedProvider>,
    named_data_scope: Option<String>,
}

impl std::fmt::Debug for BackendInitContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendInitContext")
            .field("method_name", &self.method_name)
            .field("runtime_specs", &self.runtime_specs)
            .field("parameters", &self.parameters.is_some())
            .field("named_data_scope", &self.named_data_scope)
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
            named_data_scope: None,
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

    /// Names the provider scope that [`BackendInitContext::get_named_data_map`] reads.
    pub fn with_named_data_scope(mut self, scope: impl Into<String>) -> Self {
        self.named_data_scope = Some(scope.into());
        self
    }

    /// The named-data scope, if the caller named one.
    pub fn named_data_scope(&self) -> Option<&str> {
        self.named_data_scope.as_deref()
    }

    /// The named data map of the named-data scope (upstream's `get_named_data_map`, which
    /// returns null when the method has none): `Ok(None)` when no scope was named.
    ///
    /// # Errors
    /// `NotFound` when a scope was named but the context has no provider or the provider does
    /// not serve it.
    pub fn get_named_data_map(&self) -> Result<Option<NamedDataMap>> {
        self.named_data_scope
            .as_deref()
            .map(|scope| self.named_data_map(scope))
            .transpose()
    }

    /// The named data map of any `scope` of the context's provider (not in upstream).
    ///
    /// # Errors
    /// `NotFound` when the context has no provider or the provider does not serve `scope`.
    pub fn named_data_map(&self, scope: &str) -> Result<NamedDataMap> {
        let provider = self.parameters.clone().ok_or_else(|| {
            Error::not_found(format!(
                "named data scope {scope:?}: the init context has no parameter provider"
            ))
        })?;
        NamedDataMap::new(provider, scope)
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
