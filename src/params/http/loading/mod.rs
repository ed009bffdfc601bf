//! Loading, the HTTP provider's middle layer: planned requests run against a transport and their
//! bodies streamed into destination buffers.
//!
//! - [`runner`]: one request with retries and resume from the first byte not yet consumed;
//!   [`group`], [`queue`]: when a server stops honouring Range mid-load, the first whole-file
//!   answer feeds every request not started yet (the file is read once more at most);
//! - [`sink`], [`edges`], [`destination`]: one request's body into its pieces with 4-byte-aligned
//!   writes (a destination's zero-copy [`crate::params::DirectWrite`] path when it has one);
//! - [`load`]: one load of a scope's spans, start to end, with [`progress`] events and
//!   statistics, and [`control`] (abort, suspend).

pub(crate) mod control;
pub(crate) mod destination;
pub(crate) mod edges;
pub(crate) mod group;
pub(crate) mod load;
pub(crate) mod progress;
pub(crate) mod queue;
pub(crate) mod runner;
pub(crate) mod sink;
#[cfg(test)]
mod tests;
