//! The one execute path every operation goes through: admission (cooldown gate and quota
//! pacer), the request with its headers, the bounded body read, quota and deprecation
//! bookkeeping, classification, retries, and decoding.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use chrono::{DateTime, SecondsFormat, Utc};
use http::{HeaderMap, Method, StatusCode};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tracing::Instrument;
use url::Url;

use crate::call_info::{CallInfo, HoldCause};
use crate::client::{Inner, PetStoreClient};
use crate::clock;
use crate::error::{ApiError, Error, Result, ThrottleCause, TimeoutKind};
use crate::headers::{Deprecation, Head};
use crate::rate::{HeadReport, Held, HeldBy, Hold, Permit, Waited};
use crate::response::Response;
use crate::retry::{Action, Failure, RetryPolicy, Schedule, classify_failure, classify_status};

/// The specification's operations, and requests to endpoints the crate does not wrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    ListPets,
    CreatePet,
    GetPet,
    /// [`PetStoreClient::request`]: any method and path under the base URL.
    Request,
}

impl Operation {
    pub(crate) const COUNT: usize = 4;

    /// The operation name the specification uses (`request` for the others).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::ListPets => "listPets",
            Self::CreatePet => "createPet",
            Self::GetPet => "getPet",
            Self::Request => "request",
        }
    }

    /// The method of [`PetStoreClient`] that makes it.
    fn method(self) -> &'static str {
        match self {
            Self::ListPets => "PetStoreClient::list_pets",
            Self::CreatePet => "PetStoreClient::create_pet",
            Self::GetPet => "PetStoreClient::get_pet",
            Self::Request => "PetStoreClient::request",
        }
    }
}

/// One call, as a request builder describes it.
pub(crate) struct Call {
    pub(crate) operation: Operation,
    pub(crate) method: Method,
    pub(crate) target: Target,
    pub(crate) body: Option<Bytes>,
    pub(crate) retry: Option<RetryPolicy>,
}

/// Where a call goes.
pub(crate) enum Target {
    /// The client's pets collection, the same URL for each call: not copied into every one.
    Pets,
    /// A URL of the call's own.
    Url(Url),
}

impl Target {
    fn url<'a>(&'a self, client: &'a Inner) -> &'a Url {
        match self {
            Self::Pets => &client.pets_url,
            Self::Url(url) => url,
        }
    }
}

/// A response, read whole (up to the body limit), with what its head said of the rate limits.
struct Exchange {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    truncated: bool,
    report: HeadReport,
    deprecation: Option<Deprecation>,
}

/// Error bodies are only read for their error object or a snippet; more is not needed.
const ERROR_BODY_CAP: usize = 64 * 1024;

impl PetStoreClient {
    /// Sends the call and decodes the success body as `T`.
    ///
    /// Not `async fn`s, these three: an `async fn` keeps its arguments twice in its future,
    /// and every layer is one more copy of the future as it moves.
    pub(crate) fn execute<T: DeserializeOwned>(
        &self,
        call: Call,
    ) -> impl Future<Output = Result<Response<T>>> {
        let operation = call.operation;
        self.execute_with(call, move |status, body| decode(operation, status, body))
    }

    /// Sends the call and keeps the success body as it came.
    pub(crate) fn execute_bytes(
        &self,
        call: Call,
    ) -> impl Future<Output = Result<Response<Vec<u8>>>> {
        self.execute_with(call, |_, body| Ok(body.to_vec()))
    }

    #[allow(clippy::manual_async_fn)] // an `async fn` would keep `call` twice, as said above
    fn execute_with<V>(
        &self,
        call: Call,
        value: impl FnOnce(StatusCode, &[u8]) -> Result<V>,
    ) -> impl Future<Output = Result<Response<V>>> {
        async move {
            // OpenTelemetry's HTTP client names, so that `tracing-opentelemetry` exports them as
            // they are; numbers as `i64`, which it exports as integers (a `u64` it exports as a
            // string).
            let url = call.target.url(&self.inner);
            let span = tracing::debug_span!(
                "petstore_client",
                petstore.operation = call.operation.name(),
                http.request.method = %call.method,
                url.path = url.path(),
                server.address = url.host_str(),
                server.port = url.port_or_known_default().map(i64::from),
            );
            // One reading of the clock for the call's start, its deadline and its wait limit.
            let start = Instant::now();
            let mut tally = Tally::default();
            let limit = self.inner.call_timeout;
            let deadline = limit.map(|limit| clock::after_from(start, limit));
            let run = self.run(&call, &mut tally, start, deadline);
            let outcome = match (limit, deadline) {
                (Some(limit), Some(deadline)) => tokio::time::timeout_at(deadline, run)
                    .instrument(span)
                    .await
                    .unwrap_or_else(|_| Err(Error::timeout(TimeoutKind::Call, Some(limit)))),
                _ => run.instrument(span).await,
            };
            // The call's future is gone, ended or timed out: what it counted is readable.
            let info = tally.info(start.elapsed());
            #[cfg(feature = "metrics")]
            self.inner.meter.call(call.operation.name(), &info);
            outcome
                .and_then(|exchange| self.finish(call.operation, exchange, info, value))
                .map_err(|e| e.with_call(info))
        }
    }

