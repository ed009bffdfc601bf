//! Provider semantics against `docs/semantics.md` (IREE's interface, index provider and provider
//! list), on the in-memory provider and the provider list.

use super::*;
use crate::error::StatusCode;
use pollster::block_on;
use std::sync::Arc;

fn provider() -> MemoryProvider {
    let provider = MemoryProvider::new();
    provider.insert("weights", "a", (0..16).collect());
    provider.insert("weights", "b", vec![7; 4]);
    provider.insert("weights", "a", vec![99; 16]);
    provider.add_scope("scratch", true);
    provider.insert("scratch", "s", vec![0; 8]);
    provider
}

fn request(key: &str, parameter_offset: u64, buffer_offset: u64, length: u64) -> SpanRequest {
    SpanRequest {
        key: key.into(),
        span: Span {
            parameter_offset,
            buffer_offset,
            length,
        },
    }
}

fn code<T>(result: StatusResult<T>) -> StatusCode {
    match result {
        Ok(_) => StatusCode::Ok,
        Err(status) => status.code(),
    }
}

#[test]
fn signals_have_upstream_values() {
    assert_eq!(Signal::Resume as u32, 0);
    assert_eq!(Signal::Suspend as u32, 1);
    assert_eq!(Signal::LowMemory as u32, 2);
    for signal in [Signal::Resume, Signal::Suspend, Signal::LowMemory] {
        assert!(provider().notify(signal).is_ok());
    }
}

#[test]
fn query_support_is_an_exact_scope_match() {
    let provider = provider();
    assert!(provider.query_support("weights"));
    assert!(!provider.query_support("Weights"));
    assert!(!provider.query_support("weights "));
}

#[test]
fn load_gives_each_span_its_bytes_and_first_key_wins() {
    let provider = provider();
    let spans = block_on(provider.load(
        &HostAllocator,
        "weights",
        &[
            request("a", 4, 0, 8),
            request("b", 0, 0, 4),
            request("a", 16, 0, 0),
        ],
    ))
    .unwrap();
    assert_eq!(spans.len(), 3);
    let read = |span: &LoadedSpan| block_on(span.buffer.read(span.offset, span.length)).unwrap();
    assert_eq!(
        read(&spans[0]),
        (4..12).collect::<Vec<u8>>(),
        "the first 'a' is served"
    );
    assert_eq!(read(&spans[1]), vec![7; 4]);
    assert!(
        read(&spans[2]).is_empty(),
        "a span ending exactly at the end is allowed"
    );
}

#[test]
fn unknown_scope_or_key_is_not_found() {
    let provider = provider();
    let target = HostBuffer::zeroed(8).unwrap();
    assert_eq!(
        code(block_on(provider.gather(
            "nope",
            &target,
            &[request("a", 0, 0, 1)]
        ))),
        StatusCode::NotFound
    );
    assert_eq!(
        code(block_on(provider.load(
            &HostAllocator,
            "weights",
            &[request("zz", 0, 0, 1)]
        ))),
        StatusCode::NotFound
    );
}

#[test]
fn spans_past_the_end_are_out_of_range_even_when_they_overflow() {
    let provider = provider();
    let target = HostBuffer::zeroed(64).unwrap();
    for bad in [
        request("b", 1, 0, 4),
        request("b", 5, 0, 0),
        request("b", u64::MAX, 0, 2),
        request("b", 2, 0, u64::MAX - 1),
    ] {
        assert_eq!(
            code(block_on(provider.gather(
                "weights",
                &target,
                std::slice::from_ref(&bad)
            ))),
            StatusCode::OutOfRange,
            "{bad:?}"
        );
    }
    // Past the target buffer's end, and overflowing there too.
    assert_eq!(
        code(block_on(provider.gather(
            "weights",
            &target,
            &[request("b", 0, 62, 4)]
        ))),
        StatusCode::OutOfRange
    );
    assert_eq!(
        code(block_on(provider.gather(
            "weights",
            &target,
            &[request("b", 0, u64::MAX, 4)]
        ))),
        StatusCode::OutOfRange
    );
    assert_eq!(
        target.to_vec(),
        vec![0; 64],
        "nothing was written by failed gathers"
    );
}

