//! A fleet of independent instances on one key, sharing their rate-limit state through Redis,
//! against the sandbox on the real clock: what `tests/redis/state.rs` and `tests/redis/faults.rs`
//! run and assert.

use std::collections::BTreeMap;
use std::time::Duration;

use petstore_client::{Error, PetStoreClient, PetStoreClientBuilder, RateLimitScope, RedisState};
use petstore_sandbox::{LoggedRequest, Plan, Sandbox};
use tokio::time::Instant;

use super::redis_server::RedisServer;
use super::slow_link::SlowLink;

pub const KEY: &str = "FAKE-fleet-key-not-a-secret";
pub const TASKS: usize = 16;
/// The sandbox's minute window, shortened so that ten pass in a test.
pub const WINDOW: Duration = Duration::from_secs(2);

pub async fn sandbox(per_window: u32, per_day: u32, day: Duration) -> Sandbox {
    Sandbox::builder()
        .key(
            KEY,
            Plan::Enterprise {
                per_minute: per_window,
                per_day,
            },
        )
        .minute_window(WINDOW)
        .day_window(day)
        .start()
        .await
        .expect("the sandbox starts")
}

/// An instance of its own, sharing through Redis when given its URL.
pub fn instance(sandbox: &Sandbox, i: usize, redis: Option<&str>) -> PetStoreClient {
    let mut builder = instance_builder(sandbox, i);
    if let Some(url) = redis {
        builder = builder.shared_state(RedisState::new(url).expect("a Redis URL"));
    }
    builder.build().expect("a valid client")
}

/// The builder of instance `i`, of its own (`RateLimitScope::Client`) and telling the sandbox
/// which it is by its `User-Agent`, `instance-{i}`.
pub fn instance_builder(sandbox: &Sandbox, i: usize) -> PetStoreClientBuilder {
    PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(KEY)
        .user_agent(format!("instance-{i}"))
        .rate_limit_scope(RateLimitScope::Client)
}

/// What the tasks of a run saw.
#[derive(Debug, Default)]
pub struct Calls {
    pub succeeded: usize,
    pub failed: BTreeMap<String, usize>,
    /// How many of the failed calls failed on the rate limit: a 429, or held back.
    pub rate_limited: usize,
    pub slowest: Duration,
    /// When each call that returned started, and how long it took.
    pub took: Vec<(Instant, Duration)>,
    /// How many calls were still pending at their bound, when the run has one.
    pub past_bound: usize,
}

/// `TASKS` tasks per client call back to back until `deadline`; a call cut off by the end of
/// the run counts for nothing.
pub async fn hammer(clients: &[PetStoreClient], deadline: Instant) -> Calls {
    hammer_with(clients, TASKS, deadline, None).await
}

/// `tasks` tasks per client call back to back until `deadline`. Without a `bound`, a call cut
/// off by the end of the run counts for nothing; with one, each call is waited for up to its
/// bound, the run's end aside, and one still pending then counts in `past_bound`.
pub async fn hammer_with(
    clients: &[PetStoreClient],
    tasks_per_client: usize,
    deadline: Instant,
    bound: Option<Duration>,
) -> Calls {
    let mut tasks = Vec::new();
    for client in clients {
        for _ in 0..tasks_per_client {
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                let mut calls = Calls::default();
                while Instant::now() < deadline {
                    let start = Instant::now();
                    let call = client.list_pets().limit(1).send();
                    let until = bound.map_or(deadline, |bound| start + bound);
                    let Ok(result) = tokio::time::timeout_at(until, call).await else {
                        if bound.is_some() {
                            calls.past_bound += 1;
                            calls.slowest = calls.slowest.max(start.elapsed());
                        }
                        break;
                    };
                    calls.slowest = calls.slowest.max(start.elapsed());
                    calls.took.push((start, start.elapsed()));
                    match result {
                        Ok(_) => calls.succeeded += 1,
                        Err(error) => {
                            *calls.failed.entry(error.to_string()).or_default() += 1;
                            calls.rate_limited += usize::from(error.is_rate_limited());
                            let pause = match error {
                                Error::Throttled(held) => held.retry_after(),
                                _ => WINDOW,
                            };
                            tokio::time::sleep(pause.min(WINDOW)).await;
                        }
                    }
                }
                calls
            }));
        }
    }
    let mut all = Calls::default();
    for task in tasks {
        let calls = task.await.expect("a task of the run");
        all.succeeded += calls.succeeded;
        all.rate_limited += calls.rate_limited;
        all.past_bound += calls.past_bound;
        all.slowest = all.slowest.max(calls.slowest);
        all.took.extend(calls.took);
        for (error, n) in calls.failed {
            *all.failed.entry(error).or_default() += n;
        }
    }
    all
}

