//! The crate's error type: one enum of what can go wrong, each kind holding its details
//! behind accessors.

mod api;
mod details;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

pub use api::{ApiError, ApiErrorBuilder};
pub(crate) use api::{is_transient_status, mask, snippet};
pub(crate) use details::Cause;
use details::Link;
pub use details::{
    BodyTooLargeError, ConfigError, ConnectError, ConnectionError, DecodeError,
    InvalidArgumentError, ThrottledError, TimeoutError,
};

use crate::call_info::CallInfo;
use crate::headers::Quota;

/// A `Result` whose error defaults to this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with a call.
///
/// Use the predicates ([`Error::is_retryable`], [`Error::is_rate_limited`],
/// [`Error::is_not_found`], ...) and accessors ([`Error::status`], [`Error::retry_after`],
/// [`Error::attempts`], ...) first: they answer the usual questions for every kind. Match on a
/// variant when you need what only it holds.
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
/// use petstore_client::{Error, NewPet, StatusCode};
///
/// match client.create_pet(NewPet::new("Rex", 3)).send().await {
///     Ok(pet) => println!("created {}", pet.id),
///     Err(e) if e.is_rate_limited() => println!("slow down; retry after {:?}", e.retry_after()),
///     Err(e) if e.status() == Some(StatusCode::BAD_REQUEST) => println!("rejected: {e}"),
///     Err(Error::Decode(decode)) => println!("unexpected response at {}", decode.path()),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
///
/// # One shape: a kind to match on, details behind accessors
///
/// Each variant holds one value of its own type ([`ApiError`], [`ConnectError`],
/// [`DecodeError`], ...) whose fields are private and read through methods, as reqwest's
/// `Error` keeps its data private and the AWS SDK's `SdkError` variants hold opaque
/// `TimeoutError`, `DispatchFailure`, ... values. A later release can then add a detail to any
/// kind, and the enum (which is `#[non_exhaustive]`) can gain kinds, without breaking a
/// caller; public fields could never change again. The enum stays, rather than one opaque
/// struct with a `kind()`, so that what only one kind has (the JSON path of a decode error,
/// the timeout that fired) sits on that kind's type instead of on a growing list of
/// `Option`-returning methods of every error. Only this crate builds these values, except
/// [`Error::Api`]: `Error::from(ApiError::new(..))` builds one for tests of your own error
/// handling.
///
/// # Message and cause
///
/// `Display` is one lowercase sentence without trailing punctuation (the Rust API Guidelines'
/// C-GOOD-ERR) of what failed, with the address, status or JSON path it concerns. What a lower
/// layer said about why (the operating system's "Connection refused", the JSON parser's
/// complaint) is the [`source()`](std::error::Error::source), not repeated in the message: so
/// hyper does, so reqwest does since 0.12.1 (it used to repeat it, and chains printed every
/// cause twice), and so error reporters that print the chain (anyhow's `{:#}` and `{:?}`,
/// eyre) expect, each part then shown once. The source is the root cause itself, such as the
/// [`std::io::Error`] of a refused connection, not the layers of the HTTP stack above it,
/// which would only repeat the address. To print the chain yourself:
///
/// ```
/// use std::error::Error as _;
///
/// fn chain(error: &petstore_client::Error) -> String {
///     let mut text = error.to_string();
///     let mut cause = error.source();
///     while let Some(inner) = cause {
///         text = format!("{text}: {inner}");
///         cause = inner.source();
///     }
///     text
/// }
/// // e.g. "could not connect to the Pet Store API at 127.0.0.1:9 (after 4 attempts):
/// // Connection refused (os error 111)"
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The service answered with an error status (4xx or 5xx, or an unexpected 1xx/3xx).
    #[error(transparent)]
    Api(Box<ApiError>),

    /// The client held the request back without sending it: the service asked for quiet (a
    /// `Retry-After`, or a spent quota) for longer than the retry policy's
    /// [`max_server_wait`](crate::RetryPolicy::max_server_wait) or what is left of the
    /// [call timeout](crate::PetStoreClientBuilder::call_timeout).
    ///
    /// It reads, for example, "the request was not sent: the rate limit allows no request for
    /// another 40s, longer than this call may wait".
    #[error(transparent)]
    Throttled(ThrottledError),

    /// A timeout elapsed; [`TimeoutError::kind`] says which.
    #[error(transparent)]
    Timeout(TimeoutError),

    /// No connection to the service could be made; the request was not sent, so the client
    /// retries it for every method, unless the host name did not resolve (see
    /// [`RetryPolicy`](crate::RetryPolicy)).
    ///
    /// The message names the address, e.g. "could not connect to the Pet Store API at
    /// 127.0.0.1:9 (after 4 attempts)"; [`source()`](std::error::Error::source) is the root
    /// cause, a [`std::io::Error`] of kind
    /// [`ConnectionRefused`](std::io::ErrorKind::ConnectionRefused) for a refused connection.
    #[error(transparent)]
    Connect(ConnectError),

    /// The connection failed after the request may have been sent (reset, closed early, body
    /// cut short), so whether the service processed it is unknown.
    ///
    /// The message names the address; [`source()`](std::error::Error::source) is the root
    /// cause, as for [`Error::Connect`].
    #[error(transparent)]
    Connection(ConnectionError),

    /// A successful response whose body is not what the specification says; the message names
    /// the JSON path, [`source()`](std::error::Error::source) what was wrong there.
    #[error(transparent)]
    Decode(DecodeError),

    /// The response body was larger than the client accepts; reading stopped at the limit.
    #[error(transparent)]
    BodyTooLarge(BodyTooLargeError),

    /// An argument is outside what the specification allows, or could not be serialized;
    /// nothing was sent.
    #[error(transparent)]
    InvalidArgument(InvalidArgumentError),

    /// The client could not be built from the given configuration.
    #[error(transparent)]
    Config(ConfigError),
}

