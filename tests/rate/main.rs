//! The rate discipline end to end against the sandbox on tokio's paused clock: admission, the
//! rate limits as users meet them, the scenario matrix's readable cells, and a real-clock run.

/// The shared test set-up (`tests/common`): the base, and only the helpers these tests use.
#[path = "../common"]
#[allow(dead_code)]
mod common {
    mod base;
    pub use base::*;
    pub mod matrix;
    pub mod windows;
}

mod admission;
mod ban_matrix;
mod rate_limits;
mod real_clock;
