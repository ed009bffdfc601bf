//! Reads a scope's index from its opened file with the format parsers ([`crate::params::formats`]):
//! the format the caller names, or the one detected from the URL's extension and, failing that,
//! the file's first bytes (already read when the file was opened, so detection costs nothing).
//! The parsers' first read (64 KiB) is served from the same prefix: most indexes cost the one
//! request that opened the file.

use crate::params::formats::{Format, detect, parse_index};
use crate::params::http::provider::file::HttpFile;
use crate::params::{ParameterIndex, StatusResult};

/// The format and index of `file`, in `format` (`"safetensors"`, `"gguf"`, `"irpa"`, `"ptd"`,
/// any case) or the detected one.
///
/// # Errors
/// `UNIMPLEMENTED` for an unknown or undetectable format; the parser's errors for a malformed
/// index; transport errors for the reads past the prefix.
pub async fn read_index(
    file: &HttpFile<'_>,
    format: Option<&str>,
) -> StatusResult<(Format, ParameterIndex)> {
    let format = match format {
        Some(name) => name.parse::<Format>()?,
        None => detect(file.url(), file.prefix())?,
    };
    Ok((format, parse_index(format, file).await?))
}