/// Why the service asked for quiet, in an [`Error::Throttled`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThrottleCause {
    /// The rate limit: a 429, or a window's budget spent.
    RateLimited,
    /// The service is unavailable: a 503 with `Retry-After`.
    Unavailable,
}

impl fmt::Display for ThrottleCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::RateLimited => "the rate limit allows no request",
            Self::Unavailable => "the service is unavailable and asked for quiet",
        })
    }
}

/// A wait in whole seconds, rounded up: a wait shown shorter than it is would be cut short by
/// a caller who trusts it.
fn whole_secs(wait: Duration) -> u64 {
    wait.as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0))
}

/// Which of the client's timeouts fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutKind {
    /// Establishing the connection (TCP and TLS).
    Connect,
    /// One attempt: sending the request and reading the whole response.
    Attempt,
    /// The whole call, retries and waits included.
    Call,
}

impl fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Connect => "connect",
            Self::Attempt => "per-attempt",
            Self::Call => "whole-call",
        })
    }
}

/// Formats " (after N attempts)" when more than one attempt was made.
struct Attempts(u32);

impl fmt::Display for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 | 1 => Ok(()),
            n => write!(f, " (after {n} attempts)"),
        }
    }
}

impl Error {
    /// The API error, when the service answered with an error status.
    ///
    /// ```
    /// use petstore_client::{ApiError, Error, StatusCode};
    ///
    /// let error = Error::from(ApiError::new(StatusCode::NOT_FOUND, "not_found", "pet 42 does not exist"));
    /// assert_eq!(error.api_error().and_then(|api| api.code()), Some("not_found"));
    /// ```
    #[must_use]
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            Self::Api(api) => Some(api),
            _ => None,
        }
    }

    /// The HTTP status of an error response from the service; `None` for every other error,
    /// including a success response that could not be decoded.
    ///
    /// ```
    /// use petstore_client::{ApiError, Error, StatusCode};
    ///
    /// let error = Error::from(ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "Invalid API key"));
    /// assert_eq!(error.status(), Some(StatusCode::UNAUTHORIZED));
    /// ```
    #[must_use]
    pub fn status(&self) -> Option<StatusCode> {
        self.api_error().map(ApiError::status)
    }

    /// Whether the service answered 400: the request had missing or invalid values.
    #[must_use]
    pub fn is_bad_request(&self) -> bool {
        self.status() == Some(StatusCode::BAD_REQUEST)
    }

    /// Whether the service answered 401: the API key is missing or invalid.
    #[must_use]
    pub fn is_unauthorized(&self) -> bool {
        self.status() == Some(StatusCode::UNAUTHORIZED)
    }

    /// Whether the service answered 404: the pet does not exist.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(StatusCode::NOT_FOUND)
    }

    /// Whether the call failed on the rate limit: a 429 from the service, or a request the
    /// client held back for the rate limit ([`Error::Throttled`] with
    /// [`ThrottleCause::RateLimited`]). A request held back because the service was
    /// unavailable is not a rate limit: see [`Error::is_unavailable`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_client::{ApiError, Error, StatusCode};
    ///
    /// let error = Error::from(
    ///     ApiError::builder(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "Rate limit exceeded")
    ///         .retry_after(Duration::from_secs(30))
    ///         .build(),
    /// );
    /// assert!(error.is_rate_limited());
    /// assert!(!error.is_unavailable());
    /// ```
    #[must_use]
    pub fn is_rate_limited(&self) -> bool {
        self.throttle_cause() == Some(ThrottleCause::RateLimited)
            || self.status() == Some(StatusCode::TOO_MANY_REQUESTS)
    }

    /// Whether the service is unavailable: it answered 503, or the client held the request
    /// back because a 503 asked for quiet ([`Error::Throttled`] with
    /// [`ThrottleCause::Unavailable`]). The first is also an [`is_server_error`]; the second
    /// is not, as no response came for this call.
    ///
    /// [`is_server_error`]: Error::is_server_error
    ///
    /// ```
    /// use petstore_client::{ApiError, Error, StatusCode};
    ///
    /// let error = Error::from(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "down", "Maintenance"));
    /// assert!(error.is_unavailable() && error.is_server_error());
    /// assert!(!error.is_rate_limited());
    /// ```
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        self.throttle_cause() == Some(ThrottleCause::Unavailable)
            || self.status() == Some(StatusCode::SERVICE_UNAVAILABLE)
    }

    /// Why the client held the request back, for an [`Error::Throttled`].
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) {
    /// use petstore_client::ThrottleCause;
    ///
    /// if let Err(error) = client.list_pets().send().await {
    ///     if error.throttle_cause() == Some(ThrottleCause::Unavailable) {
    ///         println!("the service is down; not sent. {error}");
    ///     }
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn throttle_cause(&self) -> Option<ThrottleCause> {
        match self {
            Self::Throttled(held) => Some(held.cause),
            _ => None,
        }
    }

    /// Whether the service answered with a 5xx status: it failed to handle a request that may
    /// have been valid. A request the client held back ([`Error::Throttled`]) is not one, even
    /// when an earlier 503 is the reason; [`Error::is_unavailable`] covers both.
    ///
    /// ```
    /// use petstore_client::{ApiError, Error, StatusCode};
    ///
    /// let error = Error::from(ApiError::new(StatusCode::BAD_GATEWAY, "bad_gateway", "Upstream failed"));
    /// assert!(error.is_server_error());
    /// let error = Error::from(ApiError::new(StatusCode::NOT_FOUND, "not_found", "pet 42 does not exist"));
    /// assert!(!error.is_server_error());
    /// ```
    #[must_use]
    pub fn is_server_error(&self) -> bool {
        self.status().is_some_and(|status| status.is_server_error())
    }

    /// Whether an argument was rejected before anything was sent ([`Error::InvalidArgument`]),
    /// such as a `limit` outside 1..=100.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> petstore_client::Result<()> {
    /// use petstore_client::PetStoreClient;
    ///
    /// let client = PetStoreClient::builder()
    ///     .base_url("http://localhost:8080/v1")
    ///     .api_key("my-api-key")
    ///     .build()?;
    /// let error = client.list_pets().limit(500).send().await.unwrap_err();
    /// assert!(error.is_invalid_argument());
    /// assert!(!error.is_retryable());
    /// assert_eq!(error.to_string(), "invalid limit 500: the API accepts 1 to 100");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Self::InvalidArgument { .. })
    }

    /// Whether trying the same call again later can succeed: the failure was transient.
    ///
    /// True for a 429, a 500, 502, 503 or 504, a request held back ([`Error::Throttled`]), a
    /// connect or connection error, and any timeout. False for every other status (400, 401,
    /// 404, and 5xx that state a lasting condition, such as 501 Not Implemented), a body that
    /// did not decode or was too large, an invalid argument and an invalid configuration:
    /// the same call would fail the same way. The statuses are those the client retries
    /// itself (see [`RetryPolicy`](crate::RetryPolicy)); this error is what was left once its
    /// retries were spent or not allowed.
    ///
    /// It does not say whether repeating is safe: after a 5xx, a timeout or a connection
    /// error, a `create_pet` may have been processed, and a repeat may add the pet twice.
    /// Wait at least [`Error::retry_after`] when there is one.
    ///
    /// ```
    /// use petstore_client::{ApiError, Error, StatusCode};
    ///
    /// let unavailable = Error::from(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "down", "Maintenance"));
    /// assert!(unavailable.is_retryable());
    /// let rejected = Error::from(ApiError::new(StatusCode::BAD_REQUEST, "invalid_pet", "name is required"));
    /// assert!(!rejected.is_retryable());
    /// ```
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Api(api) => is_transient_status(api.status()),
            Self::Throttled { .. }
            | Self::Timeout { .. }
            | Self::Connect { .. }
            | Self::Connection { .. } => true,
            Self::Decode { .. }
            | Self::BodyTooLarge { .. }
            | Self::InvalidArgument { .. }
            | Self::Config { .. } => false,
        }
    }

    /// Whether an attempt failed in a way the client retries for a `GET` (a host name that does
    /// not resolve aside): no connection, a dropped connection, or the connect or per-attempt
    /// timeout.
    pub(crate) fn is_transient_failure(&self) -> bool {
        match self {
            Self::Connect(_) | Self::Connection(_) => true,
            Self::Timeout(timeout) => timeout.kind != TimeoutKind::Call,
            _ => false,
        }
    }

    /// Whether a timeout fired, and which.
    #[must_use]
    pub fn timeout_kind(&self) -> Option<TimeoutKind> {
        match self {
            Self::Timeout(timeout) => Some(timeout.kind),
            _ => None,
        }
    }

    /// Whether a timeout fired.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        self.timeout_kind().is_some()
    }

    /// Whether no connection could be made (refused, unreachable, connect timeout).
    #[must_use]
    pub fn is_connect(&self) -> bool {
        matches!(self, Self::Connect(_)) || self.timeout_kind() == Some(TimeoutKind::Connect)
    }

    /// Whether the network failed the call: no connection could be made, the connection
    /// failed, or a timeout fired. One test for a "network" message.
    ///
    /// ```
    /// # async fn run(client: petstore_client::PetStoreClient) {
    /// match client.list_pets().send().await {
    ///     Err(error) if error.is_network() => eprintln!("network trouble: {error}"),
    ///     Err(error) => eprintln!("{error}"),
    ///     Ok(pets) => println!("{} pets", pets.len()),
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn is_network(&self) -> bool {
        matches!(
            self,
            Self::Connect(_) | Self::Connection(_) | Self::Timeout(_)
        )
    }

    /// Whether a successful response could not be decoded.
    #[must_use]
    pub fn is_decode(&self) -> bool {
        matches!(self, Self::Decode { .. })
    }

    /// How long the service asked to wait before the next request, if it said.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api(api) => api.retry_after(),
            Self::Throttled(held) => Some(held.retry_after),
            _ => None,
        }
    }

    /// The rate-limit quota reported with the failure, if any.
    #[must_use]
    pub fn quota(&self) -> Option<Quota> {
        match self {
            Self::Api(api) => api.quota(),
            Self::Throttled(held) => held.quota,
            _ => None,
        }
    }

    /// How many requests were sent for this call (zero when it failed before sending).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.call_info().map_or(0, CallInfo::attempts)
    }

    /// How the call went until it failed: attempts, holds, backoff and time taken. `None` for
    /// an error found before the call started ([`Error::InvalidArgument`], [`Error::Config`]).
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) {
    /// if let Err(error) = client.list_pets().send().await {
    ///     if let Some(call) = error.call_info() {
    ///         println!("{error} after {:?}, held {:?}", call.elapsed(), call.held());
    ///     }
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn call_info(&self) -> Option<&CallInfo> {
        match self {
            Self::Api(api) => Some(&api.call),
            Self::Throttled(held) => Some(&held.call),
            Self::Timeout(timeout) => Some(&timeout.call),
            Self::Connect(ConnectError(link)) | Self::Connection(ConnectionError(link)) => {
                Some(&link.call)
            }
            Self::Decode(decode) => Some(&decode.call),
            Self::BodyTooLarge(large) => Some(&large.call),
            Self::InvalidArgument(_) | Self::Config(_) => None,
        }
    }

    /// A call held back for `retry_after` (see [`Error::Throttled`]), before any attempt.
    pub(crate) fn throttled(
        retry_after: Duration,
        quota: Option<Quota>,
        cause: ThrottleCause,
    ) -> Self {
        Self::Throttled(ThrottledError {
            retry_after,
            quota,
            cause,
            call: Box::default(),
        })
    }

    /// A timeout of one attempt; `after` as for [`TimeoutError::after`].
    pub(crate) fn timeout(kind: TimeoutKind, after: Option<Duration>) -> Self {
        Self::Timeout(TimeoutError {
            kind,
            after,
            call: Box::new(CallInfo::of_attempts(1)),
        })
    }

    /// No connection to `address` (`host:port`) in one attempt, for `cause`.
    pub(crate) fn connect(
        address: String,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Connect(ConnectError(Link::of_one_attempt(address, Arc::new(cause))))
    }

    /// The connection to `address` (`host:port`) failed mid-exchange in one attempt, for
    /// `cause`.
    pub(crate) fn connection(
        address: String,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Connection(ConnectionError(Link::of_one_attempt(
            address,
            Arc::new(cause),
        )))
    }

    /// A success body of `operation` that did not decode at `path`, for `cause`.
    pub(crate) fn decode(
        operation: &'static str,
        status: StatusCode,
        path: String,
        body: &[u8],
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Decode(DecodeError {
            operation,
            status,
            path,
            snippet: snippet(body),
            cause: Arc::new(cause),
            call: Box::new(CallInfo::of_attempts(1)),
        })
    }

    /// This error with `secret` masked as `***` in what an answer put in it: a body that echoes
    /// the request's headers must not show the API key.
    pub(crate) fn masked(mut self, secret: &str) -> Self {
        match &mut self {
            Self::Api(api) => api.mask(secret),
            Self::Decode(decode) => {
                mask(&mut decode.path, secret);
                mask(&mut decode.snippet, secret);
                let mut cause = decode.cause.to_string();
                if mask(&mut cause, secret) {
                    decode.cause =
                        Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(cause));
                }
            }
            _ => {}
        }
        self
    }

    /// A body over the `limit` of one attempt.
    pub(crate) fn body_too_large(status: StatusCode, limit: usize) -> Self {
        Self::BodyTooLarge(BodyTooLargeError {
            status,
            limit,
            call: Box::new(CallInfo::of_attempts(1)),
        })
    }

    /// The argument `name` of `value` is not what the specification allows (`expected`).
    pub(crate) fn invalid_argument(
        name: &'static str,
        value: impl Into<String>,
        expected: &'static str,
    ) -> Self {
        Self::InvalidArgument(InvalidArgumentError {
            name,
            value: Some(value.into()),
            expected,
            cause: None,
        })
    }

    /// The argument `name` could not be serialized, for `cause`.
    pub(crate) fn unserializable(name: &'static str, expected: &'static str, cause: Cause) -> Self {
        Self::InvalidArgument(InvalidArgumentError {
            name,
            value: None,
            expected,
            cause: Some(cause),
        })
    }

    /// An unusable configuration; `reason` says what to change.
    pub(crate) fn config(reason: impl Into<String>) -> Self {
        Self::Config(ConfigError {
            reason: reason.into(),
            cause: None,
        })
    }

    /// An unusable configuration that a lower-level error (`cause`) reported.
    pub(crate) fn config_caused(
        reason: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Config(ConfigError {
            reason: reason.into(),
            cause: Some(Arc::new(cause)),
        })
    }

    /// Records how the call went, for the error it ends with.
    pub(crate) fn with_call(mut self, info: CallInfo) -> Self {
        match &mut self {
            Self::Api(api) => api.call = info,
            Self::Throttled(held) => *held.call = info,
            Self::Timeout(timeout) => *timeout.call = info,
            Self::Connect(ConnectError(link)) | Self::Connection(ConnectionError(link)) => {
                *link.call = info;
            }
            Self::Decode(decode) => *decode.call = info,
            Self::BodyTooLarge(large) => *large.call = info,
            Self::InvalidArgument(_) | Self::Config(_) => {}
        }
        self
    }
}