pub fn limited(log: &[LoggedRequest]) -> usize {
    log.iter().filter(|r| r.status == Some(429)).count()
}

/// What a real-clock test asserts, however loaded the machine: no ban, and at most one
/// request per instance inside any `Retry-After`.
#[track_caller]
pub fn assert_safe(log: &[LoggedRequest], bans: u64) {
    assert_eq!(bans, 0, "expected no ban of the key");
    let most = super::matrix::most_in_a_cooldown(log);
    assert!(
        most <= 1,
        "expected at most one request per instance inside a Retry-After, one sent {most}"
    );
}

/// The test's own connection to `server`, which waits up to 10 s for an answer (the redis
/// crate's default is 500 ms): long enough for a loaded machine.
pub async fn redis_connection(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    let mut connection = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("a connection to the test's redis-server");
    connection.set_response_timeout(Duration::from_secs(10));
    connection
}

/// Sets one of the server's settings (`CONFIG SET`).
pub async fn config_set(redis: &mut redis::aio::MultiplexedConnection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query_async(redis)
        .await
        .unwrap_or_else(|error| panic!("expected CONFIG SET {name} {value} to succeed: {error}"));
}

/// The value of `field` in `INFO section`.
pub async fn info(
    redis: &mut redis::aio::MultiplexedConnection,
    section: &str,
    field: &str,
) -> String {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query_async(redis)
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
        .unwrap_or_else(|| panic!("expected {field} in INFO {section}, got {text}"))
}

/// A replica of the server on `master_port`, following it through a link of `lag` each way,
/// once it follows (the first synchronisation takes a few round trips of the link); and that
/// link, which the replica follows through while it lives.
pub async fn lagging_replica(master_port: u16, lag: Duration) -> (RedisServer, SlowLink) {
    let link = SlowLink::start(master_port, lag).await;
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &link.port().to_string()]);
    let mut to_replica = redis_connection(&replica).await;
    let give_up = Instant::now() + Duration::from_secs(60);
    while info(&mut to_replica, "replication", "master_link_status").await != "up" {
        assert!(
            Instant::now() < give_up,
            "expected the replica to follow the master within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    (replica, link)
}

/// The names of the crate's states in the Redis of `redis`.
pub async fn states(redis: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    redis::cmd("KEYS")
        .arg("petstore-client:*")
        .query_async(redis)
        .await
        .unwrap()
}

/// How many times scripts ran since the server started, from `INFO commandstats`.
pub async fn script_calls(redis: &mut redis::aio::MultiplexedConnection) -> usize {
    command_calls(redis, &["evalsha", "eval"]).await
}

/// How many times the `commands` (as `INFO commandstats` names them: `evalsha`,
/// `pubsub|numsub`) ran since the server started.
pub async fn command_calls(
    redis: &mut redis::aio::MultiplexedConnection,
    commands: &[&str],
) -> usize {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(redis)
        .await
        .unwrap();
    stats
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(":calls="))
        .filter(|(command, _)| commands.contains(command))
        .filter_map(|(_, rest)| rest.split(',').next()?.parse::<usize>().ok())
        .sum()
}
