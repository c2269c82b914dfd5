//! Goodput under a rate limit: 64 tasks sharing one client call back to back against the
//! sandbox on the Free plan (60 a minute) for ten windows, under tokio's paused clock, so the
//! figures are exact and the run takes a second. Reports the share of each full window's
//! allowance used and the 429s, with quota pacing on and off.
//!
//! Targets: >= 95% of the allowance, zero 429s after the first window (pacing on).
//! Run with `cargo bench --bench goodput`.

use std::collections::BTreeMap;
use std::time::Duration;

use petstore_client::sandbox::{Plan, Sandbox};
use petstore_client::{Pacing, PetStoreClient, RetryPolicy};
use tokio::time::Instant;

const TASKS: usize = 64;
const WINDOWS: u64 = 10;

struct Run {
    per_window: BTreeMap<i64, u64>,
    limited: usize,
    limited_after_first_window: usize,
    bans: u64,
    during_cooldown: u64,
    gave_up: usize,
}

async fn run(pacing: Pacing) -> Run {
    let sandbox = Sandbox::start().await.unwrap();
    let http = reqwest::Client::builder()
        .pool_idle_timeout(None)
        .build()
        .unwrap();
    let client = PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(sandbox.key(Plan::Free))
        .http_client(http)
        .attempt_timeout(None)
        .pacing(pacing)
        .retry_policy(RetryPolicy::default().with_max_retries(10))
        .build()
        .unwrap();
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60 * WINDOWS);
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut resets = Vec::new();
                while let Ok(result) =
                    tokio::time::timeout_at(deadline, client.list_pets().limit(1).send_with_meta())
                        .await
                {
                    match result {
                        Ok(response) => resets.push(response.quota().unwrap().reset.timestamp()),
                        Err(_) => return (resets, true),
                    }
                }
                (resets, false)
            })
        })
        .collect();
    let mut per_window = BTreeMap::new();
    let mut gave_up = 0;
    for task in tasks {
        let (resets, failed) = task.await.unwrap();
        gave_up += usize::from(failed);
        for reset in resets {
            *per_window.entry(reset).or_default() += 1;
        }
    }
    let log = sandbox.request_log();
    let first_window_end = start + Duration::from_secs(60);
    Run {
        per_window,
        limited: log.iter().filter(|r| r.status == Some(429)).count(),
        limited_after_first_window: log
            .iter()
            .filter(|r| r.status == Some(429) && r.at >= first_window_end)
            .count(),
        bans: sandbox.stats().bans(),
        during_cooldown: sandbox.stats().during_cooldown(),
        gave_up,
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    println!("{TASKS} tasks, Free plan (60 per 60 s window), {WINDOWS} windows, paused clock");
    println!(
        "| pacing | calls that succeeded | allowance used (full windows) | 429s | 429s after the first window | requests during a cooldown | bans | tasks that gave up |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for pacing in [Pacing::Shared, Pacing::Sole, Pacing::Off] {
        let run = rt.block_on(run(pacing));
        let counts: Vec<u64> = run.per_window.values().copied().collect();
        // The first and last windows are only partly covered by the run.
        let full = counts.get(1..counts.len().saturating_sub(1)).unwrap_or(&[]);
        let used: u64 = full.iter().sum();
        let allowance = 60 * full.len() as u64;
        let share = if full.is_empty() {
            "no full window".to_owned()
        } else {
            format!(
                "{used}/{allowance} ({:.1}%)",
                100.0 * used as f64 / allowance as f64
            )
        };
        println!(
            "| {pacing:?} | {} | {share} | {} | {} | {} | {} | {} |",
            counts.iter().sum::<u64>(),
            run.limited,
            run.limited_after_first_window,
            run.during_cooldown,
            run.bans,
            run.gave_up,
        );
    }
}
