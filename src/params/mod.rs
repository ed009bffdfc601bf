//! IREE's parameter provider (`runtime/src/iree/io/parameter_provider.h`): where a program's
//! weights come from.
//!
//! Parameters are addressed by a *scope* (a file, group or table) and a scope-unique *key*. A
//! provider loads spans of parameters into new buffers, reads and gathers them into existing
//! buffers, writes and scatters them back, answers whether it serves a scope, and is told about
//! the host program's life (`Resume`, `Suspend`, `LowMemory`).
//!
//! Buffers are abstract ([`ParameterBuffer`], allocated by a [`BufferAllocator`]): host memory
//! for the CPU backend and tests, GPU buffers for the WebGPU backend. A provider never needs to
//! know which.
//!
//! Status codes are IREE's ([`crate::error::StatusCode`]). Where this module differs from
//! upstream on purpose: span bounds are checked with overflow-safe arithmetic (upstream adds
//! without a guard), and `load`/`gather`/`scatter` are async instead of semaphore-ordered.

mod buffer;
pub mod formats;
pub mod http;
mod index;
mod list;
mod memory;
mod pieces;
mod provider;
mod span;

pub use crate::browser::chunk::JsChunk;
pub use buffer::{
    BufferAllocator, DirectWrite, HostAllocator, HostBuffer, ParameterBuffer, SharedBuffer,
};
pub use index::{EntryStorage, IndexEntry, ParameterIndex, RangeRead};
pub use list::ProviderList;
pub use memory::MemoryProvider;
pub use pieces::{BufferPlacement, LoadedPiece, PiecePlan, plan_pieces};
#[cfg(test)]
mod tests;

pub use provider::{
    LoadedSpan, ParameterInfo, ParameterProvider, ShapeOrder, SharedProvider, Signal, Span,
    SpanRequest,
};
pub use span::check_span;

/// Result of a parameter operation, with an IREE status on failure.
pub type StatusResult<T> = std::result::Result<T, crate::error::Status>;
