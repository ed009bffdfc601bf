//! Unit tests of the HTTP provider's pure parts.

mod planner;
