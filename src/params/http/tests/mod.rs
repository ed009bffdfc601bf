//! Unit tests of the HTTP provider's pure parts.

mod control;
mod group;
mod planner;
mod response;
mod sink;
mod support;
