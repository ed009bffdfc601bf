//! A counting global allocator for the tests that measure heap bytes: it counts what each
//! thread allocates and frees, so a measurement on one thread is not disturbed by the tests the
//! harness runs beside it on others. A test binary that declares `mod counting_alloc;` counts
//! every allocation it makes.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    /// Bytes this thread allocated minus the bytes it freed (may go negative when it frees
    /// what another thread allocated).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// The highest [`LIVE`] seen since [`reset_peak`].
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let size = layout.size() as isize;
            let _ = LIVE.try_with(|live| {
                let now = live.get() + size;
                live.set(now);
                let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
            });
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        let _ = LIVE.try_with(|live| live.set(live.get() - layout.size() as isize));
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// This thread's live heap bytes (its allocations minus its frees).
pub fn live() -> isize {
    LIVE.with(Cell::get)
}

/// Starts a new peak at the current live count.
pub fn reset_peak() {
    PEAK.with(|peak| peak.set(live()));
}

/// The highest live count since [`reset_peak`].
pub fn peak() -> isize {
    PEAK.with(Cell::get)
}
