//! Building a client: configuration errors, accepted base URLs, the environment, a supplied
//! `reqwest::Client`, and a key that never shows in `Debug` or `Display` output.

use crate::common;

use std::time::Duration;

use common::{
    API_KEY, BEARER, PETS, QueryIs, api_request, base_url, builder, builder_at, client, json,
    mount_list, mount_list_queries, refused_base_url, start,
};
use petstore_client::{
    API_KEY_ENV, BASE_URL_ENV, Error, PetStoreClient, PetStoreClientBuilder, RetryPolicy,
};
use wiremock::matchers::header;

const SECURE: &str = "https://petstore.example.com/v1";
/// A base URL that builds with or without a TLS feature.
const LOOPBACK: &str = "http://127.0.0.1/v1";
/// The start of every test key: no output may show it, even a key cut short.
const KEY_PART: &str = "FAKE-petstore-key";

/// Asserts that building fails with this configuration reason, and never shows the key.
#[track_caller]
fn assert_config_error(builder: PetStoreClientBuilder, reason: &str) {
    let error = builder.build().expect_err(reason);
    assert!(
        matches!(error, Error::Config(_)),
        "expected a configuration error, got {error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!("invalid client configuration: {reason}"),
        "expected the error to show the reason"
    );
    assert!(
        !format!("{error} {error:?}").contains(KEY_PART),
        "expected no key in the error, got {error:?}"
    );
}

#[test]
fn a_missing_empty_or_unsendable_key_is_a_configuration_error() {
    let with_key = |key: &str| PetStoreClient::builder().base_url(LOOPBACK).api_key(key);
    assert_config_error(
        PetStoreClient::builder().base_url(LOOPBACK),
        "no API key: call api_key() or set PETSTORE_API_KEY",
    );
    for empty in ["", "   "] {
        assert_config_error(with_key(empty), "the API key is empty");
    }
    for unsendable in [
        "FAKE-petstore-key-4242\n",
        "FAKE-petstore-key\r\n-4242",
        "FAKE-petstore-key\u{0}-4242",
        "FAKE-petstore-key\u{7f}-4242",
        "FAKE-petstore-key\u{1b}-4242",
        "FAKE-petstore-key\t4242",
        "FAKE-petstore-clé-4242",
    ] {
        assert_config_error(
            with_key(unsendable),
            "the API key contains characters that cannot be sent in an HTTP header",
        );
    }
}

#[test]
fn a_zero_timeout_or_body_limit_is_a_configuration_error() {
    let builder = || builder_at(LOOPBACK);
    for (builder, name) in [
        (builder().connect_timeout(Duration::ZERO), "connect_timeout"),
        (builder().attempt_timeout(Duration::ZERO), "attempt_timeout"),
        (builder().call_timeout(Duration::ZERO), "call_timeout"),
    ] {
        assert_config_error(
            builder,
            &format!(
                "{name} is zero, which fails every call: give a longer one, or None for no limit"
            ),
        );
    }
    assert_config_error(
        builder().max_response_body(0),
        "max_response_body is zero, which refuses every body: give a size in bytes",
    );
    builder()
        .connect_timeout(None)
        .attempt_timeout(None)
        .build()
        .unwrap();
}

#[test]
fn a_missing_or_unusable_base_url_is_a_configuration_error() {
    let at = |url: &str| builder_at(url);
    assert_config_error(
        PetStoreClient::builder().api_key(API_KEY),
        "no base URL: call base_url() or set PETSTORE_BASE_URL",
    );
    assert_config_error(
        at("https://exa mple.com/v1"),
        "the base URL `https://exa mple.com/v1` is not a valid URL",
    );
    let unparsed = at("https://exa mple.com/v1").build().unwrap_err();
    assert_eq!(
        std::error::Error::source(&unparsed).map(ToString::to_string),
        Some("invalid international domain name".to_owned()),
        "expected the URL parser's words as the source"
    );
    assert_config_error(
        at("ftp://example.com/v1"),
        "the base URL `ftp://example.com/v1` must be an http or https URL that can take paths",
    );
    // Text without `://` may be the API key given in the base URL's place: not shown.
    for url in [
        "petstore.example.com/v1",
        "localhost:8080/v1",
        "mailto:pets@example.com",
        "data:text/plain,v1",
    ] {
        assert_config_error(
            at(url),
            "the base URL has no `://` (it is not shown, as it may be a secret): \
             write it as https://host/v1",
        );
    }
    for (url, shown) in [
        (
            "https://example.com/v1?token=secret",
            "https://example.com/v1?…",
        ),
        (
            "https://example.com/v1#token=secret",
            "https://example.com/v1#…",
        ),
    ] {
        let builder = at(url);
        assert!(!format!("{builder:?}").contains("secret"), "{builder:?}");
        assert_config_error(
            builder,
            &format!("the base URL `{shown}` must not have a query or fragment"),
        );
    }
    for url in [
        "https://example.com",
        "https://example.com/v2",
        "https://example.com/v1/pets",
    ] {
        assert_config_error(
            at(url),
            &format!("the base URL `{url}` must end in the API version segment `/v1`"),
        );
    }
    assert_config_error(
        at("http://example.com/v1"),
        "refusing to send the API key in clear text to `http://example.com/v1`: \
         use https, or allow_insecure_http(true)",
    );
}

