//! One body feeding many sinks (a whole-file stream): random chunkings of the whole file fed to
//! the sinks of every planned request at once must reproduce the same bytes as one request per
//! sink; a sink the stream has passed is not fed (no hole); and the load queue's hand-over and
//! supersede rules.

use super::support::{AlignedBuffer, Rng, random_bytes};
use crate::params::http::loading::destination::Destination;
use crate::params::http::loading::edges::EdgeStore;
use crate::params::http::loading::group::SinkGroup;
use crate::params::http::loading::queue::LoadQueue;
use crate::params::http::loading::sink::{LoadTargets, RequestSink};
use crate::params::http::planning::planner::{PlannerConfig, Wanted, plan};
use crate::params::http::transport::BodyChunk;
use crate::params::http::transport::staging::{StagingBuffer, StagingPool};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

fn host_chunk(bytes: &[u8]) -> BodyChunk {
    BodyChunk::Host(StagingBuffer::from_vec(bytes.to_vec()))
}

fn wanted_ranges(rng: &mut Rng, file_len: u64, target_size: u64) -> Vec<Wanted> {
    let mut wanted = Vec::new();
    let mut cursor = rng.below(5);
    while wanted.len() < 16 {
        let length = 1 + rng.below(70);
        if cursor + length > target_size || length > file_len {
            break;
        }
        wanted.push(Wanted {
            file_offset: rng.below(file_len - length + 1),
            length,
            target: 0,
            target_offset: cursor,
            atomic: false,
        });
        cursor += length + rng.below(9);
    }
    wanted
}

#[test]
fn one_whole_file_body_feeds_every_sink_exactly() {
    let mut rng = Rng(0x05EE_D0F6_A00B);
    for _ in 0..200 {
        let file_len = 500 + rng.below(500) as usize;
        let file = random_bytes(&mut rng, file_len);
        let target_size = 1500;
        let background = random_bytes(&mut rng, target_size as usize);
        let target = AlignedBuffer::new(background.clone());
        let wanted = wanted_ranges(&mut rng, file.len() as u64, target_size);
        let config = PlannerConfig {
            gap_threshold: rng.below(30),
            max_request_size: 1 + rng.below(80),
        };
        let planned = plan(&wanted, config, Some(file.len() as u64)).unwrap();
        let targets = LoadTargets {
            destinations: vec![Destination::borrowed(&target)],
            edges: RefCell::new(EdgeStore::default()),
            pool: StagingPool::new(64, 4),
        };
        let mut sinks = planned
            .requests
            .iter()
            .map(|r| RequestSink::new(r, &[], None));
        let Some(first) = sinks.next() else {
            continue;
        };
        let mut group = SinkGroup::new(first);
        group.add(sinks);
        // The whole file from byte 0, in random chunks, with random offsets into each chunk.
        let mut at = 0usize;
        let mut completed = 0;
        while at < file.len() && !group.is_complete() {
            let to = (at + 1 + rng.below(45) as usize).min(file.len());
            let pad = rng.below(3) as usize;
            let mut chunk = vec![0xEE; pad];
            chunk.extend_from_slice(&file[at..to]);
            let fed = group
                .feed(&targets, &host_chunk(&chunk), pad, at as u64, to - at)
                .unwrap();
            completed += fed.completed;
            at = to;
        }
        assert!(group.is_complete());
        assert_eq!(completed, planned.requests.len() as u64);
        assert_eq!(group.consumed(), planned.bytes_fetched);
        let edges = targets.edges.take();
        pollster::block_on(edges.flush(&targets.destinations)).unwrap();
        let mut expected = background.clone();
        for w in &wanted {
            let (from, to) = (w.file_offset as usize, (w.file_offset + w.length) as usize);
            let at = w.target_offset as usize;
            expected[at..at + w.length as usize].copy_from_slice(&file[from..to]);
        }
        assert_eq!(target.bytes(), expected);
        assert_eq!(target.unaligned_writes(), 0);
    }
}

