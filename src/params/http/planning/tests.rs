//! Unit tests of planning: the planner's properties (coverage, coalescing, request caps, atomic
//! ranges, over-fetch accounting and overflow-safe bounds, on hand-made cases and on seeded
//! random plans) and the retry policy's backoff.

use crate::error::StatusCode;
use crate::params::http::planning::options::RetryPolicy;
use crate::params::http::planning::planner::{Plan, PlannerConfig, Wanted, plan, plan_whole_file};
use std::time::Duration;

fn wanted(file_offset: u64, length: u64, target: usize) -> Wanted {
    Wanted {
        file_offset,
        length,
        target,
        target_offset: 0,
        atomic: false,
    }
}

fn config(gap_threshold: u64, max_request_size: u64) -> PlannerConfig {
    PlannerConfig {
        gap_threshold,
        max_request_size,
    }
}

fn ranges(plan: &Plan) -> Vec<(u64, u64)> {
    plan.requests.iter().map(|r| (r.start, r.end)).collect()
}

#[test]
fn contiguous_tensors_coalesce_into_one_request() {
    let w = [wanted(100, 50, 0), wanted(150, 30, 1), wanted(180, 20, 2)];
    let p = plan(&w, config(0, 1 << 20), Some(1000)).unwrap();
    assert_eq!(ranges(&p), vec![(100, 200)]);
    assert_eq!(p.requests[0].pieces.len(), 3);
    assert_eq!((p.bytes_needed, p.bytes_fetched), (100, 100));
    assert_eq!(p.overfetch_fraction(), 0.0);
}

#[test]
fn gaps_within_threshold_merge_and_count_as_overfetch() {
    let w = [wanted(0, 100, 0), wanted(110, 100, 1), wanted(400, 100, 2)];
    let p = plan(&w, config(10, 1 << 20), None).unwrap();
    assert_eq!(ranges(&p), vec![(0, 210), (400, 500)]);
    assert_eq!((p.bytes_needed, p.bytes_fetched), (300, 310));
    assert!((p.overfetch_fraction() - 10.0 / 300.0).abs() < 1e-12);
    // One byte more gap than the threshold: no merge.
    let p = plan(&w, config(9, 1 << 20), None).unwrap();
    assert_eq!(ranges(&p), vec![(0, 100), (110, 210), (400, 500)]);
    assert_eq!(p.bytes_fetched, 300);
}

#[test]
fn requests_are_capped_and_a_long_tensor_is_split_across_them() {
    let w = [wanted(10, 1000, 7)];
    let p = plan(&w, config(0, 300), None).unwrap();
    assert_eq!(
        ranges(&p),
        vec![(10, 310), (310, 610), (610, 910), (910, 1010)]
    );
    let pieces: Vec<_> = p
        .requests
        .iter()
        .flat_map(|r| {
            r.pieces
                .iter()
                .map(|x| (x.target, x.target_offset, x.length))
        })
        .collect();
    assert_eq!(
        pieces,
        vec![(7, 0, 300), (7, 300, 300), (7, 600, 300), (7, 900, 100)]
    );
}

#[test]
fn request_count_meets_the_bench_bound_for_a_contiguous_file() {
    // 200 tensors of odd sizes back to back, as in a safetensors file after its header.
    let mut w = Vec::new();
    let mut offset = 8 + 4000;
    for i in 0..200u64 {
        let length = 1000 + (i * 7919) % 50_000;
        w.push(wanted(offset, length, i as usize));
        offset += length;
    }
    let bytes = offset - 4008;
    for max in [4096, 65_536, 1 << 20, 16 << 20] {
        let p = plan(&w, config(64 << 10, max), Some(offset)).unwrap();
        assert!(
            p.requests.len() as u64 <= 1 + bytes.div_ceil(max),
            "max {max}"
        );
        assert_eq!(p.bytes_fetched, bytes);
        assert!(p.requests.iter().all(|r| r.len() <= max));
    }
}