    /// Sends the call, which started at `start`, until it succeeds or the retry policy gives
    /// up, counting what it does in `tally`.
    async fn run(
        &self,
        call: &Call,
        tally: &mut Tally,
        start: Instant,
        deadline: Option<Instant>,
    ) -> Result<Exchange> {
        let inner = &self.inner;
        let policy = call.retry.as_ref().unwrap_or(&inner.retry);
        let operation = call.operation;
        let method = &call.method;
        // Made at the first retry: most calls make none.
        let mut delays = None;
        // The call waits for the rate limit at most `max_server_wait` in all, and never past
        // its own deadline.
        let most = clock::after_from(start, policy.max_server_wait());
        let give_up_at = deadline.map_or(most, |deadline| deadline.min(most));
        loop {
            let admitted = match inner.rate.try_admit() {
                Some(admitted) => Ok(admitted),
                None => inner.rate.admit(operation.name(), give_up_at).await,
            };
            tally.waited.add(
                admitted
                    .as_ref()
                    .map_or_else(|held| held.waited, |(_, w)| *w),
            );
            tally.attempts += u32::from(admitted.is_ok());
            let attempt = tally.attempts;
            // Taken apart at once: kept whole, the admission would stay in the future's state
            // while the attempt runs.
            let permit = match admitted {
                Ok((permit, _)) => permit,
                Err(held) => return Err(throttled(held)),
            };
            // OpenTelemetry's name: the resends of one request count from 1, and the first
            // sending has none.
            let span = tracing::debug_span!(
                "attempt",
                http.request.resend_count = (attempt > 1).then(|| i64::from(attempt - 1)),
                http.response.status_code = tracing::field::Empty
            );
            #[cfg(feature = "metrics")]
            let sent = Instant::now();
            let outcome = self
                .attempt(call, permit, policy)
                .instrument(span.clone())
                .await;
            #[cfg(feature = "metrics")]
            self.meter_request(call, &outcome, sent.elapsed());
            if let Ok(exchange) = &outcome
                && exchange.report.clock_offset.is_some()
            {
                tally.clock_offset = exchange.report.clock_offset;
            }
            let (floor, error) = match self.judge(method, outcome, &span) {
                Ok(exchange) => return Ok(exchange),
                Err((Action::Retry { floor }, error)) => (floor, error),
                Err((Action::Finish, error)) => return Err(error),
            };
            let Some((delay, source)) = retry_delay(
                policy,
                floor,
                (&mut delays, &inner.retried),
                give_up_at,
                deadline,
            ) else {
                return Err(error);
            };
            // Asked last, so that a retry the call would not make spends nothing.
            if !self.retry_allowed(policy, operation, attempt, &error, (delay, source)) {
                return Err(error);
            }
            tokio::time::sleep(delay).await;
            tally.backoff += delay;
        }
    }