#[test]
fn a_stream_that_passed_a_sink_does_not_feed_it() {
    let file: Vec<u8> = (0..100).collect();
    let target = AlignedBuffer::new(vec![0; 100]);
    let wanted = [Wanted {
        file_offset: 40,
        length: 20,
        target: 0,
        target_offset: 0,
        atomic: false,
    }];
    let planned = plan(&wanted, PlannerConfig::UNBOUNDED, Some(100)).unwrap();
    let targets = LoadTargets {
        destinations: vec![Destination::borrowed(&target)],
        edges: RefCell::new(EdgeStore::default()),
        pool: StagingPool::new(64, 4),
    };
    let mut group = SinkGroup::new(RequestSink::new(&planned.requests[0], &[], None));
    // Bytes [50, 70) start past the sink's first missing byte (40): not fed.
    let fed = group
        .feed(&targets, &host_chunk(&file[50..70]), 0, 50, 20)
        .unwrap();
    assert_eq!((fed.consumed, fed.completed), (0, 0));
    assert_eq!(group.span(), Some((40, 60)));
    // From 30: the sink takes [40, 60) and completes.
    let fed = group
        .feed(&targets, &host_chunk(&file[30..70]), 0, 30, 40)
        .unwrap();
    assert_eq!((fed.consumed, fed.completed), (20, 1));
    assert!(group.is_complete());
}

#[test]
fn the_queue_hands_over_to_an_open_stream_that_has_not_passed_and_supersedes_one_that_has() {
    let wanted: Vec<Wanted> = (0..4)
        .map(|i| Wanted {
            file_offset: i * 100,
            length: 100,
            target: 0,
            target_offset: i * 100,
            atomic: false,
        })
        .collect();
    let config = PlannerConfig {
        gap_threshold: 0,
        max_request_size: 100,
    };
    let planned = plan(&wanted, config, Some(400)).unwrap();
    let ranges = AtomicBool::new(true);
    let queue = LoadQueue::new(
        &planned.requests,
        Box::new(|r| RequestSink::new(r, &[], None)),
        &ranges,
    );
    let first = queue.next_sink().expect("request 0");
    let second = queue.next_sink().expect("request 1");
    // No open stream: nothing can be handed over.
    let back = queue
        .hand_over(second.position(), vec![second])
        .unwrap_err();
    assert_eq!(back.len(), 1);
    queue.ranges_ignored();
    assert!(!ranges.load(Ordering::Relaxed), "marked at once");
    let rest = queue.claim_rest();
    assert_eq!(rest.len(), 2, "requests 2 and 3 were not started");
    assert!(queue.next_sink().is_none(), "nothing starts after a claim");
    let stream = queue.open_stream();
    assert!(stream.is_current());
    assert!(stream.advance(150).is_empty());
    // Request 1 (from 100) arrives: the stream at 150 has passed it.
    let back = queue.hand_over(100, back).unwrap_err();
    // Request 0 (from 0) is superseded by nobody yet; a stream at 150 cannot take it either.
    let first = queue.hand_over(0, vec![first]).unwrap_err();
    // Request 1's own 200 supersedes the stream, which then hands its sinks to the new one.
    let newer = queue.open_stream();
    assert!(!stream.is_current() && newer.is_current());
    assert!(
        stream.advance(200).is_empty(),
        "a superseded stream takes nothing"
    );
    assert!(
        queue.hand_over(150, rest).is_ok(),
        "the new stream (at 0) takes them"
    );
    assert!(queue.hand_over(0, first).is_ok(), "and request 0's");
    assert_eq!(newer.advance(10).len(), 3);
    assert!(stream.close().is_empty());
    assert!(
        newer.is_current(),
        "closing a superseded stream leaves the open one"
    );
    drop(back);
    assert!(newer.close().is_empty());
    assert!(
        queue.hand_over(0, Vec::new()).is_err(),
        "no stream open after close"
    );
}
