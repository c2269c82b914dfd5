//! The rate-limit quota from the `X-RateLimit-*` headers: on successes and errors, shared by
//! every clone of a client, never an error when the headers are off, and a quota shown only on
//! a 429 that does not hold the client back once its window has ended.

use crate::common;

use chrono::{DateTime, Utc};
use common::{
    api_error, client, fixtures, json, mount_list, mount_list_queries, start, with_quota,
};
use std::time::Duration;

use petstore_client::{Error, PetStoreClient, Quota, RetryPolicy};
use petstore_sandbox::{Plan, QuotaFields, Sandbox};
use wiremock::ResponseTemplate;

/// 2031-01-01T00:00:00Z, a reset far enough ahead that pacing never holds a request.
const RESET: i64 = 1_924_992_000;

fn quota(limit: u64, remaining: u64) -> Quota {
    Quota::new(
        limit,
        remaining,
        DateTime::<Utc>::from_timestamp(RESET, 0).unwrap(),
    )
}

#[tokio::test]
async fn quota_is_read_from_a_success_response() {
    let server = start().await;
    mount_list(&server, with_quota(json(200, "[]"), 300, 299, RESET), 1).await;
    let client = client(&server);
    assert_eq!(client.quota(), None, "no response yet");

    let response = client.list_pets().send_with_meta().await.unwrap();

    assert_eq!(
        response.quota(),
        Some(quota(300, 299)),
        "expected the response's quota from the headers"
    );
    assert_eq!(
        client.quota(),
        Some(quota(300, 299)),
        "expected the client's quota from the headers"
    );
    let seen = client.quota().unwrap();
    assert_eq!(
        (seen.used(), seen.is_exhausted()),
        (1, false),
        "expected one request used and the quota not exhausted"
    );
}

#[tokio::test]
async fn quota_is_read_from_an_error_response() {
    let server = start().await;
    let template = with_quota(json(401, fixtures::ERROR_401), 60, 12, RESET);
    mount_list(&server, template, 1).await;
    let client = client(&server);

    let error = client.list_pets().send().await.unwrap_err();

    assert!(
        error.is_unauthorized(),
        "expected an unauthorized error, got {error:?}"
    );
    assert_eq!(
        error.quota(),
        Some(quota(60, 12)),
        "expected the error's quota from the headers"
    );
    assert_eq!(
        api_error(&error).quota(),
        Some(quota(60, 12)),
        "expected the API error's quota from the headers"
    );
    assert_eq!(
        client.quota(),
        Some(quota(60, 12)),
        "expected the client's quota from the error's headers"
    );
}

#[tokio::test]
async fn client_quota_is_the_latest_any_clone_saw() {
    let server = start().await;
    mount_list_queries(
        &server,
        [
            ("limit=1", with_quota(json(200, "[]"), 60, 59, RESET)),
            ("limit=2", with_quota(json(200, "[]"), 60, 58, RESET)),
            ("limit=3", json(200, "[]")),
        ],
    )
    .await;
    let first = client(&server);
    let second = first.clone();

    first.list_pets().limit(1).send().await.unwrap();
    assert_eq!(
        second.quota(),
        Some(quota(60, 59)),
        "expected the clone to see the quota of the first call"
    );

    let task = tokio::spawn(async move {
        second.list_pets().limit(2).send().await.unwrap();
        second
    });
    let second = task.await.unwrap();
    assert_eq!(
        first.quota(),
        Some(quota(60, 58)),
        "expected the client to see the quota of the clone's call"
    );

    first.list_pets().limit(3).send().await.unwrap();
    assert_eq!(
        second.quota(),
        Some(quota(60, 58)),
        "a response without quota keeps the latest reported one"
    );
}

