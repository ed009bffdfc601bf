//! A checked parse: a counting allocator bounds the largest single allocation a parse makes,
//! errors must carry the codes the parsers promise, and accepted indexes must keep the invariants
//! every index keeps whatever the input.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use webdelegate::StatusCode;
use webdelegate::params::formats::{Format, INITIAL_READ_BYTES, parse_index_in_memory};
use webdelegate::params::{EntryStorage, ParameterIndex, StatusResult};

/// Records the largest single allocation each thread asks for.
struct Tracking;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: forwards every call to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

/// Parses `bytes` as `format`, checking the allocation bound and, on success, the invariants
/// every index must keep whatever the input.
pub fn parse_checked(format: Format, bytes: &[u8]) -> StatusResult<ParameterIndex> {
    let mut result = None;
    let largest =
        largest_allocation_during(|| result = Some(parse_index_in_memory(format, bytes))) as u64;
    let result = result.expect("ran");
    let bound = 16 * (bytes.len() as u64).max(INITIAL_READ_BYTES);
    assert!(
        largest <= bound,
        "{format}: allocated {largest} bytes for a {}-byte file",
        bytes.len()
    );
    match &result {
        Ok(index) => check_invariants(format, bytes, index),
        Err(error) => {
            // RESOURCE_EXHAUSTED: an IRPA splat longer than the limit on what a file may ask for.
            let allowed = [
                StatusCode::InvalidArgument,
                StatusCode::OutOfRange,
                StatusCode::Unimplemented,
                StatusCode::ResourceExhausted,
            ];
            assert!(
                allowed.contains(&error.code()),
                "{format}: unexpected {error}"
            );
            assert!(!error.message().is_empty());
        }
    }
    result
}

pub fn check_invariants(format: Format, bytes: &[u8], index: &ParameterIndex) {
    let size = bytes.len() as u64;
    let mut data: Vec<(u64, u64)> = Vec::new();
    for entry in index.entries() {
        match &entry.storage {
            EntryStorage::Data { offset } => {
                let end = offset.checked_add(entry.length).expect("no overflow");
                assert!(
                    end <= size,
                    "{format}: {} ends at {end} past {size}",
                    entry.key
                );
                data.push((*offset, end));
            }
            EntryStorage::Splat { pattern } => {
                assert!([1, 2, 4, 8, 16].contains(&pattern.len()), "{format}");
                assert_eq!(entry.length % pattern.len() as u64, 0, "{format}");
            }
        }
    }
    if !matches!(format, Format::Irpa | Format::Ptd) {
        // IRPA and .ptd allow entries to share bytes; the others must not overlap.
        data.sort_unstable();
        for pair in data.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "{format}: overlapping {pair:?}");
        }
    }
}

/// The largest single allocation `work` makes on this thread.
pub fn largest_allocation_during<T>(work: impl FnOnce() -> T) -> usize {
    LARGEST.with(|largest| largest.set(0));
    let _ = std::hint::black_box(work());
    LARGEST.with(Cell::get)
}
