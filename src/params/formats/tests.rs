//! Unit tests of the format helpers: detection, alignment, the streaming cursor and the prefix
//! cache; and the `.ptd` parser on files built here with the schema's generated builder, for
//! the table-level defects ExecuTorch's own writer cannot produce. The parsers are tested
//! against real peers' files in `tests/formats_*.rs` (`.ptd`: tests/formats_ptd.rs).

use super::cursor::{MAX_CHUNK, RangeCursor};
use super::*;
use crate::params::RangeRead;
use crate::send_sync::LocalBoxFuture;
use std::cell::RefCell;

/// A file of `size` bytes whose byte `i` is `i % 251`, recording every read.
struct Recorded {
    size: u64,
    reads: RefCell<Vec<(u64, u64)>>,
}

impl Recorded {
    fn new(size: u64) -> Self {
        Self {
            size,
            reads: RefCell::new(Vec::new()),
        }
    }
}

impl RangeRead for Recorded {
    fn size(&self) -> Option<u64> {
        Some(self.size)
    }

    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        Box::pin(async move {
            crate::params::check_span("file", offset, length, self.size)?;
            self.reads.borrow_mut().push((offset, length));
            Ok((offset..offset + length).map(|i| (i % 251) as u8).collect())
        })
    }
}

#[test]
fn extensions_pick_formats_as_upstream() {
    let cases = [
        ("model.safetensors", Some(Format::Safetensors)),
        ("MODEL.SafeTensors", Some(Format::Safetensors)),
        ("dir/llama.Q4_K.gguf", Some(Format::Gguf)),
        (
            "https://host/w/params.irpa?download=1#x",
            Some(Format::Irpa),
        ),
        ("https://host/w.gguf/model.bin", None),
        ("gguf", Some(Format::Gguf)),
        ("C:\\weights\\model.irpa", Some(Format::Irpa)),
        ("https://host/w/model.ptd?x=1", Some(Format::Ptd)),
        ("MODEL.PTD", Some(Format::Ptd)),
        ("model.pte", None),
        ("model.safetensors.tmp", None),
        ("", None),
        ("https://host/resolve/main/model", None),
    ];
    for (name, expected) in cases {
        assert_eq!(format_from_name(name), expected, "{name}");
    }
}

#[test]
fn format_names_parse_like_extensions() {
    assert_eq!("GGUF".parse::<Format>(), Ok(Format::Gguf));
    assert_eq!(".safetensors".parse::<Format>(), Ok(Format::Safetensors));
    assert_eq!("irpa".parse::<Format>(), Ok(Format::Irpa));
    assert_eq!(".PTD".parse::<Format>(), Ok(Format::Ptd));
    let error = "onnx".parse::<Format>().unwrap_err();
    assert_eq!(error.code(), StatusCode::Unimplemented);
    for format in Format::ALL {
        assert_eq!(format.to_string().parse::<Format>(), Ok(format));
    }
}

#[test]
fn magic_identifies_formats_when_the_name_does_not() {
    let mut safetensors = 2u64.to_le_bytes().to_vec();
    safetensors.extend_from_slice(b"{}");
    assert_eq!(format_from_magic(&safetensors), Some(Format::Safetensors));
    assert_eq!(format_from_magic(b"GGUF\x03\0\0\0"), Some(Format::Gguf));
    assert_eq!(format_from_magic(b"IRPA\0\0\0\0"), Some(Format::Irpa));
    assert_eq!(format_from_magic(b"GGU"), None);
    assert_eq!(format_from_magic(b"\x44\0\0\0FT01FH01"), Some(Format::Ptd));
    assert_eq!(format_from_magic(b"\x44\0\0\0FT01"), Some(Format::Ptd));
    assert_eq!(format_from_magic(b"\x44\0\0\0ET12eh00"), None);
    let mut too_long = (MAX_HEADER_BYTES + 1).to_le_bytes().to_vec();
    too_long.push(b'{');
    assert_eq!(format_from_magic(&too_long), None);
    assert_eq!(format_from_magic(b"\x02\0\0\0\0\0\0\0["), None);

    assert_eq!(detect("blob", b"GGUF\x03\0\0\0"), Ok(Format::Gguf));
    // The extension wins over contradicting magic (upstream dispatches by extension only).
    assert_eq!(detect("x.irpa", b"GGUF\x03\0\0\0"), Ok(Format::Irpa));
    let error = detect("weights.bin", b"PK\x03\x04").unwrap_err();
    assert_eq!(error.code(), StatusCode::Unimplemented);
    assert!(error.message().contains("weights.bin"), "{error}");
}

