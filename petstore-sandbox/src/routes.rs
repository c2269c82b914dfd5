//! The API as the specification states it, behind authentication, rate limiting and faults.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::header::{
    AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, DATE, RETRY_AFTER, USER_AGENT,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Router, middleware, routing};
use bytes::Bytes;
use chrono::TimeDelta;
use http_body::Frame;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::faults::{FaultKind, Faults, Route};
use super::limits::{Headers, Limiter, UnixClock, Verdict, shift};
use super::{LoggedRequest, QuotaFields, RequestLog, ShownQuota};
use petstore_client::{CategoryId, Pet, PetId, PetStatus};

/// The removal date of `getPet`, as the specification gives it.
const SUNSET: &str = "Thu, 05 Dec 2030 00:00:00 GMT";
const NAME_MAX_CHARS: usize = 100;

/// Everything the routes share.
#[derive(Debug)]
pub(super) struct Shared {
    /// The sandbox's wall clock, also the limiter's.
    pub(super) clock: UnixClock,
    /// Each backend's clock minus the limiter's; at least one.
    pub(super) backends: Vec<TimeDelta>,
    /// The backend to answer the next request, counting up (round-robin).
    pub(super) next_backend: AtomicUsize,
    pub(super) limiter: Mutex<Limiter>,
    pub(super) faults: Mutex<Faults>,
    pub(super) catalogue: Mutex<Catalogue>,
    pub(super) log: Mutex<RequestLog>,
    pub(super) max_body_bytes: usize,
    pub(super) quota_fields: QuotaFields,
}

#[derive(Debug, Default)]
pub(super) struct Catalogue {
    pets: BTreeMap<i64, Pet>,
    last_id: i64,
}

impl Shared {
    /// The backend that answers the next request, in turn.
    fn take_backend(&self) -> usize {
        self.next_backend.fetch_add(1, Ordering::Relaxed) % self.backends.len().max(1)
    }

    /// Now on the clock of `backend`, since the unix epoch.
    fn backend_now(&self, backend: usize) -> Duration {
        let offset = self
            .backends
            .get(backend)
            .copied()
            .unwrap_or_else(TimeDelta::zero);
        shift(self.clock.now(), offset)
    }
}

impl Catalogue {
    pub(super) fn add(&mut self, name: String, category_id: CategoryId, status: PetStatus) -> Pet {
        self.last_id += 1;
        let pet = Pet::new(self.last_id, name, category_id).status(status);
        self.pets.insert(self.last_id, pet.clone());
        pet
    }
}

/// Lets a handler close its connection without answering.
#[derive(Debug, Clone)]
pub(super) struct ConnectionKill(pub(super) Arc<Notify>);

/// Locks a mutex; the sandbox never panics while holding one, but a poisoned lock must not
/// take the server down either.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/pets", routing::get(list_pets).post(create_pet))
        .route("/v1/pets/{pet_id}", routing::get(get_pet))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|method: Method| async move {
            let message = format!("{method} is not allowed on this route");
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                message,
            )
        })
        .layer(middleware::from_fn_with_state(shared.clone(), gate))
        .with_state(shared)
}

/// The error object of the specification.
pub(super) fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "code": code, "message": message.into(), "status": status.as_u16() });
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn json_response(status: StatusCode, value: &impl serde::Serialize) -> Response {
    match serde_json::to_string(value) {
        Ok(body) => (status, [(CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            e.to_string(),
        ),
    }
}

fn route_of(method: &Method, path: &str) -> Option<Route> {
    let rest = path.strip_prefix("/v1/pets")?;
    match (method, rest) {
        (&Method::GET, "" | "/") => Some(Route::ListPets),
        (&Method::POST, "" | "/") => Some(Route::CreatePet),
        (&Method::GET, id) if id.len() > 1 && !id[1..].contains('/') => Some(Route::GetPet),
        _ => None,
    }
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, key) = value.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty()).then(|| key.trim().to_owned())
}

