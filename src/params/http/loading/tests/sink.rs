//! The aligned streaming path: request bodies cut into random chunks, fed through the sink into
//! buffers that (like GPU queues) refuse any write whose offset or size is not a multiple of 4,
//! then compared byte for byte with the source; bytes outside the pieces stay untouched.

use super::support::{AlignedBuffer, Rng, random_bytes};
use crate::error::StatusCode;
use crate::params::http::loading::destination::Destination;
use crate::params::http::loading::edges::EdgeStore;
use crate::params::http::loading::sink::{ExpectedDigest, LoadTargets, RangeDigest, RequestSink};
use crate::params::http::planning::planner::{PlannerConfig, Wanted, plan};
use crate::params::http::transport::BodyChunk;
use crate::params::http::transport::staging::{StagingBuffer, StagingPool};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::sync::Arc;

fn host_chunk(bytes: &[u8]) -> BodyChunk {
    BodyChunk::Host(StagingBuffer::from_vec(bytes.to_vec()))
}

/// Feeds the rest of the sink's request (up to `end`) from `file` in random chunk sizes.
fn stream(sink: &mut RequestSink, targets: &LoadTargets<'_>, file: &[u8], end: u64, rng: &mut Rng) {
    while !sink.is_complete() {
        let at = sink.position() as usize;
        let to = (at + 1 + rng.below(37) as usize).min(end as usize);
        sink.consume(targets, &host_chunk(&file[at..to]), 0, to - at)
            .unwrap();
    }
}

#[test]
fn gather_into_unaligned_offsets_is_exact_and_aligned() {
    let mut rng = Rng(0xDEC0_DE00_1234_5678);
    for round in 0..300 {
        let file_len = 400 + rng.below(600) as usize;
        let file = random_bytes(&mut rng, file_len);
        let target_size = 1200;
        let background = random_bytes(&mut rng, target_size as usize);
        let target = AlignedBuffer::new(background.clone());
        // Non-overlapping destination ranges at arbitrary offsets.
        let mut wanted = Vec::new();
        let mut cursor = rng.below(5);
        while wanted.len() < 12 {
            let length = rng.below(60);
            if cursor + length > target_size {
                break;
            }
            let file_offset = rng.below(file.len() as u64 - length + 1);
            wanted.push(Wanted {
                file_offset,
                length,
                target: 0,
                target_offset: cursor,
                atomic: false,
            });
            cursor += length + rng.below(9);
        }
        let config = PlannerConfig {
            gap_threshold: rng.below(40),
            max_request_size: 1 + rng.below(90),
        };
        let planned = plan(&wanted, config, Some(file.len() as u64)).unwrap();
        let targets = LoadTargets {
            destinations: vec![Destination::borrowed(&target)],
            edges: RefCell::new(EdgeStore::default()),
            pool: StagingPool::new(64, 4),
        };
        // Requests complete in any order: reverse them half the time.
        let mut order: Vec<_> = planned.requests.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for request in order {
            let mut sink = RequestSink::new(request, &[], None);
            stream(&mut sink, &targets, &file, request.end, &mut rng);
            sink.finish().unwrap();
        }
        let edges = targets.edges.take();
        pollster::block_on(edges.flush(&targets.destinations)).unwrap();
        let mut expected = background.clone();
        for w in &wanted {
            let (t, f, n) = (
                w.target_offset as usize,
                w.file_offset as usize,
                w.length as usize,
            );
            expected[t..t + n].copy_from_slice(&file[f..f + n]);
        }
        assert_eq!(
            target.bytes(),
            expected,
            "round {round}: {wanted:?} {config:?}"
        );
        assert_eq!(target.unaligned_writes(), 0, "round {round}");
    }
}