impl From<ApiError> for Error {
    fn from(error: ApiError) -> Self {
        Self::Api(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::io;

    use super::*;

    fn api(status: u16) -> Error {
        let status = StatusCode::from_u16(status).unwrap();
        Error::from(ApiError::new(status, "code", "message"))
    }

    fn throttled(cause: ThrottleCause, retry_after: Duration) -> Error {
        Error::throttled(retry_after, None, cause)
    }

    fn timeout(kind: TimeoutKind) -> Error {
        Error::timeout(kind, Some(Duration::from_secs(1)))
    }

    /// A layer above the root cause, as reqwest's and hyper's errors are.
    #[derive(Debug, thiserror::Error)]
    #[error("error sending request")]
    struct Layer(#[source] io::Error);

    fn connect() -> Error {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        Error::connect("127.0.0.1:9".to_owned(), Layer(refused))
    }

    fn connection() -> Error {
        let closed = io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed before message completed",
        );
        Error::connection("127.0.0.1:9".to_owned(), Layer(closed))
    }

    fn decode() -> Error {
        let body = b"{}";
        let cause = serde_json::from_slice::<Vec<u8>>(body).unwrap_err();
        Error::decode("listPets", StatusCode::OK, ".".to_owned(), body, cause)
    }

    fn body_too_large() -> Error {
        Error::body_too_large(StatusCode::OK, 16)
    }

    fn invalid_argument() -> Error {
        Error::invalid_argument("limit", "0", "the API accepts 1 to 100")
    }

    const SECS_40: Duration = Duration::from_secs(40);

    /// One error of every kind, each named for the assertion messages.
    fn every_kind() -> Vec<(&'static str, Error)> {
        let mut errors: Vec<(&'static str, Error)> =
            [400, 401, 404, 409, 429, 500, 501, 502, 503, 504, 505, 302]
                .into_iter()
                .map(|status| (status_name(status), api(status)))
                .collect();
        errors.extend([
            (
                "throttled by the rate limit",
                throttled(ThrottleCause::RateLimited, SECS_40),
            ),
            (
                "throttled while unavailable",
                throttled(ThrottleCause::Unavailable, SECS_40),
            ),
            ("connect timeout", timeout(TimeoutKind::Connect)),
            ("attempt timeout", timeout(TimeoutKind::Attempt)),
            ("call timeout", timeout(TimeoutKind::Call)),
            ("connect", connect()),
            ("connection", connection()),
            ("decode", decode()),
            ("body too large", body_too_large()),
            ("invalid argument", invalid_argument()),
            ("config", Error::config("no base URL")),
        ]);
        errors
    }

    fn status_name(status: u16) -> &'static str {
        StatusCode::from_u16(status)
            .unwrap()
            .canonical_reason()
            .unwrap()
    }

    /// Asserts that `predicate` holds for exactly the errors named in `expected`.
    #[track_caller]
    fn assert_holds_for(predicate: fn(&Error) -> bool, expected: &[&str]) {
        let holds: Vec<&str> = every_kind()
            .iter()
            .filter(|(_, error)| predicate(error))
            .map(|(name, _)| *name)
            .collect();
        assert_eq!(holds, expected);
    }

    #[test]
    fn retryable_are_the_transient_failures() {
        assert_holds_for(
            Error::is_retryable,
            &[
                "Too Many Requests",
                "Internal Server Error",
                "Bad Gateway",
                "Service Unavailable",
                "Gateway Timeout",
                "throttled by the rate limit",
                "throttled while unavailable",
                "connect timeout",
                "attempt timeout",
                "call timeout",
                "connect",
                "connection",
            ],
        );
    }

    #[test]
    fn server_errors_are_the_5xx_answers() {
        assert_holds_for(
            Error::is_server_error,
            &[
                "Internal Server Error",
                "Not Implemented",
                "Bad Gateway",
                "Service Unavailable",
                "Gateway Timeout",
                "HTTP Version Not Supported",
            ],
        );
    }

    #[test]
    fn only_an_invalid_argument_is_an_invalid_argument() {
        assert_holds_for(Error::is_invalid_argument, &["invalid argument"]);
    }

    #[test]
    fn a_throttle_is_a_rate_limit_only_when_the_rate_limit_caused_it() {
        assert_holds_for(
            Error::is_rate_limited,
            &["Too Many Requests", "throttled by the rate limit"],
        );
        assert_holds_for(
            Error::is_unavailable,
            &["Service Unavailable", "throttled while unavailable"],
        );
        let unavailable = throttled(ThrottleCause::Unavailable, SECS_40);
        assert_eq!(
            unavailable.throttle_cause(),
            Some(ThrottleCause::Unavailable)
        );
        assert_eq!(unavailable.retry_after(), Some(SECS_40));
        assert_eq!(api(503).throttle_cause(), None);
    }

    #[test]
    fn a_throttle_reads_as_a_sentence_for_either_cause() {
        assert_eq!(
            throttled(ThrottleCause::RateLimited, SECS_40).to_string(),
            "the request was not sent: the rate limit allows no request for another 40s, \
             longer than this call may wait"
        );
        assert_eq!(
            throttled(ThrottleCause::Unavailable, Duration::from_millis(39_001)).to_string(),
            "the request was not sent: the service is unavailable and asked for quiet for \
             another 40s, longer than this call may wait"
        );
        assert_eq!(
            throttled(ThrottleCause::RateLimited, Duration::ZERO).to_string(),
            "the request was not sent: the rate limit allows no request, and this call may \
             wait no longer"
        );
        let after_two = throttled(ThrottleCause::Unavailable, Duration::MAX)
            .with_call(CallInfo::of_attempts(2));
        assert_eq!(
            after_two.to_string(),
            format!(
                "the request was not sent: the service is unavailable and asked for quiet for \
                 another {}s, longer than this call may wait (after 2 attempts)",
                u64::MAX
            )
        );
    }

    #[test]
    fn connection_failures_name_the_address_and_keep_the_root_cause_as_the_source() {
        let refused = connect().with_call(CallInfo::of_attempts(4));
        assert_eq!(
            refused.to_string(),
            "could not connect to the Pet Store API at 127.0.0.1:9 (after 4 attempts)"
        );
        let source = refused.source().expect("the cause as the source");
        assert_eq!(
            source.downcast_ref::<io::Error>().map(io::Error::kind),
            Some(io::ErrorKind::ConnectionRefused),
            "expected the io::Error below the layer as the source, got {source:?}"
        );
        let closed = connection();
        assert_eq!(
            closed.to_string(),
            "the connection to the Pet Store API at 127.0.0.1:9 failed before the response was \
             complete"
        );
        assert_eq!(
            closed.source().map(ToString::to_string).as_deref(),
            Some("connection closed before message completed"),
            "expected the root cause as the source"
        );
    }

    #[test]
    fn no_message_repeats_its_source() {
        for (name, error) in every_kind() {
            if let Some(source) = error.source() {
                assert!(
                    !error.to_string().contains(&source.to_string()),
                    "{name}: the message `{error}` repeats its source `{source}`"
                );
            }
        }
        let decode = decode();
        assert_eq!(
            decode.to_string(),
            "could not decode the listPets response at `.`"
        );
        assert!(
            decode
                .source()
                .is_some_and(|source| source.is::<serde_json::Error>()),
            "expected the JSON parser's error as the source of {decode:?}"
        );
    }

    #[test]
    fn an_api_error_shows_its_wait_rounded_up_to_whole_seconds() {
        let limited = |wait: Duration| {
            ApiError::builder(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "slow down")
                .retry_after(wait)
                .build()
                .to_string()
        };
        let shown = |secs: u64| {
            format!(
                "the Pet Store API answered 429 Too Many Requests: slow down (code \
                 `rate_limited`); retry after {secs}s"
            )
        };
        assert_eq!(limited(Duration::from_millis(500)), shown(1));
        assert_eq!(limited(Duration::from_millis(1_001)), shown(2));
        assert_eq!(limited(Duration::from_secs(30)), shown(30));
        assert_eq!(limited(Duration::ZERO), shown(0));
    }

    #[test]
    fn a_status_without_a_reason_phrase_reads_cleanly() {
        assert_eq!(
            api(599).to_string(),
            "the Pet Store API answered 599: message (code `code`)"
        );
        assert_eq!(api(599).status(), StatusCode::from_u16(599).ok());
    }
}