/// Rate-limit headers that do not make a quota.
fn unusable_quota_headers() -> Vec<(&'static str, ResponseTemplate)> {
    let base = || json(200, "[]");
    vec![
        ("no headers", base()),
        (
            "no reset",
            base()
                .insert_header("X-RateLimit-Limit", "60")
                .insert_header("X-RateLimit-Remaining", "59"),
        ),
        (
            "not a number",
            with_quota(base(), 60, 59, RESET).insert_header("X-RateLimit-Remaining", "many"),
        ),
        (
            "negative",
            with_quota(base(), 60, 59, RESET).insert_header("X-RateLimit-Limit", "-60"),
        ),
        (
            "fraction",
            with_quota(base(), 60, 59, RESET).insert_header("X-RateLimit-Reset", "1924992000.5"),
        ),
        (
            "overflow",
            with_quota(base(), 60, 59, RESET)
                .insert_header("X-RateLimit-Limit", "99999999999999999999999"),
        ),
        (
            "duplicated, one value not a number",
            with_quota(base(), 60, 59, RESET).append_header("X-RateLimit-Remaining", "some"),
        ),
    ]
}

/// Found by the simulation explorer with 16 and 32 independent instances: a gateway's
/// `X-RateLimit-Remaining` line before the service's made the quota unreadable, so no instance
/// saw the others spend the key, and together they emptied windows into one `Retry-After`.
#[tokio::test]
async fn a_field_given_twice_reads_as_its_most_careful_value() {
    let server = start().await;
    let gateway_first = with_quota(json(200, "[]"), 60, 59, RESET)
        .insert_header("X-RateLimit-Remaining", "60")
        .append_header("X-RateLimit-Remaining", "12");
    mount_list(&server, gateway_first, 1).await;
    let client = client(&server);

    let response = client.list_pets().send_with_meta().await.unwrap();

    assert_eq!(response.quota(), Some(quota(60, 12)));
}

#[tokio::test]
async fn missing_or_malformed_headers_give_no_quota_and_no_error() {
    for (case, template) in unusable_quota_headers() {
        let server = start().await;
        mount_list(&server, template, 1).await;
        let client = client(&server);

        let response = client.list_pets().send_with_meta().await;

        let response =
            response.unwrap_or_else(|e| panic!("expected a success with {case}, got {e:?}"));
        assert_eq!(
            response.quota(),
            None,
            "expected no response quota with {case}"
        );
        assert_eq!(client.quota(), None, "expected no client quota with {case}");
    }
}

#[tokio::test]
async fn malformed_headers_on_an_error_give_the_error_without_quota() {
    let server = start().await;
    let template = with_quota(json(404, fixtures::ERROR_404), 60, 59, RESET)
        .insert_header("X-RateLimit-Reset", "soon");
    mount_list(&server, template, 1).await;
    let client = client(&server);

    let error = client.list_pets().send().await.unwrap_err();

    assert!(
        error.is_not_found(),
        "expected a not-found error, got {error:?}"
    );
    assert_eq!(
        error.quota(),
        None,
        "expected no quota on the error from a bad reset"
    );
    assert_eq!(
        client.quota(),
        None,
        "expected no client quota from a bad reset"
    );
}

/// A sandbox showing the quota as `fields`, with a key allowed 5 requests per 10-second window.
async fn sandbox_showing(fields: QuotaFields) -> Sandbox {
    common::sandbox_builder()
        .key(
            "five",
            Plan::Enterprise {
                per_minute: 5,
                per_day: 1_000_000,
            },
        )
        .minute_window(Duration::from_secs(10))
        .quota_fields(fields)
        .start()
        .await
        .unwrap()
}

/// 20 tasks of one client calling back to back for a minute; a call held back waits as long
/// as the error says. How many calls succeeded.
async fn twenty_tasks_for_a_minute(client: &PetStoreClient) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut succeeded = 0;
                while let Ok(result) =
                    tokio::time::timeout_at(deadline, client.list_pets().limit(1).send()).await
                {
                    match result {
                        Ok(_) => succeeded += 1,
                        Err(Error::Throttled(held)) => {
                            tokio::time::sleep(held.retry_after()).await;
                        }
                        Err(error) => panic!("expected only successes and holds, got {error}"),
                    }
                }
                succeeded
            })
        })
        .collect();
    let mut succeeded = 0;
    for task in tasks {
        succeeded += task.await.unwrap();
    }
    succeeded
}

