//! Every operation of the specification with every status it lists, and the exact requests
//! the client sends for them.

use crate::common;

use chrono::{TimeZone, Utc};
use common::{
    BEARER, DEFAULT_USER_AGENT, PET_42, PETS, QueryIs, api_request, assert_api_error, builder,
    client, expect_once, fixtures, json, mount_list, mount_list_queries, only_request, start,
    with_quota,
};
use petstore_client::{Error, NewPet, Pet, PetStatus, Quota};
use wiremock::matchers::{body_string, header};

fn listed_pets() -> Vec<Pet> {
    vec![
        Pet::new(1, "Rex", 3).status(PetStatus::Available),
        Pet::new(2, "Tom", 1).status(PetStatus::Sold),
        Pet::new(3, "Nemo", 7),
    ]
}

#[tokio::test]
async fn list_pets_gets_the_bare_array_without_a_query() {
    let server = start().await;
    mount_list(&server, json(200, fixtures::PETS), 1).await;

    let pets = client(&server).list_pets().send().await.unwrap();

    assert_eq!(pets, listed_pets());
    let request = only_request(&server).await;
    assert_eq!(request.url.query(), None, "expected no query");
    assert!(
        request.body.is_empty(),
        "expected no body, got {} bytes",
        request.body.len()
    );
    assert_eq!(
        request.headers.get("content-type"),
        None,
        "expected no content type on a GET"
    );
}

#[tokio::test]
async fn list_pets_sends_limit_and_status_exactly_as_set() {
    let server = start().await;
    let queries = [
        "limit=10&status=sold",
        "status=pending",
        "limit=1",
        "limit=100",
    ];
    mount_list_queries(&server, queries.map(|query| (query, json(200, "[]")))).await;
    let client = client(&server);

    let both = client.list_pets().status(PetStatus::Sold).limit(10);
    assert_eq!(
        both.send().await.unwrap(),
        [],
        "expected no pets with limit and status"
    );
    let status = client.list_pets().status(PetStatus::Pending);
    assert_eq!(
        status.send().await.unwrap(),
        [],
        "expected no pets with status"
    );
    assert_eq!(
        client.list_pets().limit(1).send().await.unwrap(),
        [],
        "expected no pets with limit 1"
    );
    assert_eq!(
        client.list_pets().limit(100).send().await.unwrap(),
        [],
        "expected no pets with limit 100"
    );
}

#[tokio::test]
async fn list_pets_rejects_a_limit_outside_1_to_100_before_sending() {
    let server = start().await;
    let client = client(&server);

    for limit in [0, 101] {
        let error = client.list_pets().limit(limit).send().await.unwrap_err();
        let Error::InvalidArgument(invalid) = &error else {
            panic!("expected InvalidArgument, got {error:?}");
        };
        assert_eq!(invalid.name(), "limit", "expected the name of the argument");
        assert_eq!(
            invalid.value(),
            Some(limit.to_string().as_str()),
            "expected the value of the argument"
        );
        assert_eq!(invalid.expected(), "the API accepts 1 to 100");
        assert_eq!(
            error.to_string(),
            format!("invalid limit {limit}: the API accepts 1 to 100")
        );
        assert_eq!(error.attempts(), 0, "expected no attempt for limit {limit}");
        let with_meta = client.list_pets().limit(limit).send_with_meta().await;
        assert!(
            matches!(with_meta, Err(Error::InvalidArgument { .. })),
            "expected an invalid argument from send_with_meta, got {with_meta:?}"
        );
    }
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        0,
        "expected no request at the server"
    );
}

#[tokio::test]
async fn list_pets_rejects_a_status_the_specification_does_not_list_before_sending() {
    let server = start().await;
    let client = client(&server);
    // An unknown status can only come from the service, decoded earlier.
    let pet: Pet =
        serde_json::from_str(r#"{"id":1,"name":"Rex","categoryId":3,"status":"adopted"}"#).unwrap();
    let unknown = pet.status.unwrap();

    let error = client.list_pets().status(unknown).send().await.unwrap_err();

    assert!(
        matches!(&error, Error::InvalidArgument(invalid) if invalid.name() == "status"),
        "expected an invalid status argument, got {error:?}"
    );
    assert_eq!(
        error.to_string(),
        "invalid status adopted: the API accepts available, pending or sold"
    );
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        0,
        "expected no request at the server"
    );
}

#[tokio::test]
async fn list_pets_maps_401_to_an_unauthorized_error() {
    let server = start().await;
    mount_list(&server, json(401, fixtures::ERROR_401), 1).await;

    let error = client(&server).list_pets().send().await.unwrap_err();

    assert_api_error(&error, 401, "unauthorized", "Invalid API key");
    assert!(
        error.is_unauthorized(),
        "expected an unauthorized error, got {error:?}"
    );
}