#[test]
fn gather_validates_every_span_before_writing_any() {
    let provider = provider();
    let target = HostBuffer::zeroed(8).unwrap();
    let result = block_on(provider.gather(
        "weights",
        &target,
        &[request("b", 0, 0, 4), request("missing", 0, 4, 4)],
    ));
    assert_eq!(code(result), StatusCode::NotFound);
    assert_eq!(target.to_vec(), vec![0; 8]);
    block_on(provider.gather(
        "weights",
        &target,
        &[request("b", 0, 0, 4), request("a", 14, 6, 2)],
    ))
    .unwrap();
    assert_eq!(target.to_vec(), [7, 7, 7, 7, 0, 0, 14, 15]);
}

#[test]
fn read_and_write_are_single_span_gather_and_scatter() {
    let provider = provider();
    let buffer = HostBuffer::from_bytes(vec![1, 2, 3, 4, 5, 6]);
    block_on(provider.write(&buffer, 2, "scratch", "s", 4, 3)).unwrap();
    assert_eq!(
        provider.get("scratch", "s").unwrap(),
        [0, 0, 0, 0, 3, 4, 5, 0]
    );
    let target = HostBuffer::zeroed(4).unwrap();
    block_on(provider.read("scratch", "s", 3, &target, 1, 3)).unwrap();
    assert_eq!(target.to_vec(), [0, 0, 3, 4]);
}

#[test]
fn writing_a_read_only_scope_is_permission_denied_before_bounds() {
    let provider = provider();
    let source = HostBuffer::zeroed(4).unwrap();
    assert_eq!(
        code(block_on(provider.scatter(
            &source,
            "weights",
            &[request("b", 0, 0, 4)]
        ))),
        StatusCode::PermissionDenied
    );
    // Access is checked before bounds, as upstream.
    assert_eq!(
        code(block_on(provider.scatter(
            &source,
            "weights",
            &[request("b", 100, 0, 4)]
        ))),
        StatusCode::PermissionDenied
    );
    assert_eq!(provider.get("weights", "b").unwrap(), vec![7; 4]);
}

#[test]
fn zero_count_is_a_completed_no_op() {
    let provider = provider();
    let buffer = HostBuffer::zeroed(1).unwrap();
    assert!(block_on(provider.gather("weights", &buffer, &[])).is_ok());
    assert!(block_on(provider.scatter(&buffer, "weights", &[])).is_ok());
    assert!(
        block_on(provider.load(&HostAllocator, "weights", &[]))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn provider_list_picks_the_first_supporting_provider() {
    let first = MemoryProvider::new();
    first.insert("shared", "k", vec![1]);
    let second = MemoryProvider::new();
    second.insert("shared", "k", vec![2]);
    second.insert("only-second", "k", vec![3]);
    let mut list = ProviderList::new();
    list.push(Arc::new(first));
    list.push(Arc::new(second));
    let target = HostBuffer::zeroed(1).unwrap();
    block_on(list.read("shared", "k", 0, &target, 0, 1)).unwrap();
    assert_eq!(target.to_vec(), [1]);
    block_on(list.read("only-second", "k", 0, &target, 0, 1)).unwrap();
    assert_eq!(target.to_vec(), [3]);
    assert_eq!(
        code(block_on(list.read("nobody", "k", 0, &target, 0, 1))),
        StatusCode::NotFound
    );
    assert_eq!(list.describe("shared", "k").unwrap().length, 1);
    assert!(list.notify(Signal::LowMemory).is_ok());
}

#[test]
fn host_buffers_beyond_memory_are_resource_exhausted_not_an_abort() {
    // Beyond any 64-bit address space in use (47-57 bits) and beyond isize::MAX: both refused
    // by the fallible allocation, whatever the kernel's overcommit policy.
    for size in [1u64 << 57, u64::MAX - 3, isize::MAX as u64 + 1] {
        let error = HostBuffer::zeroed(size).expect_err("cannot be had");
        assert_eq!(
            error.code(),
            StatusCode::ResourceExhausted,
            "{size}: {error}"
        );
        assert!(error.message().contains(&size.to_string()), "{error}");
        let Err(error) = HostAllocator.allocate(size, "w") else {
            panic!("{size} bytes were allocated");
        };
        assert_eq!(error.code(), StatusCode::ResourceExhausted, "{error}");
    }
    assert_eq!(HostBuffer::zeroed(5).unwrap().to_vec(), vec![0; 5]);
}
