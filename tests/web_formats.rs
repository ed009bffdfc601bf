//! The index parsers inside headless Chromium (wasm32, where `usize` is 32 bits): every fixture
//! written by the real peers' tools parses to what the writer wrote, and files whose tensors lie
//! past 4 GiB keep their exact u64 offsets.
#![cfg(all(target_arch = "wasm32", target_os = "unknown"))]

mod formats_support;

use formats_support::{
    CountingReader, FIXTURES, check_against_manifest, check_offsets_past_4_gib, format_of, manifest,
};
use wasm_bindgen_test::*;
use webdelegate::params::formats::{INITIAL_READ_BYTES, detect_and_parse_index};

wasm_bindgen_test_configure!(run_in_browser);

#[wasm_bindgen_test]
async fn fixtures_parse_in_the_browser_as_the_writers_wrote_them() {
    let manifest = manifest();
    for (name, bytes) in FIXTURES {
        let reader = CountingReader::new(bytes);
        let (format, index) = detect_and_parse_index(name, &reader).await.unwrap();
        assert_eq!(format, format_of(name));
        check_against_manifest(&manifest, name, bytes, &index);
        let expected = if bytes.len() as u64 > INITIAL_READ_BYTES {
            2
        } else {
            1
        };
        assert_eq!(reader.reads().len(), expected, "{name}");
    }
}

#[wasm_bindgen_test]
fn offsets_past_4_gib_survive_32_bit_usize() {
    check_offsets_past_4_gib();
}
