//! The provider interface and its plain data types.

pub use crate::lifecycle::Signal;
use crate::params::StatusResult;
use crate::params::buffer::{BufferAllocator, ParameterBuffer, SharedBuffer};
use crate::send_sync::{LocalBoxFuture, MaybeSendSync};
use std::sync::Arc;

/// One span of a parameter: `length` bytes from `parameter_offset` within the parameter, placed
/// at `buffer_offset` within the target buffer (IREE's `iree_io_parameter_span_t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Offset within the parameter's bytes.
    pub parameter_offset: u64,
    /// Offset within the buffer.
    pub buffer_offset: u64,
    /// Length in bytes.
    pub length: u64,
}

/// A span of the parameter named `key` (what upstream's enumerator yields).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpanRequest {
    /// The parameter's key within the scope.
    pub key: String,
    /// Which bytes, and where they go.
    pub span: Span,
}

impl SpanRequest {
    /// The whole parameter `key` of `length` bytes, at offset 0 of its buffer.
    pub fn whole(key: impl Into<String>, length: u64) -> Self {
        Self {
            key: key.into(),
            span: Span {
                parameter_offset: 0,
                buffer_offset: 0,
                length,
            },
        }
    }
}

/// What a provider knows about one parameter (from the weights file's index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParameterInfo {
    /// Length in bytes.
    pub length: u64,
    /// Element type as the file names it (e.g. `"F32"`), when the format records one.
    pub dtype: Option<String>,
    /// Shape, when the format records one, in the order `shape_order` says.
    pub shape: Option<Vec<u64>>,
    /// The order of `shape`: the file's own (GGUF lists the innermost dimension first).
    pub shape_order: ShapeOrder,
}

/// The order in which a weights file lists a tensor's dimensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShapeOrder {
    /// Outermost first, as numpy, safetensors and programs do.
    #[default]
    RowMajor,
    /// Innermost (contiguous) first: ggml's `ne` order, as GGUF stores it. A `[rows, cols]`
    /// matrix is listed `[cols, rows]`.
    InnermostFirst,
}

impl ParameterInfo {
    /// The shape outermost first (reversed when the file lists it innermost first).
    pub fn row_major_shape(&self) -> Option<Vec<u64>> {
        let mut shape = self.shape.clone()?;
        if self.shape_order == ShapeOrder::InnermostFirst {
            shape.reverse();
        }
        Some(shape)
    }
}

/// A loaded span: a buffer (possibly shared with other spans) and where the span lies in it.
#[derive(Clone)]
pub struct LoadedSpan {
    /// The buffer holding the bytes.
    pub buffer: SharedBuffer,
    /// Offset of the span's first byte within `buffer`.
    pub offset: u64,
    /// Length of the span in bytes.
    pub length: u64,
}

impl std::fmt::Debug for LoadedSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedSpan")
            .field("offset", &self.offset)
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

/// A provider shared by the programs that use it.
pub type SharedProvider = Arc<dyn ParameterProvider>;

/// A source of parameters (IREE's `iree_io_parameter_provider_t`).
///
/// Every method that takes spans validates all of them before moving a byte: an unknown key is
/// `NOT_FOUND`, a span past the parameter's or buffer's end `OUT_OF_RANGE`, writing a read-only
/// source `PERMISSION_DENIED`. A count of zero is a no-op that completes.
pub trait ParameterProvider: MaybeSendSync {
    /// Tells the provider about a host event. Providers may ignore it "at their peril".
    ///
    /// # Errors
    /// Provider-specific; the built-in providers always succeed.
    fn notify(&self, signal: Signal) -> StatusResult<()>;

    /// Whether this provider serves `scope` (an exact match for file-backed providers).
    fn query_support(&self, scope: &str) -> bool;

    /// What the provider knows of `key` in `scope`, or `None` when it does not have it.
    fn describe(&self, scope: &str, key: &str) -> Option<ParameterInfo>;

    /// Loads each span into a buffer from `allocator`, one result per request, in order.
    /// Results may be sub-spans of one shared allocation.
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown scope or key; `OUT_OF_RANGE` for a span past a parameter's end;
    /// allocation or transport errors as statuses.
    fn load<'a>(
        &'a self,
        allocator: &'a dyn BufferAllocator,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<Vec<LoadedSpan>>>;

    /// Copies each span of `scope` into `target` at its `buffer_offset`.
    ///
    /// # Errors
    /// As [`ParameterProvider::load`], plus `OUT_OF_RANGE` for a span past the target's end.
    fn gather<'a>(
        &'a self,
        scope: &'a str,
        target: &'a dyn ParameterBuffer,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>>;

    /// Copies each span from `source` at its `buffer_offset` into the parameter.
    ///
    /// # Errors
    /// `PERMISSION_DENIED` when the scope is read-only; otherwise as [`ParameterProvider::gather`].
    fn scatter<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        scope: &'a str,
        requests: &'a [SpanRequest],
    ) -> LocalBoxFuture<'a, StatusResult<()>>;

    /// Reads `length` bytes of `key` from `source_offset` into `target` at `target_offset`
    /// (a gather of one span).
    ///
    /// # Errors
    /// As [`ParameterProvider::gather`].
    fn read<'a>(
        &'a self,
        scope: &'a str,
        key: &'a str,
        source_offset: u64,
        target: &'a dyn ParameterBuffer,
        target_offset: u64,
        length: u64,
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let request = [SpanRequest {
                key: key.to_owned(),
                span: Span {
                    parameter_offset: source_offset,
                    buffer_offset: target_offset,
                    length,
                },
            }];
            self.gather(scope, target, &request).await
        })
    }

    /// Writes `length` bytes from `source` at `source_offset` into `key` at `target_offset`
    /// (a scatter of one span).
    ///
    /// # Errors
    /// As [`ParameterProvider::scatter`].
    fn write<'a>(
        &'a self,
        source: &'a dyn ParameterBuffer,
        source_offset: u64,
        scope: &'a str,
        key: &'a str,
        target_offset: u64,
        length: u64,
    ) -> LocalBoxFuture<'a, StatusResult<()>> {
        Box::pin(async move {
            let request = [SpanRequest {
                key: key.to_owned(),
                span: Span {
                    parameter_offset: target_offset,
                    buffer_offset: source_offset,
                    length,
                },
            }];
            self.scatter(source, scope, &request).await
        })
    }
}
