//! Unit tests of the HTTP provider's pure parts.

mod planner;
mod sink;
mod support;
