//! Weight-file indexes: which key lives at which bytes of a `safetensors`, GGUF, IRPA or
//! ExecuTorch `.ptd` file, read with a few small ranged reads and never by downloading the file.
//!
//! Each format has its own module ([`safetensors`], [`gguf`], [`irpa`], [`ptd`]) with a rich
//! index type (file metadata, header sizes, alignment, layouts) and a plain [`ParameterIndex`]
//! for providers.
//! [`detect`] picks a format the way IREE's parser registry does (by extension, case-insensitive)
//! and falls back to the file's magic when the name says nothing; [`parse_index`] dispatches.
//!
//! What every parser promises:
//! - **Few, small reads.** The first read is [`INITIAL_READ_BYTES`] (or the whole file when it is
//!   smaller); later reads fetch only header bytes the parser still needs. Tensor data is never
//!   read.
//! - **Untrusted input.** Every count, length and offset from the file is checked against the
//!   bytes that exist with overflow-safe arithmetic before anything is allocated or read; no
//!   input panics, and allocations are bounded by the bytes actually read plus
//!   [`MAX_HEADER_BYTES`].
//! - **Upstream codes.** Errors carry IREE's status codes as IREE's own parsers use them:
//!   truncation is `OUT_OF_RANGE`, malformed content `INVALID_ARGUMENT`, unsupported versions
//!   and element types `UNIMPLEMENTED`, a reader without a known size `FAILED_PRECONDITION`.
//!   Messages name the field, key or offset that is wrong. (IREE has no `.ptd` parser; ours
//!   uses the same codes the same way.)

mod cursor;
pub mod gguf;
pub mod irpa;
mod prefix;
pub mod ptd;
pub mod safetensors;

use crate::error::{Status, StatusCode};
use crate::params::{ParameterIndex, RangeRead, StatusResult};
pub use prefix::PrefixCachedReader;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The largest index region a parser accepts, in bytes: a `safetensors` JSON header, the GGUF
/// key-value and tensor-info sections, an IRPA entry table or metadata segment, a `.ptd`
/// flatbuffer (with its extended header). 100 MB is the
/// `safetensors` crate's own header limit; larger is `INVALID_ARGUMENT`.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Size of a parser's first read: big enough to hold the whole index of most files, so that one
/// request usually suffices.
pub const INITIAL_READ_BYTES: u64 = 64 * 1024;

/// A weights-file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Hugging Face `safetensors`: u64 header length, JSON header, data.
    Safetensors,
    /// llama.cpp's GGUF, versions 2 and 3.
    Gguf,
    /// IREE parameter archive, version 0.
    Irpa,
    /// ExecuTorch's flat-tensor named-data file (`.ptd`, flatbuffer identifier `FT01`), schema
    /// version 0.
    Ptd,
}

impl Format {
    /// Every format: IREE's, in the order upstream's registry tries extensions, then ExecuTorch's
    /// `.ptd` (not in IREE's registry).
    pub const ALL: [Format; 4] = [Format::Irpa, Format::Gguf, Format::Safetensors, Format::Ptd];

    /// The file extension (without the dot), as upstream's registry matches it.
    pub const fn extension(self) -> &'static str {
        match self {
            Self::Safetensors => "safetensors",
            Self::Gguf => "gguf",
            Self::Irpa => "irpa",
            Self::Ptd => "ptd",
        }
    }

    /// The format whose extension is `extension` (ASCII case-insensitive), if any.
    pub fn from_extension(extension: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|format| format.extension().eq_ignore_ascii_case(extension))
    }
}

impl std::str::FromStr for Format {
    type Err = Status;

    /// The format named `name`: its extension, any case, with or without a leading dot.
    fn from_str(name: &str) -> StatusResult<Self> {
        Self::from_extension(name.strip_prefix('.').unwrap_or(name)).ok_or_else(|| {
            Status::unimplemented(format!(
                "unsupported file format {name:?}; supported formats: [irpa, gguf, safetensors, ptd]"
            ))
        })
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.extension())
    }
}

/// The format a file name or URL names by its extension, as IREE's `iree_io_parse_file_index`:
/// the text after the last `.` of the last path segment (a URL's `?query` and `#fragment`
/// ignored), or the whole segment when it has no `.` (so `"gguf"` alone names GGUF).
pub fn format_from_name(name_or_url: &str) -> Option<Format> {
    let path = name_or_url.split(['?', '#']).next().unwrap_or(name_or_url);
    let segment = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let extension = match segment.rsplit_once('.') {
        Some((_, extension)) => extension,
        None => segment,
    };
    Format::from_extension(extension)
}

