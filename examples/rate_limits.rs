//! How does the client keep me under the rate limit? `cargo run --example rate_limits`
//!
//! 32 tasks share one client and call as fast as they can against the sandbox, on a plan of 10
//! requests per 2-second window, with each pacing mode: `Shared` (the default: the budget spread
//! over each window), `Sole` (the budget spent as fast as calls come) and `Off` (only the
//! service's 429s and the cooldown gate limit). Without pacing, a burst of concurrent calls
//! overshoots the limit before the first 429 comes back, and the service counts the overshoot
//! as calling on after a 429: that is why pacing is on by default.

use std::time::Duration;

use petstore_client::{Pacing, PetStoreClient, RetryPolicy};
use petstore_sandbox::{Plan, Sandbox};

const TASKS: usize = 32;
const RUN: Duration = Duration::from_secs(6);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    for pacing in [Pacing::Shared, Pacing::Sole, Pacing::Off] {
        let sandbox = Sandbox::builder()
            .key(
                "demo",
                Plan::Enterprise {
                    per_minute: 10,
                    per_day: 100_000,
                },
            )
            .minute_window(Duration::from_secs(2))
            .start()
            .await?;
        let client = PetStoreClient::builder()
            .base_url(sandbox.base_url())
            .api_key("demo")
            .pacing(pacing)
            .retry_policy(RetryPolicy::builder().max_retries(10).build())
            .build()?;

        let deadline = tokio::time::Instant::now() + RUN;
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    let mut done = 0u32;
                    let mut gave_up = None;
                    // Calls still held at the deadline are cancelled: only what fits in RUN counts.
                    while let Ok(result) =
                        tokio::time::timeout_at(deadline, client.list_pets().limit(1).send()).await
                    {
                        match result {
                            Ok(_) => done += 1,
                            Err(e) => {
                                gave_up = Some(e.to_string());
                                break;
                            }
                        }
                    }
                    (done, gave_up)
                })
            })
            .collect();
        let mut succeeded = 0;
        let mut gave_up = Vec::new();
        for task in tasks {
            let (done, error) = task.await?;
            succeeded += done;
            gave_up.extend(error);
        }

        let log = sandbox.request_log();
        let limited = log.iter().filter(|r| r.status == Some(429)).count();
        println!(
            "{:<14} {succeeded} calls succeeded in {} s (the plan allows 10 per 2-s window), {} requests sent, {limited} answered 429, {} bans",
            format!("{pacing:?}:"),
            RUN.as_secs(),
            log.len(),
            sandbox.stats().bans(),
        );
        if let Some(error) = gave_up.first() {
            println!(
                "    {} of {TASKS} tasks gave up, e.g.: {error}",
                gave_up.len()
            );
        }
    }
    Ok(())
}
