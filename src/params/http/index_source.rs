//! Reads a scope's index from its opened file with the format parsers (`params::formats`):
//! the format named by the caller, or the one detected from the URL's extension and the file's
//! first bytes.

use crate::error::{Status, StatusCode};
use crate::params::http::file::HttpFile;
use crate::params::{ParameterIndex, StatusResult};

/// The index of `file`, in `format` (`"safetensors"`, `"gguf"`, `"irpa"`) or the detected one.
///
/// # Errors
/// `UNIMPLEMENTED` for an unknown format; the parser's errors for a malformed index.
pub async fn read_index(file: &HttpFile<'_>, format: Option<&str>) -> StatusResult<ParameterIndex> {
    // The format parsers land separately; until then only indexes given by the caller work.
    let _ = (file, format);
    Err(Status::new(
        StatusCode::Unimplemented,
        "weight-file index parsers are not part of this build yet; use add_scope_with_index",
    ))
}
