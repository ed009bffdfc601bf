//! ExecuTorch's `BackendInterface`, in Rust, for a browser.
//!
//! The shape follows `runtime/backend/interface.h` method for method. One deliberate difference:
//! `init` and `execute` return futures, because in a browser a GPU device, a buffer readback and
//! a weight download are all asynchronous, and blocking the only thread is not an option. The
//! futures are not `Send` (browser objects never are); natively they are driven by any executor,
//! e.g. `pollster::block_on`.

use crate::error::{Error, Result};
use crate::evalue::EValue;
use crate::lifecycle::{Released, Signal};
use crate::registry::context::{BackendExecutionContext, BackendInitContext, BackendOptionContext};
use crate::registry::freeable::FreeableBuffer;
use crate::registry::options::BackendOption;
pub use crate::send_sync::{LocalBoxFuture, MaybeSendSync};
use std::any::Any;

#[cfg(native)]
type AnyBox = Box<dyn Any + Send + Sync>;
#[cfg(web)]
type AnyBox = Box<dyn Any>;

/// The opaque per-program state a backend returns from `init` and receives in `execute` and
/// `destroy` (upstream's `DelegateHandle*`). The backend owns what is inside and downcasts it.
pub struct DelegateHandle(AnyBox);

impl DelegateHandle {
    /// Wraps backend-private state.
    pub fn new<T: Any + MaybeSendSync>(state: T) -> Self {
        Self(Box::new(state))
    }

    /// The state, if it is a `T`.
    pub fn downcast_ref<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }

    /// The state, mutable, if it is a `T`.
    pub fn downcast_mut<T: Any>(&mut self) -> Option<&mut T> {
        self.0.downcast_mut()
    }
}

impl std::fmt::Debug for DelegateHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DelegateHandle(..)")
    }
}

/// One compile spec: the key and raw value that were used ahead of time to produce the blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileSpec {
    /// The spec key.
    pub key: String,
    /// The spec value, as raw bytes (often UTF-8 text).
    pub value: Vec<u8>,
}

impl CompileSpec {
    /// A spec from a key and raw bytes.
    pub fn new(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// A delegate backend (upstream's `BackendInterface`).
///
/// Implementations must never panic on input: a panic in WebAssembly kills the whole module. Bad
/// blobs, specs and arguments are errors with the upstream code.
pub trait BackendInterface: MaybeSendSync {
    /// Whether the backend can process delegation calls right now (e.g. a GPU device exists).
    fn is_available(&self) -> bool;

    /// Prepares `processed` for execution and returns the handle that `execute` and `destroy`
    /// receive.
    ///
    /// # Errors
    /// `DelegateInvalidCompatibility` when the blob is not for this backend or this version of
    /// it; `InvalidProgram` when it is malformed; `DelegateMemoryAllocationFailed` or
    /// `MemoryAllocationFailed` when resources run out; other codes as the backend sees fit.
    fn init<'a>(
        &'a self,
        context: &'a BackendInitContext,
        processed: FreeableBuffer,
        compile_specs: &'a [CompileSpec],
    ) -> LocalBoxFuture<'a, Result<DelegateHandle>>;

    /// Runs the program behind `handle`. `args` holds the method's inputs followed by its outputs;
    /// the backend writes the outputs in place.
    ///
    /// # Errors
    /// `DelegateInvalidHandle` when the handle is not one of this backend's; `InvalidArgument`
    /// for inputs of the wrong type or shape; other codes as the backend sees fit.
    fn execute<'a>(
        &'a self,
        context: &'a BackendExecutionContext,
        handle: &'a mut DelegateHandle,
        args: &'a mut [EValue],
    ) -> LocalBoxFuture<'a, Result<()>>;

    /// Updates backend-wide settings from user options. The default accepts and ignores them, as
    /// upstream's does.
    ///
    /// # Errors
    /// Whatever the backend reports; the registry passes it through unchanged.
    fn set_option(
        &self,
        _context: &mut BackendOptionContext,
        _options: &[BackendOption],
    ) -> Result<()> {
        Ok(())
    }

    /// Fills in the values of the requested options. The default leaves them as they are, as
    /// upstream's does.
    ///
    /// # Errors
    /// Whatever the backend reports; the registry passes it through unchanged.
    fn get_option(
        &self,
        _context: &mut BackendOptionContext,
        _options: &mut [BackendOption],
    ) -> Result<()> {
        Ok(())
    }

    /// Releases everything behind `handle`. Called exactly once per successful `init`.
    fn destroy(&self, _handle: DelegateHandle) {}

    /// A lifecycle signal from the host (not in upstream, whose backends have no such hook; it
    /// mirrors the parameter provider's `notify`). `Suspend`: drop transient memory (activations,
    /// staging) that the next `execute` re-creates; `Resume`: nothing needs to happen at once,
    /// rebuilding is lazy; `LowMemory`: also drop what can be fetched again (parameters). The
    /// next `execute` of every live handle must still succeed with the same results. Returns
    /// what was released. The default holds nothing to release.
    fn notify(&self, _signal: Signal) -> Released {
        Released::default()
    }

    /// Sets the state tensors behind `handle` (a program's KV cache: ExecuTorch's mutable
    /// buffers) back to zero, and makes a state that was dropped (by `LowMemory` with state
    /// dropping allowed, or a device loss) usable again, zeroed. Not in upstream, whose mutable
    /// buffers are reset by re-loading the method; a generator calls it between sequences. The
    /// default, for backends that keep no state, is `NotSupported`.
    fn reset_state(&self, _handle: &mut DelegateHandle) -> Result<()> {
        Err(Error::not_supported(
            "this backend keeps no state tensors to reset",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_downcasts_only_to_its_own_type() {
        let mut handle = DelegateHandle::new(41u32);
        assert!(handle.downcast_ref::<String>().is_none());
        *handle.downcast_mut::<u32>().unwrap() += 1;
        assert_eq!(handle.downcast_ref::<u32>(), Some(&42));
    }
}
