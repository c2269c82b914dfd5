//! Shared setup of the HTTP-level tests: a wiremock server that fails loudly on any request no
//! test expects, a client pointed at it, the fixtures, and response templates.
#![allow(dead_code)] // each test binary uses a different part of this module

use http::StatusCode;
use petstore_client::{ApiError, Error, PetStoreClient, PetStoreClientBuilder, RetryPolicy};
use wiremock::matchers::{any, header, method, path};
use wiremock::{Match, Mock, MockBuilder, MockServer, Request, ResponseTemplate};

/// A distinctive key, so that a leak into `Debug` or `Display` output is easy to spot; plainly
/// fake, so that secret scanners do not take it for a live key.
pub const API_KEY: &str = "FAKE-petstore-key-4242-not-a-secret";
pub const BEARER: &str = "Bearer FAKE-petstore-key-4242-not-a-secret";
pub const PETS: &str = "/v1/pets";
pub const PET_42: &str = "/v1/pets/42";
pub const DEFAULT_USER_AGENT: &str = concat!("petstore-client/", env!("CARGO_PKG_VERSION"));

/// The JSON fixtures in `tests/fixtures`.
pub mod fixtures {
    pub const PETS: &str = include_str!("../fixtures/pets.json");
    pub const PET_42: &str = include_str!("../fixtures/pet_42.json");
    pub const PET_CREATED: &str = include_str!("../fixtures/pet_created.json");
    pub const PETS_FUTURE_FIELDS: &str = include_str!("../fixtures/pets_future_fields.json");
    pub const PETS_CATEGORY_AS_STRING: &str =
        include_str!("../fixtures/pets_category_as_string.json");
    pub const PET_WITHOUT_NAME: &str = include_str!("../fixtures/pet_without_name.json");
    pub const ERROR_400: &str = include_str!("../fixtures/error_400.json");
    pub const ERROR_401: &str = include_str!("../fixtures/error_401.json");
    pub const ERROR_404: &str = include_str!("../fixtures/error_404.json");
    pub const ERROR_429: &str = include_str!("../fixtures/error_429.json");
    pub const ERROR_WRONG_SHAPE: &str = include_str!("../fixtures/error_wrong_shape.json");
}

/// A mock server whose lowest-priority mock answers 599 and expects no call, so that a request
/// no test mounted a mock for fails the call and then the test when the server is dropped.
pub async fn start() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(599))
        .with_priority(u8::MAX)
        .expect(0)
        .named("catch-all: a request no test expected")
        .mount(&server)
        .await;
    server
}

