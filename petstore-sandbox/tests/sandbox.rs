//! End to end against the embedded sandbox: every behaviour of the specification, the
//! sandbox's own decisions where it is silent, rate limits with the ban under a paused clock,
//! and each injected fault.

/// The set-up these tests share: a sandbox whose clock starts at a pinned instant, and a client
/// of it that keeps its connections and never times out an attempt on tokio's paused clock.
mod common {
    use petstore_client::{PetStoreClient, PetStoreClientBuilder, RetryPolicy};
    use petstore_sandbox::Sandbox;

    /// 2027-01-15T08:00:00Z, the start of a minute: no test's windows depend on the second of
    /// the minute it happens to run in.
    const CLOCK_START_UNIX: u64 = 1_800_000_000;

    /// A sandbox with the default keys whose clock starts at [`CLOCK_START_UNIX`].
    pub async fn sandbox() -> Sandbox {
        let start = std::time::UNIX_EPOCH + std::time::Duration::from_secs(CLOCK_START_UNIX);
        Sandbox::builder()
            .clock_start(start)
            .start()
            .await
            .expect("the sandbox starts on a loopback port")
    }

    /// A client builder for `sandbox` with `key` and `policy`.
    pub fn sandbox_client(
        sandbox: &Sandbox,
        key: &str,
        policy: RetryPolicy,
    ) -> PetStoreClientBuilder {
        let http = reqwest::Client::builder()
            .pool_idle_timeout(None)
            .build()
            .expect("a reqwest client");
        PetStoreClient::builder()
            .base_url(sandbox.base_url().as_str())
            .api_key(key)
            .http_client(http)
            .attempt_timeout(None)
            .retry_policy(policy)
    }
}

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::TimeDelta;
use common::sandbox_client;
use http::StatusCode;
use petstore_client::{CategoryId, Error, NewPet, PetStatus, PetStoreClient, RetryPolicy};
use petstore_sandbox::{Fault, Plan, Route, Sandbox, SandboxBuilder};
use reqwest::header::CONTENT_TYPE;
use serde_json::Value;
use tokio::time::Instant;

/// A raw response: status, headers, JSON body.
struct Raw {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Value,
}

/// A plain HTTP client without the idle-pool timer, which a paused clock would jump to.
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(None)
        .build()
        .unwrap()
}