#[test]
#[cfg_attr(
    not(any(feature = "rustls", feature = "native-tls")),
    ignore = "https needs a TLS feature"
)]
fn https_loopback_http_and_allowed_insecure_http_base_urls_build() {
    let cases = [
        (SECURE, "https://petstore.example.com/v1/"),
        ("https://example.com/api/v1/", "https://example.com/api/v1/"),
        ("http://localhost/v1", "http://localhost/v1/"),
        ("http://127.0.0.1/v1", "http://127.0.0.1/v1/"),
        ("http://127.0.0.2:8080/v1", "http://127.0.0.2:8080/v1/"),
        ("http://[::1]/v1", "http://[::1]/v1/"),
    ];
    for (url, expected) in cases {
        let client = builder_at(url)
            .build()
            .unwrap_or_else(|e| panic!("expected the base URL {url} to build, got {e}"));
        assert_eq!(
            client.base_url().as_str(),
            expected,
            "expected the base URL built from {url}"
        );
    }
    let insecure = builder_at("http://example.com/v1").allow_insecure_http(true);
    assert_eq!(
        insecure.build().unwrap().base_url().as_str(),
        "http://example.com/v1/",
        "expected the allowed insecure base URL"
    );
}

/// Without a TLS feature, an `https://` base URL fails at `build()`, not on every call.
#[cfg(not(any(feature = "rustls", feature = "native-tls")))]
#[test]
fn without_tls_an_https_base_url_is_a_configuration_error() {
    let reason = "this build of petstore-client has no TLS: enable the `rustls` or \
                  `native-tls` feature, or use http:// to loopback";
    assert_config_error(builder_at(SECURE), reason);
    assert_config_error(builder_at("https://127.0.0.1/v1"), reason);
    builder_at("http://127.0.0.1/v1").build().unwrap();
    // A supplied client is the application's: it may have TLS through its own reqwest.
    builder_at(SECURE)
        .http_client(reqwest::Client::new())
        .build()
        .unwrap();
}

#[test]
fn a_connect_timeout_with_a_supplied_http_client_is_a_configuration_error() {
    let reason = "connect_timeout has no effect on a supplied http_client: set it on that client";
    assert_config_error(
        builder_at(LOOPBACK)
            .http_client(petstore_client::reqwest::Client::new())
            .connect_timeout(std::time::Duration::from_secs(3)),
        reason,
    );
    builder_at(LOOPBACK)
        .http_client(petstore_client::reqwest::Client::new())
        .build()
        .unwrap();
    builder_at(LOOPBACK).connect_timeout(None).build().unwrap();
}

/// Sets or removes the client's environment variables.
fn set_env(base_url: Option<&str>, api_key: Option<&str>) {
    for (name, value) in [(BASE_URL_ENV, base_url), (API_KEY_ENV, api_key)] {
        // SAFETY: this is the only test of the crate's test binaries that touches the
        // environment, and nothing in this binary reads it concurrently: the client reads
        // these variables only in `from_env`, which only this test calls.
        unsafe {
            match value {
                Some(value) => std::env::set_var(name, value),
                None => std::env::remove_var(name),
            }
        }
    }
}

