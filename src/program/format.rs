//! The processed blob: `MAGIC` (4 bytes), `FORMAT_VERSION` (u16 LE), reserved (u16, zero), then
//! the [`Program`] in postcard encoding, and nothing after it.
//!
//! Decoding never panics and allocates at most in proportion to the blob: postcard reads
//! length-prefixed sequences element by element and serde caps pre-allocation, so a lying length
//! runs out of bytes instead of memory.

use crate::error::{Error, ErrorCode, Result};
use crate::program::ir::Program;

/// First four bytes of every program blob.
pub const MAGIC: [u8; 4] = *b"WDPG";
/// The format version this build reads and writes.
pub const FORMAT_VERSION: u16 = 1;
/// Header size: magic, version, reserved.
pub const HEADER_LEN: usize = 8;

/// Encodes `program` into a blob (without validating it; see `program::validate`).
///
/// # Errors
/// `Internal` if serialisation fails (it does not for in-memory programs).
pub fn encode(program: &Program) -> Result<Vec<u8>> {
    let mut blob = Vec::with_capacity(HEADER_LEN + 256);
    blob.extend_from_slice(&MAGIC);
    blob.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    blob.extend_from_slice(&0u16.to_le_bytes());
    postcard::to_extend(program, blob)
        .map_err(|e| Error::internal(format!("cannot encode program: {e}")))
}

/// Decodes a blob into a [`Program`] (without validating it; see `program::validate`).
///
/// # Errors
/// `DelegateInvalidCompatibility` for a foreign magic or another format version;
/// `InvalidProgram` for a truncated or malformed body or trailing bytes.
pub fn decode(blob: &[u8]) -> Result<Program> {
    if blob.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return Err(Error::new(
            ErrorCode::DelegateInvalidCompatibility,
            "not a webdelegate program (bad magic)",
        ));
    }
    if blob.len() < HEADER_LEN {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!(
                "truncated header: {} bytes, a program starts with {HEADER_LEN}",
                blob.len()
            ),
        ));
    }
    let version = u16::from_le_bytes([blob[4], blob[5]]);
    if version != FORMAT_VERSION {
        return Err(Error::new(
            ErrorCode::DelegateInvalidCompatibility,
            format!(
                "program format version {version}; this runtime reads version {FORMAT_VERSION}"
            ),
        ));
    }
    let reserved = u16::from_le_bytes([blob[6], blob[7]]);
    if reserved != 0 {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!("reserved header field is {reserved}, expected 0"),
        ));
    }
    let (program, rest) =
        postcard::take_from_bytes::<Program>(&blob[HEADER_LEN..]).map_err(|e| {
            Error::new(
                ErrorCode::InvalidProgram,
                format!("malformed program body: {e}"),
            )
        })?;
    if !rest.is_empty() {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!("{} unexpected bytes after the program", rest.len()),
        ));
    }
    Ok(program)
}