/// Sends a request by hand, for what the typed client cannot express.
async fn raw(method: &str, url: String, auth: Option<&str>, body: Option<(&str, &str)>) -> Raw {
    let mut request = http().request(method.parse().unwrap(), url);
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    if let Some((content_type, body)) = body {
        request = request
            .header(CONTENT_TYPE, content_type)
            .body(body.to_owned());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Raw {
        status,
        headers,
        body,
    }
}

fn url(sandbox: &Sandbox, path: &str) -> String {
    format!("{}{path}", sandbox.base_url())
}

fn bearer(sandbox: &Sandbox) -> String {
    format!("Bearer {}", sandbox.key(Plan::Pro))
}

/// The error object, with `status` equal to the HTTP status, and the rate-limit headers.
fn assert_error(response: &Raw, status: u16, code: &str) {
    assert_eq!(
        response.status, status,
        "expected the status {status}, the body was {:?}",
        response.body
    );
    assert_eq!(
        response.body["code"], code,
        "expected the code {code}, the body was {:?}",
        response.body
    );
    assert_eq!(
        response.body["status"], status,
        "expected the body's status to be the HTTP status"
    );
    assert!(
        response.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "expected a message in the error object, the body was {:?}",
        response.body
    );
    assert_eq!(
        response.headers[CONTENT_TYPE], "application/json",
        "expected a JSON error object"
    );
    assert_quota_headers(response);
}

/// The `Date` of a response, in unix seconds.
fn date(headers: &reqwest::header::HeaderMap) -> u64 {
    let date = httpdate::parse_http_date(headers["date"].to_str().unwrap()).unwrap();
    date.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// `X-RateLimit-Reset`, in unix seconds.
fn reset(headers: &reqwest::header::HeaderMap) -> u64 {
    headers["x-ratelimit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// A sandbox with a key allowed one request per minute window, to meet a 429 at once.
async fn sandbox_with_tiny_key(builder: SandboxBuilder) -> Sandbox {
    builder
        .key(
            "tiny",
            Plan::Enterprise {
                per_minute: 1,
                per_day: 1_000,
            },
        )
        .start()
        .await
        .unwrap()
}

fn assert_quota_headers(response: &Raw) {
    for name in [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    ] {
        let value = response
            .headers
            .get(name)
            .unwrap_or_else(|| panic!("expected a {name} header, the response has none"));
        value.to_str().unwrap().parse::<u64>().unwrap();
    }
}

/// A client that neither retries nor paces, so that it shows what the sandbox answers.
fn client(sandbox: &Sandbox, plan: Plan) -> PetStoreClient {
    sandbox_client(sandbox, sandbox.key(plan), RetryPolicy::none())
        .pacing(petstore_client::Pacing::Off)
        .build()
        .unwrap()
}

#[tokio::test]
async fn every_route_requires_a_known_bearer_key() {
    let sandbox = common::sandbox().await;
    for (method, path) in [
        ("GET", "/pets"),
        ("POST", "/pets"),
        ("GET", "/pets/1"),
        ("GET", "/nowhere"),
    ] {
        for auth in [
            None,
            Some("Basic dXNlcjpwYXNz"),
            Some("Bearer "),
            Some("Bearer not-a-key"),
            Some("sandbox-pro-key"),
        ] {
            let response = raw(method, url(&sandbox, path), auth, None).await;
            assert_error(&response, 401, "unauthorized");
        }
    }
    let error = sandbox_client(&sandbox, "wrong", RetryPolicy::none())
        .build()
        .unwrap()
        .list_pets()
        .send()
        .await
        .unwrap_err();
    assert!(
        error.is_unauthorized(),
        "expected an unauthorized error, got {error:?}"
    );
    assert!(
        error.quota().is_some(),
        "a 401 carries the rate-limit headers too"
    );
}

#[tokio::test]
async fn pets_are_created_listed_filtered_and_fetched() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, Plan::Pro);
    assert!(
        client.list_pets().send().await.unwrap().is_empty(),
        "expected no pet in a new sandbox"
    );

    let rex = client
        .create_pet(NewPet::new("Rex", 3))
        .send()
        .await
        .unwrap();
    let misty = client
        .create_pet(NewPet::new("Misty", 4).status(PetStatus::Pending))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (rex.id.get(), misty.id.get()),
        (1, 2),
        "expected the ids in the order of creation"
    );
    assert_eq!(rex.status, Some(PetStatus::Available), "the default status");
    assert_eq!(
        rex.category_id,
        CategoryId::new(3),
        "expected the category sent"
    );

    assert_eq!(
        client.list_pets().send().await.unwrap(),
        vec![rex.clone(), misty.clone()],
        "expected both pets listed"
    );
    let pending = client
        .list_pets()
        .status(PetStatus::Pending)
        .send()
        .await
        .unwrap();
    assert_eq!(pending, vec![misty], "expected only the pending pet");
    assert!(
        client
            .list_pets()
            .status(PetStatus::Sold)
            .send()
            .await
            .unwrap()
            .is_empty(),
        "expected no sold pet"
    );

    #[allow(deprecated)]
    let response = client.get_pet(rex.id).send_with_meta().await.unwrap();
    assert_eq!(response.value(), &rex);
    let sunset = response.deprecation().and_then(|d| d.sunset).unwrap();
    assert_eq!(sunset.to_rfc3339(), "2030-12-05T00:00:00+00:00");

    #[allow(deprecated)]
    let missing = client.get_pet(99).send().await.unwrap_err();
    assert!(
        missing.is_not_found(),
        "expected a not-found error, got {missing:?}"
    );
    assert_eq!(
        missing.api_error().unwrap().code(),
        Some("not_found"),
        "expected the code of the 404"
    );
}

#[tokio::test]
async fn limit_defaults_to_20_and_accepts_1_to_100() {
    let seed = (0..120).map(|i| NewPet::new(format!("pet {i}"), 1));
    let sandbox = Sandbox::builder().pets(seed).start().await.unwrap();
    let client = client(&sandbox, Plan::Pro);

    assert_eq!(
        client.list_pets().send().await.unwrap().len(),
        20,
        "expected 20 pets by default"
    );
    assert_eq!(
        client.list_pets().limit(1).send().await.unwrap().len(),
        1,
        "expected one pet with limit 1"
    );
    let hundred = client.list_pets().limit(100).send().await.unwrap();
    assert_eq!(hundred.len(), 100, "expected 100 pets with limit 100");
    assert!(
        hundred.windows(2).all(|w| w[0].id < w[1].id),
        "ordered by id"
    );

    let auth = bearer(&sandbox);
    for query in [
        "limit=0",
        "limit=101",
        "limit=abc",
        "limit=-1",
        "status=lost",
    ] {
        let response = raw(
            "GET",
            url(&sandbox, &format!("/pets?{query}")),
            Some(&auth),
            None,
        )
        .await;
        assert_error(&response, 400, "invalid_request");
    }
    let ignored = raw("GET", url(&sandbox, "/pets?page=2"), Some(&auth), None).await;
    assert_eq!(
        ignored.status, 200,
        "expected an unknown query parameter to be ignored"
    );
    assert!(ignored.body.is_array(), "a bare array");
}

#[tokio::test]
async fn invalid_creation_bodies_are_rejected() {
    let sandbox = Sandbox::builder()
        .max_body_bytes(1024)
        .start()
        .await
        .unwrap();
    let auth = bearer(&sandbox);
    let json = "application/json";
    let long_name = format!(r#"{{"name":"{}","categoryId":1}}"#, "x".repeat(101));
    let too_large = format!(r#"{{"name":"{}","categoryId":1}}"#, "x".repeat(2000));
    let cases = [
        (json, r#"{"categoryId":1}"#, 400, "invalid_request"),
        (json, r#"{"name":"Rex"}"#, 400, "invalid_request"),
        (json, r#"{"name":7,"categoryId":1}"#, 400, "invalid_request"),
        (
            json,
            r#"{"name":"Rex","categoryId":"1"}"#,
            400,
            "invalid_request",
        ),
        (
            json,
            r#"{"name":"Rex","categoryId":1.5}"#,
            400,
            "invalid_request",
        ),
        (
            json,
            r#"{"name":"Rex","categoryId":1,"status":"lost"}"#,
            400,
            "invalid_request",
        ),
        (
            json,
            r#"{"name":"  ","categoryId":1}"#,
            400,
            "invalid_request",
        ),
        (json, &long_name, 400, "invalid_request"),
        (json, "[1, 2]", 400, "invalid_request"),
        (json, "not json", 400, "invalid_request"),
        (json, &too_large, 413, "payload_too_large"),
        (
            "text/plain",
            r#"{"name":"Rex","categoryId":1}"#,
            415,
            "unsupported_media_type",
        ),
    ];
    for (content_type, body, status, code) in cases {
        let response = raw(
            "POST",
            url(&sandbox, "/pets"),
            Some(&auth),
            Some((content_type, body)),
        )
        .await;
        assert_error(&response, status, code);
    }
    let with_id = raw(
        "POST",
        url(&sandbox, "/pets"),
        Some(&auth),
        Some((json, r#"{"id":77,"name":"Rex","categoryId":1}"#)),
    )
    .await;
    assert_eq!(
        with_id.status, 201,
        "expected a body with an id to create a pet, got {:?}",
        with_id.body
    );
    assert_eq!(with_id.body["id"], 1, "a client-sent id is ignored");
    assert_quota_headers(&with_id);
}

#[tokio::test]
async fn unknown_routes_methods_and_ids() {
    let sandbox = common::sandbox().await;
    let auth = bearer(&sandbox);
    assert_error(
        &raw("GET", url(&sandbox, "/pets/abc"), Some(&auth), None).await,
        400,
        "invalid_request",
    );
    assert_error(
        &raw(
            "GET",
            url(&sandbox, "/pets/99999999999999999999"),
            Some(&auth),
            None,
        )
        .await,
        400,
        "invalid_request",
    );
    assert_error(
        &raw("GET", url(&sandbox, "/pets/5"), Some(&auth), None).await,
        404,
        "not_found",
    );
    assert_error(
        &raw("GET", url(&sandbox, "/orders"), Some(&auth), None).await,
        404,
        "not_found",
    );
    assert_error(
        &raw("DELETE", url(&sandbox, "/pets"), Some(&auth), None).await,
        405,
        "method_not_allowed",
    );
    assert_error(
        &raw("PUT", url(&sandbox, "/pets/1"), Some(&auth), None).await,
        405,
        "method_not_allowed",
    );
}

#[tokio::test(start_paused = true)]
async fn over_the_limit_a_429_tells_exactly_when_the_window_frees() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, Plan::Free);
    for used in 1..=60u64 {
        let response = client.list_pets().send_with_meta().await.unwrap();
        let quota = response.quota().unwrap();
        assert_eq!(
            (quota.limit, quota.remaining),
            (60, 60 - used),
            "expected the limit and remaining after {used} calls"
        );
    }
    let reset = client.quota().unwrap().reset;
    assert_eq!(reset.timestamp() % 60, 0, "windows end on whole minutes");

    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        error.is_rate_limited(),
        "expected a rate-limited error, got {error:?}"
    );
    assert_eq!(
        error.api_error().unwrap().code(),
        Some("rate_limited"),
        "expected the code of the 429"
    );
    let quota = error.quota().unwrap();
    assert_eq!(
        (quota.remaining, quota.reset),
        (0, reset),
        "expected nothing left until the same reset"
    );
    let wait = error.retry_after().unwrap();
    assert!(
        wait >= Duration::from_secs(1) && wait <= Duration::from_secs(60),
        "expected a wait of 1 s to 60 s, got {wait:?}"
    );

    // After the wait, the next window has its whole allowance: the 429 was not counted.
    tokio::time::sleep(wait).await;
    let fresh = client.list_pets().send_with_meta().await.unwrap();
    assert_eq!(
        fresh.quota().unwrap().remaining,
        59,
        "expected the whole next window less this call"
    );
    assert!(
        fresh.quota().unwrap().reset > reset,
        "expected a reset after {reset}, got {}",
        fresh.quota().unwrap().reset
    );
}

#[tokio::test(start_paused = true)]
async fn calling_on_during_the_retry_after_gets_the_key_banned_until_it_expires() {
    let sandbox = sandbox_with_tiny_key(Sandbox::builder()).await;
    let auth = Some("Bearer tiny");
    let list = url(&sandbox, "/pets");
    assert_eq!(
        raw("GET", list.clone(), auth, None).await.status,
        200,
        "expected the first call of the window to succeed"
    );
    let limited = raw("GET", list.clone(), auth, None).await;
    assert_error(&limited, 429, "rate_limited");
    assert!(
        limited.headers.contains_key("retry-after"),
        "expected a Retry-After on the 429, the headers were {:?}",
        limited.headers
    );

    // Nine more calls during the wait are still plain 429s; the tenth is a ban.
    for _ in 0..9 {
        assert_error(
            &raw("GET", list.clone(), auth, None).await,
            429,
            "rate_limited",
        );
    }
    let banned = raw("GET", list.clone(), auth, None).await;
    assert_error(&banned, 429, "key_banned");
    assert_eq!(
        banned.headers["retry-after"], "600",
        "expected the ban's Retry-After in seconds"
    );
    assert_eq!(sandbox.stats().bans(), 1, "expected one ban");

    tokio::time::sleep(Duration::from_secs(599)).await;
    assert_error(
        &raw("GET", list.clone(), auth, None).await,
        429,
        "key_banned",
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        raw("GET", list, auth, None).await.status,
        200,
        "the ban expires by itself"
    );
}

#[tokio::test(start_paused = true)]
async fn the_day_window_binds_once_it_has_fewer_requests_left() {
    let sandbox = Sandbox::builder()
        .key(
            "daily",
            Plan::Enterprise {
                per_minute: 10,
                per_day: 15,
            },
        )
        .day_window(Duration::from_secs(600))
        // The start of a 600 s window, so that the run stays within one.
        .clock_start(std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000))
        .start()
        .await
        .unwrap();
    let client = sandbox_client(&sandbox, "daily", RetryPolicy::none())
        .pacing(petstore_client::Pacing::Off)
        .build()
        .unwrap();
    for _ in 0..10 {
        client.list_pets().send().await.unwrap();
    }
    let minute_reset = client.quota().unwrap().reset;
    assert_eq!(
        client.quota().unwrap().limit,
        10,
        "expected the minute's limit while it binds"
    );

    tokio::time::sleep(Duration::from_secs(60)).await;
    for _ in 0..5 {
        client.list_pets().send().await.unwrap();
    }
    let quota = client.quota().unwrap();
    assert_eq!(
        (quota.limit, quota.remaining),
        (15, 0),
        "expected the day's limit, spent"
    );
    assert_eq!(
        quota.reset.timestamp() % 600,
        0,
        "expected the day's reset on a whole 600 s window"
    );
    assert!(
        quota.reset > minute_reset,
        "expected the day's reset after the minute's {minute_reset}, got {}",
        quota.reset
    );

    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        error.is_rate_limited(),
        "expected a rate-limited error, got {error:?}"
    );
    assert_eq!(
        error.quota().unwrap().reset,
        quota.reset,
        "expected the 429 to report the day's reset"
    );
}

#[tokio::test(start_paused = true)]
async fn injected_latency_and_statuses() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, Plan::Pro);
    sandbox.inject(
        Fault::latency(Duration::from_secs(3))
            .route(Route::ListPets)
            .times(1),
    );
    let start = Instant::now();
    client.list_pets().send().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(3),
        "expected the 3 s of injected latency"
    );
    client.list_pets().send().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(3),
        "the latency applied once"
    );

    for status in [500, 502, 503, 504] {
        sandbox.inject(Fault::status(status).retry_after(2).times(1));
        let error = client.list_pets().send().await.unwrap_err();
        assert_eq!(
            error.status(),
            StatusCode::from_u16(status).ok(),
            "expected the injected {status}"
        );
        assert_eq!(
            error.retry_after(),
            Some(Duration::from_secs(2)),
            "expected the injected 2 s Retry-After on the {status}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    sandbox.inject(Fault::status(500).route(Route::CreatePet));
    client.list_pets().send().await.unwrap();
    assert!(
        client
            .create_pet(NewPet::new("Rex", 1))
            .send()
            .await
            .is_err(),
        "expected the creation to meet the injected 500"
    );
    sandbox.clear_faults();
    client
        .create_pet(NewPet::new("Rex", 1))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn injected_broken_connections_and_bodies() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, Plan::Pro);
    client
        .create_pet(NewPet::new("Rex", 1))
        .send()
        .await
        .unwrap();

    sandbox.inject(Fault::drop_connection().times(1));
    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        matches!(error, Error::Connection { .. }),
        "expected a connection error from the dropped connection, got {error:?}"
    );

    sandbox.inject(Fault::truncated_body().times(1));
    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        matches!(error, Error::Connection { .. }),
        "expected a connection error from the truncated body, got {error:?}"
    );

    sandbox.inject(Fault::non_json_body(502).times(1));
    let error = client.list_pets().send().await.unwrap_err();
    assert_eq!(
        error.status(),
        Some(StatusCode::BAD_GATEWAY),
        "expected the injected 502"
    );
    assert!(
        error
            .api_error()
            .unwrap()
            .body_snippet()
            .unwrap()
            .contains("<html>"),
        "expected the HTML body in the snippet, got {error:?}"
    );

    sandbox.inject(Fault::non_json_body(200).times(1));
    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        error.is_decode(),
        "expected a decode error from the HTML body, got {error:?}"
    );

    assert_eq!(
        client.list_pets().send().await.unwrap().len(),
        1,
        "faults are used up"
    );
    let log = sandbox.request_log();
    assert_eq!(log.len(), 6, "expected six requests in the log");
    assert_eq!(log[1].status, None, "the dropped connection got no answer");
}