#[tokio::test]
async fn from_env_reads_base_url_and_key_and_reports_what_is_unset_or_empty() {
    let server = start().await;
    mount_list(&server, json(200, "[]"), 2).await;
    let url = base_url(&server);

    set_env(None, None);
    assert_config_error(
        PetStoreClientBuilder::from_env(),
        "no base URL: call base_url() or set PETSTORE_BASE_URL",
    );
    set_env(Some(&url), None);
    let missing_key = PetStoreClient::from_env().unwrap_err();
    assert_eq!(
        missing_key.to_string(),
        "invalid client configuration: no API key: call api_key() or set PETSTORE_API_KEY"
    );
    let overridden = PetStoreClientBuilder::from_env().api_key(API_KEY).build();
    overridden.unwrap().list_pets().send().await.unwrap();

    // A key that is not UTF-8 is not read as unset.
    // SAFETY: as in `set_env`.
    unsafe {
        std::env::set_var(
            API_KEY_ENV,
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
                b"FAKE-petstore-key-\xff",
            ),
        );
    }
    assert_config_error(
        PetStoreClientBuilder::from_env(),
        "the API key from PETSTORE_API_KEY contains characters that cannot be sent in an HTTP header",
    );

    // The user set the variable, so the message names it.
    set_env(Some(&url), Some(" "));
    assert_config_error(
        PetStoreClientBuilder::from_env(),
        "the API key from PETSTORE_API_KEY is empty",
    );
    assert_config_error(
        PetStoreClientBuilder::from_env().api_key(""),
        "the API key is empty",
    );

    let with_credentials = "https://user:hunter2@petstore.example.com/v1";
    set_env(Some(with_credentials), Some(API_KEY));
    let builder = PetStoreClientBuilder::from_env();
    assert!(
        !format!("{builder:?}").contains("hunter2"),
        "expected the builder's Debug to hide the credentials from {BASE_URL_ENV}, got {builder:?}"
    );
    assert_config_error(
        builder,
        "the base URL `https://***@petstore.example.com/v1` from PETSTORE_BASE_URL must not \
         contain a user name or password: the client authenticates with the API key alone",
    );

    set_env(Some(&url), Some(API_KEY));
    let from_env = PetStoreClient::from_env();
    set_env(None, None);
    let from_env = from_env.unwrap();
    assert_eq!(
        from_env.base_url().as_str(),
        format!("{url}/"),
        "expected the base URL from the environment"
    );
    from_env.list_pets().send().await.unwrap();
}

#[tokio::test]
async fn a_supplied_reqwest_client_sends_the_requests() {
    let server = start().await;
    api_request("GET", PETS)
        .and(QueryIs(None))
        .and(header("x-supplied-client", "yes"))
        .respond_with(json(200, "[]"))
        .expect(1)
        .mount(&server)
        .await;
    let mut headers = http::HeaderMap::new();
    headers.insert("x-supplied-client", http::HeaderValue::from_static("yes"));
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();

    let client = builder(&server).http_client(http).build().unwrap();

    client.list_pets().send().await.unwrap();
}

fn assert_clone_send_sync<T: Clone + Send + Sync + 'static>() {}

fn assert_send_sync<T: Send + Sync + 'static>() {}

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[tokio::test]
async fn the_client_is_clone_send_and_sync_and_so_are_its_calls() {
    assert_clone_send_sync::<PetStoreClient>();
    assert_clone_send_sync::<PetStoreClientBuilder>();
    assert_send_sync::<Error>();
    let server = start().await;
    mount_list(&server, json(200, "[]"), 1).await;
    let client = client(&server);

    let call = assert_send(client.clone().list_pets().send());
    let pets = tokio::spawn(call).await.unwrap().unwrap();

    assert!(pets.is_empty(), "expected no pets, got {pets:?}");
    assert_eq!(
        client.clone().base_url(),
        client.base_url(),
        "expected a clone to keep the base URL"
    );
}