    /// Whether the client's retry budget allows the retry of `attempt` after `delay` (set by
    /// `source`), logged either way.
    fn retry_allowed(
        &self,
        policy: &RetryPolicy,
        operation: Operation,
        attempt: u32,
        error: &Error,
        (delay, source): (Duration, &'static str),
    ) -> bool {
        if !self.inner.retry_window.take_retry(policy.retry_budget()) {
            tracing::info!(
                operation = operation.name(),
                attempt,
                reason = %error,
                "not retrying: the client's retry budget is spent"
            );
            return false;
        }
        tracing::info!(
            operation = operation.name(),
            attempt,
            reason = %error,
            delay = ?delay,
            delay_source = source,
            "retrying"
        );
        #[cfg(feature = "metrics")]
        self.inner.meter.retry(operation.name());
        true
    }

    /// What an attempt's outcome means for the call: the exchange when it succeeded, else what
    /// to do and the error the call ends with if it does not retry. An answer that needs no
    /// retry adds to the retry budget.
    fn judge(
        &self,
        method: &Method,
        outcome: Result<Exchange, Failure>,
        span: &tracing::Span,
    ) -> Result<Exchange, (Action, Error)> {
        let exchange = match outcome {
            Ok(exchange) => exchange,
            Err(failure) => return Err((classify_failure(method, &failure), failure.error)),
        };
        let status = exchange.status;
        span.record("http.response.status_code", i64::from(status.as_u16()));
        if status.is_success() {
            self.inner.retry_window.answered();
            return Ok(exchange);
        }
        let report = exchange.report;
        let action = classify_status(method, status, report.quiet, report.quota);
        // An answer not worth a retry (a 404) shows the service working, as a success does.
        if action == Action::Finish {
            self.inner.retry_window.answered();
        }
        let error =
            ApiError::from_response(status, &exchange.body, report.quota, report.retry_after);
        Err((action, Error::from(error).masked(self.inner.headers.key())))
    }

    /// One request and its whole response, within the per-attempt timeout. The permit is
    /// reported as soon as the response head arrives, before the body is read, so that a body
    /// that fails cannot lose the quota or the wait the head carried; dropped before then (the
    /// attempt timed out, the call was cancelled), it counts the request as spent.
    async fn attempt(
        &self,
        call: &Call,
        permit: Permit<'_>,
        policy: &RetryPolicy,
    ) -> Result<Exchange, Failure> {
        let inner = &self.inner;
        let url = call.target.url(inner);
        // A closure, so that each branch below makes the future where it runs it: a future
        // made first and then moved into `timeout` keeps room for both in this one.
        let exchange = move || async move {
            // Built here, so that the future does not keep the request after it is sent.
            let mut request = reqwest::Request::new(call.method.clone(), url.clone());
            *request.headers_mut() = inner.headers.of(call.body.is_some());
            *request.body_mut() = call.body.clone().map(reqwest::Body::from);
            let mut response = match inner.http.execute(request).await {
                Ok(response) => response,
                Err(error) => {
                    let unresolved = error.is_dns();
                    let error = self.transport_error(error, url);
                    if error.is_connect() || matches!(error, Error::Config(_)) {
                        permit.not_sent();
                    }
                    return Err(Failure { error, unresolved });
                }
            };
            let status = response.status();
            let at = Instant::now();
            // One pass over the headers finds every field the client reads. The head is not
            // kept across an await: the future stays smaller.
            let (report, deprecation, tell) = {
                let head = Head::of(response.headers());
                let (report, tell) = permit.heard(status, &head, at, &|n| policy.step(n));
                (report, Deprecation::from_head(&head), tell)
            };
            if let Some(tell) = tell {
                tell.send().await;
            }
            let headers = std::mem::take(response.headers_mut());
            let (body, truncated) = if status.is_success() {
                let cap = inner.max_response_body;
                if response
                    .content_length()
                    .is_some_and(|len| len > cap as u64)
                {
                    return Err(Error::body_too_large(status, cap).into());
                }
                read_body(&mut response, cap)
                    .await
                    .map_err(|e| self.transport_error(e, url))?
            } else {
                // An error body only adds detail to what the head said; one that fails is
                // taken as empty rather than turning a 429 into a connection error.
                let cap = inner.max_response_body.min(ERROR_BODY_CAP);
                read_body(&mut response, cap).await.unwrap_or_default()
            };
            Ok(Exchange {
                status,
                headers,
                body,
                truncated,
                report,
                deprecation,
            })
        };
        match inner.attempt_timeout {
            Some(limit) => tokio::time::timeout(limit, exchange())
                .await
                .unwrap_or_else(|_| Err(Error::timeout(TimeoutKind::Attempt, Some(limit)).into())),
            None => exchange().await,
        }
    }

    /// Records one request's outcome, and what its head said of the rate limits.
    #[cfg(feature = "metrics")]
    fn meter_request(&self, call: &Call, outcome: &Result<Exchange, Failure>, took: Duration) {
        let inner = &self.inner;
        let status = outcome.as_ref().map(|exchange| exchange.status);
        let quota = outcome.as_ref().ok().and_then(|exchange| {
            let report = &exchange.report;
            report.quota.zip(report.window)
        });
        inner.meter.request(
            call.operation.name(),
            &call.method,
            status.map_err(|failure| &failure.error),
            took,
        );
        // A quota whose period was over when it arrived says nothing of a window in force.
        if let Some((quota, length)) = quota {
            inner.meter.quota(quota, length);
        }
        let (instances, store_live, store_lost) = inner.rate.fleet();
        inner.meter.fleet(instances, store_live, store_lost);
    }

    fn finish<V>(
        &self,
        operation: Operation,
        exchange: Exchange,
        call: CallInfo,
        value: impl FnOnce(StatusCode, &[u8]) -> Result<V>,
    ) -> Result<Response<V>> {
        if exchange.truncated {
            return Err(Error::body_too_large(
                exchange.status,
                self.inner.max_response_body,
            ));
        }
        let value = value(exchange.status, &exchange.body)
            .map_err(|error| error.masked(self.inner.headers.key()))?;
        let deprecation = exchange.deprecation;
        if let Some(notice) = &deprecation {
            self.warn_deprecated_once(operation, notice);
        }
        Ok(Response::new(
            value,
            exchange.status,
            exchange.headers,
            exchange.report.quota,
            deprecation,
            call,
        ))
    }

    /// Once per operation per process: a program that builds a client per run or per task
    /// warns once, not every time.
    fn warn_deprecated_once(&self, operation: Operation, notice: &Deprecation) {
        static WARNED: [AtomicBool; Operation::COUNT] =
            [const { AtomicBool::new(false) }; Operation::COUNT];
        if !WARNED[operation as usize].swap(true, Ordering::Relaxed) {
            // An absent date (`None`) records no field at all.
            tracing::warn!(
                operation = operation.name(),
                method = operation.method(),
                deprecated_at = notice.deprecated_at.map(rfc3339),
                sunset = notice.sunset.map(rfc3339),
                "the Pet Store API reports this operation as deprecated: it may go after its sunset date; the documentation of the method named says what replaces it, and what does not"
            );
        }
    }

    /// The error for a request to `url` that failed in transport. A connect or connection
    /// error names the host and port, and keeps reqwest's error as its cause.
    fn transport_error(&self, error: reqwest::Error, url: &Url) -> Error {
        if error.is_builder() {
            // Nothing was sent, and sending it again cannot help.
            return Error::config_caused(
                format!("the request to {} cannot be built", address(url)),
                error,
            );
        }
        if error.is_timeout() {
            if error.is_connect() {
                Error::timeout(TimeoutKind::Connect, self.inner.connect_timeout)
            } else {
                Error::timeout(TimeoutKind::Attempt, None)
            }
        } else if error.is_connect() {
            Error::connect(address(url), error)
        } else {
            Error::connection(address(url), error)
        }
    }
}

/// The wait before a retry after `floor` (the quiet the service asked for), with what set it,
/// or `None` when the call should not retry: the schedule is over, the service asked for
/// longer than the call may wait, or the retry could start only at or past the deadline (the
/// call would end as a timeout, and the answer it has says more).
fn retry_delay(
    policy: &RetryPolicy,
    floor: Duration,
    (delays, retried): (&mut Option<Schedule>, &AtomicU64),
    give_up_at: Instant,
    deadline: Option<Instant>,
) -> Option<(Duration, &'static str)> {
    if floor > policy.max_server_wait() || clock::after(floor) > give_up_at {
        return None;
    }
    // Numbered at its first retry, by the client's calls that retried before it.
    let schedule = || policy.schedule(retried.fetch_add(1, Ordering::Relaxed));
    let backoff = delays.get_or_insert_with(schedule).next()?;
    // `Retry-After` is a floor: the backoff (and its jitter) only ever adds to it.
    let (delay, source) = if floor >= backoff {
        (floor, "Retry-After")
    } else {
        (backoff, "backoff")
    };
    let late = deadline.is_some_and(|deadline| clock::after(delay) >= deadline);
    (!late).then_some((delay, source))
}

/// A date as logs show it: RFC 3339 in UTC, to the second (`2030-12-05T00:00:00Z`).
fn rfc3339(at: DateTime<Utc>) -> tracing::field::DisplayValue<String> {
    tracing::field::display(at.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// What a call did so far. It lives outside the call's future, so that a call its timeout
/// ended still tells.
#[derive(Default)]
struct Tally {
    attempts: u32,
    waited: Waited,
    backoff: Duration,
    clock_offset: Option<f64>,
}

impl Tally {
    fn info(&self, elapsed: Duration) -> CallInfo {
        let cause = self.waited.longest.map(|(by, _)| hold_cause(by));
        CallInfo::new(
            self.attempts,
            self.waited.total,
            cause,
            self.backoff,
            elapsed,
            self.clock_offset,
        )
    }
}

/// The public name of what held a call.
fn hold_cause(by: HeldBy) -> HoldCause {
    match by {
        HeldBy::Process(Hold::Cooldown) => HoldCause::Cooldown,
        HeldBy::Process(Hold::Probe) => HoldCause::Probe,
        HeldBy::Process(Hold::Pace) => HoldCause::Pacing,
        // A zero limit fails the call at once; it is a window with nothing to spend.
        HeldBy::Process(Hold::Spent | Hold::ZeroLimit) => HoldCause::SpentWindow,
        HeldBy::Store => HoldCause::SharedStore,
        HeldBy::Line => HoldCause::Queue,
    }
}

/// The error of a call the rate discipline would hold past the instant it gives up.
pub(crate) fn throttled(held: Held) -> Error {
    let cause = if held.unavailable {
        ThrottleCause::Unavailable
    } else {
        ThrottleCause::RateLimited
    };
    Error::throttled(held.retry_after, held.quota, cause)
}

/// `host:port` of a URL, the port made explicit (`petstore.example.com:443`). Never the
/// user information, nor the path or query.
fn address(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    }
}

/// Reads the body up to `cap` bytes; the flag says whether there was more (left unread).
async fn read_body(response: &mut reqwest::Response, cap: usize) -> reqwest::Result<(Bytes, bool)> {
    let Some(first) = response.chunk().await? else {
        return Ok((Bytes::new(), false));
    };
    if first.len() > cap {
        return Ok((first.slice(..cap), true));
    }
    // Most bodies arrive in one chunk; keep it without copying.
    let Some(second) = response.chunk().await? else {
        return Ok((first, false));
    };
    let expected = response
        .content_length()
        .and_then(|len| usize::try_from(len).ok())
        .unwrap_or(first.len() + second.len());
    let mut body = BytesMut::with_capacity(expected.min(cap));
    body.extend_from_slice(&first);
    let mut next = Some(second);
    while let Some(chunk) = next {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body.freeze(), true));
        }
        body.extend_from_slice(&chunk);
        next = response.chunk().await?;
    }
    Ok((body.freeze(), false))
}

