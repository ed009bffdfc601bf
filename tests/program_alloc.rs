//! Decoding allocates in proportion to the blob, not to the lengths it claims: a blob of a few
//! bytes that claims a vector of 2^32 (or 2^64) elements fails with `InvalidProgram` after at
//! most serde's 1 MiB pre-allocation cap.
//!
//! A counting global allocator measures the peak bytes allocated while decoding; this file holds
//! one test so nothing else allocates concurrently.
#![cfg(not(target_arch = "wasm32"))]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use webdelegate::ErrorCode;
use webdelegate::program::{FORMAT_VERSION, MAGIC, decode, encode, samples};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn record(added: usize) {
    let now = CURRENT.fetch_add(added, Ordering::SeqCst) + added;
    PEAK.fetch_max(now, Ordering::SeqCst);
}

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            record(new_size - layout.size());
        } else {
            CURRENT.fetch_sub(layout.size() - new_size, Ordering::SeqCst);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak bytes allocated (above what was live before) while running `f`.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = CURRENT.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let result = f();
    (result, PEAK.load(Ordering::SeqCst) - before)
}

fn header() -> Vec<u8> {
    let mut blob = MAGIC.to_vec();
    blob.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    blob.extend_from_slice(&[0, 0]);
    blob
}

const U32_MAX_VARINT: [u8; 5] = [0xFF, 0xFF, 0xFF, 0xFF, 0x0F];
const U64_MAX_VARINT: [u8; 10] = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];

#[test]
fn lying_lengths_fail_without_large_allocations() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "symbols: 2^32 - 1 strings",
            [header(), U32_MAX_VARINT.to_vec()].concat(),
        ),
        (
            "symbols: 2^64 - 1 strings",
            [header(), U64_MAX_VARINT.to_vec()].concat(),
        ),
        (
            "tensors: 2^32 - 1 declarations",
            [header(), vec![0], U32_MAX_VARINT.to_vec()].concat(),
        ),
        (
            "a symbol name of 2^32 - 1 bytes",
            [header(), vec![1], U32_MAX_VARINT.to_vec(), b"abc".to_vec()].concat(),
        ),
        (
            "a shape of 2^32 - 1 dims",
            // 0 symbols, 1 tensor named "", dtype F32 (0), shape length 2^32 - 1, one dim.
            [
                header(),
                vec![0, 1, 0, 0],
                U32_MAX_VARINT.to_vec(),
                vec![0, 1],
            ]
            .concat(),
        ),
        (
            "ops: 2^64 - 1",
            // 0 symbols, 0 tensors, 0 inputs, 0 outputs, 0 params, then the op count.
            [header(), vec![0, 0, 0, 0, 0], U64_MAX_VARINT.to_vec()].concat(),
        ),
    ];
    for (what, blob) in cases {
        let (result, peak) = peak_during(|| decode(&blob));
        let error = result.expect_err(what);
        assert_eq!(error.code(), ErrorCode::InvalidProgram, "{what}: {error}");
        assert!(
            peak <= (1 << 20) + 4096,
            "{what}: a {}-byte blob made decoding allocate {peak} bytes",
            blob.len()
        );
    }

    // A real program: the peak stays within a small multiple of the blob.
    let blob = encode(&samples::matmul(384, 384, 1536, true).unwrap()).unwrap();
    let (result, peak) = peak_during(|| decode(&blob));
    result.unwrap();
    assert!(
        peak <= 64 * blob.len() + 4096,
        "{peak} bytes for a {}-byte blob",
        blob.len()
    );
}