/// Authentication, rate limiting, faults, the rate-limit headers, `Date` and the request log,
/// around every route. The request is answered by the next backend in turn, whose clock
/// writes `Date`.
async fn gate(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let arrived = Instant::now();
    let backend = shared.take_backend();
    let route = route_of(request.method(), request.uri().path());
    let key = bearer(request.headers());
    let user_agent = request
        .headers()
        .get(USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut logged = Logged(
        &shared.log,
        LoggedRequest {
            at: arrived,
            server_time: UNIX_EPOCH + shared.clock.now(),
            route,
            key: key.clone(),
            status: None,
            user_agent,
            backend,
            during_cooldown: false,
            told_to_wait_until: None,
            injected: false,
            answered_at: None,
            quota: None,
            left: None,
            refills_at: None,
        },
    );
    let entry = &mut logged.1;
    let mut response = admit(&shared, route, key.as_deref(), request, next, entry).await;
    entry.status = Some(response.status().as_u16());
    entry.answered_at = Some(Instant::now());
    drop(logged);
    let date = http_date(shared.backend_now(backend));
    response.headers_mut().insert(DATE, date);
    response
}

/// A request's log entry, logged when it is answered, or without a status when its connection
/// closes first (the client gave up, or a fault dropped it): the limiter counted it either way.
struct Logged<'a>(&'a Mutex<RequestLog>, LoggedRequest);

impl Drop for Logged<'_> {
    fn drop(&mut self) {
        lock(self.0).push(self.1.clone());
    }
}

/// A time since the unix epoch as an HTTP-date, truncated to the second (hyper adds its own
/// `Date`, from the system time, only to a response without one).
fn http_date(unix: Duration) -> HeaderValue {
    let now = UNIX_EPOCH + Duration::from_secs(unix.as_secs());
    HeaderValue::from_str(&httpdate::fmt_http_date(now))
        .unwrap_or_else(|_| HeaderValue::from_static("Thu, 01 Jan 1970 00:00:00 GMT"))
}

async fn admit(
    shared: &Shared,
    route: Option<Route>,
    key: Option<&str>,
    request: Request,
    next: Next,
    entry: &mut LoggedRequest,
) -> Response {
    let verdict = {
        let mut limiter = lock(&shared.limiter);
        match key.filter(|key| limiter.knows(key)) {
            Some(key) => {
                let verdict = limiter.check(key);
                if let Some((left, refills)) = limiter.left(key) {
                    entry.left = Some(left);
                    // The limiter's clock read at arrival, so the refill is that far off.
                    let unix = entry
                        .server_time
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default();
                    entry.refills_at = refills.map(|at| entry.at + at.saturating_sub(unix));
                }
                verdict
            }
            None => None,
        }
    };
    let headers = match verdict {
        None => {
            let anonymous = lock(&shared.limiter).anonymous();
            let message = if key.is_some() {
                "the API key is not valid"
            } else {
                "a bearer API key is required"
            };
            return with_quota(
                error(StatusCode::UNAUTHORIZED, "unauthorized", message),
                anonymous,
                shared,
                entry,
            );
        }
        Some(Verdict::Allowed(headers)) => headers,
        Some(Verdict::Limited {
            headers,
            retry_after,
            during_cooldown,
        }) => {
            entry.during_cooldown = during_cooldown;
            entry.told_to_wait_until = Some(entry.at + Duration::from_secs(retry_after));
            let response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "rate limit exceeded",
            );
            return with_quota(
                with_retry_after(response, retry_after),
                headers,
                shared,
                entry,
            );
        }
        Some(Verdict::Banned {
            headers,
            retry_after,
        }) => {
            entry.during_cooldown = true;
            entry.told_to_wait_until = Some(entry.at + Duration::from_secs(retry_after));
            let message = "the API key is banned for calling on after a 429";
            let response = error(StatusCode::TOO_MANY_REQUESTS, "key_banned", message);
            return with_quota(
                with_retry_after(response, retry_after),
                headers,
                shared,
                entry,
            );
        }
    };
    let (latency, failure) = lock(&shared.faults).draw(route);
    if let Some(delay) = latency {
        tokio::time::sleep(delay).await;
    }
    let Some(fault) = failure else {
        return with_quota(next.run(request).await, headers, shared, entry);
    };
    entry.injected = true;
    if let (Some(wait), Some(key)) = (fault.kind.cooldown(), key) {
        // An injected 429 acts like a real one: the key must wait.
        lock(&shared.limiter).cool_down(key, wait);
        entry.told_to_wait_until = Some(Instant::now() + wait);
    }
    let response = match fault.kind {
        FaultKind::Status {
            status,
            retry_after,
            cut_body,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = error(status, status_code_name(status), "injected fault");
            if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
                response.headers_mut().insert(RETRY_AFTER, value);
            }
            if cut_body {
                truncate(response).await
            } else {
                response
            }
        }
        FaultKind::NonJsonBody { status } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            let page = "<html><body><h1>Bad Gateway</h1><p>upstream unavailable</p></body></html>";
            (status, [(CONTENT_TYPE, "text/html")], page).into_response()
        }
        FaultKind::TruncatedBody => truncate(next.run(request).await).await,
        FaultKind::DropConnection => {
            if let Some(kill) = request.extensions().get::<ConnectionKill>() {
                // The entry is logged as the connection closes.
                kill.0.notify_one();
                std::future::pending::<()>().await;
            }
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                "connection not droppable",
            )
        }
        FaultKind::Latency(_) => next.run(request).await,
    };
    if fault.rate_limit_headers {
        with_quota(response, headers, shared, entry)
    } else {
        response
    }
}

