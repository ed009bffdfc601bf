//! The `.pte` container: ExecuTorch's program flatbuffer (identifier `ET12`), its optional
//! extended header (`eh00` at byte 8: header length, program size, segment base offset,
//! segment data size) and the segments after the flatbuffer (delegate blobs, named data,
//! constants), read into owned, checked values.
//!
//! Everything in the file is untrusted. [`PteFile::parse`] runs the flatbuffers verifier, then
//! checks every segment, index and size with overflow-safe arithmetic and turns each execution
//! plan into a [`MethodPlan`]; nothing later reads the flatbuffer again, and no input panics.
//! Malformed content is `InvalidProgram` naming the field; features this runtime does not run
//! (non-contiguous dim orders, element types it has no tensor for) are `NotSupported`.

use crate::error::{Error, Result};
use crate::executorch_schema::{program as fb, verified_program};
use crate::pte::plan::MethodPlan;
use crate::pte::sources::{Constants, PlanSources, SegmentRange, checked_index, range_within};
use std::ops::Range;

/// The extended header's magic, at byte 8 of a `.pte`.
pub const EXTENDED_HEADER_MAGIC: &[u8; 4] = b"eh00";
/// The extended header's length without the segment data size (older files).
const EXTENDED_HEADER_MIN_LENGTH: u32 = 24;
/// Where the extended header starts: after the root offset and the file identifier.
const EXTENDED_HEADER_OFFSET: usize = 8;

/// A parsed `.pte`: its bytes, where its segments lie, its named data and its methods.
#[derive(Debug)]
pub struct PteFile {
    bytes: Vec<u8>,
    version: u32,
    segments: Vec<SegmentRange>,
    named_data: Vec<(String, SegmentRange)>,
    methods: Vec<MethodPlan>,
}

/// The extended header of a `.pte` (upstream's `ExtendedHeader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendedHeader {
    /// Bytes of the flatbuffer at the start of the file.
    pub program_size: u64,
    /// Where the first segment starts, or 0 when there are none.
    pub segment_base_offset: u64,
    /// Bytes of all segments together (0 in files written before the field existed).
    pub segment_data_size: u64,
}

