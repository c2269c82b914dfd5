//! What calls record through the `metrics` facade (the `metrics` feature), read from
//! `metrics-util`'s debugging recorder set as each test's own, against the sandbox on tokio's
//! paused clock; with the `redis` feature too, through a real `redis-server` on the real clock.

/// The shared test set-up (`tests/common`): the base, and only the helpers these tests use.
#[path = "common"]
#[allow(dead_code)]
mod common {
    mod base;
    pub use base::*;
    pub mod redis_server;
}

use std::collections::HashMap;
use std::time::Duration;

use common::{API_KEY, sandbox_client};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use petstore_client::{PetStoreClient, RateLimitScope, RetryPolicy};
use petstore_sandbox::{Fault, Plan, Sandbox};

type Labels = Vec<(String, String)>;

/// What was recorded since the last reading, by name and sorted labels.
fn read(snapshotter: &Snapshotter) -> HashMap<(String, Labels), DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (_, key) = key.into_parts();
            let mut labels: Labels = key
                .labels()
                .map(|label| (label.key().to_owned(), label.value().to_owned()))
                .collect();
            labels.sort();
            ((key.name().to_owned(), labels), value)
        })
        .collect()
}

/// `pairs` and the server's labels, sorted.
fn labels(sandbox: &Sandbox, pairs: &[(&str, &str)]) -> Labels {
    let url = sandbox.base_url();
    let mut labels: Labels = pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .chain([
            (
                "server.address".to_owned(),
                url.host_str().unwrap().to_owned(),
            ),
            ("server.port".to_owned(), url.port().unwrap().to_string()),
        ])
        .collect();
    labels.sort();
    labels
}

/// The values recorded in the histogram `name` with `labels`.
fn histogram(
    recorded: &HashMap<(String, Labels), DebugValue>,
    name: &str,
    labels: Labels,
) -> Vec<f64> {
    match recorded.get(&(name.to_owned(), labels)) {
        Some(DebugValue::Histogram(values)) => values.iter().map(|value| value.0).collect(),
        other => panic!("expected the histogram {name}, got {other:?} in {recorded:#?}"),
    }
}

/// The count of the counter `name` with `labels`.
fn counter(recorded: &HashMap<(String, Labels), DebugValue>, name: &str, labels: Labels) -> u64 {
    match recorded.get(&(name.to_owned(), labels)) {
        Some(DebugValue::Counter(count)) => *count,
        other => panic!("expected the counter {name}, got {other:?} in {recorded:#?}"),
    }
}

/// The value of the gauge `name` with `labels`.
fn gauge(recorded: &HashMap<(String, Labels), DebugValue>, name: &str, labels: Labels) -> f64 {
    match recorded.get(&(name.to_owned(), labels)) {
        Some(DebugValue::Gauge(value)) => value.0,
        other => panic!("expected the gauge {name}, got {other:?} in {recorded:#?}"),
    }
}

/// A sandbox that knows the tests' distinctive key, and a client of it with a rate-limit
/// state of its own.
async fn sandbox_and_client(policy: RetryPolicy) -> (Sandbox, PetStoreClient) {
    let sandbox = common::sandbox_builder()
        .key(API_KEY, Plan::Pro)
        .start()
        .await
        .unwrap();
    let client = sandbox_client(&sandbox, API_KEY, policy)
        .rate_limit_scope(RateLimitScope::Client)
        .build()
        .unwrap();
    (sandbox, client)
}

