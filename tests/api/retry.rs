//! Retries, `Retry-After`, the ceiling and the cooldown gate, against wiremock on loopback under
//! tokio's paused clock: every delay is exact and nothing really sleeps.
//!
//! The clients here have no per-attempt timeout and no idle-pool timer: with a paused clock,
//! tokio jumps to the next timer whenever it waits for I/O, which would fire such timers early.

use crate::common;

use std::time::Duration;

use http::StatusCode;
use petstore_client::{
    Error, NewPet, PetStoreClient, RateLimitScope, RetryBudget, RetryPolicy, ThrottleCause,
};
use petstore_sandbox::{Fault, Plan, Route, Sandbox};
use tokio::time::Instant;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "FAKE-retry-key";
const PETS: &str = r#"[{"id":1,"name":"Rex","categoryId":3,"status":"available"}]"#;
const PET: &str = r#"{"id":1,"name":"Rex","categoryId":3}"#;

fn client(server: &MockServer, policy: RetryPolicy) -> PetStoreClient {
    common::paused_builder(common::base_url(server), KEY, policy)
        .build()
        .unwrap()
}

fn no_jitter() -> RetryPolicy {
    RetryPolicy::builder().jitter(false).build()
}

fn status(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_raw(
        format!(r#"{{"code":"error","message":"status {code}","status":{code}}}"#),
        "application/json",
    )
}

fn ok(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.to_owned(), "application/json")
}

fn created() -> ResponseTemplate {
    ResponseTemplate::new(201).set_body_raw(PET, "application/json")
}

/// Answers `first` to the first `times` requests on `route`, then `then`.
async fn sequence(
    server: &MockServer,
    verb: &str,
    times: u64,
    first: ResponseTemplate,
    then: ResponseTemplate,
) {
    Mock::given(method(verb))
        .and(path("/v1/pets"))
        .respond_with(first)
        .up_to_n_times(times)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method(verb))
        .and(path("/v1/pets"))
        .respond_with(then)
        .with_priority(2)
        .mount(server)
        .await;
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.map_or(0, |r| r.len())
}

#[tokio::test(start_paused = true)]
async fn delays_follow_the_exponential_schedule_and_stop_after_max_retries() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(status(503))
        .expect(4)
        .mount(&server)
        .await;
    let start = Instant::now();

    let error = client(&server, no_jitter())
        .list_pets()
        .send()
        .await
        .unwrap_err();

    assert_eq!(
        start.elapsed(),
        Duration::from_millis(500 + 1000 + 2000),
        "expected the backoff of 0.5 s, 1 s and 2 s"
    );
    assert_eq!(
        error.status(),
        Some(StatusCode::SERVICE_UNAVAILABLE),
        "expected the last 503 as the error"
    );
    assert_eq!(
        error.attempts(),
        4,
        "expected the first attempt and three retries"
    );
    assert_eq!(
        error.to_string(),
        "the Pet Store API answered 503 Service Unavailable: status 503 (code `error`) (after 4 attempts)"
    );
}