#[test]
fn load_layout_pads_its_own_buffers_and_never_reads_back() {
    let mut rng = Rng(0x5151_7777_0000_0001);
    for round in 0..200 {
        let file = random_bytes(&mut rng, 2000);
        let count = 1 + rng.below(10) as usize;
        let mut buffers = Vec::new();
        let mut destinations = Vec::new();
        let mut wanted = Vec::new();
        for target in 0..count {
            let length = rng.below(300);
            let file_offset = rng.below(2000 - length + 1);
            let buffer = Arc::new(AlignedBuffer::new(vec![
                0;
                length.next_multiple_of(4) as usize
            ]));
            destinations.push(Destination::shared(buffer.clone(), Some(length)));
            buffers.push(buffer);
            wanted.push(Wanted {
                file_offset,
                length,
                target,
                target_offset: 0,
                atomic: false,
            });
        }
        let config = PlannerConfig {
            gap_threshold: 16,
            max_request_size: 1 + rng.below(257),
        };
        let planned = plan(&wanted, config, Some(2000)).unwrap();
        let targets = LoadTargets {
            destinations,
            edges: RefCell::new(EdgeStore::default()),
            pool: StagingPool::new(64, 4),
        };
        for request in &planned.requests {
            let mut sink = RequestSink::new(request, &[], None);
            stream(&mut sink, &targets, &file, request.end, &mut rng);
            sink.finish().unwrap();
        }
        pollster::block_on(targets.edges.take().flush(&targets.destinations)).unwrap();
        for (w, buffer) in wanted.iter().zip(&buffers) {
            let bytes = buffer.bytes();
            let (f, n) = (w.file_offset as usize, w.length as usize);
            assert_eq!(&bytes[..n], &file[f..f + n], "round {round}");
            assert!(
                bytes[n..].iter().all(|&b| b == 0),
                "round {round}: padding not zero"
            );
            assert_eq!(buffer.unaligned_writes(), 0);
            assert_eq!(
                buffer.reads(),
                0,
                "round {round}: owned padding needs no read-back"
            );
        }
    }
}

#[test]
fn digests_are_checked_per_piece_and_per_request() {
    let file: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let digest = |bytes: &[u8]| -> [u8; 32] { Sha256::digest(bytes).into() };
    let wanted = [Wanted {
        file_offset: 100,
        length: 500,
        target: 0,
        target_offset: 0,
        atomic: true,
    }];
    let planned = plan(
        &wanted,
        PlannerConfig {
            gap_threshold: 0,
            max_request_size: 64,
        },
        None,
    )
    .unwrap();
    assert_eq!(planned.requests.len(), 1, "an atomic range is one request");
    let run = |expected: [u8; 32]| {
        let buffer = Arc::new(AlignedBuffer::new(vec![0; 500]));
        let targets = LoadTargets {
            destinations: vec![Destination::shared(buffer, Some(500))],
            edges: RefCell::new(EdgeStore::default()),
            pool: StagingPool::new(64, 4),
        };
        let request = &planned.requests[0];
        let what = "parameter \"w\"".to_owned();
        let digests = [RangeDigest {
            start: 100,
            end: 600,
            expected: ExpectedDigest {
                sha256: expected,
                what: what.clone(),
            },
        }];
        let mut sink = RequestSink::new(request, &digests, None);
        stream(&mut sink, &targets, &file, request.end, &mut Rng(7));
        sink.finish()
    };
    assert!(run(digest(&file[100..600])).is_ok());
    let error = run(digest(&file[101..601])).unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss);
    assert!(error.message().contains("parameter \"w\""), "{error}");
}

#[test]
fn bytes_past_the_request_end_are_data_loss() {
    let wanted = [Wanted {
        file_offset: 0,
        length: 8,
        target: 0,
        target_offset: 0,
        atomic: false,
    }];
    let planned = plan(&wanted, PlannerConfig::UNBOUNDED, None).unwrap();
    let buffer = Arc::new(AlignedBuffer::new(vec![0; 8]));
    let targets = LoadTargets {
        destinations: vec![Destination::shared(buffer, Some(8))],
        edges: RefCell::new(EdgeStore::default()),
        pool: StagingPool::new(64, 4),
    };
    let mut sink = RequestSink::new(&planned.requests[0], &[], None);
    let error = sink
        .consume(&targets, &host_chunk(&[1; 12]), 0, 12)
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::DataLoss);
    let mut sink = RequestSink::new(&planned.requests[0], &[], None);
    sink.consume(&targets, &host_chunk(&[1; 4]), 0, 4).unwrap();
    assert_eq!(sink.finish().unwrap_err().code(), StatusCode::Internal);
}

#[test]
fn staging_pool_reuses_buffers_and_release_drops_them() {
    let pool = StagingPool::new(1024, 2);
    let a = pool.take();
    let b = pool.take();
    let c = pool.take();
    assert_eq!(pool.in_use_bytes(), 3 * 1024);
    drop((a, b, c));
    assert_eq!(pool.in_use_bytes(), 0);
    assert_eq!(pool.idle_bytes(), 2 * 1024, "keeps at most max_idle");
    assert_eq!(pool.peak_bytes(), 3 * 1024);
    let held = pool.take();
    pool.release();
    assert_eq!(pool.idle_bytes(), 0);
    drop(held);
    assert_eq!(
        pool.idle_bytes(),
        0,
        "a buffer out during release is dropped on return"
    );
    let _ = pool.take().capacity();
    assert_eq!(pool.idle_bytes(), 1024);
}