/// The server's base URL, `http://127.0.0.1:PORT/v1`.
pub fn base_url(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

/// A builder for a client of `server` that never retries.
pub fn builder(server: &MockServer) -> PetStoreClientBuilder {
    builder_at(base_url(server))
}

/// A builder for a client of `base_url` that never retries.
pub fn builder_at(base_url: impl AsRef<str>) -> PetStoreClientBuilder {
    PetStoreClient::builder()
        .base_url(base_url)
        .api_key(API_KEY)
        .retry_policy(RetryPolicy::none())
}

/// A client of `server` that never retries.
pub fn client(server: &MockServer) -> PetStoreClient {
    builder(server).build().expect("a valid test client")
}

/// A request as every operation sends it: method, exact path, the bearer key and
/// `Accept: application/json`.
pub fn api_request(http_method: &str, exact_path: &str) -> MockBuilder {
    Mock::given(method(http_method))
        .and(path(exact_path))
        .and(header("authorization", BEARER))
        .and(header("accept", "application/json"))
}

/// Matches the whole query string exactly (`None`: no `?` at all), which wiremock's
/// `query_param` cannot: it ignores parameters it was not told about.
pub struct QueryIs(pub Option<&'static str>);

impl Match for QueryIs {
    fn matches(&self, request: &Request) -> bool {
        request.url.query() == self.0
    }
}

/// A response with a JSON body and status.
pub fn json(status: u16, body: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_raw(body, "application/json")
}

/// The three `X-RateLimit-*` headers.
pub fn with_quota(
    template: ResponseTemplate,
    limit: u64,
    remaining: u64,
    reset: i64,
) -> ResponseTemplate {
    template
        .insert_header("X-RateLimit-Limit", limit.to_string().as_str())
        .insert_header("X-RateLimit-Remaining", remaining.to_string().as_str())
        .insert_header("X-RateLimit-Reset", reset.to_string().as_str())
}

/// Mounts an [`api_request`] answering `template`, expected exactly once.
pub async fn expect_once(
    server: &MockServer,
    http_method: &str,
    exact_path: &str,
    template: ResponseTemplate,
) {
    api_request(http_method, exact_path)
        .respond_with(template)
        .expect(1)
        .mount(server)
        .await;
}

/// Mounts `GET /v1/pets` (no query) answering `template`, expected `times` times.
pub async fn mount_list(server: &MockServer, template: ResponseTemplate, times: u64) {
    api_request("GET", PETS)
        .and(QueryIs(None))
        .respond_with(template)
        .expect(times)
        .mount(server)
        .await;
}

/// Mounts `GET /v1/pets?<query>` answering its template, each expected exactly once, so that
/// one client can meet several responses in a known order.
pub async fn mount_list_queries(
    server: &MockServer,
    cases: impl IntoIterator<Item = (&'static str, ResponseTemplate)>,
) {
    for (query, template) in cases {
        api_request("GET", PETS)
            .and(QueryIs(Some(query)))
            .respond_with(template)
            .expect(1)
            .named(query)
            .mount(server)
            .await;
    }
}

/// The one request the server received.
pub async fn only_request(server: &MockServer) -> Request {
    let mut requests = server
        .received_requests()
        .await
        .expect("request recording is on");
    assert_eq!(requests.len(), 1, "expected exactly one request");
    requests.remove(0)
}

/// The API error inside `error`, or a panic naming what it was instead.
pub fn api_error(error: &Error) -> &ApiError {
    error
        .api_error()
        .unwrap_or_else(|| panic!("expected an API error, got {error:?}"))
}

/// A `/v1` base URL on a loopback port nothing listens on: bound and never listened on, for the
/// rest of the test process, so that connecting is refused and no server a test starts takes
/// the port (released at once, it was taken by a sandbox and answered 401).
pub fn refused_base_url() -> String {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind(([127, 0, 0, 1], 0).into())
        .expect("bind an ephemeral port");
    let port = socket.local_addr().expect("local address").port();
    std::mem::forget(socket);
    format!("http://127.0.0.1:{port}/v1")
}

/// Asserts that `error` is the API error with this status and error object.
#[track_caller]
pub fn assert_api_error(error: &Error, status: u16, code: &str, message: &str) {
    let status = StatusCode::from_u16(status).expect("a valid status");
    let api = api_error(error);
    assert_eq!(
        api.status(),
        status,
        "expected the status of the API error, got {error:?}"
    );
    assert_eq!(
        error.status(),
        Some(status),
        "expected the status of the error"
    );
    assert_eq!(
        api.code(),
        Some(code),
        "expected the code of the error object"
    );
    assert_eq!(
        api.message(),
        Some(message),
        "expected the message of the error object"
    );
    assert_eq!(
        api.body_snippet(),
        None,
        "expected no snippet for an error object"
    );
    assert_eq!(api.attempts(), 1, "expected one attempt");
}

/// A server for what wiremock cannot send (a chunked body, a body cut short): it answers one
/// connection's request with `response`, byte for byte, and closes. Its `/v1` base URL.
pub async fn raw_server(response: &'static [u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buffer = [0; 1024];
        while !head.windows(4).any(|window| window == b"\r\n\r\n") {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(read) => head.extend_from_slice(&buffer[..read]),
            }
        }
        let _ = stream.write_all(response).await;
        let _ = stream.shutdown().await;
    });
    format!("http://127.0.0.1:{port}/v1")
}

/// A builder for a client of `base_url` for tests under a paused clock: no per-attempt timeout
/// and no idle-pool timer, since a paused clock jumps to the next timer whenever the runtime
/// waits for I/O.
pub fn paused_builder(
    base_url: impl AsRef<str>,
    key: &str,
    policy: RetryPolicy,
) -> PetStoreClientBuilder {
    let http = reqwest::Client::builder()
        .pool_idle_timeout(None)
        .build()
        .expect("a reqwest client");
    PetStoreClient::builder()
        .base_url(base_url)
        .api_key(key)
        .http_client(http)
        .attempt_timeout(None)
        .retry_policy(policy)
}

/// The Unix time every sandbox of the tests starts at: 2027-01-15T08:00:00Z, the start of a
/// minute, so that a test's windows never depend on the second of the minute it happens to
/// run in.
pub const CLOCK_START_UNIX: u64 = 1_800_000_000;

/// A sandbox builder whose clock starts at [`CLOCK_START_UNIX`].
pub fn sandbox_builder() -> petstore_sandbox::SandboxBuilder {
    let start = std::time::UNIX_EPOCH + std::time::Duration::from_secs(CLOCK_START_UNIX);
    petstore_sandbox::Sandbox::builder().clock_start(start)
}

