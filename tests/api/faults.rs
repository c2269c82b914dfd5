//! The fault matrix: a server that misbehaves in every way a network or a proxy can, and the
//! typed error or recovery each case must give, with no panic, no hang past the configured
//! timeouts, and never a duplicate `POST`.
//!
//! Most cases use a scripted raw TCP server running on the test's own runtime, so that under
//! tokio's paused clock its sleeps and the client's timeouts are exact.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use http::StatusCode;
use petstore_client::{Error, NewPet, PetStoreClient, RetryPolicy, TimeoutKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use wiremock::matchers::{any, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "FAKE-faults-key";
const PETS: &str = r#"[{"id":1,"name":"Rex","categoryId":3}]"#;

/// What the scripted server does once it has read a request.
#[derive(Clone, Copy)]
enum Script {
    /// Resets the connection (RST) without answering.
    Reset,
    /// Sends the headers and part of the promised body, then closes.
    CutMidBody,
    /// Never sends anything.
    Silent,
    /// Sends the headers, then one body byte per second, forever.
    Trickle,
    /// Sends `200` with a `Content-Length` far beyond any sane body.
    HugeContentLength,
    /// Sends `200` with a body that never ends (close-delimited), as fast as it can.
    Endless,
}

#[derive(Default)]
struct Seen {
    requests: AtomicUsize,
    body_bytes_written: AtomicU64,
}

async fn scripted(script: Script) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let seen = counter.clone();
            tokio::spawn(async move {
                let mut socket = socket;
                if read_request(&mut socket).await {
                    seen.requests.fetch_add(1, Ordering::SeqCst);
                    play(script, socket, &seen).await;
                }
            });
        }
    });
    (addr, seen)
}

/// Reads a request head and its body; false if the client went away.
async fn read_request(socket: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + 4 + length {
                if socket.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return false;
                }
            }
            return true;
        }
        if socket.read_buf(&mut buf).await.unwrap_or(0) == 0 {
            return false;
        }
    }
}

async fn play(script: Script, mut socket: TcpStream, seen: &Seen) {
    let head =
        |length: &str| format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{length}\r\n");
    match script {
        Script::Reset => {
            // A zero linger makes close send RST at once; it never blocks.
            #[allow(deprecated)]
            socket.set_linger(Some(Duration::ZERO)).unwrap();
            drop(socket);
        }
        Script::CutMidBody => {
            let body = PETS.as_bytes();
            let reply = head(&format!("content-length: {}\r\n", body.len()));
            let _ = socket.write_all(reply.as_bytes()).await;
            let _ = socket.write_all(&body[..body.len() / 2]).await;
        }
        Script::Silent => std::future::pending().await,
        Script::Trickle => {
            let _ = socket
                .write_all(head("content-length: 1000000\r\n").as_bytes())
                .await;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if socket.write_all(b" ").await.is_err() {
                    return;
                }
            }
        }
        Script::HugeContentLength => {
            let reply = head("content-length: 10000000000\r\n");
            let _ = socket.write_all(reply.as_bytes()).await;
            let _ = socket.write_all(b"[").await;
            std::future::pending::<()>().await;
        }
        Script::Endless => {
            let _ = socket
                .write_all(head("connection: close\r\n").as_bytes())
                .await;
            let chunk = vec![b' '; 64 * 1024];
            while socket.write_all(&chunk).await.is_ok() {
                seen.body_bytes_written
                    .fetch_add(chunk.len() as u64, Ordering::SeqCst);
            }
        }
    }
}

fn client(addr: SocketAddr) -> petstore_client::PetStoreClientBuilder {
    PetStoreClient::builder()
        .base_url(format!("http://{addr}/v1"))
        .api_key(KEY)
        .retry_policy(RetryPolicy::builder().jitter(false).build())
}

async fn list(client: &PetStoreClient) -> Result<Vec<petstore_client::Pet>, Error> {
    client.list_pets().send().await
}

async fn create(client: &PetStoreClient) -> Result<petstore_client::Pet, Error> {
    client.create_pet(NewPet::new("Rex", 3)).send().await
}

/// Nothing was sent, so a `POST` is retried as a `GET` is: a refused connection may be a
/// server restarting.
#[tokio::test(start_paused = true)]
async fn connection_refused_is_a_connect_error_retried_for_every_method() {
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let client = client(addr).build().unwrap();

    let error = list(&client).await.unwrap_err();
    assert!(
        error.is_connect(),
        "expected a connect error, got {error:?}"
    );
    assert_eq!(
        error.attempts(),
        4,
        "expected the first attempt and three retries"
    );
    assert_eq!(
        error.to_string(),
        format!("could not connect to the Pet Store API at {addr} (after 4 attempts)")
    );

    let error = create(&client).await.unwrap_err();
    assert!(
        matches!(&error, Error::Connect(connect) if connect.attempts() == 4),
        "expected a connect error after four attempts of a POST, got {error:?}"
    );
}

