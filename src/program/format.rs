//! The processed blob: `MAGIC` (4 bytes), `FORMAT_VERSION` (u16 LE), reserved (u16, zero), then
//! the [`Program`] in postcard encoding, and nothing after it. Older blobs still load: version
//! 1 has no state tensors; versions 1 and 2 write `rms_norm`'s weight as a plain tensor id
//! (it became optional in version 3); versions 1 to 3 have no `rope` scaling (version 4). The
//! blob's version is told to those ops' decoders through [`decoding_version`], set only while
//! [`decode`] runs on this thread.
//!
//! Decoding never panics and allocates at most in proportion to the blob: postcard reads
//! length-prefixed sequences element by element and serde caps pre-allocation, so a lying length
//! runs out of bytes instead of memory.

use crate::error::{Error, ErrorCode, Result};
use crate::program::ir::{ParamRef, Program};
use crate::program::ops::Op;
use crate::program::tensor::{TensorDecl, TensorId};
use serde::Deserialize;

/// A version-1 body: [`Program`] before state tensors existed.
#[derive(Deserialize)]
struct ProgramV1 {
    symbols: Vec<String>,
    tensors: Vec<TensorDecl>,
    inputs: Vec<TensorId>,
    outputs: Vec<TensorId>,
    params: Vec<ParamRef>,
    ops: Vec<Op>,
}

impl ProgramV1 {
    fn into_program(self) -> Program {
        Program {
            symbols: self.symbols,
            tensors: self.tensors,
            inputs: self.inputs,
            outputs: self.outputs,
            params: self.params,
            ops: self.ops,
            states: Vec::new(),
        }
    }
}

thread_local! {
    /// The format version of the blob being decoded on this thread ([`FORMAT_VERSION`] when
    /// none is).
    static DECODING_VERSION: std::cell::Cell<u16> = const { std::cell::Cell::new(FORMAT_VERSION) };
}

/// The format version of the blob [`decode`] is reading on this thread; [`FORMAT_VERSION`]
/// outside it (JSON programs and programs built in memory have the current layout).
pub(crate) fn decoding_version() -> u16 {
    DECODING_VERSION.with(std::cell::Cell::get)
}

/// Whether the blob being decoded writes `rms_norm`'s weight as a plain id (versions 1 and 2);
/// false outside [`decode`].
pub(crate) fn legacy_rms_norm_weight() -> bool {
    decoding_version() < 3
}

/// Sets [`decoding_version`] for one decode, restored on drop (a panic included).
struct LegacyLayout;

impl LegacyLayout {
    fn enter(version: u16) -> Self {
        DECODING_VERSION.with(|v| v.set(version));
        Self
    }
}

impl Drop for LegacyLayout {
    fn drop(&mut self) {
        DECODING_VERSION.with(|v| v.set(FORMAT_VERSION));
    }
}