#[test]
fn atomic_ranges_are_never_split() {
    let mut a = wanted(250, 200, 1);
    a.atomic = true;
    let w = [wanted(0, 250, 0), a, wanted(450, 100, 2)];
    let p = plan(&w, config(0, 300), None).unwrap();
    for r in &p.requests {
        for piece in &r.pieces {
            if piece.wanted == 1 {
                assert_eq!((piece.file_offset, piece.length), (250, 200));
            }
        }
    }
    // An atomic range longer than the cap gets a request of its own, over the cap.
    let mut big = wanted(0, 1000, 0);
    big.atomic = true;
    let p = plan(&[big, wanted(1000, 10, 1)], config(0, 300), None).unwrap();
    assert_eq!(ranges(&p), vec![(0, 1000), (1000, 1010)]);
}

#[test]
fn overlapping_and_repeated_ranges_share_bytes() {
    let mut w = vec![
        wanted(100, 100, 0),
        wanted(100, 100, 1),
        wanted(150, 100, 2),
    ];
    w[1].target_offset = 64;
    let p = plan(&w, config(0, 1 << 20), None).unwrap();
    assert_eq!(ranges(&p), vec![(100, 250)]);
    assert_eq!((p.bytes_needed, p.bytes_fetched), (150, 150));
    let pieces = &p.requests[0].pieces;
    assert_eq!(pieces.len(), 3);
    assert_eq!((pieces[1].target, pieces[1].target_offset), (1, 64));
}

#[test]
fn empty_ranges_and_empty_input_plan_nothing() {
    let p = plan(&[], config(0, 10), Some(0)).unwrap();
    assert!(p.requests.is_empty());
    assert_eq!(p.overfetch_fraction(), 0.0);
    let p = plan(&[wanted(5, 0, 0)], config(0, 10), Some(5)).unwrap();
    assert!(p.requests.is_empty());
}

#[test]
fn bounds_are_checked_without_overflow() {
    let err = plan(&[wanted(u64::MAX - 1, 2, 0)], config(0, 10), None).unwrap_err();
    assert_eq!(err.code(), StatusCode::OutOfRange);
    assert!(err.message().contains("overflows"), "{err}");
    let err = plan(&[wanted(90, 11, 0)], config(0, 10), Some(100)).unwrap_err();
    assert_eq!(err.code(), StatusCode::OutOfRange);
    assert!(err.message().contains("[90, 101)"), "{err}");
    // Ending exactly at the file's end is fine.
    assert!(plan(&[wanted(90, 10, 0)], config(0, 10), Some(100)).is_ok());
    let mut w = wanted(0, 10, 0);
    w.target_offset = u64::MAX - 5;
    assert_eq!(
        plan(&[w], config(0, 10), None).unwrap_err().code(),
        StatusCode::OutOfRange
    );
    let err = plan(&[wanted(0, 1, 0)], config(0, 0), None).unwrap_err();
    assert_eq!(err.code(), StatusCode::InvalidArgument);
    // Huge but valid numbers do not overflow in the gap / cap arithmetic.
    let p = plan(
        &[wanted(u64::MAX - 100, 50, 0), wanted(u64::MAX - 40, 40, 1)],
        PlannerConfig::UNBOUNDED,
        None,
    )
    .unwrap();
    assert_eq!(ranges(&p), vec![(u64::MAX - 100, u64::MAX)]);
}

