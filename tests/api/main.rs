//! The client's API against HTTP on loopback: operations, errors, raw requests, retries,
//! faults, concurrency, quota and call information (wiremock for exact wire scenarios, the
//! sandbox end to end).

/// The shared test set-up (`tests/common`): the base, and only the helpers these tests use.
#[path = "../common"]
#[allow(dead_code)]
mod common {
    mod base;
    pub use base::*;
    pub mod windows;
}

mod client;
mod concurrency;
mod errors;
mod faults;
mod observability;
mod operations;
mod quota;
mod raw_requests;
mod retry;
mod server_numbers;