/// A sandbox with the default keys whose clock starts at [`CLOCK_START_UNIX`].
pub async fn sandbox() -> petstore_sandbox::Sandbox {
    sandbox_builder()
        .start()
        .await
        .expect("the sandbox starts on a loopback port")
}

/// Creates `n` pets at once, each in its own task; every call must succeed.
pub async fn create_concurrently(client: &PetStoreClient, n: usize) {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .create_pet(petstore_client::NewPet::new(format!("pet {i}"), 1))
                    .send()
                    .await
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

/// A client of a sandbox for tests under a paused clock (see [`paused_builder`]).
pub fn sandbox_client(
    sandbox: &petstore_sandbox::Sandbox,
    key: &str,
    policy: RetryPolicy,
) -> PetStoreClientBuilder {
    paused_builder(sandbox.base_url(), key, policy)
}

/// A sandbox whose key `small` has `plan`, and the key's sole user: a client with a
/// rate-limit state of its own, `Pacing::Sole` and no retries.
pub async fn sole_user_of(
    plan: petstore_sandbox::Plan,
) -> (petstore_sandbox::Sandbox, PetStoreClient) {
    let sandbox = sandbox_builder().key("small", plan).start().await.unwrap();
    let client = sandbox_client(&sandbox, "small", RetryPolicy::none())
        .rate_limit_scope(petstore_client::RateLimitScope::Client)
        .pacing(petstore_client::Pacing::Sole)
        .build()
        .unwrap();
    (sandbox, client)
}

/// What a test captured of the `tracing` output of its own thread.
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

std::thread_local! {
    /// The capture of the test running on this thread, and the most verbose level it keeps.
    static CAPTURE: std::cell::RefCell<Option<(Captured, tracing::Level)>> =
        const { std::cell::RefCell::new(None) };
}

/// Writes an event into the capture of the thread that emitted it.
struct ToThreadCapture;

/// One event's output on its way to a capture.
struct CaptureWriter(Option<Captured>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Some(captured) = &self.0 {
            captured.0.lock().unwrap().extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for ToThreadCapture {
    type Writer = CaptureWriter;

    fn make_writer(&'a self) -> Self::Writer {
        CaptureWriter(
            CAPTURE.with_borrow(|capture| capture.as_ref().map(|(captured, _)| captured.clone())),
        )
    }
}

/// Whether this thread captures events of `meta`'s level.
fn captured_here(meta: &tracing::Metadata<'_>) -> bool {
    CAPTURE.with_borrow(|capture| {
        capture
            .as_ref()
            .is_some_and(|(_, level)| meta.level() <= level)
    })
}

/// Sets, once for the whole test binary, the global subscriber that writes each event into
/// the capture of the thread that emitted it. Call it first thing in every test of a binary
/// that captures logs, so that no callsite is registered before it.
///
/// A subscriber set per test with `set_default` races: `tracing` caches each callsite's
/// interest for the whole process, computed while one dispatcher is registered from the
/// default of whichever thread reaches the callsite first, and a sibling test's thread with no
/// subscriber caches "never", so the capturing test sees nothing (tokio-rs/tracing#2874 and
/// the many flaky suites it caused). With one global default every thread sees the same
/// subscriber, and its filter answers "sometimes" and decides per event by the thread's
/// capture, so no interest is ever cached as "never". The filter is a dynamic one:
/// `filter_fn` caches each callsite's interest from the first thread that reaches it, so an
/// event first logged by a test that captures nothing (a WARN of Redis frozen) was never
/// captured again.
pub fn install_log_capture() {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(ToThreadCapture)
            .with_ansi(false)
            .with_filter(tracing_subscriber::filter::dynamic_filter_fn(|meta, _| {
                captured_here(meta)
            }));
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("no other global subscriber in the test binary");
    });
}

/// Ends a capture when dropped.
pub struct CaptureGuard(());

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURE.set(None);
    }
}

/// Captures this thread's `tracing` output up to `level`, until the guard is dropped. Call it
/// first thing in the test (see [`install_log_capture`]).
pub fn capture(level: tracing::Level) -> (Captured, CaptureGuard) {
    let captured = Captured::default();
    capture_into(&captured, level);
    (captured, CaptureGuard(()))
}

/// Captures this thread's `tracing` output up to `level` into `captured` for the thread's
/// whole life: for the worker threads of a runtime, from `on_thread_start`.
pub fn capture_into(captured: &Captured, level: tracing::Level) {
    install_log_capture();
    CAPTURE.set(Some((captured.clone(), level)));
}
