//! Loading and running delegates with upstream's method-loader rules (`method.cpp`,
//! `BackendDelegate`).
//!
//! - A delegate entry without a backend id is `InvalidProgram`.
//! - An unregistered backend is `NotFound`; so is one whose `is_available()` is false.
//! - A failed `init` frees the processed blob (it was moved into `init`) and never calls `destroy`.
//! - `destroy` runs exactly once for every successful `init`, when the [`LoadedDelegate`] drops.
//! - A method that fails half-way through loading destroys only the delegates that initialised.
//! - Calling a delegate index the method does not have is `Internal`.
//! - Each delegate's runtime specs are its own backend's entry in the load options
//!   ([`MethodDelegates::load_with_options`]).

use crate::error::{Error, ErrorCode, Result};
use crate::evalue::EValue;
use crate::params::SharedProvider;
use crate::registry::context::{BackendExecutionContext, BackendInitContext};
use crate::registry::freeable::FreeableBuffer;
use crate::registry::global::get_backend_class;
use crate::registry::interface::{CompileSpec, DelegateHandle};
use crate::registry::options::LoadBackendOptionsMap;
use crate::registry::table::{SharedBackend, unknown_backend};
use std::sync::Arc;

/// A delegate whose backend `init` succeeded; destroys its handle when dropped.
pub struct LoadedDelegate {
    backend_id: String,
    backend: SharedBackend,
    method_name: Option<String>,
    // `Some` from init until drop.
    handle: Option<DelegateHandle>,
}

impl LoadedDelegate {
    /// Looks `backend_id` up in the process-wide registry and initialises it with `processed`.
    ///
    /// # Errors
    /// `NotFound` when no such backend is registered or it is not available; otherwise the
    /// backend's `init` error, unchanged.
    pub async fn init(
        backend_id: &str,
        processed: FreeableBuffer,
        compile_specs: &[CompileSpec],
        context: &BackendInitContext,
    ) -> Result<Self> {
        let backend = get_backend_class(backend_id).ok_or_else(|| unknown_backend(backend_id))?;
        Self::init_with_backend(backend_id, backend, processed, compile_specs, context).await
    }

    /// Initialises a backend instance the caller already holds (see [`LoadedDelegate::init`]).
    ///
    /// # Errors
    /// `NotFound` when the backend is not available; otherwise its `init` error, unchanged.
    pub async fn init_with_backend(
        backend_id: &str,
        backend: SharedBackend,
        processed: FreeableBuffer,
        compile_specs: &[CompileSpec],
        context: &BackendInitContext,
    ) -> Result<Self> {
        if !backend.is_available() {
            return Err(Error::not_found(format!(
                "backend {backend_id:?} is registered but not available"
            )));
        }
        let handle = backend.init(context, processed, compile_specs).await?;
        Ok(Self {
            backend_id: backend_id.to_owned(),
            backend,
            method_name: context.method_name().map(str::to_owned),
            handle: Some(handle),
        })
    }

    /// Runs the delegate on `args` (inputs, then outputs that the backend fills in).
    ///
    /// # Errors
    /// The backend's `execute` error, unchanged.
    pub async fn execute(&mut self, args: &mut [EValue]) -> Result<()> {
        let context = BackendExecutionContext::new(self.method_name.as_deref());
        let handle = self.handle.as_mut().ok_or_else(|| {
            Error::new(ErrorCode::DelegateInvalidHandle, "delegate handle is gone")
        })?;
        self.backend.execute(&context, handle, args).await
    }

    /// Sets the delegate's state tensors back to zero (see [`BackendInterface::reset_state`]).
    ///
    /// # Errors
    /// `DelegateInvalidHandle` after destroy; the backend's error (`NotSupported` when it keeps
    /// no state).
    pub fn reset_state(&mut self) -> Result<()> {
        let handle = self.handle.as_mut().ok_or_else(|| {
            Error::new(ErrorCode::DelegateInvalidHandle, "delegate handle is gone")
        })?;
        self.backend.reset_state(handle)
    }

    /// The id of the backend that runs this delegate.
    pub fn backend_id(&self) -> &str {
        &self.backend_id
    }