#[tokio::test]
async fn a_fraction_of_requests_can_fail() {
    let sandbox = common::sandbox().await;
    let client = client(&sandbox, Plan::Pro);
    sandbox.inject(Fault::status(503).fraction(0.5));
    let mut failed = 0;
    for _ in 0..100 {
        failed += usize::from(client.list_pets().send().await.is_err());
    }
    assert!(
        (30..=70).contains(&failed),
        "expected 30 to 70 of 100 calls to fail, {failed} failed"
    );
}

#[tokio::test]
async fn counters_log_every_request_per_route_and_key() {
    let sandbox = common::sandbox().await;
    let pro = client(&sandbox, Plan::Pro);
    let free = client(&sandbox, Plan::Free);
    pro.create_pet(NewPet::new("Rex", 1)).send().await.unwrap();
    pro.list_pets().send().await.unwrap();
    free.list_pets().send().await.unwrap();
    #[allow(deprecated)]
    free.get_pet(1).send().await.unwrap();
    raw("GET", url(&sandbox, "/pets"), None, None).await;

    let stats = sandbox.stats();
    assert_eq!(stats.total(), 5, "expected five requests in all");
    assert_eq!(
        stats.requests(Route::ListPets),
        3,
        "expected three listPets requests"
    );
    assert_eq!(
        stats.requests(Route::CreatePet),
        1,
        "expected one createPet request"
    );
    assert_eq!(
        stats.requests(Route::GetPet),
        1,
        "expected one getPet request"
    );
    assert_eq!(
        stats.requests_for_key(sandbox.key(Plan::Pro)),
        2,
        "expected two requests with the Pro key"
    );
    assert_eq!(
        stats.requests_for_key(sandbox.key(Plan::Free)),
        2,
        "expected two requests with the Free key"
    );
    let statuses: Vec<_> = sandbox.request_log().iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [Some(201), Some(200), Some(200), Some(200), Some(401)],
        "expected the statuses answered, in order"
    );
}