fn status_code_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        429 => "rate_limited",
        502 => "bad_gateway",
        503 => "service_unavailable",
        504 => "gateway_timeout",
        _ => "internal_error",
    }
}

/// Writes `quota` on the response in the sandbox's [`QuotaFields`], and records in `entry` what
/// it reported.
fn with_quota(
    mut response: Response,
    quota: Headers,
    shared: &Shared,
    entry: &mut LoggedRequest,
) -> Response {
    let shown = match shared.quota_fields {
        QuotaFields::Absent => false,
        QuotaFields::OnlyOn429 => response.status() == StatusCode::TOO_MANY_REQUESTS,
        _ => true,
    };
    if !shown {
        return response;
    }
    entry.quota = Some(ShownQuota {
        limit: quota.limit,
        remaining: quota.remaining,
        reset: quota.reset,
    });
    let headers = response.headers_mut();
    let x_ratelimit = [
        ("x-ratelimit-limit", quota.limit),
        ("x-ratelimit-remaining", quota.remaining),
        ("x-ratelimit-reset", quota.reset),
    ];
    let until_reset = quota.reset.saturating_sub(shared.clock.now().as_secs());
    match shared.quota_fields {
        QuotaFields::XRateLimit | QuotaFields::OnlyOn429 | QuotaFields::Absent => {
            for (name, value) in x_ratelimit {
                headers.insert(name, HeaderValue::from(value));
            }
        }
        QuotaFields::RepeatedRemaining => {
            for (name, value) in x_ratelimit {
                headers.insert(name, HeaderValue::from(value));
            }
            // A gateway's own line first, which never falls.
            headers.insert("x-ratelimit-remaining", HeaderValue::from(quota.limit));
            headers.append("x-ratelimit-remaining", HeaderValue::from(quota.remaining));
        }
        QuotaFields::NegativeRemaining => {
            for (name, value) in x_ratelimit {
                headers.insert(name, HeaderValue::from(value));
            }
            headers.insert("x-ratelimit-remaining", HeaderValue::from_static("-1"));
        }
        QuotaFields::ResetInSeconds => {
            for (name, value) in x_ratelimit {
                headers.insert(name, HeaderValue::from(value));
            }
            headers.insert("x-ratelimit-reset", HeaderValue::from(until_reset));
        }
        QuotaFields::Unlimited => {
            for (name, value) in x_ratelimit {
                headers.insert(name, HeaderValue::from(value));
            }
            for name in ["x-ratelimit-limit", "x-ratelimit-remaining"] {
                headers.insert(name, HeaderValue::from(u64::MAX));
            }
        }
        QuotaFields::Ietf => {
            let field = format!("\"window\";r={};t={until_reset}", quota.remaining);
            let policy = format!("\"window\";q={}", quota.limit);
            for (name, value) in [("ratelimit", field), ("ratelimit-policy", policy)] {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    headers.insert(name, value);
                }
            }
        }
    }
    response
}

fn with_retry_after(mut response: Response, seconds: u64) -> Response {
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// A body that ends before the `Content-Length` it was sent with.
///
/// Between its one frame and its early end it is pending once: hyper flushes what it holds
/// (the head and the frame) while a body is pending, whereas a body that ends short makes it
/// drop the connection with its buffer unsent.
struct Truncated {
    data: Option<Bytes>,
    flushed: bool,
}

impl http_body::Body for Truncated {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if !self.flushed {
            self.flushed = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(None)
    }
}

async fn truncate(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(full) = axum::body::to_bytes(body, usize::MAX).await else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "could not truncate",
        );
    };
    parts
        .headers
        .insert(CONTENT_LENGTH, HeaderValue::from(full.len()));
    Response::from_parts(
        parts,
        Body::new(Truncated {
            data: Some(full.slice(..full.len() / 2)),
            flushed: false,
        }),
    )
}

