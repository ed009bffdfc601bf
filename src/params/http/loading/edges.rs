//! Unaligned edges: the bytes of a destination range that do not fill a whole 4-byte word (a
//! range starting or ending off a multiple of 4, or split between two requests there). GPU
//! queues only take 4-byte-aligned writes, so these bytes are kept aside (at most 3 at each end
//! of each piece) and written once every request of the load has finished, one whole word at a
//! time: completed from neighbouring edges, from padding the load owns (zeros), or else by
//! reading the word back first. Doing it last means no concurrent request can race on a word.

use crate::params::StatusResult;
use crate::params::http::loading::destination::Destination;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Default)]
struct WordPatch {
    bytes: [u8; 4],
    known: [bool; 4],
}

/// Edge bytes waiting to be written, by destination and word.
#[derive(Debug, Default)]
pub struct EdgeStore {
    words: BTreeMap<(usize, u64), WordPatch>,
}

impl EdgeStore {
    /// Records that byte `position` of destination `target` is `value`.
    pub fn put(&mut self, target: usize, position: u64, value: u8) {
        let patch = self.words.entry((target, position / 4)).or_default();
        let lane = (position % 4) as usize;
        if let (Some(byte), Some(known)) = (patch.bytes.get_mut(lane), patch.known.get_mut(lane)) {
            *byte = value;
            *known = true;
        }
    }

    /// Records `bytes` at `position` onwards.
    pub fn put_all(&mut self, target: usize, position: u64, bytes: &[u8]) {
        for (index, &value) in bytes.iter().enumerate() {
            self.put(target, position.saturating_add(index as u64), value);
        }
    }

    /// Words waiting.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Writes every waiting word into its destination.
    ///
    /// # Errors
    /// The destinations' write and read errors.
    pub async fn flush(self, destinations: &[Destination<'_>]) -> StatusResult<()> {
        for ((target, word), patch) in self.words {
            let Some(destination) = destinations.get(target) else {
                continue;
            };
            let start = word.saturating_mul(4);
            let owned = |lane: usize| {
                destination
                    .owned_from()
                    .is_some_and(|from| start.saturating_add(lane as u64) >= from)
            };
            // Lanes the load may write: its own edge bytes, and padding it allocated (zeros,
            // as a fresh buffer holds).
            let writable: [bool; 4] = std::array::from_fn(|lane| patch.known[lane] || owned(lane));
            let fits = start
                .checked_add(4)
                .is_some_and(|end| end <= destination.buffer().size());
            if fits && writable.iter().all(|&w| w) {
                destination.write_host(start, &patch.bytes)?;
            } else if fits {
                let current = destination.buffer().read(start, 4).await?;
                let merged: [u8; 4] = std::array::from_fn(|lane| {
                    if patch.known[lane] {
                        patch.bytes[lane]
                    } else {
                        current.get(lane).copied().unwrap_or(0)
                    }
                });
                destination.write_host(start, &merged)?;
            } else {
                // The buffer ends inside this word (its size is not a multiple of 4): only exact
                // writes reach these bytes, and buffers that need alignment refuse them.
                for (lane, byte) in patch.bytes.iter().enumerate() {
                    if patch.known[lane] {
                        destination.write_host(start + lane as u64, std::slice::from_ref(byte))?;
                    }
                }
            }
        }
        Ok(())
    }
}