#[tokio::test]
async fn sandboxes_run_side_by_side_and_shut_down() {
    let first = common::sandbox().await;
    let second = common::sandbox().await;
    assert_ne!(
        first.base_url(),
        second.base_url(),
        "expected each sandbox on its own address"
    );
    assert!(
        first.base_url().as_str().ends_with("/v1"),
        "expected a base URL ending in /v1, got {}",
        first.base_url()
    );
    assert_eq!(first.keys().count(), 4, "expected one key per plan");
    client(&first, Plan::Free)
        .create_pet(NewPet::new("Rex", 1))
        .send()
        .await
        .unwrap();
    assert!(
        client(&second, Plan::Free)
            .list_pets()
            .send()
            .await
            .unwrap()
            .is_empty(),
        "expected the second sandbox not to see the first one's pet"
    );

    let base_url = first.base_url().clone();
    first.shutdown().await;
    let client = PetStoreClient::builder()
        .base_url(base_url)
        .api_key("sandbox-free-key")
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    assert!(
        client.list_pets().send().await.unwrap_err().is_connect(),
        "expected a connect error from a sandbox shut down"
    );
}

#[tokio::test(start_paused = true)]
async fn every_response_carries_the_sandboxs_date_not_the_system_time() {
    let sandbox = sandbox_with_tiny_key(Sandbox::builder()).await;
    tokio::time::advance(Duration::from_secs(3600)).await;
    let real = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let auth = bearer(&sandbox);
    let ok = raw("GET", url(&sandbox, "/pets"), Some(&auth), None).await;
    assert_eq!(ok.status, 200, "expected the listing to succeed");
    let now = date(&ok.headers);
    assert!(
        (real + 3599..=real + 3601).contains(&now),
        "Date {now} is not an hour after the system time {real}: hyper replaced it"
    );
    assert!(
        reset(&ok.headers) > now && reset(&ok.headers) <= now + 60,
        "Date agrees with X-RateLimit-Reset"
    );

    let tiny = Some("Bearer tiny");
    raw("GET", url(&sandbox, "/pets"), tiny, None).await;
    sandbox.inject(Fault::status(503).route(Route::ListPets).times(1));
    sandbox.inject(Fault::non_json_body(502).route(Route::GetPet).times(1));
    let errors = [
        ("GET", "/pets", None, None, 401),
        ("GET", "/orders", Some(auth.as_str()), None, 404),
        ("DELETE", "/pets", Some(auth.as_str()), None, 405),
        (
            "POST",
            "/pets",
            Some(&auth),
            Some(("text/plain", "{}")),
            415,
        ),
        ("GET", "/pets", tiny, None, 429),
        ("GET", "/pets", Some(&auth), None, 503),
        ("GET", "/pets/1", Some(&auth), None, 502),
    ];
    for (method, path, auth, body, status) in errors {
        let response = raw(method, url(&sandbox, path), auth, body).await;
        assert_eq!(
            response.status, status,
            "expected the status {status} for {method} {path}"
        );
        assert_eq!(
            date(&response.headers),
            now,
            "expected the sandbox's Date on {method} {path}"
        );
        assert_eq!(
            response.headers.get_all("date").iter().count(),
            1,
            "expected one Date header on {method} {path}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn date_is_truncated_to_the_second_never_rounded_up() {
    let start = UNIX_EPOCH + Duration::from_millis(1_800_000_000_999);
    let sandbox = Sandbox::builder().clock_start(start).start().await.unwrap();
    let auth = bearer(&sandbox);
    let response = raw("GET", url(&sandbox, "/pets"), Some(&auth), None).await;
    assert_eq!(
        date(&response.headers),
        1_800_000_000,
        "expected the Date truncated to the second"
    );
    assert_eq!(
        reset(&response.headers),
        1_800_000_060,
        "expected the reset at the end of the minute"
    );

    tokio::time::advance(Duration::from_millis(1)).await;
    let response = raw("GET", url(&sandbox, "/pets"), Some(&auth), None).await;
    assert_eq!(
        date(&response.headers),
        1_800_000_001,
        "expected the Date of the next second"
    );
}

#[tokio::test(start_paused = true)]
async fn a_clock_offset_shifts_windows_resets_and_date_together() {
    // 90 s behind a pinned start on a minute boundary: 30 s before the window ends.
    let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let builder = Sandbox::builder()
        .clock_start(start)
        .clock_offset(TimeDelta::seconds(-90));
    let sandbox = sandbox_with_tiny_key(builder).await;
    let list = url(&sandbox, "/pets");
    let tiny = Some("Bearer tiny");
    let ok = raw("GET", list.clone(), tiny, None).await;
    assert_eq!(ok.status, 200, "expected the first call to succeed");
    assert_eq!(
        date(&ok.headers),
        1_799_999_910,
        "expected the Date 90 s behind"
    );
    assert_eq!(
        reset(&ok.headers),
        1_799_999_940,
        "expected the reset at the end of the shifted minute"
    );
    let limited = raw("GET", list.clone(), tiny, None).await;
    assert_error(&limited, 429, "rate_limited");
    assert_eq!(
        limited.headers["retry-after"], "30",
        "expected a wait until the shifted window ends"
    );

    tokio::time::advance(Duration::from_secs(30)).await;
    let next = raw("GET", list, tiny, None).await;
    assert_eq!(next.status, 200, "the shifted window has ended");
    assert_eq!(
        date(&next.headers),
        1_799_999_940,
        "expected the Date 30 s later"
    );
    assert_eq!(
        reset(&next.headers),
        1_800_000_000,
        "expected the reset of the next shifted minute"
    );

    // Without a pinned start, the offset applies to the system time.
    let ahead = Sandbox::builder()
        .clock_offset(TimeDelta::hours(2))
        .start()
        .await
        .unwrap();
    let real = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let response = raw("GET", url(&ahead, "/pets"), Some(&bearer(&ahead)), None).await;
    let shown = date(&response.headers);
    assert!(
        (real + 7199..=real + 7201).contains(&shown),
        "expected a Date two hours after the system time {real}, got {shown}"
    );
    assert!(
        reset(&response.headers) > shown && reset(&response.headers) <= shown + 60,
        "expected a reset within the minute after the Date {shown}, got {}",
        reset(&response.headers)
    );
}

/// A key allowed `per_minute` requests per minute window, under its own name.
fn enterprise(per_minute: u32) -> Plan {
    Plan::Enterprise {
        per_minute,
        per_day: 1_000,
    }
}

/// `Retry-After`, in seconds.
fn retry_after(headers: &reqwest::header::HeaderMap) -> u64 {
    headers["retry-after"].to_str().unwrap().parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn backends_answer_in_turn_each_dating_on_its_clock_while_the_limiter_keeps_one() {
    // On a minute boundary: the limiter's window is [1_800_000_000, 1_800_000_060).
    let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let offsets = [0, 2, -3];
    let builder = Sandbox::builder()
        .clock_start(start)
        .backend_clock_offsets(offsets.map(TimeDelta::seconds));
    let sandbox = sandbox_with_tiny_key(builder).await;
    let list = url(&sandbox, "/pets");
    tokio::time::advance(Duration::from_secs(10)).await;
    let tiny = Some("Bearer tiny");
    let mut answers = Vec::new();
    for _ in 0..4 {
        answers.push(raw("GET", list.clone(), tiny, None).await);
    }
    let statuses: Vec<u16> = answers.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [200, 429, 429, 429],
        "expected one call allowed, then the limiter's 429s whatever the backend"
    );
    for (i, answer) in answers.iter().enumerate() {
        let offset = offsets[i % offsets.len()];
        assert_eq!(
            date(&answer.headers),
            1_800_000_010_u64.saturating_add_signed(offset),
            "expected the Date of backend {} ({offset:+} s) on answer {i}",
            i % offsets.len()
        );
        assert_eq!(
            reset(&answer.headers),
            1_800_000_060,
            "expected the limiter's reset on answer {i}, whatever the backend's clock"
        );
    }
    assert_eq!(
        retry_after(&answers[1].headers),
        50,
        "expected the wait until the limiter's window ends, not the backend's"
    );
    let backends: Vec<usize> = sandbox.request_log().iter().map(|r| r.backend).collect();
    assert_eq!(backends, [0, 1, 2, 0], "expected the backends in turn");

    // One backend by default, on the sandbox's clock.
    let one = Sandbox::builder().clock_start(start).start().await.unwrap();
    let auth = bearer(&one);
    for _ in 0..2 {
        let response = raw("GET", url(&one, "/pets"), Some(&auth), None).await;
        assert_eq!(
            date(&response.headers),
            1_800_000_000,
            "expected the Date of the sandbox's own clock"
        );
    }
    assert!(
        one.request_log().iter().all(|r| r.backend == 0),
        "expected every answer from backend 0"
    );
}

#[tokio::test(start_paused = true)]
async fn a_clock_step_moves_windows_resets_and_date_at_once() {
    // 30 s into a minute; 10 s later the clock jumps 25 s ahead, into the next minute.
    let start = UNIX_EPOCH + Duration::from_secs(1_800_000_030);
    let builder = Sandbox::builder()
        .clock_start(start)
        .clock_step(Duration::from_secs(10), TimeDelta::seconds(25));
    let sandbox = sandbox_with_tiny_key(builder).await;
    let list = url(&sandbox, "/pets");
    let tiny = Some("Bearer tiny");
    let first = raw("GET", list.clone(), tiny, None).await;
    assert_eq!(first.status, 200, "expected the first call allowed");
    assert_eq!(
        (date(&first.headers), reset(&first.headers)),
        (1_800_000_030, 1_800_000_060),
        "expected Date and reset before the step"
    );
    tokio::time::advance(Duration::from_secs(9)).await;
    let limited = raw("GET", list.clone(), tiny, None).await;
    assert_error(&limited, 429, "rate_limited");
    assert_eq!(
        retry_after(&limited.headers),
        21,
        "expected the wait until the window ends, just before the step"
    );

    tokio::time::advance(Duration::from_secs(22)).await;
    let stepped = raw("GET", list, tiny, None).await;
    assert_eq!(stepped.status, 200, "expected the next window open");
    assert_eq!(
        (date(&stepped.headers), reset(&stepped.headers)),
        (1_800_000_086, 1_800_000_120),
        "expected Date and reset 25 s further than the time passed"
    );
    let times: Vec<u64> = sandbox
        .request_log()
        .iter()
        .map(|r| r.server_time.duration_since(UNIX_EPOCH).unwrap().as_secs())
        .collect();
    assert_eq!(
        times,
        [1_800_000_030, 1_800_000_039, 1_800_000_086],
        "expected the log on the stepped clock"
    );
}

#[tokio::test(start_paused = true)]
async fn a_clock_stepped_back_counts_on_in_the_window_it_returns_to() {
    // 5 s into a minute; 10 s later the clock goes 20 s back, into the previous minute (at
    // :55), then comes forward again into the minute the key had used.
    let start = UNIX_EPOCH + Duration::from_secs(1_800_000_065);
    let builder = Sandbox::builder()
        .clock_start(start)
        .clock_step(Duration::from_secs(10), TimeDelta::seconds(-20));
    let sandbox = sandbox_with_tiny_key(builder).await;
    let list = url(&sandbox, "/pets");
    let tiny = Some("Bearer tiny");
    let first = raw("GET", list.clone(), tiny, None).await;
    assert_eq!(first.status, 200, "expected the first call allowed");
    assert_eq!(reset(&first.headers), 1_800_000_120);

    tokio::time::advance(Duration::from_secs(10)).await;
    let back = raw("GET", list.clone(), tiny, None).await;
    assert_eq!(back.status, 200, "expected the previous minute unused");
    assert_eq!(
        (date(&back.headers), reset(&back.headers)),
        (1_800_000_055, 1_800_000_060),
        "expected Date and reset 20 s back, in the previous minute"
    );

    tokio::time::advance(Duration::from_secs(6)).await;
    let again = raw("GET", list, tiny, None).await;
    assert_error(&again, 429, "rate_limited");
    assert_eq!(
        (date(&again.headers), reset(&again.headers)),
        (1_800_000_061, 1_800_000_120),
        "expected the minute of the first call again"
    );
    assert_eq!(
        retry_after(&again.headers),
        59,
        "expected the minute's count kept across the step: it is spent"
    );
}

#[tokio::test(start_paused = true)]
async fn a_plan_change_applies_at_the_next_request_and_keeps_the_window_count() {
    let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let sandbox = Sandbox::builder()
        .clock_start(start)
        .key("shop", enterprise(3))
        .key("scheduled", enterprise(2))
        .plan_change(Duration::from_secs(30), "scheduled", enterprise(5))
        .start()
        .await
        .unwrap();
    let list = url(&sandbox, "/pets");
    let quota = |response: &Raw| {
        let read =
            |name: &str| -> u64 { response.headers[name].to_str().unwrap().parse().unwrap() };
        (read("x-ratelimit-limit"), read("x-ratelimit-remaining"))
    };
    let shop = Some("Bearer shop");
    for remaining in [2, 1] {
        let response = raw("GET", list.clone(), shop, None).await;
        assert_eq!(quota(&response), (3, remaining));
    }
    sandbox.set_plan("shop", enterprise(5));
    let upgraded = raw("GET", list.clone(), shop, None).await;
    assert_eq!(
        (upgraded.status, quota(&upgraded)),
        (200, (5, 2)),
        "expected the new limit with the window's 3 calls counted"
    );
    sandbox.set_plan("shop", enterprise(2));
    let downgraded = raw("GET", list.clone(), shop, None).await;
    assert_error(&downgraded, 429, "rate_limited");
    assert_eq!(
        (quota(&downgraded), retry_after(&downgraded.headers)),
        ((2, 0), 60),
        "expected the window past the new limit, spent until it ends"
    );
    assert_eq!(
        sandbox
            .keys()
            .find(|(key, _)| *key == "shop")
            .map(|(_, plan)| plan),
        Some(enterprise(3)),
        "expected keys() to give the plan the key started with"
    );

    let scheduled = Some("Bearer scheduled");
    for expected in [(2, 1), (2, 0)] {
        let response = raw("GET", list.clone(), scheduled, None).await;
        assert_eq!(quota(&response), expected);
    }
    tokio::time::advance(Duration::from_secs(30)).await;
    let later = raw("GET", list, scheduled, None).await;
    assert_eq!(
        (later.status, quota(&later)),
        (200, (5, 2)),
        "expected the scheduled plan from 30 s on, in the same window"
    );
}

#[tokio::test]
async fn a_plan_change_for_a_key_the_sandbox_lacks_is_refused() {
    let error = Sandbox::builder()
        .plan_change(Duration::from_secs(1), "nobody", Plan::Pro)
        .start()
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        error.to_string().contains("\"nobody\""),
        "expected the error to name the key, got {error}"
    );
}

#[tokio::test]
#[should_panic(expected = "register it with SandboxBuilder::key")]
async fn set_plan_of_a_key_the_sandbox_lacks_panics_with_what_to_do() {
    let sandbox = common::sandbox().await;
    sandbox.set_plan("nobody", Plan::Pro);
}

#[tokio::test(start_paused = true)]
async fn a_skipped_fault_falls_on_a_later_request() {
    let sandbox = common::sandbox().await;
    sandbox.inject(Fault::status(503).skip(2).times(1));
    let auth = bearer(&sandbox);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            raw("GET", url(&sandbox, "/pets"), Some(&auth), None)
                .await
                .status,
        );
    }
    assert_eq!(
        statuses,
        [200, 200, 503, 200],
        "expected the fault on the third request only"
    );
}

