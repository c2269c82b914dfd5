//! What the client logs while it retries and holds calls, read from `tracing` output. Every
//! test here captures before anything else happens, so that the one global subscriber of
//! `common::capture` is in place before any event of this binary (see there why).

use crate::common;

use petstore_client::{RetryBudget, RetryPolicy};
use petstore_sandbox::Plan;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

const PETS: &str = r#"[{"id":1,"name":"Rex","categoryId":3,"status":"available"}]"#;

/// Mounts `GET /v1/pets` answering each template once, in order.
async fn answers_in_turn(server: &MockServer, templates: Vec<wiremock::ResponseTemplate>) {
    for (turn, template) in templates.into_iter().enumerate() {
        Mock::given(method("GET"))
            .and(path(common::PETS))
            .respond_with(template)
            .up_to_n_times(1)
            .with_priority(u8::try_from(turn + 1).unwrap())
            .expect(1)
            .mount(server)
            .await;
    }
}

/// The lines of `text` that contain `needle`.
fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

/// The one line of `text` that contains `needle`.
#[track_caller]
fn the_line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    let lines = lines_with(text, needle);
    assert_eq!(
        lines.len(),
        1,
        "expected one line with `{needle}`, the log reads:\n{text}"
    );
    lines[0]
}

#[track_caller]
fn assert_line_says(line: &str, what: &str, expected: &str) {
    assert!(
        line.contains(expected),
        "expected the {what} line to contain `{expected}`, it reads: {line}"
    );
}

