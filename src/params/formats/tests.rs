//! Unit tests of the format helpers: detection, alignment, the streaming cursor and the prefix
//! cache. The parsers are tested against real peers' files in `tests/formats_*.rs`.

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