#[test]
fn align_up_is_overflow_safe() {
    assert_eq!(align_up(0, 32), Some(0));
    assert_eq!(align_up(1, 32), Some(32));
    assert_eq!(align_up(64, 64), Some(64));
    assert_eq!(align_up(65, 64), Some(128));
    assert_eq!(align_up(u64::MAX - 3, 4), Some(u64::MAX - 3));
    assert_eq!(align_up(u64::MAX - 2, 4), None);
    assert_eq!(align_up(5, 0), None);
}

#[test]
fn cursor_reads_ahead_in_doubling_chunks_and_skips_without_reading() {
    let file = Recorded::new(40 << 20);
    pollster::block_on(async {
        let mut cursor = RangeCursor::new(&file, file.size, u64::MAX, "test header");
        assert_eq!(cursor.take(4, "a").await.unwrap(), &[0, 1, 2, 3]);
        assert_eq!(cursor.reads(), 1);
        // Within the first chunk: no read.
        cursor.skip(1000, "b").unwrap();
        assert_eq!(cursor.u32("c").await.unwrap(), {
            let at = 1004u64;
            u32::from_le_bytes([0, 1, 2, 3].map(|i| ((at + i) % 251) as u8))
        });
        assert_eq!(cursor.reads(), 1);
        // A field straddling the chunk end keeps the buffered part and reads on.
        cursor.skip(INITIAL_READ_BYTES - 1008 - 2, "d").unwrap();
        let straddling = cursor.take(4, "e").await.unwrap().to_vec();
        let at = INITIAL_READ_BYTES - 2;
        assert_eq!(
            straddling,
            (at..at + 4).map(|i| (i % 251) as u8).collect::<Vec<_>>()
        );
        // A large skip is not read at all.
        cursor.skip(20 << 20, "f").unwrap();
        cursor.u64("g").await.unwrap();
    });
    let reads = file.reads.borrow().clone();
    assert_eq!(reads[0], (0, INITIAL_READ_BYTES));
    assert_eq!(reads[1], (INITIAL_READ_BYTES, 2 * INITIAL_READ_BYTES));
    assert_eq!(reads.len(), 3, "{reads:?}");
    assert!(reads.iter().all(|&(_, length)| length <= MAX_CHUNK));
    let skipped_from = INITIAL_READ_BYTES + 2 + (20 << 20);
    assert_eq!(reads[2].0, skipped_from);
}

#[test]
fn cursor_checks_sizes_before_reading() {
    let file = Recorded::new(1000);
    pollster::block_on(async {
        let mut cursor = RangeCursor::new(&file, 1000, 100, "test header");
        let error = cursor.take(2000, "field").await.unwrap_err();
        assert_eq!(error.code(), StatusCode::OutOfRange, "{error}");
        let error = cursor.take(200, "field").await.unwrap_err();
        assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
        assert!(error.message().contains("test header limit"), "{error}");
        cursor.skip(10, "field").unwrap();
        let error = cursor.skip(u64::MAX, "field").unwrap_err();
        assert_eq!(error.code(), StatusCode::OutOfRange, "{error}");
        assert_eq!(cursor.take(0, "empty").await.unwrap(), &[] as &[u8]);
    });
    assert!(file.reads.borrow().is_empty());
}