/// A name that does not resolve will not resolve a few seconds later: the error comes at once,
/// for every method. `.invalid` never resolves (RFC 6761).
#[tokio::test(start_paused = true)]
async fn a_host_name_that_does_not_resolve_is_not_retried() {
    // No connect or attempt timer: under the paused clock it could fire during the lookup.
    let client = PetStoreClient::builder()
        .base_url("http://petstore.invalid/v1")
        .allow_insecure_http(true)
        .api_key(KEY)
        .connect_timeout(None)
        .attempt_timeout(None)
        .retry_policy(RetryPolicy::builder().jitter(false).build())
        .build()
        .unwrap();
    let start = Instant::now();

    for error in [
        list(&client).await.unwrap_err(),
        create(&client).await.unwrap_err(),
    ] {
        assert!(
            matches!(&error, Error::Connect(connect) if connect.attempts() == 1),
            "expected a connect error after one attempt, got {error:?}"
        );
        assert_eq!(
            error.to_string(),
            "could not connect to the Pet Store API at petstore.invalid:80",
            "expected the message to name the host"
        );
    }
    assert_eq!(start.elapsed(), Duration::ZERO, "expected no retry delay");
}

/// A reset before the response, or a body cut short: a GET is retried, a POST is not.
#[tokio::test(start_paused = true)]
async fn a_dropped_connection_is_retried_for_get_only() {
    for script in [Script::Reset, Script::CutMidBody] {
        let (addr, seen) = scripted(script).await;
        let client = client(addr).build().unwrap();

        let error = list(&client).await.unwrap_err();
        assert!(
            matches!(&error, Error::Connection(connection) if connection.attempts() == 4),
            "expected a connection error after four attempts of a GET, got {error:?}"
        );
        assert_eq!(
            seen.requests.load(Ordering::SeqCst),
            4,
            "expected four GET requests at the server"
        );

        let error = create(&client).await.unwrap_err();
        assert!(
            matches!(&error, Error::Connection(connection) if connection.attempts() == 1),
            "expected a connection error after the one attempt of a POST, got {error:?}"
        );
        assert_eq!(
            seen.requests.load(Ordering::SeqCst),
            5,
            "the POST was sent twice"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn headers_that_never_arrive_hit_the_attempt_timeout() {
    let (addr, seen) = scripted(Script::Silent).await;
    let client = client(addr)
        .attempt_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let start = Instant::now();

    let error = list(&client).await.unwrap_err();
    assert_eq!(
        error.timeout_kind(),
        Some(TimeoutKind::Attempt),
        "expected the attempt timeout on the GET"
    );
    assert_eq!(error.attempts(), 4, "expected four attempts of the GET");
    // Four 5 s attempts and the 0.5 + 1 + 2 s backoff between them.
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(4 * 5000 + 3500),
        "expected four 5 s attempts and 3.5 s of backoff"
    );

    let error = create(&client).await.unwrap_err();
    assert_eq!(
        error.timeout_kind(),
        Some(TimeoutKind::Attempt),
        "expected the attempt timeout on the POST"
    );
    assert_eq!(error.attempts(), 1, "expected one attempt of the POST");
    assert_eq!(
        seen.requests.load(Ordering::SeqCst),
        5,
        "expected four GET requests and one POST at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_that_trickles_forever_hits_the_attempt_timeout() {
    let (addr, _) = scripted(Script::Trickle).await;
    let client = client(addr)
        .attempt_timeout(Duration::from_secs(5))
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let start = Instant::now();

    let error = list(&client).await.unwrap_err();

    assert_eq!(
        error.timeout_kind(),
        Some(TimeoutKind::Attempt),
        "expected the attempt timeout"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(5),
        "expected the call to end at the 5 s attempt timeout"
    );
    assert_eq!(error.to_string(), "the per-attempt timeout of 5s elapsed");
}

#[tokio::test(start_paused = true)]
async fn the_call_timeout_bounds_retries_and_waits() {
    let (addr, _) = scripted(Script::Silent).await;
    let client = client(addr)
        .attempt_timeout(Duration::from_secs(5))
        .call_timeout(Duration::from_secs(12))
        .build()
        .unwrap();
    let start = Instant::now();

    let error = list(&client).await.unwrap_err();

    assert_eq!(
        error.timeout_kind(),
        Some(TimeoutKind::Call),
        "expected the call timeout"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(12),
        "expected the call to end at the 12 s call timeout"
    );
    assert_eq!(
        error.attempts(),
        3,
        "expected three attempts within the call timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn a_huge_content_length_is_refused_without_reading() {
    let (addr, _) = scripted(Script::HugeContentLength).await;
    let client = client(addr).max_response_body(1 << 20).build().unwrap();

    let error = list(&client).await.unwrap_err();

    assert!(
        matches!(
            &error,
            Error::BodyTooLarge(large)
                if (large.status(), large.limit(), large.attempts()) == (StatusCode::OK, 1_048_576, 1)
        ),
        "expected a body too large for the 1 MiB limit, got {error:?}"
    );
}

#[tokio::test]
async fn an_endless_body_is_not_buffered_past_the_cap() {
    let (addr, seen) = scripted(Script::Endless).await;
    let cap = 1 << 20;
    let client = client(addr).max_response_body(cap).build().unwrap();

    let error = list(&client).await.unwrap_err();

    assert!(
        matches!(&error, Error::BodyTooLarge(large) if large.status() == StatusCode::OK),
        "expected a body too large, got {error:?}"
    );
    // The client stopped reading at the cap: what the server managed to write is the cap plus
    // what the kernel's socket buffers hold, not an unbounded stream.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let written = seen.body_bytes_written.load(Ordering::SeqCst);
    assert!(
        written < (cap as u64) + (16 << 20),
        "expected the server to write less than the cap and 16 MiB, it wrote {written} bytes"
    );
}

async fn rate_limited(retry_after: &[&str], quota: &[(&str, &str)]) -> MockServer {
    let server = MockServer::start().await;
    let mut response = ResponseTemplate::new(429).set_body_raw(
        r#"{"code":"rate_limited","message":"slow down","status":429}"#,
        "application/json",
    );
    for value in retry_after {
        response = response.append_header("Retry-After", *value);
    }
    for (name, value) in quota {
        response = response.append_header(*name, *value);
    }
    Mock::given(method("GET"))
        .respond_with(response)
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(PETS, "application/json"))
        .with_priority(2)
        .mount(&server)
        .await;
    server
}

fn paused_client(server: &MockServer) -> PetStoreClient {
    PetStoreClient::builder()
        .base_url(format!("{}/v1", server.uri()))
        .api_key(KEY)
        .http_client(
            reqwest::Client::builder()
                .pool_idle_timeout(None)
                .build()
                .unwrap(),
        )
        .attempt_timeout(None)
        .retry_policy(RetryPolicy::builder().jitter(false).build())
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn unusable_retry_after_values_on_a_429_give_the_backoff_with_a_one_second_floor() {
    for values in [&["-5"][..], &["soon"], &["", ""], &["3", "4"], &["0x10"]] {
        let server = rate_limited(values, &[]).await;
        let start = Instant::now();

        let response = paused_client(&server)
            .list_pets()
            .send_with_meta()
            .await
            .unwrap();

        assert_eq!(
            response.attempts(),
            2,
            "expected one retry with Retry-After {values:?}"
        );
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(1),
            "expected the 1 s floor with Retry-After {values:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_decimal_retry_after_is_rounded_up_never_shortened() {
    let server = rate_limited(&["1.5"], &[]).await;
    let start = Instant::now();

    let response = paused_client(&server)
        .list_pets()
        .send_with_meta()
        .await
        .unwrap();

    assert_eq!(response.attempts(), 2, "expected one retry");
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(2),
        "expected the 1.5 s Retry-After rounded up to 2 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_of_zero_or_in_the_past_still_backs_off_and_grows() {
    for value in ["Sun, 06 Nov 1994 08:49:37 GMT", "0"] {
        let server = rate_limited(&[value], &[]).await;
        let start = Instant::now();

        let response = paused_client(&server)
            .list_pets()
            .send_with_meta()
            .await
            .unwrap();

        assert_eq!(
            response.attempts(),
            2,
            "expected one retry with Retry-After {value}"
        );
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(500),
            "expected the 0.5 s backoff with Retry-After {value}"
        );
    }
    // Every answer a 429 with `Retry-After: 0`: the delays grow as the backoff's.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(429).append_header("Retry-After", "0"))
        .expect(4)
        .mount(&server)
        .await;
    let start = Instant::now();
    let error = paused_client(&server).list_pets().send().await.unwrap_err();
    assert_eq!(
        error.attempts(),
        4,
        "expected the first attempt and three retries"
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(500 + 1_000 + 2_000),
        "expected the backoff to grow: 0.5 s, 1 s, 2 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_huge_retry_after_fails_at_once_and_never_panics() {
    let server = rate_limited(&["99999999999999999999999"], &[]).await;
    let client = paused_client(&server);

    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        error.is_rate_limited(),
        "expected a rate-limited error, got {error:?}"
    );
    assert_eq!(
        error.retry_after(),
        Some(Duration::from_secs(u64::MAX)),
        "expected the huge wait saturated, not wrapped"
    );

    let held = client.list_pets().send().await.unwrap_err();
    assert!(
        matches!(held, Error::Throttled { .. }),
        "expected the next call to be held, got {held:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn unusable_rate_limit_headers_give_no_quota_and_no_error() {
    let cases: [&[(&str, &str)]; 5] = [
        &[
            ("X-RateLimit-Limit", "-1"),
            ("X-RateLimit-Remaining", "5"),
            ("X-RateLimit-Reset", "1767225600"),
        ],
        &[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "1e3"),
            ("X-RateLimit-Reset", "1767225600"),
        ],
        &[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "5"),
            ("X-RateLimit-Reset", "99999999999999999999"),
        ],
        &[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "5"),
            ("X-RateLimit-Reset", "1.5"),
        ],
        &[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Limit", "sixty"),
            ("X-RateLimit-Remaining", "5"),
            ("X-RateLimit-Reset", "1767225600"),
        ],
    ];
    for quota in cases {
        let server = rate_limited(&["1"], quota).await;
        let client = paused_client(&server);

        let response = client.list_pets().send_with_meta().await.unwrap();

        assert_eq!(
            client.quota(),
            None,
            "expected no client quota from the headers {quota:?}"
        );
        assert_eq!(
            response.quota(),
            None,
            "expected no response quota from the headers {quota:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_spent_quota_far_in_the_future_fails_at_once_instead_of_waiting() {
    let quota = [
        ("X-RateLimit-Limit", "1000"),
        ("X-RateLimit-Remaining", "0"),
        ("X-RateLimit-Reset", "253402300799"),
    ];
    let server = rate_limited(&["86400"], &quota).await;
    let client = paused_client(&server);

    let error = client.list_pets().send().await.unwrap_err();
    assert!(
        error.is_rate_limited(),
        "expected a rate-limited error, got {error:?}"
    );
    assert_eq!(
        error.quota().map(|q| q.remaining),
        Some(0),
        "expected the quota to say the budget is spent"
    );

    let start = Instant::now();
    let held = client.list_pets().send().await.unwrap_err();
    assert!(
        matches!(held, Error::Throttled { .. }),
        "expected the next call to be held, got {held:?}"
    );
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "expected the held call to fail without waiting"
    );
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        1,
        "expected only the first request at the server"
    );
}

#[tokio::test]
async fn redirects_are_not_followed_and_never_carry_the_key_to_another_host() {
    let elsewhere = MockServer::builder()
        .listener(std::net::TcpListener::bind("127.0.0.2:0").unwrap())
        .start()
        .await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200).set_body_raw(PETS, "application/json"))
        .mount(&elsewhere)
        .await;
    let origin = MockServer::start().await;
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(302)
                .insert_header("Location", format!("{}/v1/pets", elsewhere.uri()).as_str()),
        )
        .mount(&origin)
        .await;
    let base_url = format!("{}/v1", origin.uri());

    // The crate's own HTTP client does not follow redirects: the 302 is an error.
    let client = PetStoreClient::builder()
        .base_url(&base_url)
        .api_key(KEY)
        .build()
        .unwrap();
    let error = client.list_pets().send().await.unwrap_err();
    assert_eq!(
        error.status(),
        Some(StatusCode::FOUND),
        "expected the 302 as an error"
    );
    assert!(
        elsewhere.received_requests().await.unwrap().is_empty(),
        "expected no request at the other host, it got {}",
        elsewhere.received_requests().await.unwrap().len()
    );

    // A user-supplied client that follows redirects reaches the other host without the key.
    let following = PetStoreClient::builder()
        .base_url(&base_url)
        .api_key(KEY)
        .http_client(reqwest::Client::new())
        .build()
        .unwrap();
    let pets = following.list_pets().send().await.unwrap();
    assert_eq!(pets.len(), 1, "expected the pet of the other host");
    let received = elsewhere.received_requests().await.unwrap();
    assert_eq!(received.len(), 1, "expected one request at the other host");
    assert!(
        !received[0].headers.contains_key("authorization"),
        "expected no authorization header at the other host, got {:?}",
        received[0].headers
    );
}