/// First four bytes of every program blob.
pub const MAGIC: [u8; 4] = *b"WDPG";
/// The format version this build writes. It also reads version 1 (programs without state
/// tensors: the same body without the trailing `states` list), version 2 (`rms_norm` with a
/// weight that is not optional) and version 3 (`rope` without its scaling).
pub const FORMAT_VERSION: u16 = 4;
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
    if !(1..=FORMAT_VERSION).contains(&version) {
        return Err(Error::new(
            ErrorCode::DelegateInvalidCompatibility,
            format!(
                "program format version {version}; this runtime reads versions 1 to {FORMAT_VERSION}"
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
    let malformed = |e: postcard::Error| {
        Error::new(
            ErrorCode::InvalidProgram,
            format!("malformed program body: {e}"),
        )
    };
    let body = &blob[HEADER_LEN..];
    let _layout = LegacyLayout::enter(version);
    let (program, rest) = if version == 1 {
        let (v1, rest) = postcard::take_from_bytes::<ProgramV1>(body).map_err(malformed)?;
        (v1.into_program(), rest)
    } else {
        postcard::take_from_bytes::<Program>(body).map_err(malformed)?
    };
    if !rest.is_empty() {
        return Err(Error::new(
            ErrorCode::InvalidProgram,
            format!("{} unexpected bytes after the program", rest.len()),
        ));
    }
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::builder::ProgramBuilder;
    use crate::program::tensor::{DType, Dim};

    /// A version-1 blob (the body without the trailing `states` list) decodes with no states;
    /// the same program written now is version 4 and ends with that list (one zero byte).
    #[test]
    fn version_1_blobs_still_load() {
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![Dim::Fixed(2)]);
        let y = b.gelu(x).unwrap();
        b.output(y);
        let program = b.finish().unwrap();
        let v2 = encode(&program).unwrap();
        assert_eq!(u16::from_le_bytes([v2[4], v2[5]]), FORMAT_VERSION);
        assert_eq!(v2.last(), Some(&0), "an empty states list");
        let mut v1 = v2[..v2.len() - 1].to_vec();
        v1[4..6].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(decode(&v1).unwrap(), program);
        assert_eq!(decode(&v2).unwrap(), program);
        // A version-1 blob that carries the states list has a trailing byte: refused.
        let mut mixed = v2.clone();
        mixed[4..6].copy_from_slice(&1u16.to_le_bytes());
        let error = decode(&mixed).unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidProgram, "{error}");
        let mut program = program;
        program.states.push(0);
        let with_state = encode(&program).unwrap();
        assert_eq!(decode(&with_state).unwrap().states, vec![0]);
    }

    /// `rope` in a version-3 blob has no scaling: it decodes with none; the same program
    /// written now carries it (9 bytes), and a scaled one round-trips.
    #[test]
    fn version_3_rope_still_loads() {
        use crate::program::ops::{Rope, RopeScaling, RopeStyle};
        let build = |scaling: RopeScaling| {
            let mut b = ProgramBuilder::new();
            let x = b.input(
                "x",
                DType::F32,
                vec![Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(4)],
            );
            let p = b.input("p", DType::I32, vec![Dim::Fixed(1)]);
            let y = b
                .push(|out| Rope {
                    x,
                    positions: p,
                    dims: 4,
                    base: 1e4,
                    style: RopeStyle::Neox,
                    out,
                    scaling,
                })
                .unwrap();
            b.output(y);
            b.finish().unwrap()
        };
        let program = build(RopeScaling::default());
        let v4 = encode(&program).unwrap();
        let tail = [0u8, 0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f];
        let at = v4
            .windows(tail.len())
            .position(|w| w == tail)
            .expect("the scaling's bytes");
        let mut v3 = [&v4[..at], &v4[at + tail.len()..]].concat();
        v3[4..6].copy_from_slice(&3u16.to_le_bytes());
        assert_eq!(decode(&v3).unwrap(), program);
        assert_eq!(decode(&v4).unwrap(), program);
        let scaled = build(RopeScaling {
            factors: vec![1.0, 4.0],
            freq_scale: 0.5,
            attn_factor: 1.1,
        });
        assert_eq!(decode(&encode(&scaled).unwrap()).unwrap(), scaled);
        assert_eq!(decoding_version(), FORMAT_VERSION, "restored after decode");
    }

    /// `rms_norm` in a version-2 blob: the weight is a plain id (no option tag). It decodes as
    /// `Some(weight)`; the same program written now carries the tag, and a weightless one too.
    #[test]
    fn version_2_rms_norm_still_loads() {
        use crate::program::ops::RmsNorm;
        let mut b = ProgramBuilder::new();
        let x = b.input("x", DType::F32, vec![Dim::Fixed(2), Dim::Fixed(4)]);
        let w = b.input("w", DType::F32, vec![Dim::Fixed(4)]);
        let y = b
            .push(|out| RmsNorm {
                x,
                weight: Some(w),
                eps: 0.5,
                out,
            })
            .unwrap();
        b.output(y);
        let program = b.finish().unwrap();
        let v3 = encode(&program).unwrap();
        // The op's bytes now: variant 15, x 0, Some (1) w 1, eps, out 2.
        let op_v3 = [15u8, 0, 1, 1, 0, 0, 0, 0x3f, 2];
        let at = v3
            .windows(op_v3.len())
            .position(|w| w == op_v3)
            .expect("the rms_norm bytes");
        let mut v2 = v3.clone();
        v2.remove(at + 2);
        v2[4..6].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(decode(&v2).unwrap(), program);
        assert_eq!(decode(&v3).unwrap(), program);
        assert!(!legacy_rms_norm_weight(), "cleared after decode");
        // Read as version 3, the legacy bytes are malformed (or another program): never panics.
        let mut as_v3 = v2.clone();
        as_v3[4..6].copy_from_slice(&3u16.to_le_bytes());
        assert_ne!(decode(&as_v3).ok(), Some(program));
    }
}
