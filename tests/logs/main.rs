//! What the client logs and records in spans, and the deprecation warning: each test captures
//! the logs of its thread through the one global subscriber (`common::capture`).

/// The shared test set-up (`tests/common`): the base these tests use.
#[path = "../common"]
#[allow(dead_code)]
mod common {
    mod base;
    pub use base::*;
}

mod deprecation;
mod logs;
mod spans;