#[tokio::test]
async fn debug_and_display_never_show_the_key() {
    let server = start().await;
    let cases = [
        ("limit=1", json(401, common::fixtures::ERROR_401)),
        ("limit=2", json(200, "{}")),
        ("limit=3", json(200, common::fixtures::PETS)),
        ("limit=4", json(200, "[]").set_delay(Duration::from_secs(2))),
    ];
    mount_list_queries(&server, cases).await;
    let client = builder(&server)
        .max_response_body(32)
        .attempt_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let refused = builder_at(refused_base_url()).build().unwrap();
    let mut errors = Vec::new();
    for limit in 0..=4 {
        errors.push(client.list_pets().limit(limit).send().await.unwrap_err());
    }
    errors.push(refused.list_pets().send().await.unwrap_err());
    errors.push(builder_at("http://example.com/v1").build().unwrap_err());

    let kinds: Vec<_> = errors
        .iter()
        .map(|e| format!("{e:?}")[..8].to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "InvalidA", "Api(ApiE", "Decode(D", "BodyTooL", "Timeout(", "Connect(", "Config(C"
        ],
        "expected the start of each kind of error's Debug output"
    );
    let shown = [
        format!("{client:?}"),
        format!("{:?}", builder(&server)),
        format!("{:?}", client.list_pets()),
        format!("{errors:?}"),
        errors.iter().map(|e| format!("{e} ")).collect(),
    ];
    for text in shown {
        assert!(
            !text.contains(KEY_PART),
            "expected no key in the output, got {text}"
        );
        assert!(
            !text.contains(BEARER),
            "expected no bearer token in the output, got {text}"
        );
    }
    assert!(
        format!("{client:?}").contains("api_key: <redacted>"),
        "expected the client's Debug to show the key redacted, got {client:?}"
    );
    assert!(
        format!("{:?}", builder(&server)).contains("api_key: Some(<redacted>)"),
        "expected the builder's Debug to show the key redacted, got {:?}",
        builder(&server)
    );
}

#[test]
fn a_per_call_retry_policy_does_not_change_the_client() {
    let client = builder_at(LOOPBACK)
        .retry_policy(RetryPolicy::default())
        .build()
        .unwrap();
    let call = client.list_pets().retry_policy(RetryPolicy::none());
    assert!(
        format!("{call:?}").contains("max_retries: 0"),
        "expected the call to have no retry, got {call:?}"
    );
    assert!(
        format!("{client:?}").contains("max_retries: 3"),
        "expected the client to keep its three retries, got {client:?}"
    );
}

#[test]
fn extra_trailing_slashes_still_reach_v1_pets() {
    for url in ["http://127.0.0.1/v1//", "http://127.0.0.1/v1///"] {
        let client = builder_at(url).build().unwrap();
        assert_eq!(
            client.base_url().as_str(),
            "http://127.0.0.1/v1/",
            "expected the trailing slashes of {url} to fold into one"
        );
    }
}

/// The reason `build()` gives for a base URL with credentials, shown as `shown`.
fn credentials_reason(shown: &str) -> String {
    format!(
        "the base URL `{shown}` must not contain a user name or password: \
         the client authenticates with the API key alone"
    )
}

/// reqwest would turn the user information into a second `Authorization` header (Basic)
/// beside the bearer key, and `Debug` would print the password.
#[test]
fn a_base_url_with_credentials_is_refused_without_showing_them() {
    for (url, shown) in [
        (
            "https://user:hunter2@petstore.example.com/v1",
            "https://***@petstore.example.com/v1",
        ),
        (
            "https://hunter2@petstore.example.com/v1",
            "https://***@petstore.example.com/v1",
        ),
        (
            "https://:hunter2@petstore.example.com/v1",
            "https://***@petstore.example.com/v1",
        ),
        (
            "http://user:hunter2@127.0.0.1/v1",
            "http://***@127.0.0.1/v1",
        ),
        (
            "http://user:hunter2@example.com/v1",
            "http://***@example.com/v1",
        ),
    ] {
        let builder = builder_at(url);
        let debug = format!("{builder:?} {builder:#?}");
        assert!(
            !debug.contains("hunter2"),
            "expected the builder's Debug to hide the credentials, got {debug}"
        );
        assert_config_error(builder, &credentials_reason(shown));
    }
    // Not a valid URL, yet the credentials in it are still hidden.
    let unparsable = builder_at("https://user:hunter2@petstore.example.com:99999/v1");
    assert!(
        !format!("{unparsable:?}").contains("hunter2"),
        "expected the builder's Debug to hide the credentials, got {unparsable:?}"
    );
    assert_config_error(
        unparsable,
        "the base URL `https://***@petstore.example.com:99999/v1` is not a valid URL",
    );
}
