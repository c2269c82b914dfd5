//! The API key never appears in `Debug`, `Display`, error source chains or logs, through a
//! whole session that exercises every path (success, retries, errors of every kind).

/// The shared test set-up (`tests/common`): the base these tests use.
#[path = "common"]
#[allow(dead_code)]
mod common {
    mod base;
    pub use base::*;
}

use std::error::Error as _;
use std::time::Duration;

use petstore_client::{Error, NewPet, PetStoreClient, RetryPolicy};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Plainly fake, so that secret scanners do not take it for a live key, yet distinctive.
const KEY: &str = "FAKE-petstore-key-9f8e7d-not-a-secret";
/// The start of the key: no output may show it, even a key cut short.
const KEY_PART: &str = "FAKE-petstore-key";

/// Every way an error can be shown: `Debug`, `Display`, alternate forms, and its sources.
fn renderings(error: &Error) -> Vec<String> {
    let mut shown = vec![
        format!("{error}"),
        format!("{error:?}"),
        format!("{error:#}"),
        format!("{error:#?}"),
    ];
    let mut source = error.source();
    while let Some(cause) = source {
        shown.push(format!("{cause}"));
        shown.push(format!("{cause:?}"));
        source = cause.source();
    }
    shown
}

fn assert_hidden(what: &str, text: &str) {
    assert!(!text.contains(KEY), "the API key leaked in {what}: {text}");
    assert!(
        !text.contains(KEY_PART),
        "part of the API key leaked in {what}: {text}"
    );
}

fn json(status: u16, body: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body.to_owned(), "application/json")
}

// Every test here captures the logs first: see `common::capture`.

#[test]
fn builder_and_client_debug_hide_the_key() {
    let (logs, _guard) = common::capture(tracing::Level::TRACE);
    let builder = PetStoreClient::builder()
        .base_url("https://petstore.example.com/v1")
        .api_key(KEY);
    assert_hidden("the builder's Debug", &format!("{builder:?} {builder:#?}"));
    let client = builder.build().unwrap();
    assert_hidden("the client's Debug", &format!("{client:?} {client:#?}"));
    assert_hidden("the logs", &logs.text());
}

#[test]
fn configuration_errors_hide_the_key() {
    let (logs, _guard) = common::capture(tracing::Level::TRACE);
    let bad = [
        PetStoreClient::builder()
            .api_key(format!("{KEY}\n"))
            .base_url("https://h/v1"),
        PetStoreClient::builder()
            .api_key(KEY)
            .base_url("http://example.com/v1"),
        PetStoreClient::builder().api_key(KEY).base_url("not a url"),
        PetStoreClient::builder()
            .api_key(KEY)
            .base_url("https://h/v2"),
        PetStoreClient::builder().api_key(KEY),
        // The two swapped, or the key set as the base URL's variable.
        PetStoreClient::builder()
            .api_key("https://petstore.example.com/v1")
            .base_url(KEY),
        PetStoreClient::builder()
            .api_key(KEY)
            .base_url(format!("{KEY}:x")),
    ];
    for builder in bad {
        assert_hidden("the builder's Debug", &format!("{builder:?}"));
        let error = builder.build().unwrap_err();
        for text in renderings(&error) {
            assert_hidden("a configuration error", &text);
        }
    }
    assert_hidden("the logs", &logs.text());
}

