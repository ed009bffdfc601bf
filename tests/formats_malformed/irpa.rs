//! Malformed IRPA archives: IREE-written fixtures with one field patched, case by case.

use crate::code;
use crate::formats_support::checked::parse_checked;
use crate::formats_support::fixture;
use webdelegate::StatusCode;
use webdelegate::params::formats::Format;

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// Offsets of the entries of a fixture's (first) entry table.
fn irpa_entries(bytes: &[u8]) -> Vec<usize> {
    let read = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (count, mut at) = (read(32), read(40) as usize);
    (0..count)
        .map(|_| {
            let here = at;
            at += (read(at) as usize).div_ceil(16) * 16;
            here
        })
        .collect()
}

#[test]
fn irpa_malformed_archives_have_upstream_codes() {
    use StatusCode::*;
    let p = Format::Irpa;
    let base = fixture("mixed.irpa");
    let entries = irpa_entries(base);
    let (data0, splat1) = (entries[0], entries[1]);
    let patched = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut bytes = base.to_vec();
        edit(&mut bytes);
        bytes
    };
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str)> = vec![
        (
            "shorter than a prefix",
            base[..31].to_vec(),
            InvalidArgument,
            "not enough bytes",
        ),
        (
            "bad magic",
            patched(&|b| b[0] = b'X'),
            InvalidArgument,
            "magic",
        ),
        (
            "major 1",
            patched(&|b| b[4] = 1),
            Unimplemented,
            "version 1.0",
        ),
        (
            "minor 1",
            patched(&|b| b[6] = 1),
            Unimplemented,
            "version 0.1",
        ),
        (
            "header size 96",
            patched(&|b| put_u64(b, 8, 96)),
            InvalidArgument,
            "exactly 88",
        ),
        (
            "header size past EOF",
            patched(&|b| put_u64(b, 8, 1 << 40)),
            OutOfRange,
            "header",
        ),
        (
            "header size u64::MAX",
            patched(&|b| put_u64(b, 8, u64::MAX)),
            OutOfRange,
            "header",
        ),
        (
            "next header past EOF",
            patched(&|b| put_u64(b, 16, 4090)),
            OutOfRange,
            "linked header",
        ),
        (
            "next header u64::MAX",
            patched(&|b| put_u64(b, 16, u64::MAX)),
            OutOfRange,
            "linked header",
        ),
        (
            "entry count huge",
            patched(&|b| put_u64(b, 32, u64::MAX)),
            OutOfRange,
            "entry table truncated",
        ),
        (
            "entry segment past EOF",
            patched(&|b| put_u64(b, 48, 1 << 20)),
            OutOfRange,
            "entry segment",
        ),
        (
            "entry segment overflows",
            patched(&|b| put_u64(b, 40, u64::MAX)),
            OutOfRange,
            "entry segment",
        ),
        (
            "storage segment past EOF",
            patched(&|b| put_u64(b, 80, 1 << 40)),
            OutOfRange,
            "storage segment",
        ),
        (
            "metadata segment too short",
            patched(&|b| put_u64(b, 64, 2)),
            OutOfRange,
            "entry name reference",
        ),
        (
            "entry size 59",
            patched(&|b| put_u64(b, data0, 59)),
            OutOfRange,
            "sized header",
        ),
        (
            "entry size past table",
            patched(&|b| put_u64(b, data0, 1 << 30)),
            OutOfRange,
            "sized header",
        ),
        (
            "external entry",
            patched(&|b| b[data0 + 8] = 3),
            Unimplemented,
            "external file",
        ),
        (
            "unknown entry type",
            patched(&|b| b[data0 + 8] = 9),
            Unimplemented,
            "entry type 9",
        ),
        (
            "name past metadata",
            patched(&|b| put_u64(b, data0 + 20, 1 << 20)),
            OutOfRange,
            "entry name",
        ),
        (
            "name overflows",
            patched(&|b| put_u64(b, data0 + 20, u64::MAX)),
            OutOfRange,
            "entry name",
        ),
        (
            "metadata past segment",
            patched(&|b| put_u64(b, data0 + 44, 1 << 20)),
            OutOfRange,
            "metadata",
        ),
        (
            "data past storage",
            patched(&|b| put_u64(b, data0 + 68, 1 << 20)),
            OutOfRange,
            "storage reference",
        ),
        (
            "data offset overflows",
            patched(&|b| put_u64(b, data0 + 60, u64::MAX)),
            OutOfRange,
            "storage reference",
        ),
        (
            "data entry too small",
            patched(&|b| put_u64(b, data0, 70)),
            OutOfRange,
            "length underflow",
        ),
        (
            "splat entry too small",
            patched(&|b| put_u64(b, splat1, 80)),
            OutOfRange,
            "length underflow",
        ),
        (
            "splat pattern 17",
            patched(&|b| b[splat1 + 84] = 17),
            InvalidArgument,
            "pattern length 17",
        ),
        (
            "splat pattern 3",
            patched(&|b| b[splat1 + 84] = 3),
            InvalidArgument,
            "pattern length 3",
        ),
        (
            "splat pattern 0",
            patched(&|b| b[splat1 + 84] = 0),
            InvalidArgument,
            "pattern length 0",
        ),
        (
            "splat length not a multiple",
            patched(&|b| {
                b[splat1 + 84] = 2;
                put_u64(b, splat1 + 60, 63);
            }),
            InvalidArgument,
            "does not divide",
        ),
        (
            "splat longer than the limit",
            patched(&|b| put_u64(b, splat1 + 60, 1 << 41)),
            ResourceExhausted,
            "limit",
        ),
        (
            "splat length u64::MAX",
            patched(&|b| put_u64(b, splat1 + 60, u64::MAX)),
            ResourceExhausted,
            "limit",
        ),
        (
            "name not UTF-8",
            patched(&|b| {
                let names = u64::from_le_bytes(b[56..64].try_into().unwrap()) as usize;
                b[names] = 0xFF;
            }),
            InvalidArgument,
            "UTF-8",
        ),
    ];
    for (what, bytes, want, contains) in cases {
        let Err(error) = parse_checked(p, &bytes) else {
            panic!("{what}: accepted");
        };
        assert_eq!(error.code(), want, "{what}: {error}");
        assert!(error.message().contains(contains), "{what}: {error}");
    }
    // A SKIP entry disappears from the index; the others stay.
    let skipped = patched(&|b| b[data0 + 8] = 0);
    let index = parse_checked(p, &skipped).unwrap();
    assert_eq!(index.entries().len(), entries.len() - 1);
    assert!(index.get("weight").is_none());
}

#[test]
fn irpa_chains_are_bounded() {
    // 1025 empty archives, each linking to the next: refused without 1025 reads going on forever.
    let mut bytes = Vec::new();
    for index in 0..1025u64 {
        let mut header = vec![0u8; 96];
        header[..4].copy_from_slice(b"IRPA");
        put_u64(&mut header, 8, 88);
        put_u64(&mut header, 16, if index < 1024 { 96 } else { 0 });
        bytes.extend_from_slice(&header);
    }
    assert_eq!(code(Format::Irpa, &bytes), StatusCode::InvalidArgument);
    assert!(parse_checked(Format::Irpa, &bytes[..96 * 1024]).is_err());
    let mut short = bytes[..96 * 1024].to_vec();
    put_u64(&mut short, 96 * 1023 + 16, 0);
    assert_eq!(
        parse_checked(Format::Irpa, &short).unwrap().entries().len(),
        0
    );
}