#[tokio::test(start_paused = true)]
async fn each_retry_is_logged_with_its_reason_delay_and_source() {
    let (logs, _guard) = common::capture(tracing::Level::DEBUG);
    let server = MockServer::start().await;
    let error = |code: u16| {
        common::json(
            code,
            &format!(r#"{{"code":"error","message":"status {code}","status":{code}}}"#),
        )
    };
    let answers = vec![
        error(429).insert_header("Retry-After", "4"),
        error(503),
        common::json(200, PETS),
    ];
    answers_in_turn(&server, answers).await;
    let policy = RetryPolicy::builder().jitter(false).build();

    common::paused_builder(common::base_url(&server), common::API_KEY, policy)
        .build()
        .unwrap()
        .list_pets()
        .send()
        .await
        .unwrap();

    let text = logs.text();
    let retries = lines_with(&text, "retrying");
    assert_eq!(
        retries.len(),
        2,
        "expected two retry lines (after the 429 and after the 503), the log reads:\n{text}"
    );
    let first = "first retry";
    assert_line_says(retries[0], first, "operation=\"listPets\"");
    assert_line_says(retries[0], first, "attempt=1");
    assert_line_says(retries[0], first, "delay=4s");
    assert_line_says(retries[0], first, "delay_source=\"Retry-After\"");
    assert_line_says(retries[0], first, "429 Too Many Requests");
    // The call's span, with OpenTelemetry's HTTP client names.
    for field in [
        "petstore.operation=\"listPets\"",
        "http.request.method=GET",
        "url.path=\"/v1/pets\"",
        "server.address=\"127.0.0.1\"",
    ] {
        assert_line_says(retries[0], first, field);
    }
    let second = "second retry";
    assert_line_says(retries[1], second, "attempt=2");
    assert_line_says(retries[1], second, "delay=1s");
    assert_line_says(retries[1], second, "delay_source=\"backoff\"");
    assert!(
        !text.contains(common::API_KEY),
        "the API key leaked into the logs:\n{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_held_call_logs_its_true_reason_once_per_hold() {
    let (logs, _guard) = common::capture(tracing::Level::DEBUG);
    let sandbox = common::sandbox().await;
    let client = common::sandbox_client(&sandbox, sandbox.key(Plan::Free), RetryPolicy::none())
        .build()
        .unwrap();

    common::create_concurrently(&client, 30).await;

    let text = logs.text();
    let holds = lines_with(&text, "holding request");
    assert!(
        !holds.is_empty(),
        "expected the calls after the first to be held, the log reads:\n{text}"
    );
    // A fresh client waits for its first answer to learn the budget; nothing was spent.
    assert_line_says(
        holds[0],
        "first hold",
        "waiting for a response to tell the rate-limit budget",
    );
    assert!(
        !text.contains("budget of the window is spent"),
        "no call should be held for a spent window (30 of 60 were used), the log reads:\n{text}"
    );
    // Only the call first in line waits on the state, and it says so once per hold: one
    // probe wait, then at most one pacing wait for each call after it.
    assert!(
        holds.len() <= 30,
        "expected at most one hold line per call (30), found {}",
        holds.len()
    );
}

/// A call held for a second or more says so at INFO, what holds it and for how long, so that a
/// CLI without a DEBUG subscriber is not silent through a wait.
#[tokio::test(start_paused = true)]
async fn a_hold_of_a_second_or_more_is_told_at_info() {
    let (logs, _guard) = common::capture(tracing::Level::INFO);
    let sandbox = common::sandbox().await;
    let client = common::sandbox_client(&sandbox, sandbox.key(Plan::Free), RetryPolicy::none())
        .build()
        .unwrap();
    for _ in 0..Plan::Free.per_minute() {
        client.list_pets().send().await.unwrap();
    }
    assert!(
        !logs.text().contains("holding request"),
        "expected no INFO line while the budget lasts, the log reads:\n{}",
        logs.text()
    );

    client.list_pets().send().await.unwrap();

    let text = logs.text();
    let holds = lines_with(&text, "holding request");
    assert_eq!(
        holds.len(),
        1,
        "expected one INFO line, the log reads:\n{text}"
    );
    assert!(
        holds[0].contains("INFO") && holds[0].contains("budget of the window is spent"),
        "expected the hold and its reason at INFO, the log reads:\n{text}"
    );
    assert_line_says(holds[0], "the wait in seconds", "wait_s=");
}

/// Holds that come call after call (a plan of one request a window) are told at INFO one in
/// ten seconds at most, not one a call.
#[tokio::test(start_paused = true)]
async fn holds_call_after_call_are_told_at_info_once_in_ten_seconds() {
    let (logs, _guard) = common::capture(tracing::Level::INFO);
    let plan = Plan::Enterprise {
        per_minute: 1,
        per_day: 1_000,
    };
    let sandbox = common::sandbox_builder()
        .key("one-a-window", plan)
        .minute_window(std::time::Duration::from_secs(4))
        .start()
        .await
        .unwrap();
    let client = common::sandbox_client(&sandbox, "one-a-window", RetryPolicy::none())
        .build()
        .unwrap();

    // Held from 0, 4, 8, 12 and 16 s, each time until the next window.
    for _ in 0..6 {
        client.list_pets().send().await.unwrap();
    }

    let text = logs.text();
    let holds = lines_with(&text, "holding request");
    assert_eq!(
        holds.len(),
        2,
        "expected the holds from 0 and 12 s at INFO, and those between at DEBUG, the log \
         reads:\n{text}"
    );
}

/// More instances than the contract keeps from a ban without shared state: the budget falls 30
/// for each of this process's requests. One WARN names the remedy, however often it shows.
#[tokio::test(start_paused = true)]
async fn a_fleet_past_the_contract_is_told_once_to_share_its_state() {
    let (logs, _guard) = common::capture(tracing::Level::INFO);
    let server = MockServer::start().await;
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_secs(common::CLOCK_START_UNIX);
    let date = httpdate::fmt_http_date(start);
    let reset = i64::try_from(common::CLOCK_START_UNIX).unwrap() + 60;
    let answers = (0..5)
        .map(|call| {
            let answer = common::json(200, PETS).insert_header("Date", date.as_str());
            common::with_quota(answer, 1_000, 900 - 30 * call, reset)
        })
        .collect();
    answers_in_turn(&server, answers).await;
    let client = common::paused_builder(
        common::base_url(&server),
        common::API_KEY,
        RetryPolicy::default(),
    )
    .rate_limit_scope(petstore_client::RateLimitScope::Client)
    .build()
    .unwrap();

    for _ in 0..5 {
        client.list_pets().send().await.unwrap();
    }

    let text = logs.text();
    let warning = the_line_with(&text, "RedisState");
    assert_line_says(warning, "fleet", "WARN");
    assert_line_says(warning, "fleet", "instances");
}

/// A retry the budget refuses says so at INFO: the call ended after one attempt for a reason
/// the user can read.
#[tokio::test(start_paused = true)]
async fn a_retry_the_budget_refuses_is_told_at_info() {
    let (logs, _guard) = common::capture(tracing::Level::INFO);
    let sandbox = common::sandbox().await;
    sandbox.inject(petstore_sandbox::Fault::status(503));
    let policy = RetryPolicy::builder()
        .retry_budget(RetryBudget::new(0.2, 0))
        .build();
    let client = common::sandbox_client(&sandbox, sandbox.key(Plan::Pro), policy)
        .build()
        .unwrap();

    let error = client.list_pets().send().await.unwrap_err();

    assert_eq!(error.attempts(), 1, "expected the retry refused");
    let text = logs.text();
    let refusal = the_line_with(&text, "retry budget is spent");
    assert_line_says(refusal, "refusal", "INFO");
    assert_line_says(refusal, "refusal", "503 Service Unavailable");
}