    /// The backend's handle of this delegate, for backend-specific queries (e.g. the WebGPU
    /// backend's program stats and profiles). `None` only while being dropped.
    pub fn handle(&self) -> Option<&DelegateHandle> {
        self.handle.as_ref()
    }
}

impl Drop for LoadedDelegate {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            self.backend.destroy(handle);
        }
    }
}

impl std::fmt::Debug for LoadedDelegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedDelegate")
            .field("backend_id", &self.backend_id)
            .field("method_name", &self.method_name)
            .finish_non_exhaustive()
    }
}

/// One delegate entry of a method: which backend, which blob, which compile specs.
#[derive(Clone, Debug, Default)]
pub struct DelegateEntry {
    /// The backend id; `None` models a program whose entry lacks one.
    pub backend_id: Option<String>,
    /// The processed blob.
    pub processed: FreeableBuffer,
    /// The compile specs used ahead of time.
    pub compile_specs: Vec<CompileSpec>,
}

/// The delegates of one method, loaded all-or-nothing.
#[derive(Debug, Default)]
pub struct MethodDelegates {
    delegates: Vec<LoadedDelegate>,
}

impl MethodDelegates {
    /// Initialises every entry in order. On the first failure the delegates initialised so far
    /// are destroyed (each exactly once) and the error is returned.
    ///
    /// # Errors
    /// `InvalidProgram` for an entry without a backend id; otherwise as [`LoadedDelegate::init`].
    pub async fn load(entries: Vec<DelegateEntry>, context: &BackendInitContext) -> Result<Self> {
        let mut delegates = Vec::with_capacity(entries.len());
        for (index, entry) in entries.into_iter().enumerate() {
            let backend_id = entry.backend_id.ok_or_else(|| {
                Error::new(
                    ErrorCode::InvalidProgram,
                    format!("delegate {index} has no backend id"),
                )
            })?;
            let delegate =
                LoadedDelegate::init(&backend_id, entry.processed, &entry.compile_specs, context)
                    .await?;
            delegates.push(delegate);
        }
        Ok(Self { delegates })
    }

    /// Initialises every entry as upstream's method loader does: each entry's runtime specs are
    /// its backend's entry in `load_options` (none when it has none), with `method_name` and the
    /// parameter provider `parameters` shared by all. All-or-nothing, as [`load`](Self::load).
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub async fn load_with_options(
        entries: Vec<DelegateEntry>,
        method_name: Option<&str>,
        load_options: &LoadBackendOptionsMap,
        parameters: Option<SharedProvider>,
    ) -> Result<Self> {
        let mut delegates = Vec::with_capacity(entries.len());
        for (index, entry) in entries.into_iter().enumerate() {
            let backend_id = entry.backend_id.ok_or_else(|| {
                Error::new(
                    ErrorCode::InvalidProgram,
                    format!("delegate {index} has no backend id"),
                )
            })?;
            let mut context =
                BackendInitContext::for_backend(&backend_id, method_name, load_options);
            if let Some(parameters) = &parameters {
                context = context.with_parameters(Arc::clone(parameters));
            }
            let delegate =
                LoadedDelegate::init(&backend_id, entry.processed, &entry.compile_specs, &context)
                    .await?;
            delegates.push(delegate);
        }
        Ok(Self { delegates })
    }

    /// Runs delegate `index` (upstream's `DELEGATE_CALL`).
    ///
    /// # Errors
    /// `Internal` when the method has no delegate `index`; otherwise the backend's error.
    pub async fn execute(&mut self, index: usize, args: &mut [EValue]) -> Result<()> {
        let count = self.delegates.len();
        let delegate = self.delegates.get_mut(index).ok_or_else(|| {
            Error::internal(format!(
                "delegate index {index} is out of range ({count} delegates)"
            ))
        })?;
        delegate.execute(args).await
    }

    /// How many delegates were loaded.
    pub fn len(&self) -> usize {
        self.delegates.len()
    }

    /// Whether the method has no delegates.
    pub fn is_empty(&self) -> bool {
        self.delegates.is_empty()
    }
}
