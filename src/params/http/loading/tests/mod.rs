//! Unit tests of loading: streaming bodies into sinks (alignment, edges, digests), one
//! whole-file body feeding many sinks, the load queue's hand-over, abort and suspend.

mod control;
mod group;
mod sink;
mod support;