#[tokio::test]
async fn answers_that_echo_the_key_do_not_put_it_in_errors() {
    let (logs, _guard) = common::capture(tracing::Level::TRACE);
    let server = MockServer::start().await;
    let revoked =
        format!(r#"{{"code":"unauthorized","message":"key {KEY} is revoked","status":401}}"#);
    let echo = format!("<html>Authorization: Bearer {KEY}</html>");
    Mock::given(path("/v1/pets/1"))
        .respond_with(json(401, &revoked))
        .mount(&server)
        .await;
    Mock::given(path("/v1/pets/2"))
        .respond_with(ResponseTemplate::new(403).set_body_string(echo.clone()))
        .mount(&server)
        .await;
    Mock::given(path("/v1/pets"))
        .respond_with(ResponseTemplate::new(200).set_body_string(format!("[\"{KEY}\"]")))
        .mount(&server)
        .await;
    let client = PetStoreClient::builder()
        .base_url(format!("{}/v1", server.uri()))
        .api_key(KEY)
        .build()
        .unwrap();

    #[allow(deprecated)]
    let errors = [
        client.get_pet(1).send().await.unwrap_err(),
        client.get_pet(2).send().await.unwrap_err(),
        client.list_pets().send().await.unwrap_err(),
    ];
    for error in &errors {
        for text in renderings(error) {
            assert_hidden("an error", &text);
        }
    }
    let shown = errors.iter().map(|e| format!("{e:#}")).collect::<Vec<_>>();
    assert!(shown[0].contains("key *** is revoked"), "{}", shown[0]);
    assert!(shown[1].contains("Bearer ***"), "{}", shown[1]);
    assert!(errors[2].is_decode(), "{}", shown[2]);
    assert_hidden("the logs", &logs.text());
}

#[tokio::test]
async fn a_whole_session_with_retries_never_shows_the_key() {
    let (logs, _guard) = common::capture(tracing::Level::TRACE);

    let server = MockServer::start().await;
    let pet = r#"{"id":1,"name":"Rex","categoryId":3}"#;
    Mock::given(method("POST"))
        .respond_with(
            json(
                429,
                r#"{"code":"rate_limited","message":"slow down","status":429}"#,
            )
            .insert_header("Retry-After", "0"),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(json(201, pet))
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/pets"))
        .respond_with(json(503, "<html>upstream down</html>"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/pets"))
        .respond_with(json(200, &format!("[{pet}]")))
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/pets/1"))
        .respond_with(json(200, pet).insert_header("Sunset", "Thu, 05 Dec 2030 00:00:00 GMT"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/pets/2"))
        .respond_with(json(
            404,
            r#"{"code":"not_found","message":"no pet 2","status":404}"#,
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/pets/3"))
        .respond_with(json(200, r#"{"id":"three"}"#))
        .mount(&server)
        .await;

    let policy = RetryPolicy::builder()
        .initial_delay(Duration::from_millis(1))
        .jitter(false)
        .build();
    let client = PetStoreClient::builder()
        .base_url(format!("{}/v1", server.uri()))
        .api_key(KEY)
        .retry_policy(policy)
        .build()
        .unwrap();

    client
        .create_pet(NewPet::new("Rex", 3))
        .send()
        .await
        .unwrap();
    client.list_pets().send().await.unwrap();
    #[allow(deprecated)]
    let responses = [
        client.get_pet(1).send().await,
        client.get_pet(2).send().await,
        client.get_pet(3).send().await,
    ];
    let mut errors: Vec<Error> = responses.into_iter().filter_map(Result::err).collect();
    errors.push(client.list_pets().limit(0).send().await.unwrap_err());

    let unreachable = PetStoreClient::builder()
        .base_url("http://127.0.0.1:9/v1")
        .api_key(KEY)
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    errors.push(unreachable.list_pets().send().await.unwrap_err());

    assert_eq!(
        errors.len(),
        4,
        "expected four errors from the session, got {errors:?}"
    );
    for error in &errors {
        for text in renderings(error) {
            assert_hidden("an error", &text);
        }
    }
    let text = logs.text();
    assert!(
        text.contains("retrying"),
        "the session did not retry:\n{text}"
    );
    assert!(
        text.contains("deprecated"),
        "no deprecation warning:\n{text}"
    );
    assert!(
        text.contains("hyper"),
        "the HTTP stack's own trace logs were not captured"
    );
    assert_hidden("the logs", &text);
}