#[tokio::test]
async fn create_pet_posts_the_new_pet_without_id_and_omits_an_unset_status() {
    let server = start().await;
    for body in [
        r#"{"name":"Rex","categoryId":3}"#,
        r#"{"name":"Rex","categoryId":3,"status":"available"}"#,
    ] {
        api_request("POST", PETS)
            .and(QueryIs(None))
            .and(header("content-type", "application/json"))
            .and(body_string(body))
            .respond_with(json(201, fixtures::PET_CREATED))
            .expect(1)
            .named(body)
            .mount(&server)
            .await;
    }
    let client = client(&server);
    let created = Pet::new(7, "Rex", 3).status(PetStatus::Available);

    let bare = client.create_pet(NewPet::new("Rex", 3)).send_with_meta();
    let bare = bare.await.unwrap();
    assert_eq!(bare.status(), 201, "expected the status of a creation");
    assert_eq!(bare.value(), &created);
    let with_status = NewPet::new("Rex", 3).status(PetStatus::Available);
    assert_eq!(
        client.create_pet(with_status).send().await.unwrap(),
        created
    );
}

#[tokio::test]
async fn create_pet_maps_400_and_401_to_api_errors() {
    let cases = [
        (400, fixtures::ERROR_400, "invalid_pet", "name is required"),
        (401, fixtures::ERROR_401, "unauthorized", "Invalid API key"),
    ];
    for (status, body, code, message) in cases {
        let server = start().await;
        expect_once(&server, "POST", PETS, json(status, body)).await;

        let new_pet = NewPet::new("", 3);
        let error = client(&server)
            .create_pet(new_pet)
            .send()
            .await
            .unwrap_err();

        assert_api_error(&error, status, code, message);
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
    }
}

#[tokio::test]
#[allow(deprecated)]
async fn get_pet_gets_the_pet_by_id() {
    let server = start().await;
    api_request("GET", PET_42)
        .and(QueryIs(None))
        .respond_with(json(200, fixtures::PET_42))
        .expect(1)
        .mount(&server)
        .await;

    let pet = client(&server).get_pet(42).send().await.unwrap();

    assert_eq!(pet, Pet::new(42, "Rex", 3).status(PetStatus::Pending));
}

#[tokio::test]
#[allow(deprecated)]
async fn get_pet_maps_401_and_404_to_api_errors() {
    let cases = [
        (401, fixtures::ERROR_401, "unauthorized", "Invalid API key"),
        (404, fixtures::ERROR_404, "not_found", "Pet 42 not found"),
    ];
    for (status, body, code, message) in cases {
        let server = start().await;
        expect_once(&server, "GET", PET_42, json(status, body)).await;

        let error = client(&server).get_pet(42).send().await.unwrap_err();

        assert_api_error(&error, status, code, message);
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
    }
}

#[tokio::test]
async fn every_request_carries_the_bearer_key_accept_and_default_user_agent() {
    let server = start().await;
    mount_list(&server, json(200, "[]"), 1).await;

    client(&server).list_pets().send().await.unwrap();

    let request = only_request(&server).await;
    let header = |name: &str| request.headers.get(name).unwrap().to_str().unwrap();
    assert_eq!(request.method.as_str(), "GET");
    assert_eq!(header("authorization"), BEARER);
    assert_eq!(header("accept"), "application/json");
    assert_eq!(header("user-agent"), DEFAULT_USER_AGENT);
    assert_eq!(
        DEFAULT_USER_AGENT,
        concat!("petstore-client/", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn a_custom_user_agent_replaces_the_default() {
    let server = start().await;
    api_request("GET", PETS)
        .and(header("user-agent", "pet-shop-admin/2.1"))
        .respond_with(json(200, "[]"))
        .expect(1)
        .mount(&server)
        .await;

    let client = builder(&server).user_agent("pet-shop-admin/2.1").build();

    client.unwrap().list_pets().send().await.unwrap();
}

#[tokio::test]
async fn base_url_with_or_without_trailing_slash_reaches_v1_pets() {
    let server = start().await;
    mount_list(&server, json(200, "[]"), 2).await;

    for base_url in [
        format!("{}/v1", server.uri()),
        format!("{}/v1/", server.uri()),
    ] {
        let client = builder(&server).base_url(&base_url).build().unwrap();
        assert_eq!(
            client.base_url().as_str(),
            format!("{}/v1/", server.uri()),
            "expected one trailing slash from {base_url}"
        );
        client.list_pets().send().await.unwrap();
    }
}

#[tokio::test]
async fn send_with_meta_exposes_status_headers_quota_and_attempts() {
    let server = start().await;
    let template = json(200, fixtures::PETS).insert_header("X-Request-Id", "req-123");
    mount_list(&server, with_quota(template, 60, 59, 1_924_992_000), 1).await;

    let response = client(&server).list_pets().send_with_meta().await.unwrap();

    assert_eq!(response.status(), 200, "expected the status answered");
    assert_eq!(
        response.header("x-request-id"),
        Some("req-123"),
        "expected the header by its lower-case name"
    );
    assert_eq!(
        response.header("X-REQUEST-ID"),
        Some("req-123"),
        "expected the header by its upper-case name"
    );
    assert_eq!(
        response.header("x-absent"),
        None,
        "expected no value for a header not sent"
    );
    assert_eq!(
        response.headers()["x-ratelimit-remaining"],
        "59",
        "expected the remaining header"
    );
    let reset = Utc.with_ymd_and_hms(2031, 1, 1, 0, 0, 0).unwrap();
    assert_eq!(
        response.quota(),
        Some(Quota::new(60, 59, reset)),
        "expected the quota of the headers"
    );
    assert_eq!(response.attempts(), 1, "expected one attempt");
    assert_eq!(
        response.deprecation(),
        None,
        "expected no deprecation notice"
    );
    assert_eq!(response.into_value(), listed_pets());
}
