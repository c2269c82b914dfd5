//! The rate discipline in figures, under tokio's paused clock (exact, and a run takes seconds):
//!
//! 1. the scenario matrix of `tests/rate/ban_matrix.rs` (independent instances on one key, clock
//!    skew, two windows, cancellation, odd answers) as a table: goodput, 429s, requests inside
//!    a `Retry-After`, bans, the slowest call;
//! 2. what the default `Pacing::Shared` costs a sole user: how long a burst of calls made at
//!    the start of a window takes with each pacing mode.
//!
//! Run with `cargo bench --bench goodput`.

#[path = "../tests/common/matrix.rs"]
mod matrix;

use std::time::{Duration, UNIX_EPOCH};

use petstore_client::{Pacing, PetStoreClient};
use petstore_sandbox::{Plan, Sandbox};
use tokio::time::Instant;

/// A burst of `calls` concurrent calls at the start of a Free-plan window: how long until all
/// are done, and how many 429s the sandbox answered.
async fn burst(pacing: Pacing, calls: usize) -> (Duration, u64) {
    // 1_800_000_000 is a multiple of 60: the run starts exactly as a window opens.
    let sandbox = Sandbox::builder()
        .clock_start(UNIX_EPOCH + Duration::from_secs(1_800_000_000))
        .start()
        .await
        .unwrap();
    let client = PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(sandbox.key(Plan::Free))
        .pacing(pacing)
        .build()
        .unwrap();
    let start = Instant::now();
    let tasks: Vec<_> = (0..calls)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.list_pets().limit(1).send().await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    (start.elapsed(), sandbox.stats().answered(429))
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    println!(
        "Scenario matrix: {} tasks per instance, {} windows of {} s, paused clock",
        matrix::TASKS,
        matrix::WINDOWS,
        matrix::MINUTE
    );
    println!("{}", matrix::TABLE_HEADER);
    for cell in matrix::cells() {
        let figures = rt.block_on(matrix::run(&cell));
        println!("{}", figures.row(&cell));
    }

    println!("\nA sole user's burst at the start of a window (Free plan, 60 per 60 s)");
    println!("| pacing | 10 calls take | 429s | 60 calls take | 429s |");
    println!("| --- | --- | --- | --- | --- |");
    for pacing in [Pacing::Shared, Pacing::Sole, Pacing::Off] {
        let (ten, ten_limited) = rt.block_on(burst(pacing, 10));
        let (sixty, sixty_limited) = rt.block_on(burst(pacing, 60));
        println!(
            "| {pacing:?} | {:.1} s | {ten_limited} | {:.1} s | {sixty_limited} |",
            ten.as_secs_f64(),
            sixty.as_secs_f64()
        );
    }
}
