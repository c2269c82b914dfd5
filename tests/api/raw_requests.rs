//! `PetStoreClient::request`, the escape hatch for endpoints the crate does not wrap, against
//! wiremock: exact requests, path validation before anything is sent, one rate discipline
//! shared with the typed operations, retries by method, and decode errors with their path.

use crate::common;

use std::time::Duration;

use common::{API_KEY, DEFAULT_USER_AGENT, start};
use petstore_client::reqwest::Method;
use petstore_client::{Error, PetStoreClient, RetryPolicy, StatusCode};
use petstore_sandbox::Plan;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use wiremock::matchers::{body_string, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[derive(Debug, Deserialize, PartialEq)]
struct Order {
    id: i64,
    status: String,
}

#[derive(Serialize)]
struct NewOrder<'a> {
    #[serde(rename = "petId")]
    pet_id: i64,
    quantity: u32,
    note: &'a str,
}

const ORDERS: &str = r#"[{"id":1,"status":"placed"},{"id":2,"status":"placed"}]"#;

fn client(server: &MockServer, policy: RetryPolicy) -> PetStoreClient {
    common::paused_builder(common::base_url(server), API_KEY, policy)
        .build()
        .unwrap()
}

fn error(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_raw(
        format!(r#"{{"code":"error","message":"status {code}","status":{code}}}"#),
        "application/json",
    )
}

async fn requests(server: &MockServer) -> usize {
    server.received_requests().await.map_or(0, |r| r.len())
}

#[tokio::test]
async fn a_get_with_a_query_sends_exactly_what_the_typed_operations_send() {
    let server = start().await;
    Mock::given(method("GET"))
        .and(path("/v1/store/orders"))
        .and(query_param("status", "placed"))
        .and(query_param("limit", "5"))
        .and(header(
            "authorization",
            format!("Bearer {API_KEY}").as_str(),
        ))
        .and(header("accept", "application/json"))
        .and(header("user-agent", DEFAULT_USER_AGENT))
        .respond_with(ResponseTemplate::new(200).set_body_raw(ORDERS, "application/json"))
        .expect(1)
        .mount(&server)
        .await;

    let orders: Vec<Order> = client(&server, RetryPolicy::none())
        .request(Method::GET, "store/orders")
        .query(&[("status", "placed"), ("limit", "5")])
        .send()
        .await
        .unwrap();

    assert_eq!(orders.len(), 2, "expected two orders, got {orders:?}");
    assert_eq!(
        orders[0],
        Order {
            id: 1,
            status: "placed".to_owned()
        }
    );
    let received = &server.received_requests().await.unwrap()[0];
    assert_eq!(
        received.url.query(),
        Some("status=placed&limit=5"),
        "expected the query in the order given"
    );
}

/// As reqwest's `RequestBuilder::query`: each call appends its pairs, a repeated name
/// included, and an empty one adds nothing.
#[tokio::test]
async fn each_query_call_appends_to_the_query() {
    #[derive(Serialize)]
    struct Page {
        page: u32,
    }
    let server = start().await;
    Mock::given(method("GET"))
        .and(path("/v1/store/orders"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(ORDERS, "application/json"))
        .expect(1)
        .mount(&server)
        .await;

    let _: Vec<Order> = client(&server, RetryPolicy::none())
        .request(Method::GET, "store/orders")
        .query(&[("status", "placed")])
        .query(&Page { page: 2 })
        .query(&[] as &[(&str, &str)])
        .query(&[("status", "approved")])
        .send()
        .await
        .unwrap();

    let received = &server.received_requests().await.unwrap()[0];
    assert_eq!(
        received.url.query(),
        Some("status=placed&page=2&status=approved"),
        "expected every query call's pairs, in order"
    );
}

#[tokio::test]
async fn a_post_sends_its_json_body_and_the_raw_body_can_be_kept() {
    let server = start().await;
    Mock::given(method("POST"))
        .and(path("/v1/store/orders"))
        .and(header("content-type", "application/json"))
        .and(header(
            "authorization",
            format!("Bearer {API_KEY}").as_str(),
        ))
        .and(body_string(
            r#"{"petId":42,"quantity":1,"note":"café & co"}"#,
        ))
        .respond_with(
            ResponseTemplate::new(201)
                .set_body_raw(r#"{"id":7,"status":"placed"}"#, "application/json"),
        )
        .expect(2)
        .mount(&server)
        .await;
    let client = client(&server, RetryPolicy::none());
    let order = NewOrder {
        pet_id: 42,
        quantity: 1,
        note: "café & co",
    };

    let created = client
        .request(Method::POST, "/store/orders")
        .json(&order)
        .send_with_meta::<Order>()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "expected the status of a creation");
    assert_eq!(
        created.value().id,
        7,
        "expected the id of the created order"
    );

    let raw = client
        .request(Method::POST, "store/orders")
        .json(&order)
        .send_for_bytes()
        .await
        .unwrap();
    assert_eq!(
        raw.value(),
        br#"{"id":7,"status":"placed"}"#,
        "expected the raw body"
    );
}

#[tokio::test]
async fn a_path_that_could_leave_the_base_url_is_refused_before_anything_is_sent() {
    let server = start().await;
    let client = client(&server, RetryPolicy::none());
    for path in [
        "https://evil.example/orders",
        "//evil.example/orders",
        "../admin",
        "store/../../admin",
        "store/%2e%2e/%2e%2e/admin",
        "store/orders?status=placed",
        "store/orders#placed",
    ] {
        let error = client
            .request(Method::GET, path)
            .send::<serde_json::Value>()
            .await
            .unwrap_err();
        let Error::InvalidArgument(invalid) = &error else {
            panic!("expected the path {path} to be an invalid argument, got {error:?}");
        };
        assert_eq!(
            (invalid.name(), invalid.value()),
            ("path", Some(path)),
            "expected the name and value of the argument"
        );
        assert_eq!(
            error.attempts(),
            0,
            "expected no attempt for the path {path}"
        );
    }
    assert_eq!(requests(&server).await, 0, "a request reached the server");
}

#[tokio::test(start_paused = true)]
async fn a_429_on_a_raw_request_holds_the_typed_operations_and_the_reverse() {
    let server = MockServer::start().await;
    let limited = || ResponseTemplate::new(429).insert_header("Retry-After", "30");
    Mock::given(path("/v1/store/orders"))
        .respond_with(limited())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/store/orders"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(ORDERS, "application/json"))
        .with_priority(2)
        .mount(&server)
        .await;
    Mock::given(path("/v1/pets"))
        .respond_with(limited())
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(path("/v1/pets"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("[]", "application/json"))
        .with_priority(2)
        .mount(&server)
        .await;
    let client = client(&server, RetryPolicy::none());

    let raw = client
        .request(Method::GET, "store/orders")
        .send::<Vec<Order>>()
        .await
        .unwrap_err();
    assert_eq!(
        raw.status(),
        Some(StatusCode::TOO_MANY_REQUESTS),
        "expected the 429 on the raw request"
    );
    let start = Instant::now();
    client.list_pets().send().await.unwrap_err();
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(30),
        "the typed call did not wait"
    );

    // listPets got its own 429 after the wait: now the raw request waits for it.
    let start = Instant::now();
    let orders: Vec<Order> = client
        .request(Method::GET, "store/orders")
        .send()
        .await
        .unwrap();
    assert_eq!(orders.len(), 2, "expected two orders, got {orders:?}");
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(30),
        "the raw call did not wait"
    );
    assert_eq!(
        requests(&server).await,
        3,
        "expected two 429s and one success at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn retries_follow_the_method() {
    let policy = RetryPolicy::builder().jitter(false).build();
    for (verb, status, expected_requests) in [
        (Method::GET, 503, 4),
        (Method::HEAD, 503, 4),
        (Method::PUT, 503, 4),
        (Method::DELETE, 503, 4),
        (Method::OPTIONS, 503, 4),
        (Method::POST, 503, 1),
        (Method::PATCH, 503, 1),
        (Method::POST, 429, 4),
        (Method::PATCH, 429, 4),
    ] {
        let server = MockServer::start().await;
        Mock::given(path("/v1/store/orders/7"))
            .respond_with(error(status).insert_header("Retry-After", "1"))
            .mount(&server)
            .await;

        let failed = client(&server, policy.clone())
            .request(verb.clone(), "store/orders/7")
            .send_for_bytes()
            .await
            .unwrap_err();

        assert_eq!(
            failed.status().map(|s| s.as_u16()),
            Some(status),
            "expected the status {status} as the error of a {verb}"
        );
        assert_eq!(
            requests(&server).await,
            expected_requests,
            "expected {expected_requests} requests of a {verb} answered {status}"
        );
        assert_eq!(
            failed.attempts() as usize,
            expected_requests,
            "expected {expected_requests} attempts of a {verb} answered {status}"
        );
    }
}

/// A 204, or any answer without a body, decodes as JSON `null`: `()` or an `Option`.
#[tokio::test]
async fn an_answer_without_a_body_decodes_as_unit_or_none() {
    let server = start().await;
    Mock::given(method("DELETE"))
        .and(path("/v1/store/orders/1"))
        .respond_with(ResponseTemplate::new(204))
        .expect(3)
        .mount(&server)
        .await;
    let client = client(&server, RetryPolicy::none());
    let delete = || client.request(Method::DELETE, "store/orders/1");

    delete().send::<()>().await.unwrap();
    assert_eq!(delete().send::<Option<Order>>().await.unwrap(), None);
    let error = delete().send::<Order>().await.unwrap_err();
    assert!(error.is_decode(), "expected a decode error, got {error:?}");
}

#[tokio::test]
async fn a_body_that_is_not_the_type_asked_for_is_a_decode_error_with_its_path() {
    let server = start().await;
    Mock::given(path("/v1/store/orders"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            r#"[{"id":1,"status":"placed"},{"id":"two","status":"placed"}]"#,
            "application/json",
        ))
        .expect(1)
        .mount(&server)
        .await;

    let error = client(&server, RetryPolicy::none())
        .request(Method::GET, "store/orders")
        .send::<Vec<Order>>()
        .await
        .unwrap_err();

    let Error::Decode(decode) = &error else {
        panic!("expected a decode error, got {error:?}");
    };
    assert_eq!(
        (decode.operation(), decode.path()),
        ("request", "[1].id"),
        "expected the operation and JSON path of the decode error"
    );
}

#[tokio::test]
async fn the_sandbox_answers_a_route_it_does_not_know_with_its_404_error_object() {
    let sandbox = common::sandbox().await;
    let client = PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(sandbox.key(Plan::Free))
        .build()
        .unwrap();

    let error = client
        .request(Method::GET, "store/orders")
        .send::<serde_json::Value>()
        .await
        .unwrap_err();

    assert!(
        error.is_not_found(),
        "expected a not-found error, got {error:?}"
    );
    assert_eq!(
        error.api_error().and_then(|e| e.code()),
        Some("not_found"),
        "expected the code of the sandbox's error object"
    );
}
