//! The planned requests of one load that have not started yet, and what happens to them when the
//! server stops honouring Range in the middle of the load.
//!
//! The first data response that is the whole file (HTTP 200 to a Range request) marks the file
//! as not range-capable at once (later loads plan one request for it), claims every request the
//! load has not started, and opens the load's *whole-file stream*: that one body then feeds all
//! of them, in file order. A request already in flight whose own answer turns into a 200 (or
//! that must be retried once ranges are off) hands its sinks over to the open stream when the
//! stream has not yet passed its first missing byte, instead of downloading the file again.
//! When the open stream has passed it, the request's own 200 (which starts at byte 0, before
//! everything) supersedes the open stream, which hands its sinks over at its next chunk and
//! stops; what it had read is the only byte read twice. So the bytes over the wire are the
//! file's size, plus what ranged answers delivered before the first 200, plus what a superseded
//! stream read before it stopped. (When even the new stream has passed a superseded stream's
//! sinks, that stream finishes its own sinks and stops at their end.)

use crate::params::http::loading::sink::RequestSink;
use crate::params::http::planning::planner::PlannedRequest;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};

/// Makes the sink of one planned request (with the digests it must check).
pub type SinkFactory<'p> = Box<dyn Fn(&PlannedRequest) -> RequestSink + 'p>;

/// The requests of one load not started yet, shared by the load's loop and its requests
/// (single-threaded: everything lives in the load's task).
pub struct LoadQueue<'p> {
    requests: &'p [PlannedRequest],
    /// Index of the first request not started.
    next: Cell<usize>,
    sink_for: SinkFactory<'p>,
    ranges_supported: &'p AtomicBool,
    /// The open whole-file stream, while one is open.
    stream: Cell<Option<Open>>,
    /// Streams opened so far (each gets the next number).
    generation: Cell<u64>,
    /// Sinks handed over to the open stream, not yet taken in by it.
    handed_over: RefCell<Vec<RequestSink>>,
}

impl<'p> LoadQueue<'p> {
    /// A queue of `requests` (in file order) whose sinks `sink_for` makes; `ranges_supported`
    /// is the file's flag, switched off at the first whole-file answer.
    pub fn new(
        requests: &'p [PlannedRequest],
        sink_for: SinkFactory<'p>,
        ranges_supported: &'p AtomicBool,
    ) -> Self {
        Self {
            requests,
            next: Cell::new(0),
            sink_for,
            ranges_supported,
            stream: Cell::new(None),
            generation: Cell::new(0),
            handed_over: RefCell::new(Vec::new()),
        }
    }

    /// The sink of the next request to start, if any is left.
    pub fn next_sink(&self) -> Option<RequestSink> {
        let request = self.requests.get(self.next.get())?;
        self.next.set(self.next.get() + 1);
        Some((self.sink_for)(request))
    }

    /// Whether the file still counts as honouring Range.
    pub fn ranges_supported(&self) -> bool {
        self.ranges_supported.load(Ordering::Relaxed)
    }

    /// A data request got the whole file: from now on the file counts as not range-capable.
    pub fn ranges_ignored(&self) {
        self.ranges_supported.store(false, Ordering::Relaxed);
    }

    /// The sinks of every request not started yet (none will be started afterwards).
    pub fn claim_rest(&self) -> Vec<RequestSink> {
        let rest = self.requests.get(self.next.get()..).unwrap_or_default();
        self.next.set(self.requests.len());
        rest.iter().map(|r| (self.sink_for)(r)).collect()
    }

    /// Hands `sinks` (whose lowest position is `position`) to the open whole-file stream when it
    /// has not passed `position`; gives them back otherwise.
    ///
    /// # Errors
    /// The sinks, unchanged, when no open stream can take them.
    pub fn hand_over(
        &self,
        position: u64,
        sinks: Vec<RequestSink>,
    ) -> Result<(), Vec<RequestSink>> {
        match self.stream.get() {
            Some(open) if open.at <= position => {
                self.handed_over.borrow_mut().extend(sinks);
                Ok(())
            }
            _ => Err(sinks),
        }
    }

    /// Opens the load's whole-file stream at file byte 0 (a whole-file body's first byte). A
    /// stream open already is superseded: it hands its sinks over to this one at its next chunk
    /// (it could not take the caller's, having passed them; this one starts before everything).
    pub fn open_stream(&self) -> OpenStream<'_, 'p> {
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        self.stream.set(Some(Open { generation, at: 0 }));
        OpenStream {
            queue: self,
            generation,
        }
    }
}

/// The open whole-file stream: which one, and its next file byte.
#[derive(Clone, Copy)]
struct Open {
    generation: u64,
    at: u64,
}

/// One whole-file stream of the load; the load's open one until superseded or closed.
pub struct OpenStream<'q, 'p> {
    queue: &'q LoadQueue<'p>,
    generation: u64,
}

impl OpenStream<'_, '_> {
    /// Whether this is still the load's open stream (not superseded).
    pub fn is_current(&self) -> bool {
        self.queue
            .stream
            .get()
            .is_some_and(|open| open.generation == self.generation)
    }

    /// The stream moved on to file byte `at`; takes the sinks handed over meanwhile (none once
    /// superseded).
    pub fn advance(&self, at: u64) -> Vec<RequestSink> {
        if !self.is_current() {
            return Vec::new();
        }
        self.queue.stream.set(Some(Open {
            generation: self.generation,
            at,
        }));
        std::mem::take(&mut *self.queue.handed_over.borrow_mut())
    }

    /// Closes the stream: no sink can be handed over any more; those handed over since the last
    /// [`OpenStream::advance`] are returned (the caller still owes them their bytes).
    pub fn close(self) -> Vec<RequestSink> {
        if !self.is_current() {
            return Vec::new();
        }
        self.queue.stream.set(None);
        std::mem::take(&mut *self.queue.handed_over.borrow_mut())
    }
}

impl Drop for OpenStream<'_, '_> {
    fn drop(&mut self) {
        // Dropped without `close` only when the load itself ends (an error, an abort): the sinks
        // left behind then belong to a load that is over.
        if self.is_current() {
            self.queue.stream.set(None);
        }
    }
}