fn invalid(message: impl Into<String>) -> Response {
    error(StatusCode::BAD_REQUEST, "invalid_request", message)
}

async fn list_pets(State(shared): State<Arc<Shared>>, uri: Uri) -> Response {
    let mut limit = 20;
    let mut status = None;
    for (name, value) in url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()) {
        match &*name {
            "limit" => match value.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => limit = n,
                _ => {
                    return invalid(format!(
                        "`limit` must be an integer from 1 to 100, not `{value}`"
                    ));
                }
            },
            "status" => match value.parse::<PetStatus>() {
                Ok(s) => status = Some(s),
                Err(e) => return invalid(e.to_string()),
            },
            _ => {}
        }
    }
    let catalogue = lock(&shared.catalogue);
    let pets: Vec<&Pet> = catalogue
        .pets
        .values()
        .filter(|pet| status.is_none() || pet.status == status)
        .take(limit)
        .collect();
    json_response(StatusCode::OK, &pets)
}

async fn create_pet(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Body) -> Response {
    let too_large = || {
        let message = format!("the body exceeds {} bytes", shared.max_body_bytes);
        error(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|len| len > shared.max_body_bytes) {
        return too_large();
    }
    let is_json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !is_json {
        let message = "the body must be JSON, sent with `Content-Type: application/json`";
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            message,
        );
    }
    let Ok(bytes) = axum::body::to_bytes(body, shared.max_body_bytes).await else {
        return too_large();
    };
    let fields = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(fields)) => fields,
        Ok(_) => return invalid("the body must be a JSON object"),
        Err(e) => return invalid(format!("the body is not valid JSON: {e}")),
    };
    let name = match fields.get("name") {
        Some(Value::String(name)) if name.trim().is_empty() => {
            return invalid("`name` must not be empty");
        }
        Some(Value::String(name)) if name.chars().count() > NAME_MAX_CHARS => {
            return invalid(format!(
                "`name` must be at most {NAME_MAX_CHARS} characters"
            ));
        }
        Some(Value::String(name)) => name.clone(),
        Some(_) => return invalid("`name` must be a string"),
        None => return invalid("`name` is required"),
    };
    let category_id = match fields.get("categoryId") {
        Some(value) => match value.as_i64() {
            Some(id) => CategoryId::new(id),
            None => return invalid("`categoryId` must be an int64 integer"),
        },
        None => return invalid("`categoryId` is required"),
    };
    let status = match fields.get("status") {
        None | Some(Value::Null) => PetStatus::Available,
        Some(Value::String(s)) => match s.parse::<PetStatus>() {
            Ok(status) => status,
            Err(e) => return invalid(e.to_string()),
        },
        Some(_) => return invalid("`status` must be a string"),
    };
    let pet = lock(&shared.catalogue).add(name, category_id, status);
    json_response(StatusCode::CREATED, &pet)
}

async fn get_pet(State(shared): State<Arc<Shared>>, Path(raw_id): Path<String>) -> Response {
    let mut response = match raw_id.parse::<i64>() {
        Err(_) => invalid(format!("`petId` must be an int64 integer, not `{raw_id}`")),
        Ok(id) => match lock(&shared.catalogue).pets.get(&id) {
            Some(pet) => json_response(StatusCode::OK, pet),
            None => error(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("pet {} does not exist", PetId::new(id)),
            ),
        },
    };
    response
        .headers_mut()
        .insert("sunset", HeaderValue::from_static(SUNSET));
    response
}

