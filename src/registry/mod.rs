//! ExecuTorch's backend registry (`runtime/backend/interface.h`): the [`BackendInterface`] a
//! delegate backend implements, the 16-slot process-wide table of named backends, backend options,
//! the method loader's rules for initialising, running and destroying delegates, and the
//! `NamedDataMap` (`runtime/core/named_data_map.h`) a backend reads external weights through,
//! over a parameter-provider scope.
//!
//! Semantics are upstream's, code for code (`docs/semantics.md` lists them with their upstream
//! files); where this module differs on purpose, the item's docs say so: async
//! `init`/`execute`, option keys and strings refused rather than truncated when too long, empty
//! option keys refused (an empty key can name nothing a backend reads), and integer options
//! held as `i64`.

mod context;
mod delegate;
mod freeable;
mod global;
mod interface;
mod named_data;
mod options;
mod table;

pub use context::{BackendExecutionContext, BackendInitContext, BackendOptionContext};
pub use delegate::{DelegateEntry, LoadedDelegate, MethodDelegates};
pub use freeable::FreeableBuffer;
pub use global::{
    get_backend_class, get_backend_name, get_num_registered_backends, get_option, notify_backends,
    register_backend, register_backend_if_absent, registered_backend_names, set_option,
};
pub use interface::{BackendInterface, CompileSpec, DelegateHandle, LocalBoxFuture, MaybeSendSync};
pub use named_data::{LayoutScalarType, NamedDataMap, TensorLayout};
pub use options::{
    BackendOption, BackendOptions, LoadBackendOptionsMap, MAX_BACKEND_ID_BYTES,
    MAX_LOAD_OPTION_BACKENDS, MAX_OPTION_KEY_BYTES, MAX_OPTION_STRING_BYTES, OptionType,
    OptionValue,
};
pub use table::{Backend, BackendRegistry, MAX_REGISTERED_BACKENDS, SharedBackend};

#[cfg(test)]
mod tests;
