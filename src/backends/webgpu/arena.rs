//! Activation memory planning: every intermediate tensor gets an offset in one arena buffer,
//! and tensors whose lifetimes do not overlap share bytes.
//!
//! A lifetime is an inclusive range of steps (step 0 uploads the inputs, op `k` runs at step
//! `k + 1`, outputs stay live through the final readback step). Placement is "greedy by size"
//! (as TensorFlow Lite's arena planner): largest tensors first, each at the lowest aligned offset
//! where it overlaps no already placed tensor that is live at the same time. Two tensors live
//! at the same step never share a byte, so an op's inputs and output never alias.

use crate::error::{Error, ErrorCode, Result};

/// One tensor to place: its size in bytes and its inclusive live range of steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lifetime {
    /// Size in bytes (placed rounded up to the alignment).
    pub size: u64,
    /// First step at which it is live.
    pub first: usize,
    /// Last step at which it is live.
    pub last: usize,
}

impl Lifetime {
    fn overlaps_in_time(&self, other: &Lifetime) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// Where each tensor lies, and how big the arena must be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArenaPlan {
    /// Byte offset of each tensor, in the order given.
    pub offsets: Vec<u64>,
    /// Arena size in bytes (a multiple of the alignment; 0 when there is nothing to place).
    pub size: u64,
}

fn overflow() -> Error {
    Error::new(
        ErrorCode::OutOfResources,
        "activation arena size overflows 64 bits",
    )
}

fn align_up(value: u64, alignment: u64) -> Result<u64> {
    value
        .checked_add(alignment - 1)
        .map(|v| v / alignment * alignment)
        .ok_or_else(overflow)
}

/// Above this many tensors, placement switches from greedy by size (whose cost grows with the
/// square of the tensors) to a scan over steps, so that a hostile program cannot stall `init`.
/// Real encoders stay far below it (all-MiniLM-L6-v2 places about 150).
pub(crate) const GREEDY_MAX_TENSORS: usize = 4096;

/// Free blocks the scan looks at for each tensor (the lowest first).
const SCAN_FREE_BLOCKS: usize = 64;