/// The format a file's first bytes announce, if any: the GGUF magic `"GGUF"`, the IRPA magic
/// `"IRPA"`, the `.ptd` flatbuffer identifier `"FT01"` at bytes 4..8, or for `safetensors`
/// (which has no magic) a plausible header length followed by the JSON header's opening `{`.
pub fn format_from_magic(first_bytes: &[u8]) -> Option<Format> {
    let magic = first_bytes.get(..4)?;
    if magic == gguf::MAGIC.to_le_bytes() {
        return Some(Format::Gguf);
    }
    if magic == irpa::MAGIC.to_le_bytes() {
        return Some(Format::Irpa);
    }
    if first_bytes.get(4..8) == Some(ptd::IDENTIFIER.as_slice()) {
        return Some(Format::Ptd);
    }
    let length = u64::from_le_bytes(first_bytes.get(..8)?.try_into().ok()?);
    let plausible = (2..=MAX_HEADER_BYTES).contains(&length);
    (plausible && first_bytes.get(8) == Some(&b'{')).then_some(Format::Safetensors)
}

/// The format of a file: by extension when `name_or_url` has a known one (upstream's rule, which
/// wins even over contradicting magic: the parser then reports the bad magic), else by the magic
/// in `first_bytes` (pass at least the first 9 bytes).
///
/// # Errors
/// `UNIMPLEMENTED` when neither the name nor the bytes identify a supported format.
pub fn detect(name_or_url: &str, first_bytes: &[u8]) -> StatusResult<Format> {
    format_from_name(name_or_url)
        .or_else(|| format_from_magic(first_bytes))
        .ok_or_else(|| {
            Status::unimplemented(format!(
                "unsupported file format for {name_or_url:?}: neither its extension nor its first \
                 bytes match one of the supported formats [.irpa, .gguf, .safetensors, .ptd]"
            ))
        })
}

/// The index of a file in `format`, read from `reader` with a few small ranged reads.
///
/// # Errors
/// See the format's module: `OUT_OF_RANGE` for a truncated file, `INVALID_ARGUMENT` for malformed
/// content, `UNIMPLEMENTED` for unsupported versions or element types, `FAILED_PRECONDITION` when
/// the reader does not know the file's size; reader errors pass through.
pub async fn parse_index<R: RangeRead + ?Sized>(
    format: Format,
    reader: &R,
) -> StatusResult<ParameterIndex> {
    match format {
        Format::Safetensors => Ok(safetensors::SafetensorsIndex::parse(reader)
            .await?
            .into_index()),
        Format::Gguf => gguf::parse_index(reader).await,
        Format::Irpa => Ok(irpa::IrpaIndex::parse(reader).await?.into_index()),
        Format::Ptd => Ok(ptd::PtdIndex::parse(reader).await?.into_index()),
    }
}

/// Detects the format of `name_or_url` (reading the file's first bytes only when the name says
/// nothing) and parses its index. The first bytes are read once and reused by the parser, so a
/// small file's index still costs one read.
///
/// # Errors
/// As [`detect`] and [`parse_index`].
pub async fn detect_and_parse_index<R: RangeRead + ?Sized>(
    name_or_url: &str,
    reader: &R,
) -> StatusResult<(Format, ParameterIndex)> {
    if let Some(format) = format_from_name(name_or_url) {
        return Ok((format, parse_index(format, reader).await?));
    }
    let cached = PrefixCachedReader::new(reader).await?;
    let format = detect(name_or_url, cached.prefix())?;
    Ok((format, parse_index(format, &cached).await?))
}

/// [`parse_index`] of a file held in memory, synchronously.
///
/// # Errors
/// As [`parse_index`].
pub fn parse_index_in_memory(format: Format, bytes: &[u8]) -> StatusResult<ParameterIndex> {
    block_on_ready(parse_index(format, bytes))
}

/// Runs a future that never waits (every read served from memory) to completion.
pub(crate) fn block_on_ready<T>(future: impl Future<Output = StatusResult<T>>) -> StatusResult<T> {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(result) => result,
        Poll::Pending => Err(Status::new(
            StatusCode::Internal,
            "an in-memory index parse waited on I/O",
        )),
    }
}

/// The file's size, which every parser needs to check offsets.
pub(crate) fn known_size<R: RangeRead + ?Sized>(reader: &R, format: Format) -> StatusResult<u64> {
    reader.size().ok_or_else(|| {
        Status::new(
            StatusCode::FailedPrecondition,
            format!("cannot index a {format} file whose size is unknown"),
        )
    })
}

/// `length` bytes at `offset`, checking that the reader returned exactly that many.
pub(crate) async fn read_exact<R: RangeRead + ?Sized>(
    reader: &R,
    offset: u64,
    length: u64,
) -> StatusResult<Vec<u8>> {
    let bytes = reader.read_range(offset, length).await?;
    if bytes.len() as u64 != length {
        return Err(Status::new(
            StatusCode::DataLoss,
            format!(
                "a read of {length} bytes at offset {offset} returned {} bytes",
                bytes.len()
            ),
        ));
    }
    Ok(bytes)
}

/// `value` rounded up to a multiple of `alignment` (a power of two), or `None` on overflow.
pub(crate) fn align_up(value: u64, alignment: u64) -> Option<u64> {
    let mask = alignment.checked_sub(1)?;
    value.checked_add(mask).map(|sum| sum & !mask)
}

#[cfg(test)]
mod tests;