#[tokio::test(start_paused = true)]
async fn jittered_delays_stay_within_their_bounds() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(status(502))
        .expect(3)
        .mount(&server)
        .await;
    let start = Instant::now();

    let policy = RetryPolicy::builder().max_retries(2).build();
    let error = client(&server, policy)
        .list_pets()
        .send()
        .await
        .unwrap_err();

    // 0.5 s and 1 s, each grown by up to itself.
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1500),
        "expected a wait of at least 1.5 s, waited {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_millis(3000),
        "expected a wait of less than 3 s, waited {elapsed:?}"
    );
    assert_eq!(
        error.attempts(),
        3,
        "expected the first attempt and two retries"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_seconds_is_waited_exactly_not_the_backoff() {
    let server = MockServer::start().await;
    sequence(
        &server,
        "GET",
        1,
        status(429).insert_header("Retry-After", "7"),
        ok(PETS),
    )
    .await;
    let start = Instant::now();

    let response = client(&server, no_jitter())
        .list_pets()
        .send_with_meta()
        .await
        .unwrap();

    assert_eq!(
        start.elapsed(),
        Duration::from_secs(7),
        "expected the 7 s of Retry-After"
    );
    assert_eq!(response.attempts(), 2, "expected one retry");
    assert_eq!(
        requests(&server).await,
        2,
        "expected two requests at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_http_date_is_never_undercut() {
    let server = MockServer::start().await;
    // On the service's clock, as its `Date` tells it, whatever this machine's clock says: the
    // wait ends at the date's second, never before it.
    sequence(
        &server,
        "GET",
        1,
        status(429)
            .insert_header("Date", "Wed, 01 Jan 2025 00:00:00 GMT")
            .insert_header("Retry-After", "Wed, 01 Jan 2025 00:00:30 GMT"),
        ok(PETS),
    )
    .await;
    let start = Instant::now();

    client(&server, no_jitter())
        .list_pets()
        .send()
        .await
        .unwrap();

    let elapsed = start.elapsed();
    assert!(
        (Duration::from_secs(30)..=Duration::from_secs(31)).contains(&elapsed),
        "expected a wait of 30 s, waited {elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_the_ceiling_fails_at_once_and_holds_later_calls() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(status(429).insert_header("Retry-After", "3600"))
        .expect(1)
        .mount(&server)
        .await;
    let client = client(&server, RetryPolicy::default());
    let start = Instant::now();

    let error = client.list_pets().send().await.unwrap_err();

    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "expected the call to fail without waiting"
    );
    assert!(
        error.is_rate_limited(),
        "expected a rate-limited error, got {error:?}"
    );
    assert_eq!(
        error.retry_after(),
        Some(Duration::from_secs(3600)),
        "expected the hour of Retry-After"
    );
    assert_eq!(error.attempts(), 1, "expected one attempt");

    // The service asked for an hour of quiet: another call is held back without a request.
    let held = client.clone().list_pets().send().await.unwrap_err();
    assert!(
        matches!(held, Error::Throttled { .. }),
        "expected the next call to be held, got {held:?}"
    );
    assert!(
        held.is_rate_limited(),
        "expected the held call to be rate limited, got {held:?}"
    );
    assert!(
        held.retry_after().unwrap() > Duration::from_secs(3590),
        "expected most of the hour still to wait, got {:?}",
        held.retry_after()
    );
    assert_eq!(
        requests(&server).await,
        1,
        "expected only the first request at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_held_after_a_long_503_is_unavailable_not_rate_limited() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(status(503).insert_header("Retry-After", "3600"))
        .expect(1)
        .mount(&server)
        .await;
    let client = client(&server, RetryPolicy::default());

    let error = client.list_pets().send().await.unwrap_err();
    assert_eq!(
        error.status(),
        Some(StatusCode::SERVICE_UNAVAILABLE),
        "expected the 503 as the error"
    );
    assert!(
        error.is_unavailable() && error.is_server_error() && error.is_retryable(),
        "expected an unavailable, server and retryable error, got {error:?}"
    );
    assert!(
        !error.is_rate_limited(),
        "expected a 503 not to be rate limited, got {error:?}"
    );

    // The service asked for an hour of quiet: another call is held back without a request.
    let held = client.list_pets().send().await.unwrap_err();
    assert_eq!(
        held.throttle_cause(),
        Some(ThrottleCause::Unavailable),
        "expected the cause of the hold"
    );
    assert!(
        held.is_unavailable() && held.is_retryable(),
        "expected an unavailable and retryable hold, got {held:?}"
    );
    assert!(
        !held.is_rate_limited() && !held.is_server_error(),
        "expected a hold neither rate limited nor a server error, got {held:?}"
    );
    assert_eq!(
        held.status(),
        None,
        "expected no status for a request not sent"
    );
    assert_eq!(
        held.to_string(),
        "the request was not sent: the service is unavailable and asked for quiet for another \
         3600s, longer than this call may wait"
    );
    assert_eq!(
        requests(&server).await,
        1,
        "expected only the first request at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn post_is_retried_after_429() {
    let server = MockServer::start().await;
    sequence(
        &server,
        "POST",
        1,
        status(429).insert_header("Retry-After", "2"),
        created(),
    )
    .await;

    let pet = client(&server, no_jitter())
        .create_pet(NewPet::new("Rex", 3))
        .send()
        .await
        .unwrap();

    assert_eq!(pet.name, "Rex");
    assert_eq!(
        requests(&server).await,
        2,
        "expected the POST and its one retry"
    );
}

#[tokio::test(start_paused = true)]
async fn post_is_not_retried_after_5xx() {
    for code in [500, 502, 503, 504] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(status(code).insert_header("Retry-After", "1"))
            .expect(1)
            .mount(&server)
            .await;

        let error = client(&server, no_jitter())
            .create_pet(NewPet::new("Rex", 3))
            .send()
            .await
            .unwrap_err();

        assert_eq!(
            error.status(),
            StatusCode::from_u16(code).ok(),
            "expected the {code} as the error"
        );
        assert_eq!(
            error.attempts(),
            1,
            "expected no retry of a POST after a {code}"
        );
    }
}

/// Real time, not paused: under a paused clock the timeout would fire before wiremock's thread
/// even saw the request. Nothing is asserted about durations.
#[tokio::test]
async fn post_is_not_retried_after_an_attempt_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(created().set_delay(Duration::from_secs(60)))
        .expect(1)
        .mount(&server)
        .await;
    let client = PetStoreClient::builder()
        .base_url(format!("{}/v1", server.uri()))
        .api_key(KEY)
        .attempt_timeout(Duration::from_millis(200))
        .retry_policy(no_jitter())
        .build()
        .unwrap();

    let error = client
        .create_pet(NewPet::new("Rex", 3))
        .send()
        .await
        .unwrap_err();

    assert_eq!(
        error.timeout_kind(),
        Some(petstore_client::TimeoutKind::Attempt),
        "expected the attempt timeout"
    );
    assert_eq!(error.attempts(), 1, "expected no retry of the POST");
    assert_eq!(
        requests(&server).await,
        1,
        "expected one POST at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn get_is_retried_after_5xx_until_it_succeeds() {
    for code in [500, 502, 503, 504] {
        let server = MockServer::start().await;
        sequence(&server, "GET", 2, status(code), ok(PETS)).await;
        let start = Instant::now();

        let response = client(&server, no_jitter())
            .list_pets()
            .send_with_meta()
            .await
            .unwrap();

        assert_eq!(response.value().len(), 1, "expected the one pet listed");
        assert_eq!(
            response.attempts(),
            3,
            "expected two retries after a {code}"
        );
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(1500),
            "expected the backoff of 0.5 s and 1 s after a {code}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn client_errors_are_never_retried() {
    for code in [400, 401, 404, 409, 422] {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(status(code))
            .expect(1)
            .mount(&server)
            .await;

        let error = client(&server, no_jitter())
            .list_pets()
            .send()
            .await
            .unwrap_err();

        assert_eq!(
            error.status(),
            StatusCode::from_u16(code).ok(),
            "expected the {code} as the error"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_policy_overrides_the_client_policy() {
    let server = MockServer::start().await;
    sequence(&server, "GET", 2, status(503), ok(PETS)).await;
    let client = client(&server, RetryPolicy::none());

    let error = client.list_pets().send().await.unwrap_err();
    assert_eq!(
        error.status(),
        Some(StatusCode::SERVICE_UNAVAILABLE),
        "expected the 503 without a retry"
    );

    let pets = client
        .list_pets()
        .retry_policy(no_jitter())
        .send()
        .await
        .unwrap();
    assert_eq!(pets.len(), 1, "expected the one pet listed");
    assert_eq!(
        requests(&server).await,
        3,
        "expected one request, then two with the call's retries"
    );
}

/// Against the sandbox, which answers in this runtime: the clones wait for the probe's answer
/// with a timer at their deadline, and under the paused clock a server on another thread
/// (wiremock's) would let that timer fire before the answer came.
#[tokio::test(start_paused = true)]
async fn after_a_429_every_clone_waits_out_the_cooldown() {
    let sandbox = common::sandbox().await;
    sandbox.inject(Fault::status(429).retry_after(30).times(1));
    let client = common::sandbox_client(&sandbox, sandbox.key(Plan::Pro), RetryPolicy::none())
        .build()
        .unwrap();

    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        error.is_rate_limited(),
        "expected a rate-limited error, got {error:?}"
    );
    let start = Instant::now();

    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.list_pets().send().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(29_999)).await;
    assert_eq!(
        sandbox.request_log().len(),
        1,
        "a request went out during the cooldown"
    );

    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(30),
        "expected the clones to wait out the 30 s cooldown"
    );
    assert_eq!(
        sandbox.request_log().len(),
        9,
        "expected the 429 and one request per clone"
    );
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_also_closes_the_gate() {
    let server = MockServer::start().await;
    sequence(
        &server,
        "POST",
        1,
        status(503).insert_header("Retry-After", "10"),
        created(),
    )
    .await;
    let client = client(&server, RetryPolicy::none());

    client
        .create_pet(NewPet::new("Rex", 3))
        .send()
        .await
        .unwrap_err();
    let start = Instant::now();
    client
        .create_pet(NewPet::new("Rex", 3))
        .send()
        .await
        .unwrap();

    assert_eq!(
        start.elapsed(),
        Duration::from_secs(10),
        "expected the next call to wait out the 10 s of the 503"
    );
}

/// The wait before a retry is the longer of `Retry-After` (1 s here) and the backoff (10 s);
/// when that wait would outlast the call timeout, the call ends at once with the answer it
/// got, not at its deadline with a timeout. Against the sandbox, which answers in this
/// runtime: under the paused clock the call's deadline timer would fire while waiting for a
/// server on another thread.
#[tokio::test(start_paused = true)]
async fn a_retry_that_would_outlast_the_call_timeout_returns_the_answer_at_once() {
    let sandbox = common::sandbox().await;
    sandbox.inject(Fault::status(503).retry_after(1).route(Route::ListPets));
    let policy = RetryPolicy::builder()
        .jitter(false)
        .initial_delay(Duration::from_secs(10))
        .max_delay(Duration::from_secs(10))
        .build();
    let client = common::sandbox_client(&sandbox, sandbox.key(Plan::Pro), policy)
        .call_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let start = Instant::now();

    let error = client.list_pets().send().await.unwrap_err();

    assert_eq!(
        error.status(),
        Some(StatusCode::SERVICE_UNAVAILABLE),
        "expected the 503 the call got, got {error:?}"
    );
    assert_eq!(error.attempts(), 1, "expected one attempt");
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "expected the call to end at once, not at its deadline"
    );
    assert_eq!(
        sandbox.request_log().len(),
        1,
        "expected one request at the sandbox"
    );
}

/// A sandbox that answers 503 to every request.
async fn failing_sandbox() -> Sandbox {
    let sandbox = common::sandbox().await;
    sandbox.inject(Fault::status(503));
    sandbox
}

/// A client of `sandbox` whose retries spend `budget`: three each, 1 ms apart, so that a whole
/// test's calls fall within the budget's 10 s window.
fn budgeted(sandbox: &Sandbox, budget: RetryBudget) -> PetStoreClient {
    let policy = RetryPolicy::builder()
        .jitter(false)
        .initial_delay(Duration::from_millis(1))
        .max_delay(Duration::from_millis(1))
        .retry_budget(budget)
        .build();
    common::sandbox_client(sandbox, sandbox.key(Plan::Business), policy)
        .rate_limit_scope(RateLimitScope::Client)
        .build()
        .unwrap()
}

/// Makes `n` calls in turn, each of which must fail with the sandbox's 503.
async fn fail_in_turn(client: &PetStoreClient, n: usize) {
    for _ in 0..n {
        let error = client.list_pets().send().await.unwrap_err();
        assert_eq!(error.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    }
}

/// Against a service that fails everything, the retries of the default budget stop at its
/// minimum of 10: the requests grow with the calls, one each, not four.
#[tokio::test(start_paused = true)]
async fn a_failing_service_meets_the_budgets_retries_not_every_calls() {
    let sandbox = failing_sandbox().await;
    let client = budgeted(&sandbox, RetryBudget::default());
    let start = Instant::now();

    fail_in_turn(&client, 50).await;
    assert_eq!(
        sandbox.request_log().len(),
        50 + 10,
        "expected 50 first attempts and the budget's minimum of 10 retries"
    );
    fail_in_turn(&client, 50).await;
    assert_eq!(
        sandbox.request_log().len(),
        100 + 10,
        "expected the retries to stop growing with the calls"
    );
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "the test left the budget's window"
    );
}

#[tokio::test(start_paused = true)]
async fn the_budget_holds_for_concurrent_calls() {
    let sandbox = failing_sandbox().await;
    let client = budgeted(&sandbox, RetryBudget::default());

    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.list_pets().send().await })
        })
        .collect();
    for task in tasks {
        let error = task.await.unwrap().unwrap_err();
        assert_eq!(error.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    }

    assert_eq!(
        sandbox.request_log().len(),
        50 + 10,
        "expected 50 first attempts and the budget's minimum of 10 retries"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_budget_every_call_retries_as_its_policy_says() {
    let sandbox = failing_sandbox().await;
    let client = budgeted(&sandbox, RetryBudget::unlimited());

    fail_in_turn(&client, 50).await;

    assert_eq!(
        sandbox.request_log().len(),
        50 * 4,
        "expected every call's first attempt and three retries"
    );
}

/// Clones spend one budget; a client built on its own has its own.
#[tokio::test(start_paused = true)]
async fn clones_spend_one_budget() {
    let sandbox = failing_sandbox().await;
    let client = budgeted(&sandbox, RetryBudget::default());
    // Three calls of three retries and one of one: the minimum of 10 is spent.
    fail_in_turn(&client, 4).await;
    assert_eq!(sandbox.request_log().len(), 4 + 10);

    let error = client.clone().list_pets().send().await.unwrap_err();
    assert_eq!(
        error.attempts(),
        1,
        "expected the clone to find the budget spent"
    );

    let other = budgeted(&sandbox, RetryBudget::default());
    let error = other.list_pets().send().await.unwrap_err();
    assert_eq!(error.attempts(), 4, "expected a budget of its own");
}

/// Each answer that needs no retry gives back a fifth of a retry (the default share).
#[tokio::test(start_paused = true)]
async fn answers_refill_the_budget() {
    let sandbox = failing_sandbox().await;
    let client = budgeted(&sandbox, RetryBudget::default());
    fail_in_turn(&client, 4).await;
    let error = client.list_pets().send().await.unwrap_err();
    assert_eq!(error.attempts(), 1, "expected the budget spent");

    sandbox.clear_faults();
    for _ in 0..10 {
        client.list_pets().send().await.unwrap();
    }
    sandbox.inject(Fault::status(503));

    let error = client.list_pets().send().await.unwrap_err();
    assert_eq!(
        error.attempts(),
        3,
        "expected ten answers to give back two retries"
    );
}
