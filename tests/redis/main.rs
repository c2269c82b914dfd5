//! The shared rate-limit state (feature `redis`) on real `redis-server` processes on loopback:
//! the state and its script, leases, faults, the Cluster, Sentinel and TLS topologies, and
//! generated worlds of fleets under Redis faults.
#![cfg(feature = "redis")]

/// The shared test set-up (`tests/common`): the base, and only the helpers these tests use.
#[path = "../common"]
#[allow(dead_code)]
mod common {
    pub mod base;
    pub use base::*;
    pub mod matrix;
    pub mod redis_cluster;
    pub mod redis_fleet;
    pub mod redis_server;
    pub mod redis_tls;
    pub mod redis_world_faults;
    pub mod redis_worlds;
    pub mod simulation;
    pub mod slow_link;
}

mod faults;
mod leases;
mod script;
mod state;
mod topologies;
mod worlds;
