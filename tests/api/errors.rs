//! Error responses of the service, and everything else a call can fail with: bodies that do not
//! decode, refused connections, timeouts and oversized bodies.

use crate::common;

use std::time::Duration;

use chrono::{TimeZone, Utc};
use common::{
    PET_42, PETS, api_error, builder, builder_at, client, expect_once, fixtures, json, mount_list,
    raw_server, refused_base_url, start, with_quota,
};
use http::StatusCode;
use petstore_client::{Error, PetStatus, Quota, TimeoutKind};
use petstore_sandbox::Plan;
use wiremock::{MockServer, ResponseTemplate};

/// A server that answers `GET /v1/pets` once with `template`.
async fn listing(template: ResponseTemplate) -> MockServer {
    let server = start().await;
    mount_list(&server, template, 1).await;
    server
}

/// The error of one `listPets` call against a server answering `template`.
async fn list_error(template: ResponseTemplate) -> Error {
    let server = listing(template).await;
    client(&server).list_pets().send().await.unwrap_err()
}

#[tokio::test]
async fn a_429_keeps_status_code_message_quota_and_retry_after_seconds() {
    let template = json(429, fixtures::ERROR_429).insert_header("Retry-After", "30");
    let error = list_error(with_quota(template, 60, 0, 1_924_992_000)).await;

    let api = api_error(&error);
    assert_eq!(
        api.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "expected the status of the answer"
    );
    assert_eq!(api.code(), Some("rate_limited"));
    assert_eq!(api.message(), Some("Rate limit exceeded"));
    assert_eq!(api.attempts(), 1, "expected one attempt");
    let reset = Utc.with_ymd_and_hms(2031, 1, 1, 0, 0, 0).unwrap();
    let quota = Some(Quota::new(60, 0, reset));
    assert_eq!(
        api.quota(),
        quota,
        "expected the API error's quota from the headers"
    );
    assert_eq!(
        error.quota(),
        quota,
        "expected the error's quota from the headers"
    );
    assert_eq!(
        api.retry_after(),
        Some(Duration::from_secs(30)),
        "expected the API error's wait from Retry-After"
    );
    assert_eq!(
        error.retry_after(),
        Some(Duration::from_secs(30)),
        "expected the error's wait from Retry-After"
    );
    assert!(
        error.is_rate_limited(),
        "expected a rate-limited error, got {error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the Pet Store API answered 429 Too Many Requests: Rate limit exceeded \
         (code `rate_limited`); retry after 30s"
    );
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_the_wait_until_that_date() {
    // Read on the service's clock, as its `Date` tells it: whatever this machine's clock says.
    let future = json(429, fixtures::ERROR_429)
        .insert_header("Date", "Wed, 01 Jan 2025 00:00:00 GMT")
        .insert_header("Retry-After", "Wed, 01 Jan 2025 01:00:00 GMT");
    let wait = list_error(future).await.retry_after().unwrap();
    assert!(
        (Duration::from_secs(3599)..=Duration::from_secs(3600)).contains(&wait),
        "expected a wait of an hour (less the time since the answer), got {wait:?}"
    );

    let past = json(429, fixtures::ERROR_429)
        .insert_header("Retry-After", "Thu, 01 Jan 2015 00:00:00 GMT");
    let error = list_error(past).await;
    assert_eq!(
        error.retry_after(),
        Some(Duration::ZERO),
        "expected no wait for a date in the past"
    );
    assert!(
        error.to_string().ends_with("; retry after 0s"),
        "expected the error to end with a retry after 0s, got {error}"
    );
}

#[tokio::test]
async fn predicates_follow_the_status() {
    for status in [400, 401, 404, 429, 500] {
        let body = format!(r#"{{"code":"c{status}","message":"m","status":{status}}}"#);
        let error = list_error(json(status, &body)).await;

        assert_eq!(
            error.status(),
            StatusCode::from_u16(status).ok(),
            "expected the status answered"
        );
        assert_eq!(
            error.is_bad_request(),
            status == 400,
            "expected is_bad_request for a 400 only, the status was {status}"
        );
        assert_eq!(
            error.is_unauthorized(),
            status == 401,
            "expected is_unauthorized for a 401 only, the status was {status}"
        );
        assert_eq!(
            error.is_not_found(),
            status == 404,
            "expected is_not_found for a 404 only, the status was {status}"
        );
        assert_eq!(
            error.is_rate_limited(),
            status == 429,
            "expected is_rate_limited for a 429 only, the status was {status}"
        );
        assert!(
            !error.is_timeout() && !error.is_connect() && !error.is_decode() && !error.is_network(),
            "expected no timeout, connect, network or decode error for a {status}, got {error:?}"
        );
        assert_eq!(
            error.retry_after(),
            None,
            "expected no wait for a {status} without Retry-After"
        );
        assert_eq!(
            error.quota(),
            None,
            "expected no quota for a {status} without quota headers"
        );
        assert_eq!(error.attempts(), 1, "expected one attempt for a {status}");
    }
}

#[tokio::test]
async fn display_is_a_sentence_with_status_message_and_code() {
    let cases = [
        (
            400,
            fixtures::ERROR_400,
            "the Pet Store API answered 400 Bad Request: name is required (code `invalid_pet`)",
        ),
        (
            401,
            fixtures::ERROR_401,
            "the Pet Store API answered 401 Unauthorized: Invalid API key (code `unauthorized`)",
        ),
        (
            404,
            fixtures::ERROR_404,
            "the Pet Store API answered 404 Not Found: Pet 42 not found (code `not_found`)",
        ),
    ];
    for (status, body, expected) in cases {
        let error = list_error(json(status, body)).await;
        assert_eq!(error.to_string(), expected);
        assert_eq!(api_error(&error).to_string(), expected);
    }
}

/// Asserts an API error whose body was not the error object.
#[track_caller]
fn assert_not_an_error_object(error: &Error, status: u16, snippet: &str) {
    let api = api_error(error);
    assert_eq!(api.status(), status, "expected the status answered");
    assert_eq!(
        api.code(),
        None,
        "expected no code from a body that is not an error object"
    );
    assert_eq!(
        api.message(),
        None,
        "expected no message from a body that is not an error object"
    );
    assert_eq!(
        api.body_snippet(),
        Some(snippet),
        "expected the body as the snippet"
    );
}

#[tokio::test]
async fn a_body_that_is_not_the_error_object_keeps_status_and_snippet() {
    let html = "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>";
    let proxy = ResponseTemplate::new(502).set_body_raw(html, "text/html");
    let error = list_error(proxy).await;
    assert_not_an_error_object(&error, 502, html);
    assert_eq!(
        error.to_string(),
        format!(
            "the Pet Store API answered 502 Bad Gateway with a body that is not an error object: {html:?}"
        )
    );

    let error = list_error(ResponseTemplate::new(503)).await;
    assert_not_an_error_object(&error, 503, "");
    assert_eq!(
        error.to_string(),
        "the Pet Store API answered 503 Service Unavailable with an empty body"
    );

    let truncated = r#"{"code": "unauthorized", "mess"#;
    let error = list_error(json(401, truncated)).await;
    assert_not_an_error_object(&error, 401, truncated);
    assert!(
        error.is_unauthorized(),
        "expected an unauthorized error, got {error:?}"
    );

    let error = list_error(json(401, fixtures::ERROR_WRONG_SHAPE)).await;
    assert_not_an_error_object(&error, 401, fixtures::ERROR_WRONG_SHAPE);
    assert!(
        error.is_unauthorized(),
        "expected an unauthorized error, got {error:?}"
    );
}

#[tokio::test]
async fn the_snippet_of_a_large_body_is_bounded() {
    let error = list_error(ResponseTemplate::new(500).set_body_string("x".repeat(100_000))).await;
    let expected = format!("{}…", "x".repeat(512));
    assert_not_an_error_object(&error, 500, &expected);
    assert_eq!(
        error.to_string(),
        format!(
            "the Pet Store API answered 500 Internal Server Error with a body that is not an error object: {expected:?}"
        )
    );

    // 512 bytes end inside the 171st three-byte character, which is dropped.
    let euros = ResponseTemplate::new(500).set_body_string("€".repeat(1000));
    let error = list_error(euros).await;
    assert_not_an_error_object(&error, 500, &format!("{}…", "€".repeat(170)));
}

/// The details of a decode error: operation, status, path, and the snippet.
fn decode_parts(error: &Error) -> (&'static str, StatusCode, &str, &str) {
    match error {
        Error::Decode(decode) => (
            decode.operation(),
            decode.status(),
            decode.path(),
            decode.snippet(),
        ),
        other => panic!("expected a decode error, got {other:?}"),
    }
}

/// What the JSON parser said, the source of a decode error.
fn decode_cause(error: &Error) -> String {
    std::error::Error::source(error)
        .unwrap_or_else(|| panic!("expected the parser's error as the source of {error:?}"))
        .to_string()
}

#[tokio::test]
async fn a_success_body_that_does_not_decode_names_the_json_path() {
    let cases = [
        (fixtures::PETS_CATEGORY_AS_STRING, "[1].categoryId"),
        // At the end of a cut document the next key is unknown: `?`.
        (r#"[{"id": 1, "name": "Rex", "#, "[0].?"),
        (r#"{"pets": []}"#, "."),
        ("<html>maintenance</html>", "."),
        ("[] trailing", "."),
    ];
    for (body, path) in cases {
        let error = list_error(json(200, body)).await;
        assert!(error.is_decode(), "expected a decode error, got {error:?}");
        assert_eq!(error.attempts(), 1, "expected one attempt");
        assert_eq!(error.status(), None, "not an API error");
        assert_eq!(
            decode_parts(&error),
            ("listPets", StatusCode::OK, path, body),
            "expected the operation, status, path and snippet of the decode error"
        );
    }

    let error = list_error(json(200, fixtures::PETS_CATEGORY_AS_STRING)).await;
    assert_eq!(
        error.to_string(),
        "could not decode the listPets response at `[1].categoryId`"
    );
    assert_eq!(
        decode_cause(&error),
        "invalid type: string \"1\", expected i64 at line 3 column 44"
    );
}

#[tokio::test]
#[allow(deprecated)]
async fn a_pet_without_its_required_name_fails_to_decode() {
    let server = start().await;
    expect_once(
        &server,
        "GET",
        PET_42,
        json(200, fixtures::PET_WITHOUT_NAME),
    )
    .await;

    let error = client(&server).get_pet(42).send().await.unwrap_err();

    let (operation, status, path, snippet) = decode_parts(&error);
    assert_eq!(
        (operation, status, path),
        ("getPet", StatusCode::OK, "."),
        "expected the operation, status and path of the decode error"
    );
    assert_eq!(
        snippet,
        fixtures::PET_WITHOUT_NAME,
        "expected the whole body as the snippet"
    );
    let cause = decode_cause(&error);
    assert!(
        cause.contains("missing field `name`"),
        "expected the cause to name the missing field, got {cause}"
    );
}

#[tokio::test]
async fn unknown_statuses_and_fields_decode() {
    let server = listing(json(200, fixtures::PETS_FUTURE_FIELDS)).await;

    let pets = client(&server).list_pets().send().await.unwrap();

    assert_eq!(pets.len(), 2, "expected two pets, got {pets:?}");
    let adopted = pets[0].status.as_ref().unwrap();
    assert!(
        !adopted.is_known(),
        "expected `adopted` to be an unknown status, got {adopted:?}"
    );
    assert_eq!(adopted.as_str(), "adopted");
    assert_eq!(
        pets[1].status,
        Some(PetStatus::Available),
        "expected the second pet's status"
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() {
    let base_url = refused_base_url();
    let address = base_url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .unwrap()
        .to_owned();
    let client = builder_at(&base_url).build().unwrap();

    let error = client.list_pets().send().await.unwrap_err();

    assert!(
        matches!(&error, Error::Connect(connect) if connect.attempts() == 1),
        "expected a connect error after one attempt, got {error:?}"
    );
    assert!(
        error.is_connect() && error.is_network(),
        "expected is_connect and is_network to be true, got {error:?}"
    );
    assert!(
        !error.is_timeout(),
        "expected is_timeout to be false, got {error:?}"
    );
    assert_eq!(error.status(), None, "expected no status without an answer");
    // The operating system's own words, as a plain connect to the same port gets them.
    let reason = std::net::TcpStream::connect(&address)
        .unwrap_err()
        .to_string();
    assert!(
        reason.to_lowercase().contains("refused"),
        "expected the operating system to say the connection was refused, it said {reason}"
    );
    assert_eq!(
        error.to_string(),
        format!("could not connect to the Pet Store API at {address}")
    );
    let Error::Connect(connect) = &error else {
        unreachable!()
    };
    assert_eq!(
        connect.address(),
        address,
        "expected the address of the refused server"
    );
    // The root cause is the source, so not in the message as well.
    assert_eq!(
        std::error::Error::source(&error).map(ToString::to_string),
        Some(reason),
        "expected the operating system's words as the source"
    );
}

/// The README's sample message is the one a user sees: what the sandbox answers for a pet
/// that does not exist.
#[tokio::test]
#[allow(deprecated)]
async fn the_readme_shows_the_message_of_a_missing_pet_as_the_sandbox_words_it() {
    let sandbox = common::sandbox().await;
    let client = builder_at(sandbox.base_url())
        .api_key(sandbox.key(Plan::Free))
        .build()
        .unwrap();

    let error = client.get_pet(42).send().await.unwrap_err();

    let readme = include_str!("../../README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        readme.contains(&error.to_string()),
        "expected the README to show the message `{error}`"
    );
}

#[tokio::test]
async fn a_refused_connection_leads_through_source_to_the_operating_system_error() {
    let client = builder_at(refused_base_url()).build().unwrap();

    let error = client.list_pets().send().await.unwrap_err();

    let mut kinds = Vec::new();
    let mut cause = std::error::Error::source(&error);
    while let Some(inner) = cause {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            kinds.push(io.kind());
        }
        cause = inner.source();
    }
    assert!(
        kinds.contains(&std::io::ErrorKind::ConnectionRefused),
        "expected an io::Error of kind ConnectionRefused in the source chain of {error:?}, \
         found io::Error kinds {kinds:?}"
    );
}

const SHORT: Duration = Duration::from_millis(200);

/// A listing that answers only after far longer than [`SHORT`].
async fn slow_listing() -> MockServer {
    listing(json(200, "[]").set_delay(Duration::from_secs(2))).await
}

#[tokio::test]
async fn a_slow_response_hits_the_attempt_timeout() {
    let server = slow_listing().await;
    let client = builder(&server).attempt_timeout(SHORT).build().unwrap();

    let error = client.list_pets().send().await.unwrap_err();

    assert!(
        matches!(
            &error,
            Error::Timeout(timeout)
                if (timeout.kind(), timeout.after(), timeout.attempts())
                    == (TimeoutKind::Attempt, Some(SHORT), 1)
        ),
        "expected the 200ms attempt timeout on the first attempt, got {error:?}"
    );
    assert_eq!(
        error.timeout_kind(),
        Some(TimeoutKind::Attempt),
        "expected the kind of timeout"
    );
    assert!(
        error.is_timeout() && !error.is_connect() && error.is_network(),
        "expected a timeout, a network failure, and not a connect error, got {error:?}"
    );
    assert_eq!(
        error.to_string(),
        "the per-attempt timeout of 200ms elapsed"
    );
}

#[tokio::test]
async fn a_slow_response_hits_the_call_timeout() {
    let server = slow_listing().await;
    let client = builder(&server)
        .attempt_timeout(None)
        .call_timeout(SHORT)
        .build()
        .unwrap();

    let error = client.list_pets().send().await.unwrap_err();

    assert!(
        matches!(
            &error,
            Error::Timeout(timeout)
                if (timeout.kind(), timeout.after(), timeout.attempts())
                    == (TimeoutKind::Call, Some(SHORT), 1)
        ),
        "expected the 200ms call timeout on the first attempt, got {error:?}"
    );
    assert_eq!(error.to_string(), "the whole-call timeout of 200ms elapsed");
}

#[tokio::test]
async fn a_success_body_over_the_limit_is_body_too_large() {
    let server = start().await;
    mount_list(&server, json(200, fixtures::PETS), 2).await;
    let exact = fixtures::PETS.len();

    let small = builder(&server)
        .max_response_body(exact - 1)
        .build()
        .unwrap();
    let error = small.list_pets().send().await.unwrap_err();
    assert!(
        matches!(
            &error,
            Error::BodyTooLarge(large)
                if (large.status(), large.limit(), large.attempts()) == (StatusCode::OK, exact - 1, 1)
        ),
        "expected a body too large for the {}-byte limit, got {error:?}",
        exact - 1
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the response body is larger than the {}-byte limit (HTTP 200)",
            exact - 1
        )
    );

    let fits = builder(&server).max_response_body(exact).build().unwrap();
    assert_eq!(
        fits.list_pets().send().await.unwrap().len(),
        3,
        "expected the three pets of a body that just fits"
    );
}

#[tokio::test]
async fn an_error_body_over_the_limit_is_still_an_api_error() {
    let server = start().await;
    expect_once(&server, "GET", PETS, json(401, fixtures::ERROR_401)).await;
    let client = builder(&server).max_response_body(16).build().unwrap();

    let error = client.list_pets().send().await.unwrap_err();

    assert!(
        error.is_unauthorized(),
        "expected an unauthorized error, got {error:?}"
    );
    assert_eq!(
        api_error(&error).body_snippet(),
        Some(&fixtures::ERROR_401[..16]),
        "expected the snippet cut at the 16-byte limit"
    );
}

#[tokio::test]
async fn a_chunked_success_body_over_the_limit_is_body_too_large() {
    let base_url = raw_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n\
          6\r\n[{\"id\"\r\n8\r\n:1,\"name\r\n18\r\n\":\"Rex\",\"categoryId\":3}]\r\n0\r\n\r\n",
    )
    .await;
    let client = builder_at(base_url).max_response_body(10).build().unwrap();

    let error = client.list_pets().send().await.unwrap_err();

    assert!(
        matches!(
            &error,
            Error::BodyTooLarge(large)
                if (large.status(), large.limit(), large.attempts()) == (StatusCode::OK, 10, 1)
        ),
        "expected a body too large for the 10-byte limit, got {error:?}"
    );
}

#[tokio::test]
async fn a_body_cut_short_is_a_connection_error() {
    let base_url = raw_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[{",
    )
    .await;

    let error = builder_at(&base_url)
        .build()
        .unwrap()
        .list_pets()
        .send()
        .await
        .unwrap_err();

    assert!(
        matches!(&error, Error::Connection(connection) if connection.attempts() == 1),
        "expected a connection error after one attempt, got {error:?}"
    );
    assert!(
        !error.is_connect() && !error.is_timeout() && error.is_network(),
        "expected a network failure, neither a connect error nor a timeout, got {error:?}"
    );
    let address = base_url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/v1"))
        .unwrap();
    assert_eq!(
        error.to_string(),
        format!(
            "the connection to the Pet Store API at {address} failed before the response was \
             complete"
        )
    );
    assert_eq!(
        std::error::Error::source(&error).map(ToString::to_string),
        Some("end of file before message length reached".to_owned()),
        "expected hyper's words as the source"
    );
}