#[test]
fn prefix_reader_serves_the_prefix_and_fetches_only_the_rest() {
    let file = Recorded::new(100_000);
    pollster::block_on(async {
        let cached = PrefixCachedReader::new(&file).await.unwrap();
        assert_eq!(cached.prefix().len() as u64, INITIAL_READ_BYTES);
        assert_eq!(
            cached.read_range(10, 5).await.unwrap(),
            vec![10, 11, 12, 13, 14]
        );
        let straddle = cached.read_range(INITIAL_READ_BYTES - 2, 4).await.unwrap();
        let at = INITIAL_READ_BYTES - 2;
        assert_eq!(
            straddle,
            (at..at + 4).map(|i| (i % 251) as u8).collect::<Vec<_>>()
        );
        let error = cached.read_range(99_999, 2).await.unwrap_err();
        assert_eq!(error.code(), StatusCode::OutOfRange);
    });
    assert_eq!(
        *file.reads.borrow(),
        vec![(0, INITIAL_READ_BYTES), (INITIAL_READ_BYTES, 2)]
    );
}

#[test]
fn short_reads_from_a_transport_are_data_loss() {
    struct Short;
    impl RangeRead for Short {
        fn size(&self) -> Option<u64> {
            Some(100)
        }
        fn read_range(&self, _: u64, _: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
            Box::pin(async { Ok(vec![0; 3]) })
        }
    }
    let error = pollster::block_on(parse_index(Format::Gguf, &Short)).unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss, "{error}");
}