/// Found by an independent test (rate-core issue, failure 7): two `X-RateLimit-Remaining`
/// lines, or `-1`, read as "no quota", and after a few such answers as "not metered": 20
/// tasks then all called at once, 16 requests landed in one `Retry-After` and the key was
/// banned.
#[tokio::test(start_paused = true)]
async fn a_quota_the_client_cannot_read_never_switches_the_cooldown_off() {
    for fields in [
        QuotaFields::RepeatedRemaining,
        QuotaFields::NegativeRemaining,
    ] {
        let sandbox = sandbox_showing(fields).await;
        let client = common::sandbox_client(&sandbox, "five", RetryPolicy::default())
            .build()
            .unwrap();

        let succeeded = twenty_tasks_for_a_minute(&client).await;

        let stats = sandbox.stats();
        assert_eq!(
            (stats.bans(), stats.during_cooldown()),
            (0, 0),
            "with {fields:?}: expected no ban and no request inside a Retry-After, got {} bans \
             and {} requests there ({succeeded} calls succeeded)",
            stats.bans(),
            stats.during_cooldown()
        );
        assert!(
            succeeded >= 25,
            "with {fields:?}: expected most of six windows of 5 to be used, {succeeded} calls \
             succeeded"
        );
    }
}

/// Found by an independent test (rate-core issue, failure 7): the IETF fields were not read,
/// and a reset given as seconds was taken for a Unix time in 1970.
#[tokio::test(start_paused = true)]
async fn a_quota_in_the_ietf_fields_or_with_a_reset_in_seconds_paces_the_client() {
    for fields in [QuotaFields::Ietf, QuotaFields::ResetInSeconds] {
        let sandbox = sandbox_showing(fields).await;
        let client = common::sandbox_client(&sandbox, "five", RetryPolicy::default())
            .build()
            .unwrap();

        let succeeded = twenty_tasks_for_a_minute(&client).await;

        let quota = client.quota().expect("the quota was read");
        assert_eq!(quota.limit, 5, "with {fields:?}: the limit read");
        let stats = sandbox.stats();
        assert_eq!(
            stats.answered(429),
            0,
            "with {fields:?}: expected the pacing to keep every request within the quota \
             ({succeeded} calls succeeded)"
        );
        assert!(
            succeeded >= 25,
            "with {fields:?}: expected most of six windows of 5 to be used, {succeeded} calls \
             succeeded"
        );
    }
}

/// A 429 carried the only quota a service ever showed: once that window has ended, a call
/// goes alone only until an answer shows the service still serves, then they go together
/// again.
#[tokio::test(start_paused = true)]
async fn after_a_window_shown_only_on_its_429_ends_calls_go_together_again() {
    const ROUND_TRIP: Duration = Duration::from_millis(200);
    const WINDOW: Duration = Duration::from_secs(60);
    const MEASURED: Duration = Duration::from_secs(10);
    let service =
        common::windows::WindowService::headers_only_on_429(600, WINDOW, ROUND_TRIP).await;
    let client = common::paused_builder(
        service.base_url(),
        common::API_KEY,
        RetryPolicy::builder()
            .max_server_wait(Duration::from_secs(120))
            .build(),
    )
    .rate_limit_scope(petstore_client::RateLimitScope::Client)
    .build()
    .unwrap();
    let start = tokio::time::Instant::now();
    let until = start + WINDOW + MEASURED;

    // 8 tasks call back to back: 600 calls spend the window in about 15 s, a 429 shows the
    // quota and asks to wait until the window ends, and the next window is measured.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                while tokio::time::Instant::now() < until {
                    if let Err(error) = client.list_pets().send().await {
                        let wait = error.retry_after().unwrap_or(Duration::from_secs(1));
                        tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }

    let limited = service
        .arrivals()
        .iter()
        .filter(|a| a.status == 429)
        .count();
    assert!(limited >= 1, "expected the window to end in a 429");
    let served = service.successes_between(start + WINDOW, until);
    // One call at a time makes 5 calls a second at 200 ms a round trip.
    let one_at_a_time = (MEASURED.as_millis() / ROUND_TRIP.as_millis()) as usize;
    assert!(
        served >= 4 * one_at_a_time,
        "expected 8 tasks to make at least four times the {one_at_a_time} calls one at a time \
         makes in the {MEASURED:?} after the window ended, they made {served}"
    );
}
