//! Fuzzes the ExecuTorch `.ptd` index parser: any input must give an index that stays inside
//! the file, or an error; never a panic, a hang or a huge allocation. Seed it with
//! tests/fixtures/ptd/*.ptd (ExecuTorch-written files).
#![no_main]

use libfuzzer_sys::fuzz_target;
use webdelegate::params::EntryStorage;
use webdelegate::params::formats::{Format, parse_index_in_memory};

fuzz_target!(|data: &[u8]| {
    if let Ok(index) = parse_index_in_memory(Format::Ptd, data) {
        for entry in index.entries() {
            if let EntryStorage::Data { offset } = entry.storage {
                let end = offset.checked_add(entry.length);
                assert!(end.is_some_and(|end| end <= data.len() as u64), "{entry:?}");
            }
        }
    }
});
