//! GPU parameter buffers: streamed writes at any byte alignment land exactly (the patch kernel
//! merges partial words without losing neighbouring bytes), reads return what was written,
//! spans are bounds-checked, and every buffer is counted while alive.

use super::{Rng, new_backend};
use crate::backends::webgpu::GpuBuffer;
use crate::error::StatusCode;
use crate::params::BufferAllocator;

#[test]
fn unaligned_chunked_writes_land_exactly() {
    let backend = new_backend();
    let allocator = backend.allocator().unwrap();
    let mut rng = Rng::new(50);
    for size in [1usize, 3, 4, 5, 17, 1000, 4099] {
        let buffer = allocator.allocate(size as u64, "test").unwrap();
        let mut want = vec![0u8; size];
        // First pass: the bytes in random-length chunks, in order.
        let mut offset = 0;
        while offset < size {
            let len = rng.range(1, 11).min(size - offset);
            let chunk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            buffer.write(offset as u64, &chunk).unwrap();
            want[offset..offset + len].copy_from_slice(&chunk);
            offset += len;
        }
        // Second pass: random overwrites at random offsets, out of order.
        for _ in 0..20 {
            let start = rng.range(0, size - 1);
            let len = rng.range(1, 9).min(size - start);
            let chunk: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            buffer.write(start as u64, &chunk).unwrap();
            want[start..start + len].copy_from_slice(&chunk);
        }
        let got = pollster::block_on(buffer.read(0, size as u64)).unwrap();
        assert_eq!(got, want, "size {size}");
        if size > 3 {
            let part = pollster::block_on(buffer.read(1, size as u64 - 2)).unwrap();
            assert_eq!(part, want[1..size - 1]);
        }
    }
}

#[test]
fn spans_past_the_end_are_refused() {
    let backend = new_backend();
    let buffer = backend.allocator().unwrap().allocate(10, "test").unwrap();
    assert_eq!(buffer.size(), 10);
    assert_eq!(
        buffer.write(8, &[0; 3]).unwrap_err().code(),
        StatusCode::OutOfRange
    );
    assert_eq!(
        buffer.write(u64::MAX, &[0]).unwrap_err().code(),
        StatusCode::OutOfRange
    );
    let err = pollster::block_on(buffer.read(5, 6)).unwrap_err();
    assert_eq!(err.code(), StatusCode::OutOfRange);
    assert!(buffer.as_any().downcast_ref::<GpuBuffer>().is_some());
}

#[test]
fn buffers_are_counted_while_alive() {
    let backend = new_backend();
    assert_eq!(backend.live_buffers(), 0);
    let allocator = backend.allocator().unwrap();
    let a = allocator.allocate(100, "a").unwrap();
    let b = allocator.allocate(3, "b").unwrap();
    assert_eq!(backend.live_buffers(), 2);
    assert_eq!(backend.live_buffer_bytes(), 100 + 4);
    // Unaligned writes create and drop their own small uniform buffers.
    b.write(1, &[1, 2]).unwrap();
    drop(a);
    assert_eq!(backend.live_buffers(), 1);
    drop(b);
    assert_eq!(backend.live_buffers(), 0);
    assert_eq!(backend.live_buffer_bytes(), 0);
    let too_big = allocator
        .allocate(u64::MAX - 1, "huge")
        .err()
        .map(|e| e.code());
    assert_eq!(too_big, Some(StatusCode::InvalidArgument));
}