/// Places `lifetimes` in one arena with offsets aligned to `alignment` (a power of two).
///
/// # Errors
/// `OutOfResources` when sizes overflow.
pub(crate) fn plan_arena(lifetimes: &[Lifetime], alignment: u64) -> Result<ArenaPlan> {
    let alignment = alignment.max(4).next_power_of_two();
    let sizes = lifetimes
        .iter()
        .map(|l| align_up(l.size.max(1), alignment))
        .collect::<Result<Vec<u64>>>()?;
    if lifetimes.len() > GREEDY_MAX_TENSORS {
        return scan_by_step(lifetimes, &sizes);
    }
    let mut order: Vec<usize> = (0..lifetimes.len()).collect();
    order.sort_by(|&a, &b| {
        sizes[b]
            .cmp(&sizes[a])
            .then(lifetimes[a].first.cmp(&lifetimes[b].first))
            .then(a.cmp(&b))
    });
    let mut offsets = vec![0u64; lifetimes.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(lifetimes.len());
    let mut size = 0u64;
    for &index in &order {
        let mut busy: Vec<(u64, u64)> = placed
            .iter()
            .filter(|&&other| lifetimes[index].overlaps_in_time(&lifetimes[other]))
            .map(|&other| (offsets[other], offsets[other] + sizes[other]))
            .collect();
        busy.sort_unstable();
        let mut candidate = 0u64;
        for (start, end) in busy {
            let fits = candidate.checked_add(sizes[index]).ok_or_else(overflow)? <= start;
            if fits {
                break;
            }
            candidate = candidate.max(end);
        }
        offsets[index] = candidate;
        let end = candidate.checked_add(sizes[index]).ok_or_else(overflow)?;
        size = size.max(end);
        placed.push(index);
    }
    Ok(ArenaPlan { offsets, size })
}

/// Placement in order of first step: a tensor takes a free block left by tensors already dead
/// (first fit among the lowest free blocks; neighbouring free blocks merge), or the free block at
/// the arena's end grown to its size, or new space at the end. `n log n` in the tensors; the
/// arena may be larger than greedy by size makes it.
fn scan_by_step(lifetimes: &[Lifetime], sizes: &[u64]) -> Result<ArenaPlan> {
    use std::cmp::Reverse;
    use std::collections::{BTreeMap, BinaryHeap};
    let mut order: Vec<usize> = (0..lifetimes.len()).collect();
    order.sort_by_key(|&i| (lifetimes[i].first, i));
    let mut offsets = vec![0u64; lifetimes.len()];
    let mut live: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    // Free blocks by offset, never adjacent to each other (merged on release).
    let mut free: BTreeMap<u64, u64> = BTreeMap::new();
    let mut size = 0u64;
    for index in order {
        let first = lifetimes[index].first;
        while let Some(&Reverse((last, dead))) = live.peek() {
            if last >= first {
                break;
            }
            live.pop();
            release(&mut free, offsets[dead], sizes[dead]);
        }
        let need = sizes[index];
        let fit = free
            .iter()
            .take(SCAN_FREE_BLOCKS)
            .find(|&(_, &block)| block >= need)
            .map(|(&offset, &block)| (offset, block));
        let tail = free
            .last_key_value()
            .filter(|&(&offset, &block)| offset + block == size)
            .map(|(&offset, _)| offset);
        offsets[index] = match (fit, tail) {
            (Some((offset, block)), _) => {
                free.remove(&offset);
                if block > need {
                    free.insert(offset + need, block - need);
                }
                offset
            }
            (None, Some(offset)) => {
                free.remove(&offset);
                size = offset.checked_add(need).ok_or_else(overflow)?;
                offset
            }
            (None, None) => {
                let offset = size;
                size = size.checked_add(need).ok_or_else(overflow)?;
                offset
            }
        };
        live.push(Reverse((lifetimes[index].last, index)));
    }
    Ok(ArenaPlan { offsets, size })
}

/// Returns `[offset, offset + len)` to `free`, merged with free neighbours.
fn release(free: &mut std::collections::BTreeMap<u64, u64>, offset: u64, len: u64) {
    let (mut start, mut end) = (offset, offset + len);
    if let Some((&before, &before_len)) = free.range(..start).next_back()
        && before + before_len == start
    {
        free.remove(&before);
        start = before;
    }
    if let Some(after_len) = free.remove(&end) {
        end += after_len;
    }
    free.insert(start, end - start);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn life(size: u64, first: usize, last: usize) -> Lifetime {
        Lifetime { size, first, last }
    }

    /// No two tensors live at the same step share a byte.
    fn assert_disjoint(lifetimes: &[Lifetime], plan: &ArenaPlan, alignment: u64) {
        for (i, a) in lifetimes.iter().enumerate() {
            assert_eq!(plan.offsets[i] % alignment, 0);
            assert!(plan.offsets[i] + a.size <= plan.size);
            for (j, b) in lifetimes.iter().enumerate().skip(i + 1) {
                if a.overlaps_in_time(b) {
                    let (ai, aj) = (plan.offsets[i], plan.offsets[i] + a.size);
                    let (bi, bj) = (plan.offsets[j], plan.offsets[j] + b.size);
                    assert!(aj <= bi || bj <= ai, "tensors {i} and {j} overlap");
                }
            }
        }
    }

    #[test]
    fn a_chain_reuses_memory() {
        // x -> a -> b -> c: each lives two steps, so two slots suffice.
        let lifetimes = [
            life(1000, 0, 1),
            life(1000, 1, 2),
            life(1000, 2, 3),
            life(1000, 3, 4),
        ];
        let plan = plan_arena(&lifetimes, 256).unwrap();
        assert_disjoint(&lifetimes, &plan, 256);
        assert_eq!(plan.size, 2 * 1024);
    }

    #[test]
    fn overlapping_lifetimes_never_share() {
        let lifetimes = [
            life(100, 0, 5),
            life(300, 1, 2),
            life(50, 2, 4),
            life(400, 3, 5),
        ];
        let plan = plan_arena(&lifetimes, 32).unwrap();
        assert_disjoint(&lifetimes, &plan, 32);
        // 400 + 300 fit in time-disjoint slots: 400 at 0, 300 at 0, 100 and 50 after them.
        assert!(plan.size <= 416 + 128 + 64);
    }

    #[test]
    fn pseudo_random_programs_stay_disjoint() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..50 {
            let n = (next() % 40) as usize + 1;
            let lifetimes: Vec<Lifetime> = (0..n)
                .map(|_| {
                    let first = (next() % 30) as usize;
                    let len = (next() % 10) as usize;
                    life(next() % 5000, first, first + len)
                })
                .collect();
            let plan = plan_arena(&lifetimes, 64).unwrap();
            assert_disjoint(&lifetimes, &plan, 64);
            // The scan used past the greedy limit holds to the same rule.
            let sizes: Vec<u64> = lifetimes
                .iter()
                .map(|l| l.size.max(1).div_ceil(64) * 64)
                .collect();
            assert_disjoint(&lifetimes, &scan_by_step(&lifetimes, &sizes).unwrap(), 64);
            let total: u64 = lifetimes
                .iter()
                .map(|l| l.size.max(1).div_ceil(64) * 64)
                .sum();
            assert!(plan.size <= total);
        }
    }

    #[test]
    fn many_tensors_are_placed_by_a_scan_over_steps() {
        // A chain of 20,000 tensors (each read by the next op) and a crowd alive at once: both
        // past the greedy limit, placed without overlap in linear time.
        let chain: Vec<Lifetime> = (0..20_000)
            .map(|i| life(100 + (i as u64 % 7) * 300, i, i + 1))
            .collect();
        let plan = plan_arena(&chain, 256).unwrap();
        assert_disjoint(&chain, &plan, 256);
        assert!(
            plan.size <= 4 * 2048,
            "a chain reuses memory: {}",
            plan.size
        );
        let crowd: Vec<Lifetime> = (0..GREEDY_MAX_TENSORS + 1)
            .map(|i| life(4 + (i as u64 % 5) * 64, i % 3, 10 + i % 4))
            .collect();
        let plan = plan_arena(&crowd, 64).unwrap();
        assert_disjoint(&crowd, &plan, 64);
    }

    #[test]
    fn empty_and_overflowing_inputs() {
        assert_eq!(plan_arena(&[], 256).unwrap().size, 0);
        let err = plan_arena(&[life(u64::MAX - 3, 0, 0)], 256).unwrap_err();
        assert_eq!(err.code(), ErrorCode::OutOfResources);
        let err = plan_arena(&[life(u64::MAX / 2, 0, 0), life(u64::MAX / 2, 0, 0)], 4).unwrap_err();
        assert_eq!(err.code(), ErrorCode::OutOfResources);
    }
}
