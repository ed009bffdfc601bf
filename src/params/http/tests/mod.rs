//! Unit tests of the HTTP provider's pure parts.

mod control;
mod planner;
mod response;
mod sink;
mod support;