#[test]
fn whole_file_plan_covers_every_byte_once() {
    let w = [wanted(10, 5, 0), wanted(50, 10, 1)];
    let p = plan_whole_file(&w, 100).unwrap();
    assert_eq!(ranges(&p), vec![(0, 100)]);
    assert_eq!((p.bytes_needed, p.bytes_fetched), (15, 100));
    assert_eq!(p.requests[0].pieces.len(), 2);
    assert!(plan_whole_file(&[wanted(95, 10, 0)], 100).is_err());
    assert!(plan_whole_file(&[], 0).unwrap().requests.is_empty());
}

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn random_plans_cover_every_wanted_byte_exactly_once_per_range() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..400 {
        let file_size = 1 + rng.below(20_000);
        let count = rng.below(30) as usize;
        let w: Vec<Wanted> = (0..count)
            .map(|i| {
                let start = rng.below(file_size);
                let length = rng.below(file_size - start + 1);
                Wanted {
                    file_offset: start,
                    length,
                    target: i,
                    target_offset: rng.below(1000),
                    atomic: rng.below(5) == 0,
                }
            })
            .collect();
        let cfg = config(rng.below(500), 1 + rng.below(4000));
        let p = plan(&w, cfg, Some(file_size)).unwrap();
        check_plan(&p, &w, cfg, round);
    }
}

fn check_plan(p: &Plan, w: &[Wanted], cfg: PlannerConfig, round: usize) {
    // Requests sorted, disjoint, non-empty, within the cap unless they carry an atomic range.
    for pair in p.requests.windows(2) {
        assert!(pair[0].end <= pair[1].start, "round {round}: overlap");
    }
    let atomic_len = |r: &crate::params::http::planning::planner::PlannedRequest| {
        r.pieces
            .iter()
            .filter(|x| w[x.wanted].atomic)
            .map(|x| x.length)
            .max()
            .unwrap_or(0)
    };
    for r in &p.requests {
        assert!(r.start < r.end, "round {round}: empty request");
        assert!(
            r.len() <= cfg.max_request_size || atomic_len(r) > 0,
            "round {round}: request of {} over cap {}",
            r.len(),
            cfg.max_request_size
        );
        for piece in &r.pieces {
            assert!(piece.file_offset >= r.start && piece.file_end() <= r.end);
        }
        // A request starts and ends on needed bytes (no trailing gap is fetched).
        assert_eq!(r.pieces.iter().map(|x| x.file_offset).min(), Some(r.start));
        assert_eq!(r.pieces.iter().map(|x| x.file_end()).max(), Some(r.end));
    }
    // Every wanted range is tiled exactly by its pieces, in order, with matching targets.
    for (index, want) in w.iter().enumerate() {
        let mut pieces: Vec<_> = p
            .requests
            .iter()
            .flat_map(|r| r.pieces.iter())
            .filter(|x| x.wanted == index)
            .collect();
        pieces.sort_by_key(|x| x.file_offset);
        if want.atomic {
            assert!(pieces.len() <= 1, "round {round}: atomic range split");
        }
        let mut cursor = want.file_offset;
        for piece in pieces {
            assert_eq!(piece.file_offset, cursor, "round {round}: hole or overlap");
            assert_eq!(piece.target, want.target);
            assert_eq!(
                piece.target_offset,
                want.target_offset + (cursor - want.file_offset)
            );
            cursor += piece.length;
        }
        assert_eq!(
            cursor,
            want.file_offset + want.length,
            "round {round}: not covered"
        );
    }
    // Accounting: fetched = sum of requests; needed = size of the union.
    let mut bytes = vec![false; 20_001];
    for want in w {
        for b in want.file_offset..want.file_offset + want.length {
            bytes[b as usize] = true;
        }
    }
    let needed = bytes.iter().filter(|&&b| b).count() as u64;
    assert_eq!(p.bytes_needed, needed, "round {round}");
    assert_eq!(
        p.bytes_fetched,
        p.requests.iter().map(|r| r.len()).sum::<u64>()
    );
    assert!(p.bytes_fetched >= p.bytes_needed);
}

#[test]
fn backoff_doubles_up_to_its_cap_without_overflow() {
    let policy = RetryPolicy {
        retries: 5,
        backoff_base: Duration::from_millis(100),
        backoff_max: Duration::from_secs(2),
    };
    let waits: Vec<_> = (1..=7).map(|n| policy.backoff(n).as_millis()).collect();
    assert_eq!(waits, vec![100, 200, 400, 800, 1600, 2000, 2000]);
    assert_eq!(policy.backoff(u32::MAX), Duration::from_secs(2));
}
