//! What a call reports of itself ([`CallInfo`]), against the sandbox on tokio's paused clock,
//! so that every hold and backoff is exact.

use crate::common;

use std::time::Duration;

use common::sandbox_client;
use petstore_client::{CallInfo, Error, HoldCause, PetStoreClient, RateLimitScope, RetryPolicy};
use petstore_sandbox::{Fault, Plan, Sandbox};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A client of `sandbox` with a rate-limit state of its own.
fn client(sandbox: &Sandbox, policy: RetryPolicy) -> PetStoreClient {
    sandbox_client(sandbox, sandbox.key(Plan::Pro), policy)
        .rate_limit_scope(RateLimitScope::Client)
        .build()
        .unwrap()
}

/// What the tests compare: everything a `CallInfo` tells.
fn told(call: &CallInfo) -> (u32, Duration, Option<HoldCause>, Duration, Duration) {
    (
        call.attempts(),
        call.held(),
        call.hold_cause(),
        call.backoff(),
        call.elapsed(),
    )
}

/// Starts a 30 s cooldown on `client`'s key with an injected 429.
async fn cooldown_of_30s(sandbox: &Sandbox, client: &PetStoreClient) {
    sandbox.inject(Fault::status(429).retry_after(30).times(1));
    let error = client
        .list_pets()
        .retry_policy(RetryPolicy::none())
        .send()
        .await
        .unwrap_err();
    assert!(error.is_rate_limited(), "expected the 429, got {error:?}");
    assert_eq!(
        told(error.call_info().unwrap()),
        (1, Duration::ZERO, None, Duration::ZERO, Duration::ZERO),
        "expected the 429 itself to be neither held nor retried"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_held_by_a_cooldown_tells_the_hold_and_its_cause() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, RetryPolicy::none());
    cooldown_of_30s(&sandbox, &client).await;

    let response = client.list_pets().send_with_meta().await.unwrap();

    assert_eq!(
        told(response.call_info()),
        (
            1,
            secs(30.0),
            Some(HoldCause::Cooldown),
            Duration::ZERO,
            secs(30.0)
        ),
        "expected one attempt held 30 s by the cooldown"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_behind_a_held_call_is_held_by_the_queue() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, RetryPolicy::none());
    cooldown_of_30s(&sandbox, &client).await;

    let (first, second) = tokio::join!(
        client.list_pets().send_with_meta(),
        client.list_pets().send_with_meta()
    );

    assert_eq!(
        first.unwrap().call_info().hold_cause(),
        Some(HoldCause::Cooldown)
    );
    assert_eq!(
        told(second.unwrap().call_info()),
        (
            1,
            secs(30.0),
            Some(HoldCause::Queue),
            Duration::ZERO,
            secs(30.0)
        ),
        "expected the second call to wait 30 s in line behind the first"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_a_503_tells_the_policy_s_backoff() {
    let sandbox = common::sandbox().await;
    let policy = RetryPolicy::builder().jitter(false).build();
    let client = client(&sandbox, policy.clone());
    sandbox.inject(Fault::status(503).times(1));

    let response = client.list_pets().send_with_meta().await.unwrap();

    let backoff = policy.initial_delay();
    assert_eq!(backoff, secs(0.5));
    assert_eq!(
        told(response.call_info()),
        (2, Duration::ZERO, None, backoff, backoff),
        "expected two attempts, 0.5 s apart"
    );
    assert_eq!(response.attempts(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_error_after_retries_tells_every_backoff() {
    let sandbox = common::sandbox().await;
    let policy = RetryPolicy::builder().jitter(false).max_retries(2).build();
    let client = client(&sandbox, policy);
    sandbox.inject(Fault::status(503).times(3));

    let error = client.list_pets().send().await.unwrap_err();

    assert_eq!(error.status(), Some(http::StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(
        told(error.call_info().unwrap()),
        (3, Duration::ZERO, None, secs(1.5), secs(1.5)),
        "expected three attempts after backoffs of 0.5 s and 1 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_not_sent_tells_no_attempt_and_an_invalid_one_tells_nothing() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, RetryPolicy::none());
    cooldown_of_30s(&sandbox, &client).await;

    let error = client
        .list_pets()
        .retry_policy(
            RetryPolicy::builder()
                .max_retries(0)
                .max_server_wait(secs(10.0))
                .build(),
        )
        .send()
        .await
        .unwrap_err();

    assert!(matches!(error, Error::Throttled(_)), "{error:?}");
    assert_eq!(
        told(error.call_info().unwrap()),
        (0, Duration::ZERO, None, Duration::ZERO, Duration::ZERO),
        "expected the call to fail at once, unsent"
    );
    assert_eq!(error.call_info().unwrap().server_clock_offset(), None);

    let invalid = client.list_pets().limit(0).send().await.unwrap_err();
    assert!(invalid.is_invalid_argument(), "{invalid:?}");
    assert_eq!(invalid.call_info(), None);
    assert_eq!(invalid.attempts(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_call_tells_the_server_clock_offset_it_read() {
    // Not pinned: the offset is the service's clock against this machine's wall clock, which
    // the client reads; only the sandbox's skew is fixed. `Date`'s truncation to the second
    // leaves the offset anywhere in the second below -90 s, and the real time between the
    // sandbox's start and the client's first reading of the wall clock (milliseconds, more on
    // a loaded machine: -91.023 s was seen) lowers it further; a second of slack covers that.
    let sandbox = Sandbox::builder()
        .clock_offset(chrono::TimeDelta::seconds(-90))
        .start()
        .await
        .unwrap();
    let client = client(&sandbox, RetryPolicy::none());

    let response = client.list_pets().send_with_meta().await.unwrap();

    let offset = response.call_info().server_clock_offset().unwrap();
    assert!(
        (-92_000..=-89_000).contains(&offset.num_milliseconds()),
        "expected the sandbox's 90 s behind, read {offset}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_past_a_spent_window_is_held_until_the_window_ends() {
    let plan = Plan::Enterprise {
        per_minute: 2,
        per_day: 1_000,
    };
    let (_sandbox, client) = common::sole_user_of(plan).await;
    for _ in 0..2 {
        client.list_pets().send().await.unwrap();
    }

    let response = client.list_pets().send_with_meta().await.unwrap();

    // The sandbox's clock starts on a minute: the window ends 60 s after the first call.
    assert_eq!(
        told(response.call_info()),
        (
            1,
            secs(60.0),
            Some(HoldCause::SpentWindow),
            Duration::ZERO,
            secs(60.0)
        ),
        "expected the third call held until the minute window ends"
    );
}

/// A call whose own deadline ends its hold, while it waits for another call's answer that no
/// timer of its own foretells: the time held is told, not lost with the call.
#[tokio::test(start_paused = true)]
async fn a_call_whose_deadline_ends_its_hold_tells_the_time_it_was_held() {
    let sandbox = common::sandbox().await;
    let client = sandbox_client(&sandbox, sandbox.key(Plan::Pro), RetryPolicy::none())
        .rate_limit_scope(RateLimitScope::Client)
        .call_timeout(secs(33.0))
        .build()
        .unwrap();
    cooldown_of_30s(&sandbox, &client).await;
    // The first request after the cooldown asks alone, and its answer takes 10 s.
    sandbox.inject(Fault::latency(secs(10.0)).times(1));

    let (probe, behind) = tokio::join!(client.list_pets().send(), client.list_pets().send());

    let (probe, behind) = (probe.unwrap_err(), behind.unwrap_err());
    assert!(
        matches!(behind, Error::Throttled(_)),
        "expected the call behind the probe to be given up at its deadline, got {behind:?}"
    );
    assert_eq!(
        told(behind.call_info().expect("what the call did")),
        (
            0,
            secs(33.0),
            Some(HoldCause::Queue),
            Duration::ZERO,
            secs(33.0)
        ),
        "expected no attempt, and 33 s held: 30 s in line, 3 s for the probe's answer"
    );
    assert_eq!(probe.call_info().map(CallInfo::attempts), Some(1));
}