#[test]
fn unknown_sizes_are_a_failed_precondition() {
    struct Unsized;
    impl RangeRead for Unsized {
        fn size(&self) -> Option<u64> {
            None
        }
        fn read_range(&self, _: u64, _: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }
    for format in Format::ALL {
        let error = pollster::block_on(parse_index(format, &Unsized)).unwrap_err();
        assert_eq!(
            error.code(),
            StatusCode::FailedPrecondition,
            "{format}: {error}"
        );
    }
}

mod ptd_built {
    //! `.ptd` files built with the schema's generated builder and framed as ExecuTorch's
    //! serializer frames them (header inserted after the identifier, root offset moved, segment
    //! data at a 128-aligned base), each with one defect.

    use super::*;
    use crate::executorch_schema::flat_tensor::{
        DataSegment, DataSegmentArgs, FlatTensor, FlatTensorArgs, NamedData, NamedDataArgs,
        TensorLayout, TensorLayoutArgs,
    };
    use crate::executorch_schema::program::ScalarType;
    use crate::params::EntryStorage;
    use crate::params::formats::ptd::{PtdIndex, PtdLayout};
    use flatbuffers::FlatBufferBuilder;

    #[derive(Clone)]
    struct Layout {
        scalar: i8,
        sizes: Option<Vec<i32>>,
        dim_order: Option<Vec<u8>>,
    }

    fn layout(scalar: ScalarType, sizes: &[i32]) -> Option<Layout> {
        Some(Layout {
            scalar: scalar.0,
            sizes: Some(sizes.to_vec()),
            dim_order: Some((0..sizes.len() as u8).collect()),
        })
    }

    #[derive(Clone)]
    struct Named {
        key: Option<String>,
        segment: u32,
        layout: Option<Layout>,
    }

    #[derive(Clone)]
    struct Spec {
        version: u32,
        segments: Option<Vec<(u64, u64)>>,
        named: Option<Vec<Named>>,
        data: Vec<u8>,
    }

    fn named(key: &str, segment: u32, layout: Option<Layout>) -> Named {
        Named {
            key: Some(key.to_owned()),
            segment,
            layout,
        }
    }

    /// Two segments (8 and 4 bytes at 0 and 128); `a` (F32 [2]) and `b` (U8 [8]) share the
    /// first, `c` (opaque) is the second.
    fn valid() -> Spec {
        let mut data = vec![0u8; 132];
        data[..8].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        data[128..].copy_from_slice(&[9, 10, 11, 12]);
        Spec {
            version: 0,
            segments: Some(vec![(0, 8), (128, 4)]),
            named: Some(vec![
                named("a", 0, layout(ScalarType::FLOAT, &[2])),
                named("b", 0, layout(ScalarType::BYTE, &[8])),
                named("c", 1, None),
            ]),
            data,
        }
    }

    fn flatbuffer(spec: &Spec) -> Vec<u8> {
        let mut fbb = FlatBufferBuilder::new();
        let segments = spec.segments.as_ref().map(|segments| {
            let tables: Vec<_> = segments
                .iter()
                .map(|&(offset, size_)| {
                    DataSegment::create(&mut fbb, &DataSegmentArgs { offset, size_ })
                })
                .collect();
            fbb.create_vector(&tables)
        });
        let named_data = spec.named.as_ref().map(|named| {
            let tables: Vec<_> = named
                .iter()
                .map(|n| {
                    let key = n.key.as_deref().map(|key| fbb.create_string(key));
                    let tensor_layout = n.layout.as_ref().map(|l| {
                        let sizes = l.sizes.as_ref().map(|s| fbb.create_vector(s));
                        let dim_order = l.dim_order.as_ref().map(|d| fbb.create_vector(d));
                        TensorLayout::create(
                            &mut fbb,
                            &TensorLayoutArgs {
                                scalar_type: ScalarType(l.scalar),
                                sizes,
                                dim_order,
                            },
                        )
                    });
                    NamedData::create(
                        &mut fbb,
                        &NamedDataArgs {
                            key,
                            segment_index: n.segment,
                            tensor_layout,
                        },
                    )
                })
                .collect();
            fbb.create_vector(&tables)
        });
        let root = FlatTensor::create(
            &mut fbb,
            &FlatTensorArgs {
                version: spec.version,
                segments,
                named_data,
            },
        );
        fbb.finish(root, Some("FT01"));
        fbb.finished_data().to_vec()
    }

    /// The file ExecuTorch's serializer would write for `spec`.
    fn write(spec: &Spec) -> Vec<u8> {
        let payload = flatbuffer(spec);
        let size = payload.len() as u64;
        let base = align_up(48 + size, 128).unwrap();
        let root = u32::from_le_bytes(payload[..4].try_into().unwrap()) + 48;
        let mut out = root.to_le_bytes().to_vec();
        out.extend_from_slice(&payload[4..8]);
        out.extend_from_slice(b"FH01");
        out.extend_from_slice(&40u32.to_le_bytes());
        for field in [48, size, base, spec.data.len() as u64] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.resize(56, 0);
        out.extend_from_slice(&payload[8..]);
        out.resize(base as usize, 0);
        out.extend_from_slice(&spec.data);
        out
    }

    fn parse(spec: &Spec) -> StatusResult<PtdIndex> {
        PtdIndex::from_bytes(&write(spec))
    }

    #[track_caller]
    fn refused(spec: &Spec, code: StatusCode, needle: &str) {
        let error = parse(spec).expect_err("a defective file was accepted");
        assert_eq!(error.code(), code, "{error}");
        assert!(error.message().contains(needle), "{error}");
    }

    #[test]
    fn a_built_file_parses_with_shared_segments_and_layouts() {
        let bytes = write(&valid());
        let index = PtdIndex::from_bytes(&bytes).unwrap();
        assert_eq!(index.version(), 0);
        let base = index.header().segment_base_offset;
        assert_eq!(base % 128, 0);
        let entries = index.index().entries();
        assert_eq!(entries.len(), 3);
        let (a, b, c) = (&entries[0], &entries[1], &entries[2]);
        assert_eq!(a.storage, EntryStorage::Data { offset: base });
        assert_eq!(
            b.storage, a.storage,
            "keys sharing a segment share its bytes"
        );
        assert_eq!((a.length, b.length, c.length), (8, 8, 4));
        assert_eq!(c.storage, EntryStorage::Data { offset: base + 128 });
        assert_eq!(
            (a.dtype.as_deref(), a.shape.clone()),
            (Some("F32"), Some(vec![2]))
        );
        assert_eq!(
            (b.dtype.as_deref(), b.shape.clone()),
            (Some("U8"), Some(vec![8]))
        );
        assert_eq!((&c.dtype, &c.shape), (&None, &None));
        assert_eq!(index.get("c").unwrap().segment_index, 1);
        // The same through the generic entry points, with the format detected by magic.
        let (format, generic) =
            pollster::block_on(detect_and_parse_index("blob", bytes.as_slice())).unwrap();
        assert_eq!(format, Format::Ptd);
        assert_eq!(&generic, index.index());
    }

    #[test]
    fn table_defects_have_coded_errors() {
        use StatusCode::*;
        let with = |edit: &dyn Fn(&mut Spec)| {
            let mut spec = valid();
            edit(&mut spec);
            spec
        };
        let set_layout = |layout: Option<Layout>| {
            with(&move |s: &mut Spec| s.named.as_mut().unwrap()[0].layout = layout.clone())
        };
        refused(&with(&|s| s.version = 1), Unimplemented, "version 1");
        refused(
            &with(&|s| s.segments = None),
            InvalidArgument,
            "no segments",
        );
        refused(&with(&|s| s.named = None), InvalidArgument, "no named_data");
        refused(
            &with(&|s| s.named.as_mut().unwrap()[1].key = None),
            InvalidArgument,
            "named data 1 has no key",
        );
        refused(
            &with(&|s| s.named.as_mut().unwrap()[2].key = Some("a".into())),
            InvalidArgument,
            "repeats key \"a\"",
        );
        refused(
            &with(&|s| s.named.as_mut().unwrap()[2].segment = 2),
            InvalidArgument,
            "names segment 2",
        );
        refused(
            &with(&|s| s.named.as_mut().unwrap()[2].segment = u32::MAX),
            InvalidArgument,
            "segment 4294967295",
        );
        refused(
            &with(&|s| s.segments.as_mut().unwrap()[1] = (129, 4)),
            InvalidArgument,
            "segment 1 [129, 133) runs past",
        );
        refused(
            &with(&|s| s.segments.as_mut().unwrap()[1] = (u64::MAX - 1, 4)),
            InvalidArgument,
            "overflows",
        );
        // Layouts.
        for code in [8, 9, 10, 18, 21, 30, -1, i8::MAX] {
            let bad = Layout {
                scalar: code,
                ..layout(ScalarType::FLOAT, &[2]).unwrap()
            };
            refused(&set_layout(Some(bad)), Unimplemented, "does not define");
        }
        refused(
            &set_layout(layout(ScalarType::FLOAT, &[-2, -1])),
            InvalidArgument,
            "negative size",
        );
        let wrong_orders: [Option<Vec<u8>>; 4] =
            [Some(vec![0]), Some(vec![0, 0]), Some(vec![0, 2]), None];
        for dim_order in wrong_orders {
            let bad = Layout {
                dim_order,
                ..layout(ScalarType::BYTE, &[2, 4]).unwrap()
            };
            refused(&set_layout(Some(bad)), InvalidArgument, "not a permutation");
        }
        refused(
            &set_layout(layout(ScalarType::FLOAT, &[3])),
            InvalidArgument,
            "holds 8 bytes but sizes [3] of F32 need 12",
        );
        refused(
            &set_layout(layout(ScalarType::DOUBLE, &[i32::MAX; 4])),
            InvalidArgument,
            "more than 2^64",
        );
    }

    #[test]
    fn layouts_the_index_cannot_state_row_major_are_kept_but_not_reported() {
        let mut spec = valid();
        let named = spec.named.as_mut().unwrap();
        // Channels-last style: a valid permutation that is not the identity.
        named[1].layout = Some(Layout {
            dim_order: Some(vec![1, 0]),
            ..layout(ScalarType::BYTE, &[2, 4]).unwrap()
        });
        // Packed sub-byte types: the name is reported, the byte size is not checked.
        named[0].layout = layout(ScalarType::QUINT4X2, &[16]);
        // A layout with neither sizes nor dim order is a scalar.
        spec.segments.as_mut().unwrap()[1] = (128, 4);
        spec.named.as_mut().unwrap()[2].layout = Some(Layout {
            scalar: ScalarType::INT.0,
            sizes: None,
            dim_order: None,
        });
        let index = parse(&spec).unwrap();
        let entries = index.index().entries();
        assert_eq!(entries[0].dtype.as_deref(), Some("QUInt4x2"));
        assert_eq!(entries[0].shape, Some(vec![16]));
        assert_eq!((&entries[1].dtype, &entries[1].shape), (&None, &None));
        assert_eq!(
            index.get("b").unwrap().layout,
            Some(PtdLayout {
                scalar_type: ScalarType::BYTE.0,
                sizes: vec![2, 4],
                dim_order: vec![1, 0],
            })
        );
        assert_eq!(entries[2].dtype.as_deref(), Some("I32"));
        assert_eq!(entries[2].shape, Some(vec![]));
    }

    /// A file over bytes, recording every read.
    struct Reads<'a> {
        bytes: &'a [u8],
        log: RefCell<Vec<(u64, u64)>>,
    }

    impl RangeRead for Reads<'_> {
        fn size(&self) -> Option<u64> {
            Some(self.bytes.len() as u64)
        }
        fn read_range(
            &self,
            offset: u64,
            length: u64,
        ) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
            self.log.borrow_mut().push((offset, length));
            self.bytes.read_range(offset, length)
        }
    }

    #[test]
    fn a_long_flatbuffer_costs_one_more_read_of_exactly_its_rest() {
        let mut spec = valid();
        let keys = 3000;
        spec.named = Some(
            (0..keys)
                .map(|i| named(&format!("layer.{i}.some.long.weight.name"), i % 2, None))
                .collect(),
        );
        // Lots of segment data after the flatbuffer, which must never be read.
        spec.data.resize(1 << 20, 7);
        let bytes = write(&spec);
        let reader = Reads {
            bytes: &bytes,
            log: RefCell::new(Vec::new()),
        };
        let index = pollster::block_on(PtdIndex::parse(&reader)).unwrap();
        assert_eq!(index.index().entries().len(), keys as usize);
        let end = index.header().flatbuffer_end();
        assert!(end > INITIAL_READ_BYTES, "{end}");
        assert_eq!(
            *reader.log.borrow(),
            vec![
                (0, INITIAL_READ_BYTES),
                (INITIAL_READ_BYTES, end - INITIAL_READ_BYTES)
            ]
        );
        // A short flatbuffer in a large file: one read, never past the first 64 KiB.
        let mut spec = valid();
        spec.data.resize(1 << 20, 7);
        let bytes = write(&spec);
        let reader = Reads {
            bytes: &bytes,
            log: RefCell::new(Vec::new()),
        };
        pollster::block_on(PtdIndex::parse(&reader)).unwrap();
        assert_eq!(*reader.log.borrow(), vec![(0, INITIAL_READ_BYTES)]);
    }

    #[test]
    fn a_flatbuffer_over_the_limit_is_refused_before_it_is_read() {
        let mut bytes = write(&valid());
        let huge = MAX_HEADER_BYTES + 1;
        bytes[24..32].copy_from_slice(&(huge - 48).to_le_bytes());
        bytes[32..40].copy_from_slice(&huge.to_le_bytes());
        bytes[40..48].copy_from_slice(&0u64.to_le_bytes());
        // A reader that claims a file that large but serves only its real bytes.
        struct Claims<'a>(&'a [u8]);
        impl RangeRead for Claims<'_> {
            fn size(&self) -> Option<u64> {
                Some(MAX_HEADER_BYTES * 2)
            }
            fn read_range(
                &self,
                offset: u64,
                length: u64,
            ) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
                Box::pin(async move {
                    assert!(
                        offset + length <= self.0.len() as u64,
                        "read past the header"
                    );
                    self.0.read_range(offset, length).await
                })
            }
        }
        let mut padded = bytes.clone();
        padded.resize(INITIAL_READ_BYTES as usize, 0);
        let error = pollster::block_on(PtdIndex::parse(&Claims(&padded))).unwrap_err();
        assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
        assert!(error.message().contains("exceeds the limit"), "{error}");
    }
}
