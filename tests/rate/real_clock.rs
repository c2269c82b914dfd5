//! The rate discipline on the real clock and a multi-threaded runtime, where tasks of several
//! independent instances really interleave (a paused single-threaded clock hides that): four
//! instances × 16 tasks on one key, 2-second windows of 20 requests, for about 8 seconds.
//! Bounded: every call has a deadline, and the run stops by itself. It asserts only what holds
//! however loaded the machine is: the key is never banned.

use std::time::Duration;

use petstore_client::{Error, PetStoreClient, RateLimitScope};
use petstore_sandbox::{Plan, Sandbox};
use tokio::time::Instant;

const INSTANCES: usize = 4;
const TASKS: usize = 16;
const WINDOW: Duration = Duration::from_secs(2);
const PER_WINDOW: u32 = 20;
const RUN: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn four_independent_instances_on_a_multi_threaded_runtime_never_get_the_key_banned() {
    let sandbox = Sandbox::builder()
        .key(
            "shared-key",
            Plan::Enterprise {
                per_minute: PER_WINDOW,
                per_day: 1_000_000,
            },
        )
        .minute_window(WINDOW)
        .start()
        .await
        .unwrap();
    let deadline = Instant::now() + RUN;
    let mut tasks = Vec::new();
    for i in 0..INSTANCES {
        let client = PetStoreClient::builder()
            .base_url(sandbox.base_url())
            .api_key("shared-key")
            .user_agent(format!("instance-{i}"))
            .rate_limit_scope(RateLimitScope::Client)
            .build()
            .unwrap();
        for _ in 0..TASKS {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                let mut succeeded = 0;
                while let Ok(result) =
                    tokio::time::timeout_at(deadline, client.list_pets().limit(1).send()).await
                {
                    match result {
                        Ok(_) => succeeded += 1,
                        Err(Error::Throttled(held)) => {
                            tokio::time::sleep(held.retry_after().min(WINDOW)).await;
                        }
                        Err(error) => panic!("expected only successes and holds, got {error}"),
                    }
                }
                succeeded
            }));
        }
    }
    let mut succeeded = 0;
    for task in tasks {
        succeeded += task.await.unwrap();
    }

    let stats = sandbox.stats();
    let log = sandbox.request_log();
    let limited = log.iter().filter(|r| r.status == Some(429)).count();
    println!(
        "{succeeded} calls succeeded, {} requests, {limited} × 429, {} during a cooldown, {} bans",
        log.len(),
        stats.during_cooldown(),
        stats.bans()
    );
    // Safety only: how many calls succeed, how many 429s the fleet meets and how many
    // requests were already on the wire when a cooldown began all depend on the load on the
    // machine (the paused-clock matrix measures them exactly; `benches/goodput.rs` the rest).
    assert_eq!(
        stats.bans(),
        0,
        "expected no ban of the key; {} requests arrived during a cooldown",
        stats.during_cooldown()
    );
    assert!(
        succeeded > 0,
        "expected some call to succeed in {RUN:?}, none did"
    );
}