#[tokio::test(start_paused = true)]
async fn an_injected_429_arms_the_cooldown_and_the_ban_like_a_real_one() {
    let sandbox = Sandbox::builder().ban_threshold(3).start().await.unwrap();
    let auth = bearer(&sandbox);
    let list = url(&sandbox, "/pets");
    sandbox.inject(Fault::status(429).retry_after(5).times(1));
    let injected = raw("GET", list.clone(), Some(&auth), None).await;
    assert_error(&injected, 429, "rate_limited");
    assert_eq!(
        injected.headers["retry-after"], "5",
        "expected the injected Retry-After"
    );

    tokio::time::advance(Duration::from_secs(4)).await;
    let early = raw("GET", list.clone(), Some(&auth), None).await;
    assert_error(&early, 429, "rate_limited");
    assert_eq!(
        early.headers["retry-after"], "1",
        "expected the second left of the cooldown"
    );
    assert_error(
        &raw("GET", list.clone(), Some(&auth), None).await,
        429,
        "rate_limited",
    );
    assert_error(
        &raw("GET", list.clone(), Some(&auth), None).await,
        429,
        "key_banned",
    );
    let stats = sandbox.stats();
    assert_eq!(
        (stats.during_cooldown(), stats.bans()),
        (3, 1),
        "expected three requests during the cooldown and one ban"
    );
    let flags: Vec<bool> = sandbox
        .request_log()
        .iter()
        .map(|r| r.during_cooldown)
        .collect();
    assert_eq!(
        flags,
        [false, true, true, true],
        "expected every request after the injected 429 flagged as during the cooldown"
    );
    assert_eq!(stats.answered(429), 4, "expected four 429s");

    // Once the wait is over, nothing remains of an injected 429.
    let fresh = common::sandbox().await;
    let auth = bearer(&fresh);
    fresh.inject(Fault::status(429).retry_after(5).times(1));
    raw("GET", url(&fresh, "/pets"), Some(&auth), None).await;
    tokio::time::advance(Duration::from_secs(5)).await;
    let after = raw("GET", url(&fresh, "/pets"), Some(&auth), None).await;
    assert_eq!(after.status, 200, "expected a success after the wait");
    assert_eq!(
        fresh.stats().during_cooldown(),
        0,
        "expected no request during the cooldown"
    );
}