/// Decodes a success body. The fast path is plain `serde_json` over text validated as UTF-8
/// first, which `benches/decode.rs` measured faster than `from_slice` on this API's bodies;
/// only a failure pays for a second pass that finds the JSON path of the problem.
pub(crate) fn decode<T: DeserializeOwned>(
    operation: Operation,
    status: StatusCode,
    body: &[u8],
) -> Result<T> {
    let operation = operation.name();
    let text = std::str::from_utf8(body)
        .map_err(|e| Error::decode(operation, status, ".".to_owned(), body, e))?;
    // No body (a 204) is `null`, so that it decodes as `()` or `None`.
    let text = if text.is_empty() { "null" } else { text };
    serde_json::from_str(text).map_err(|error| {
        let (path, error) = locate::<T>(text, error);
        Error::decode(operation, status, path, body, error)
    })
}

/// Where in the document decoding failed, and why.
#[cold]
fn locate<T: DeserializeOwned>(
    text: &str,
    error: serde_json::Error,
) -> (String, serde_json::Error) {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Err(located) => (located.path().to_string(), located.into_inner()),
        // Trailing data is only caught by the first pass.
        Ok(_) => (".".to_owned(), error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::Action;

    #[tokio::test]
    async fn a_request_that_cannot_be_built_is_a_configuration_error_and_not_retried() {
        let client = PetStoreClient::builder()
            .base_url("http://127.0.0.1:9/v1")
            .api_key("FAKE-key")
            .build()
            .unwrap();
        let unbuildable = reqwest::Client::new()
            .get("http://[::1")
            .build()
            .unwrap_err();
        assert!(unbuildable.is_builder());
        let url = Url::parse("http://127.0.0.1:9/v1/pets").unwrap();

        let error = client.transport_error(unbuildable, &url);

        assert!(matches!(error, Error::Config(_)), "{error:?}");
        assert!(error.to_string().contains("127.0.0.1:9"), "{error}");
        assert_eq!(
            classify_failure(&Method::GET, &error.into()),
            Action::Finish
        );
    }
}