impl ExtendedHeader {
    /// The header at byte 8 of `bytes`, or `None` when the file has none (upstream's rule: a
    /// missing magic means the file predates the header; the flatbuffer is then the whole file).
    ///
    /// # Errors
    /// `InvalidProgram` when the magic is there but the header is shorter than its minimum or
    /// runs past the file.
    pub fn parse(bytes: &[u8]) -> Result<Option<Self>> {
        let Some(magic) = bytes.get(EXTENDED_HEADER_OFFSET..EXTENDED_HEADER_OFFSET + 4) else {
            return Ok(None);
        };
        if magic != EXTENDED_HEADER_MAGIC {
            return Ok(None);
        }
        let u32_at = |at: usize| {
            bytes
                .get(at..at + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let u64_at = |at: usize| {
            bytes.get(at..at + 8).map(|b| {
                let mut word = [0; 8];
                word.copy_from_slice(b);
                u64::from_le_bytes(word)
            })
        };
        let base = EXTENDED_HEADER_OFFSET;
        let truncated =
            || Error::invalid_program("the .pte's extended header (eh00) is truncated".to_owned());
        let length = u32_at(base + 4).ok_or_else(truncated)?;
        if length < EXTENDED_HEADER_MIN_LENGTH {
            return Err(Error::invalid_program(format!(
                "the .pte's extended header claims {length} bytes, fewer than its minimum \
                 {EXTENDED_HEADER_MIN_LENGTH}"
            )));
        }
        // In u64: on a 32-bit target (wasm32) `base + length` could overflow a usize.
        if (bytes.len() as u64) < base as u64 + u64::from(length) {
            return Err(truncated());
        }
        Ok(Some(Self {
            program_size: u64_at(base + 8).ok_or_else(truncated)?,
            segment_base_offset: u64_at(base + 16).ok_or_else(truncated)?,
            segment_data_size: if length > EXTENDED_HEADER_MIN_LENGTH {
                u64_at(base + 24).ok_or_else(truncated)?
            } else {
                0
            },
        }))
    }
}

impl PteFile {
    /// Parses and checks a whole `.pte`.
    ///
    /// # Errors
    /// `InvalidProgram` for a foreign or malformed file (naming what is wrong); `NotSupported`
    /// for a well-formed program using something this runtime does not run.
    pub fn parse(bytes: Vec<u8>) -> Result<Self> {
        let header = ExtendedHeader::parse(&bytes)?;
        let program_len = match header {
            Some(header) => usize::try_from(header.program_size)
                .ok()
                .filter(|&size| size <= bytes.len() && size >= EXTENDED_HEADER_OFFSET)
                .ok_or_else(|| {
                    Error::invalid_program(format!(
                        "the .pte's header claims a program of {} bytes but the file has {}",
                        header.program_size,
                        bytes.len()
                    ))
                })?,
            None => bytes.len(),
        };
        let program = verified_program(&bytes[..program_len])
            .map_err(|e| Error::invalid_program(format!("not a valid .pte program: {e}")))?;
        let segments = Self::segment_ranges(&program, header, bytes.len(), program_len)?;
        let named_data = program
            .named_data()
            .into_iter()
            .flatten()
            .map(|entry| {
                let key = entry.key().ok_or_else(|| {
                    Error::invalid_program("a named data entry of the .pte has no key".to_owned())
                })?;
                let index = checked_index(
                    entry.segment_index().into(),
                    segments.len(),
                    &format!("the segment index of named data {key:?}"),
                )?;
                Ok((key.to_owned(), segments[index].clone()))
            })
            .collect::<Result<Vec<_>>>()?;
        let inline_delegate_data: Vec<Range<usize>> = program
            .backend_delegate_data()
            .into_iter()
            .flatten()
            .map(|data| range_within(&bytes, data.data().map_or(&[][..], |d| d.bytes())))
            .collect();
        let constants = Constants::of(&program, &segments, &bytes)?;
        let sources = PlanSources {
            segments: &segments,
            inline_delegate_data: &inline_delegate_data,
            constants: &constants,
        };
        let methods = program
            .execution_plan()
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(index, plan)| MethodPlan::parse(index, plan, &sources))
            .collect::<Result<Vec<_>>>()?;
        let mut names = std::collections::HashSet::new();
        if let Some(name) = methods.iter().find(|m| !names.insert(m.name())) {
            return Err(Error::invalid_program(format!(
                "the .pte has two methods named {:?}",
                name.name()
            )));
        }
        let version = program.version();
        Ok(Self {
            bytes,
            version,
            segments,
            named_data,
            methods,
        })
    }

    /// The absolute byte range of every segment, checked against the header and the file.
    fn segment_ranges(
        program: &fb::Program<'_>,
        header: Option<ExtendedHeader>,
        file_len: usize,
        program_len: usize,
    ) -> Result<Vec<SegmentRange>> {
        let Some(segments) = program.segments().filter(|s| !s.is_empty()) else {
            return Ok(Vec::new());
        };
        let Some(header) = header else {
            // ExecuTorch writes no header when the segment data is empty, yet still lists the
            // (empty) constant segment: a program without weights. Empty segments need no place.
            if segments.iter().all(|segment| segment.size_() == 0) {
                return Ok(vec![program_len..program_len; segments.len()]);
            }
            return Err(Error::invalid_program(
                "the .pte lists segments but has no extended header to place them".to_owned(),
            ));
        };
        let base = usize::try_from(header.segment_base_offset)
            .ok()
            .filter(|&base| base >= program_len && base <= file_len)
            .ok_or_else(|| {
                Error::invalid_program(format!(
                    "the .pte's segment base offset {} lies outside [{program_len}, {file_len}]",
                    header.segment_base_offset
                ))
            })?;
        segments
            .iter()
            .enumerate()
            .map(|(index, segment)| {
                let start = (base as u64).checked_add(segment.offset());
                let end = start.and_then(|start| start.checked_add(segment.size_()));
                match (start, end) {
                    (Some(start), Some(end)) if end <= file_len as u64 => {
                        Ok(start as usize..end as usize)
                    }
                    _ => Err(Error::invalid_program(format!(
                        "segment {index} (offset {}, {} bytes after base {base}) runs past the \
                         end of the {file_len}-byte .pte",
                        segment.offset(),
                        segment.size_()
                    ))),
                }
            })
            .collect()
    }

    /// The program's schema version (`Program.version`).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The names of the file's methods, in file order.
    pub fn method_names(&self) -> Vec<&str> {
        self.methods.iter().map(MethodPlan::name).collect()
    }

    /// The method named `name`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the methods there are.
    pub fn method(&self, name: &str) -> Result<&MethodPlan> {
        self.methods
            .iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "the program has no method {name:?}; its methods are {:?}",
                    self.method_names()
                ))
            })
    }

    /// Every method, in file order.
    pub fn methods(&self) -> &[MethodPlan] {
        &self.methods
    }

    /// The named data stored in the `.pte` itself: key and bytes, in file order (a repeated
    /// key's first entry is the one lookups find, as upstream's map).
    pub fn named_data(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.named_data
            .iter()
            .map(|(key, range)| (key.as_str(), &self.bytes[range.clone()]))
    }

    /// The bytes of `range` (a delegate blob or constant the plan recorded).
    pub(crate) fn slice(&self, range: &Range<usize>) -> &[u8] {
        self.bytes.get(range.clone()).unwrap_or(&[])
    }

    /// How many segments the file has.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Total size of the file in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the file is empty (never true of a parsed file).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}
