//! Span arithmetic shared by providers and buffers: the one overflow-safe bounds check every
//! span (of a parameter, a buffer or a file) passes before a byte moves. A leaf: it imports
//! nothing from the rest of `params`.

use crate::error::Status;

/// Checks that `length` bytes from `offset` lie within a parameter (or buffer) of `size` bytes,
/// without overflowing. Equal end and size is allowed, as upstream.
///
/// # Errors
/// `OUT_OF_RANGE` naming `what` when the span ends past `size` or its end overflows.
pub fn check_span(what: &str, offset: u64, length: u64, size: u64) -> Result<(), Status> {
    match offset.checked_add(length) {
        Some(end) if end <= size => Ok(()),
        Some(end) => Err(Status::out_of_range(format!(
            "{what}: span [{offset}, {end}) runs past its end at {size}"
        ))),
        None => Err(Status::out_of_range(format!(
            "{what}: span of {length} bytes at {offset} overflows"
        ))),
    }
}