/// Adds the connection's kill switch to every request of one connection.
pub(super) fn for_connection(router: &Router, kill: Arc<Notify>) -> Router {
    router.clone().layer(Extension(ConnectionKill(kill)))
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use crate::{Fault, Plan, QuotaFields, Sandbox, ShownQuota};

    /// Two list requests on a plan of one a minute: the head of each answer, lowercased.
    async fn two_answers(fields: QuotaFields) -> (Vec<String>, Sandbox) {
        let plan = Plan::Enterprise {
            per_minute: 1,
            per_day: 1_000,
        };
        let sandbox = Sandbox::builder()
            .key("one-a-minute", plan)
            .quota_fields(fields)
            .start()
            .await
            .expect("the sandbox starts");
        let mut heads = Vec::new();
        for _ in 0..2 {
            heads.push(list_head(&sandbox, "one-a-minute").await);
        }
        (heads, sandbox)
    }

    /// The head of the answer to a list request with `key`, lowercased.
    async fn list_head(sandbox: &Sandbox, key: &str) -> String {
        let addr = sandbox
            .base_url()
            .socket_addrs(|| None)
            .expect("an address")[0];
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .expect("a connection");
        let request = format!(
            "GET /v1/pets HTTP/1.1\r\nHost: sandbox\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("sent");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        let head = answer.split("\r\n\r\n").next().unwrap_or_default();
        head.to_ascii_lowercase()
    }

    #[tokio::test]
    async fn the_log_tells_an_injected_429_from_the_limiters_own() {
        let plan = Plan::Enterprise {
            per_minute: 5,
            per_day: 1_000,
        };
        let sandbox = Sandbox::builder()
            .key("five-a-minute", plan)
            .start()
            .await
            .expect("the sandbox starts");
        sandbox.inject(Fault::status(429).retry_after(30).times(1));
        for _ in 0..2 {
            list_head(&sandbox, "five-a-minute").await;
        }
        let seen: Vec<(Option<u16>, bool, Option<u64>)> = (sandbox.request_log().iter())
            .map(|request| (request.status, request.injected, request.left))
            .collect();
        // The injected 429 was counted, and its wait refused the next request.
        assert_eq!(
            seen,
            [(Some(429), true, Some(4)), (Some(429), false, Some(4))]
        );
    }

    fn has_quota(head: &str) -> bool {
        head.contains("x-ratelimit-") || head.contains("\nratelimit")
    }

    #[tokio::test]
    async fn quota_only_on_429_leaves_successes_without_it() {
        let (heads, sandbox) = two_answers(QuotaFields::OnlyOn429).await;
        assert!(heads[0].starts_with("http/1.1 200"), "{}", heads[0]);
        assert!(!has_quota(&heads[0]), "{}", heads[0]);
        assert!(heads[1].starts_with("http/1.1 429"), "{}", heads[1]);
        assert!(
            heads[1].contains("x-ratelimit-remaining: 0"),
            "{}",
            heads[1]
        );
        assert!(heads[1].contains("retry-after: "), "{}", heads[1]);
        let log = sandbox.request_log();
        assert_eq!(log[0].quota, None);
        let shown = log[1].quota.expect("the 429's quota is logged");
        assert_eq!((shown.limit, shown.remaining), (1, 0));
    }

    #[tokio::test]
    async fn absent_quota_fields_leave_only_retry_after() {
        let (heads, sandbox) = two_answers(QuotaFields::Absent).await;
        assert!(heads.iter().all(|head| !has_quota(head)), "{heads:?}");
        assert!(heads[1].starts_with("http/1.1 429"), "{}", heads[1]);
        assert!(heads[1].contains("retry-after: "), "{}", heads[1]);
        let log = sandbox.request_log();
        assert!(log.iter().all(|request| request.quota.is_none()));
        assert!(log.iter().all(|request| request.answered_at.is_some()));
    }

    #[tokio::test]
    async fn the_log_keeps_the_quota_each_answer_showed() {
        let (heads, sandbox) = two_answers(QuotaFields::XRateLimit).await;
        assert!(heads.iter().all(|head| has_quota(head)), "{heads:?}");
        let remaining: Vec<Option<u64>> = sandbox
            .request_log()
            .iter()
            .map(|request| request.quota.map(|ShownQuota { remaining, .. }| remaining))
            .collect();
        assert_eq!(remaining, [Some(0), Some(0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn the_log_keeps_what_was_left_and_when_it_refills_whatever_the_answers_show() {
        let (_, sandbox) = two_answers(QuotaFields::Absent).await;
        let log = sandbox.request_log();
        let left: Vec<Option<u64>> = log.iter().map(|request| request.left).collect();
        assert_eq!(left, [Some(0), Some(0)]);
        for request in &log {
            let refills_at = request.refills_at.expect("a spent window refills");
            let server = request.server_time.duration_since(std::time::UNIX_EPOCH);
            let to_the_minute = 60 - server.expect("after 1970").as_secs() % 60;
            let wait = refills_at - request.at;
            assert!(
                wait <= std::time::Duration::from_secs(to_the_minute) && !wait.is_zero(),
                "{wait:?} to the minute's end, {to_the_minute} s by the clock"
            );
        }
    }
}