#[tokio::test(start_paused = true)]
async fn an_injected_503_with_retry_after_arms_no_cooldown() {
    let sandbox = common::sandbox().await;
    let auth = bearer(&sandbox);
    sandbox.inject(Fault::status(503).retry_after(5).times(1));
    let outage = raw("GET", url(&sandbox, "/pets"), Some(&auth), None).await;
    assert_error(&outage, 503, "service_unavailable");
    assert_eq!(
        outage.headers["retry-after"], "5",
        "expected the injected Retry-After"
    );
    let next = raw("GET", url(&sandbox, "/pets"), Some(&auth), None).await;
    assert_eq!(
        next.status, 200,
        "expected the next request to succeed at once"
    );
    assert_eq!(
        sandbox.stats().during_cooldown(),
        0,
        "expected no request counted during a cooldown"
    );
    assert!(
        sandbox.request_log().iter().all(|r| !r.during_cooldown),
        "expected no request flagged as during a cooldown, the log was {:?}",
        sandbox.request_log()
    );
}

#[tokio::test(start_paused = true)]
async fn retry_after_text_is_sent_as_given_and_a_decimal_rounds_the_cooldown_up() {
    let sandbox = common::sandbox().await;
    let auth = bearer(&sandbox);
    let list = url(&sandbox, "/pets");
    sandbox.inject(Fault::status(429).retry_after_value("1.5").times(1));
    let injected = raw("GET", list.clone(), Some(&auth), None).await;
    assert_error(&injected, 429, "rate_limited");
    assert_eq!(
        injected.headers["retry-after"], "1.5",
        "expected the Retry-After text as given"
    );

    tokio::time::advance(Duration::from_millis(1_900)).await;
    let early = raw("GET", list.clone(), Some(&auth), None).await;
    assert_error(&early, 429, "rate_limited");
    assert_eq!(early.headers["retry-after"], "1", "the cooldown is 2 s");
    tokio::time::advance(Duration::from_millis(100)).await;
    assert_eq!(
        raw("GET", list.clone(), Some(&auth), None).await.status,
        200,
        "expected a success once the 2 s cooldown is over"
    );
    assert_eq!(
        sandbox.stats().during_cooldown(),
        1,
        "expected the early request alone during the cooldown"
    );

    sandbox.inject(Fault::status(429).retry_after_value("soon").times(1));
    let vague = raw("GET", list.clone(), Some(&auth), None).await;
    assert_error(&vague, 429, "rate_limited");
    assert_eq!(
        vague.headers["retry-after"], "soon",
        "expected the Retry-After text as given"
    );
    assert_eq!(
        raw("GET", list, Some(&auth), None).await.status,
        200,
        "a Retry-After that is not a number arms no cooldown"
    );
    assert_eq!(
        sandbox.stats().during_cooldown(),
        1,
        "expected no further request during a cooldown"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cut_error_body_keeps_its_headers_and_closes_short() {
    let sandbox = common::sandbox().await;
    sandbox.inject(Fault::status(503).retry_after(1).cut_body().times(1));
    let response = http()
        .get(url(&sandbox, "/pets"))
        .bearer_auth(sandbox.key(Plan::Pro))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503, "expected the injected 503");
    let headers = response.headers().clone();
    assert_eq!(
        headers["retry-after"], "1",
        "expected the injected Retry-After"
    );
    assert!(
        headers.contains_key("date"),
        "expected a Date header, the headers were {headers:?}"
    );
    for name in [
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
    ] {
        assert!(
            headers.contains_key(name),
            "expected a {name} header, the headers were {headers:?}"
        );
    }
    let promised: usize = headers["content-length"].to_str().unwrap().parse().unwrap();
    let mut response = response;
    let mut received = Vec::new();
    let cut = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(cut, "the body ends before the Content-Length");
    assert_eq!(
        received.len(),
        promised / 2,
        "expected half of the {promised} bytes promised"
    );
    assert!(
        received.starts_with(br#"{"code":"#),
        "expected the start of the error object, got {:?}",
        String::from_utf8_lossy(&received)
    );

    // The client acts on the head: a cut error body loses neither the status nor the quota.
    sandbox.inject(Fault::status(503).retry_after(1).cut_body().times(1));
    let error = client(&sandbox, Plan::Pro)
        .list_pets()
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        error.status(),
        Some(StatusCode::SERVICE_UNAVAILABLE),
        "expected the injected 503, got {error:?}"
    );
    assert_eq!(
        error.retry_after(),
        Some(Duration::from_secs(1)),
        "expected the Retry-After of the head"
    );
    assert!(
        error.quota().is_some(),
        "expected the quota of the head, got {error:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_fault_can_come_without_rate_limit_headers() {
    let sandbox = common::sandbox().await;
    let auth = bearer(&sandbox);
    sandbox.inject(Fault::status(502).without_rate_limit_headers().times(1));
    sandbox.inject(
        Fault::non_json_body(502)
            .without_rate_limit_headers()
            .times(1),
    );
    sandbox.inject(Fault::status(500).times(1));
    for status in [502, 502] {
        let response = raw("GET", url(&sandbox, "/pets"), Some(&auth), None).await;
        assert_eq!(response.status, status, "expected the injected {status}");
        assert!(
            response
                .headers
                .keys()
                .all(|name| !name.as_str().starts_with("x-ratelimit-")),
            "expected no rate-limit header, the headers were {:?}",
            response.headers
        );
        assert!(
            response.headers.contains_key("date"),
            "expected a Date header, the headers were {:?}",
            response.headers
        );
    }
    let ordinary = raw("GET", url(&sandbox, "/pets"), Some(&auth), None).await;
    assert_error(&ordinary, 500, "internal_error");
}

#[tokio::test]
async fn the_log_tells_client_instances_apart_by_user_agent() {
    let sandbox = common::sandbox().await;
    for agent in ["worker-1", "worker-2"] {
        sandbox_client(&sandbox, sandbox.key(Plan::Pro), RetryPolicy::none())
            .user_agent(agent)
            .build()
            .unwrap()
            .list_pets()
            .send()
            .await
            .unwrap();
    }
    raw("GET", url(&sandbox, "/pets"), None, None).await;
    let agents: Vec<_> = sandbox
        .request_log()
        .into_iter()
        .map(|r| r.user_agent)
        .collect();
    assert_eq!(
        agents,
        [
            Some("worker-1".to_owned()),
            Some("worker-2".to_owned()),
            None
        ],
        "expected the User-Agent of each request, in order"
    );
}

#[tokio::test]
async fn key_gives_the_key_of_exactly_the_plan_asked_for() {
    let custom = Plan::Enterprise {
        per_minute: 7,
        per_day: 70,
    };
    let sandbox = Sandbox::builder()
        .key("custom-key", custom)
        .start()
        .await
        .unwrap();
    assert_eq!(sandbox.key(Plan::Free), "sandbox-free-key");
    assert_eq!(sandbox.key(Plan::DEMO_ENTERPRISE), "sandbox-enterprise-key");
    assert_eq!(sandbox.key(custom), "custom-key");
    let client = sandbox_client(&sandbox, sandbox.key(custom), RetryPolicy::none())
        .build()
        .unwrap();
    let response = client.list_pets().send_with_meta().await.unwrap();
    assert_eq!(
        response.quota().unwrap().limit,
        7,
        "expected the custom plan's limit"
    );
}

#[tokio::test]
#[should_panic(expected = "register one with SandboxBuilder::key")]
async fn key_of_a_plan_no_key_has_panics_with_what_to_do() {
    let sandbox = common::sandbox().await;
    let _ = sandbox.key(Plan::Enterprise {
        per_minute: 7,
        per_day: 70,
    });
}

/// The README's "Testing your code" example, run for real.
#[tokio::test(start_paused = true)]
async fn the_readme_testing_example_passes() -> Result<(), Box<dyn std::error::Error>> {
    let sandbox = Sandbox::start().await?;
    let client = PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(sandbox.key(Plan::Free))
        .attempt_timeout(None)
        .build()?;
    sandbox.inject(Fault::status(429).retry_after(30).times(1));
    let start = Instant::now();

    let rex = client.create_pet(NewPet::new("Rex", 1)).send().await?;

    assert_eq!(rex.name, "Rex");
    assert_eq!(
        sandbox.stats().total(),
        2,
        "expected the 429, then the retry 30 s later"
    );
    assert_eq!(
        sandbox.stats().during_cooldown(),
        0,
        "expected no request during the cooldown"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(30),
        "expected the 30 s of Retry-After"
    );
    Ok(())
}
