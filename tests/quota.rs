//! The rate-limit quota from the `X-RateLimit-*` headers: on successes and errors, shared by
//! every clone of a client, and never an error when the headers are off.

mod common;

use chrono::{DateTime, Utc};
use common::{
    api_error, client, fixtures, json, mount_list, mount_list_queries, start, with_quota,
};
use petstore_client::Quota;
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

    assert_eq!(response.quota(), Some(quota(300, 299)));
    assert_eq!(client.quota(), Some(quota(300, 299)));
    let seen = client.quota().unwrap();
    assert_eq!((seen.used(), seen.is_exhausted()), (1, false));
}

#[tokio::test]
async fn quota_is_read_from_an_error_response() {
    let server = start().await;
    let template = with_quota(json(401, fixtures::ERROR_401), 60, 12, RESET);
    mount_list(&server, template, 1).await;
    let client = client(&server);

    let error = client.list_pets().send().await.unwrap_err();

    assert!(error.is_unauthorized());
    assert_eq!(error.quota(), Some(quota(60, 12)));
    assert_eq!(api_error(&error).quota(), Some(quota(60, 12)));
    assert_eq!(client.quota(), Some(quota(60, 12)));
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
    assert_eq!(second.quota(), Some(quota(60, 59)));

    let task = tokio::spawn(async move {
        second.list_pets().limit(2).send().await.unwrap();
        second
    });
    let second = task.await.unwrap();
    assert_eq!(first.quota(), Some(quota(60, 58)));

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
            "duplicated",
            with_quota(base(), 60, 59, RESET).append_header("X-RateLimit-Remaining", "58"),
        ),
    ]
}

#[tokio::test]
async fn missing_malformed_or_duplicated_headers_give_no_quota_and_no_error() {
    for (case, template) in unusable_quota_headers() {
        let server = start().await;
        mount_list(&server, template, 1).await;
        let client = client(&server);

        let response = client.list_pets().send_with_meta().await;

        let response = response.unwrap_or_else(|e| panic!("{case}: {e:?}"));
        assert_eq!(response.quota(), None, "{case}");
        assert_eq!(client.quota(), None, "{case}");
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

    assert!(error.is_not_found());
    assert_eq!(error.quota(), None);
    assert_eq!(client.quota(), None);
}
