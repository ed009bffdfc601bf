//! The sinks one response body feeds. Normally that is the sink of one planned request; after a
//! server answered a Range request with the whole file (HTTP 200), it is also the sinks of every
//! request the load had not started yet and of requests handed over to that stream (see
//! [`crate::params::http::loading::queue`]), so the rest of the file is read once, in one pass.
//!
//! What it promises: every sink is fed its bytes in file order, each byte once, starting at its
//! own [`RequestSink::position`]; a sink is finished (its digests checked) as soon as its last
//! byte is in, and leaves the group. A chunk that starts past a sink's position does not feed that
//! sink (it would leave a hole): the sink waits for a stream that starts early enough (a retry
//! asks from [`SinkGroup::span`]'s start, the lowest position in the group).

use crate::error::{Status, StatusCode};
use crate::params::StatusResult;
use crate::params::http::loading::sink::{LoadTargets, RequestSink};
use crate::params::http::transport::BodyChunk;

/// What feeding one chunk did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// Bytes of the chunk that went into sinks.
    pub consumed: u64,
    /// Sinks that received their last byte (and whose digests passed).
    pub completed: u64,
}

/// The unfinished sinks one response body feeds.
#[derive(Default)]
pub struct SinkGroup {
    sinks: Vec<RequestSink>,
    consumed: u64,
}

impl SinkGroup {
    /// A group of one sink.
    pub fn new(sink: RequestSink) -> Self {
        Self {
            sinks: vec![sink],
            consumed: 0,
        }
    }

    /// Whether every sink received all its bytes.
    pub fn is_complete(&self) -> bool {
        self.sinks.is_empty()
    }

    /// `(lowest position, highest end)` of the unfinished sinks: the bytes a request for the
    /// whole group asks for. `None` once complete.
    pub fn span(&self) -> Option<(u64, u64)> {
        let start = self.sinks.iter().map(RequestSink::position).min()?;
        let end = self.sinks.iter().map(RequestSink::end).max()?;
        Some((start, end))
    }

    /// Bytes consumed by the group's sinks so far (its progress, for the retry budget).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Adds `sinks` to the group.
    pub fn add(&mut self, sinks: impl IntoIterator<Item = RequestSink>) {
        self.sinks.extend(sinks);
    }

    /// Takes every unfinished sink out of the group (to hand them to another stream).
    pub fn take(&mut self) -> Vec<RequestSink> {
        std::mem::take(&mut self.sinks)
    }

    /// Feeds the file bytes `[at, at + length)`, found at `chunk_offset` in `chunk`, to every
    /// sink whose next byte lies among them, then finishes the sinks that are complete.
    ///
    /// # Errors
    /// `OUT_OF_RANGE` when `at + length` overflows; the sinks' write and digest errors.
    pub fn feed(
        &mut self,
        targets: &LoadTargets<'_>,
        chunk: &BodyChunk,
        chunk_offset: usize,
        at: u64,
        length: usize,
    ) -> StatusResult<Fed> {
        let end = at.checked_add(length as u64).ok_or_else(|| {
            Status::new(
                StatusCode::OutOfRange,
                format!("a body chunk of {length} bytes at file offset {at} overflows"),
            )
        })?;
        let mut fed = Fed::default();
        for sink in &mut self.sinks {
            let position = sink.position();
            if position < at || position >= end {
                continue;
            }
            // position < end <= at + length, and the sink's end is past its position.
            let take = end.min(sink.end()) - position;
            let offset = chunk_offset + (position - at) as usize;
            sink.consume(targets, chunk, offset, take as usize)?;
            fed.consumed += take;
        }
        self.consumed = self.consumed.saturating_add(fed.consumed);
        fed.completed = self.settle()?;
        Ok(fed)
    }

    /// Finishes (checks the digests of) and removes every complete sink; how many there were.
    ///
    /// # Errors
    /// The first digest mismatch (`DATA_LOSS`).
    pub fn settle(&mut self) -> StatusResult<u64> {
        let mut completed = 0;
        let mut index = 0;
        while let Some(sink) = self.sinks.get_mut(index) {
            if sink.is_complete() {
                sink.finish()?;
                self.sinks.remove(index);
                completed += 1;
            } else {
                index += 1;
            }
        }
        Ok(completed)
    }
}
