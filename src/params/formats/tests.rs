//! Unit tests of the format helpers.