#[tokio::test(start_paused = true)]
async fn a_429_and_the_hold_after_it_are_recorded_without_the_key() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recorder = metrics::set_default_local_recorder(&recorder);
    let (sandbox, client) = sandbox_and_client(RetryPolicy::none()).await;

    sandbox.inject(Fault::status(429).retry_after(30).times(1));
    client.list_pets().send().await.unwrap_err();
    let response = client.list_pets().send_with_meta().await.unwrap();

    let recorded = read(&snapshotter);
    let request = |status| {
        labels(
            &sandbox,
            &[
                ("http.request.method", "GET"),
                ("http.response.status_code", status),
                ("petstore.operation", "listPets"),
            ],
        )
    };
    for status in ["429", "200"] {
        let durations = histogram(&recorded, "http.client.request.duration", request(status));
        assert_eq!(durations.len(), 1, "expected one {status} request");
    }
    let throttled = labels(&sandbox, &[("http.response.status_code", "429")]);
    assert_eq!(
        counter(&recorded, "petstore.client.responses.throttled", throttled),
        1
    );
    let held = labels(
        &sandbox,
        &[("cause", "cooldown"), ("petstore.operation", "listPets")],
    );
    assert_eq!(
        histogram(&recorded, "petstore.client.hold.duration", held.clone()),
        [30.0],
        "expected one hold of exactly 30 s"
    );
    assert_eq!(counter(&recorded, "petstore.client.holds", held), 1);
    let quota = response.quota().unwrap();
    let minute = labels(&sandbox, &[("petstore.quota.window", "60s")]);
    assert_eq!(
        gauge(&recorded, "petstore.client.quota.remaining", minute.clone()),
        quota.remaining as f64
    );
    assert_eq!(
        gauge(&recorded, "petstore.client.quota.limit", minute),
        quota.limit as f64
    );
    assert_eq!(
        gauge(
            &recorded,
            "petstore.client.instances",
            labels(&sandbox, &[])
        ),
        1.0
    );
    let secret = &API_KEY[API_KEY.len() - 8..];
    for (name, labels) in recorded.keys() {
        for (key, value) in labels {
            assert!(
                !value.contains(secret) && !key.contains(secret),
                "the key leaked into {name}'s label {key}={value}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_a_503_is_counted() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recorder = metrics::set_default_local_recorder(&recorder);
    let (sandbox, client) = sandbox_and_client(RetryPolicy::builder().jitter(false).build()).await;

    sandbox.inject(Fault::status(503).times(1));
    let response = client.list_pets().send_with_meta().await.unwrap();

    assert_eq!(response.call_info().backoff(), Duration::from_millis(500));
    let recorded = read(&snapshotter);
    let retries = labels(&sandbox, &[("petstore.operation", "listPets")]);
    assert_eq!(counter(&recorded, "petstore.client.retries", retries), 1);
    let throttled = labels(&sandbox, &[("http.response.status_code", "503")]);
    assert_eq!(
        counter(&recorded, "petstore.client.responses.throttled", throttled),
        1
    );
    assert!(
        !recorded
            .keys()
            .any(|(name, _)| name == "petstore.client.holds"),
        "expected no hold: {recorded:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn each_window_keeps_the_remaining_and_limit_it_last_reported() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recorder = metrics::set_default_local_recorder(&recorder);
    // 3 a minute and 5 a day: the minute binds in the first minute, the day in the second.
    let plan = Plan::Enterprise {
        per_minute: 3,
        per_day: 5,
    };
    let (sandbox, client) = common::sole_user_of(plan).await;
    for _ in 0..3 {
        client.list_pets().send().await.unwrap();
    }

    // Held until the minute ends; then the day, with 1 left after this call, binds.
    let response = client.list_pets().send_with_meta().await.unwrap();

    assert_eq!(response.call_info().held(), Duration::from_secs(60));
    let quota = response.quota().unwrap();
    assert_eq!((quota.limit, quota.remaining), (5, 1));
    let recorded = read(&snapshotter);
    let window = |length| {
        let window = labels(&sandbox, &[("petstore.quota.window", length)]);
        (
            gauge(&recorded, "petstore.client.quota.remaining", window.clone()),
            gauge(&recorded, "petstore.client.quota.limit", window),
        )
    };
    assert_eq!(window("60s"), (0.0, 3.0), "expected the minute spent");
    assert_eq!(
        window("86400s"),
        (1.0, 5.0),
        "expected 1 of 5 left in the day"
    );
    let series = recorded
        .keys()
        .filter(|(name, _)| name.starts_with("petstore.client.quota."))
        .count();
    assert_eq!(series, 4, "expected two windows, no other: {recorded:#?}");
}

/// `petstore.client.store.live` says whether the fleet's shared state answers: 1 after a call
/// that Redis admitted, 0 after one that found it gone (killed, as a crash would);
/// `petstore.client.store.lost` counts the times Redis lost the state (flushed here). On the real
/// clock, a Redis round trip being real I/O, and on one thread, whose recorder this is.
#[cfg(feature = "redis")]
#[tokio::test]
async fn the_shared_store_is_recorded_live_while_redis_answers_and_not_once_it_is_gone() {
    use common::redis_server::RedisServer;
    use petstore_client::RedisState;

    const LIVE: &str = "petstore.client.store.live";
    const INSTANCES: &str = "petstore.client.instances";
    const LOST: &str = "petstore.client.store.lost";
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recorder = metrics::set_default_local_recorder(&recorder);
    let mut redis = RedisServer::start();
    let sandbox = common::sandbox_builder()
        .key(API_KEY, Plan::Pro)
        .start()
        .await
        .unwrap();
    let client = common::builder_at(sandbox.base_url())
        .rate_limit_scope(RateLimitScope::Client)
        .shared_state(RedisState::new(&redis.url()).unwrap())
        .build()
        .unwrap();
    let server = labels(&sandbox, &[]);

    // One call alone: admitted by Redis, with no lease that a later call could spend
    // without asking it.
    client.list_pets().send().await.unwrap();
    let recorded = read(&snapshotter);
    assert_eq!(gauge(&recorded, LIVE, server.clone()), 1.0);
    assert_eq!(gauge(&recorded, INSTANCES, server.clone()), 1.0);
    assert_eq!(counter(&recorded, LOST, server.clone()), 0);

    // The state flushed: the next call finds it lost.
    let mut direct = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let () = redis::cmd("FLUSHALL")
        .query_async(&mut direct)
        .await
        .unwrap();
    client.list_pets().send().await.unwrap();
    assert_eq!(counter(&read(&snapshotter), LOST, server.clone()), 1);

    redis.kill();
    client
        .list_pets()
        .send()
        .await
        .expect("calls go on without Redis");
    let recorded = read(&snapshotter);
    assert_eq!(gauge(&recorded, LIVE, server.clone()), 0.0);
    assert_eq!(gauge(&recorded, INSTANCES, server), 1.0);
}
