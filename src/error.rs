//! The crate's error type, and the one mapping from an HTTP error response to an error.

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;

use crate::headers::Quota;

/// A `Result` whose error defaults to this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with a call.
///
/// Use the predicates ([`Error::is_retryable`], [`Error::is_rate_limited`],
/// [`Error::is_not_found`], ...) and accessors ([`Error::status`], [`Error::retry_after`],
/// [`Error::attempts`], ...) first: they stay meaningful as variants and fields are added. Match
/// on a variant when you need what only it holds.
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
/// use http::StatusCode;
/// use petstore_client::{Error, NewPet};
///
/// match client.create_pet(NewPet::new("Rex", 3)).send().await {
///     Ok(pet) => println!("created {}", pet.id),
///     Err(e) if e.is_rate_limited() => println!("slow down; retry after {:?}", e.retry_after()),
///     Err(e) if e.status() == Some(StatusCode::BAD_REQUEST) => println!("rejected: {e}"),
///     Err(Error::Decode { path, .. }) => println!("unexpected response at {path}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Growing without a breaking release
///
/// The enum and each of its struct variants are `#[non_exhaustive]`: a `match` needs a `_` arm
/// and a variant pattern needs `..`, and only this crate builds these variants, so a later
/// release can add variants and fields. A frozen enum (plain public fields) would make every
/// new detail, such as the address now in [`Error::Connect`], a breaking change. A fully
/// opaque error (reqwest's: a struct with predicates only) would hide what callers branch on
/// today, the timeout that fired or the JSON path of a decode error, behind a growing list of
/// accessors. [`Error::Api`] is the exception: its [`ApiError`] is opaque already, and
/// `Error::from(ApiError::new(..))` builds one for tests of your own error handling.
#[derive(Debug, thiserror::Error)]
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
    #[error("the request was not sent: {}{}", Held(*cause, *retry_after), Attempts(*attempts))]
    #[non_exhaustive]
    Throttled {
        /// How long until the service accepts requests again.
        retry_after: Duration,
        /// The quota the service last reported, if any.
        quota: Option<Quota>,
        /// Why the service asked for quiet: [`Error::is_rate_limited`] is true for
        /// [`ThrottleCause::RateLimited`], [`Error::is_unavailable`] for
        /// [`ThrottleCause::Unavailable`].
        cause: ThrottleCause,
        /// Requests this call sent before it was held back.
        attempts: u32,
    },

    /// A timeout elapsed.
    #[error("the {kind} timeout{} elapsed{}", Of(*after), Attempts(*attempts))]
    #[non_exhaustive]
    Timeout {
        /// Which timeout fired.
        kind: TimeoutKind,
        /// The configured duration of that timeout; `None` when it belongs to a
        /// user-supplied `reqwest::Client`, whose settings this crate cannot read.
        after: Option<Duration>,
        /// Attempts made, including the one that timed out.
        attempts: u32,
    },

    /// No connection to the service could be made; the request was not sent, so the client
    /// retries it for every method, unless the host name did not resolve (see
    /// [`RetryPolicy`](crate::RetryPolicy)).
    ///
    /// The message names the address and the root cause, e.g. "could not connect to the Pet
    /// Store API at 127.0.0.1:9: Connection refused (os error 111) (after 4 attempts)". As the
    /// cause is in the message, [`source()`](std::error::Error::source) is `None`.
    #[error("could not connect to the Pet Store API at {address}: {reason}{}", Attempts(*attempts))]
    #[non_exhaustive]
    Connect {
        /// The host and port the client tried to reach, e.g. `petstore.example.com:443`.
        address: String,
        /// The root cause, as the operating system or the TLS library put it, e.g.
        /// `Connection refused (os error 111)`.
        reason: String,
        /// Attempts made.
        attempts: u32,
    },

    /// The connection failed after the request may have been sent (reset, closed early, body
    /// cut short), so whether the service processed it is unknown.
    ///
    /// The message names the address and the root cause; as for [`Error::Connect`],
    /// [`source()`](std::error::Error::source) is `None`.
    #[error(
        "the connection to the Pet Store API at {address} failed before the response was complete: {reason}{}",
        Attempts(*attempts)
    )]
    #[non_exhaustive]
    Connection {
        /// The host and port of the connection, e.g. `petstore.example.com:443`.
        address: String,
        /// The root cause, e.g. `connection closed before message completed`.
        reason: String,
        /// Attempts made.
        attempts: u32,
    },

    /// A successful response whose body is not what the specification says.
    #[error("could not decode the {operation} response at `{path}`: {message}{}", Attempts(*attempts))]
    #[non_exhaustive]
    Decode {
        /// The operation (`listPets`, `createPet`, `getPet`).
        operation: &'static str,
        /// The HTTP status of the response.
        status: StatusCode,
        /// Where in the JSON document decoding failed, e.g. `[3].status` (`.` is the root).
        path: String,
        /// What was wrong there.
        message: String,
        /// The start of the body, at most 512 bytes, for diagnosis.
        snippet: String,
        /// Requests the call sent, this one included.
        attempts: u32,
    },

    /// The response body was larger than the client accepts; reading stopped at the limit.
    #[error(
        "the response body is larger than the {limit}-byte limit (HTTP {}){}",
        status.as_u16(),
        Attempts(*attempts)
    )]
    #[non_exhaustive]
    BodyTooLarge {
        /// The HTTP status of the response.
        status: StatusCode,
        /// The configured limit, see
        /// [`PetStoreClientBuilder::max_response_body`](crate::PetStoreClientBuilder::max_response_body).
        limit: usize,
        /// Requests the call sent, this one included.
        attempts: u32,
    },

    /// An argument is outside what the specification allows; nothing was sent.
    #[error("invalid {name} {value}: {expected}")]
    #[non_exhaustive]
    InvalidArgument {
        /// The parameter, as the specification names it.
        name: &'static str,
        /// The rejected value.
        value: String,
        /// What the specification allows.
        expected: &'static str,
    },

    /// The client could not be built from the given configuration.
    #[error("invalid client configuration: {reason}")]
    #[non_exhaustive]
    Config {
        /// What is wrong, without the API key.
        reason: String,
    },
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

/// Formats why a request was held back and for how long: "the rate limit allows no request
/// for another 40s, longer than this call may wait".
struct Held(ThrottleCause, Duration);

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self(cause, wait) = *self;
        if wait.is_zero() {
            // Held for a response still in flight, or at the deadline already.
            write!(f, "{cause}, and this call may wait no longer")
        } else {
            let secs = whole_secs(wait);
            write!(
                f,
                "{cause} for another {secs}s, longer than this call may wait"
            )
        }
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

/// Formats " of 30s" for a known timeout.
struct Of(Option<Duration>);

impl fmt::Display for Of {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(after) => write!(f, " of {after:?}"),
            None => Ok(()),
        }
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
    /// use http::StatusCode;
    /// use petstore_client::{ApiError, Error};
    ///
    /// let error = Error::from(ApiError::new(StatusCode::NOT_FOUND, "not_found", "Pet 42 not found"));
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
    /// use http::StatusCode;
    /// use petstore_client::{ApiError, Error};
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
    /// use http::StatusCode;
    /// use petstore_client::{ApiError, Error};
    ///
    /// let error = Error::from(
    ///     ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "Rate limit exceeded")
    ///         .with_retry_after(Duration::from_secs(30)),
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
    /// use http::StatusCode;
    /// use petstore_client::{ApiError, Error};
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
            Self::Throttled { cause, .. } => Some(*cause),
            _ => None,
        }
    }

    /// Whether the service answered with a 5xx status: it failed to handle a request that may
    /// have been valid. A request the client held back ([`Error::Throttled`]) is not one, even
    /// when an earlier 503 is the reason; [`Error::is_unavailable`] covers both.
    ///
    /// ```
    /// use http::StatusCode;
    /// use petstore_client::{ApiError, Error};
    ///
    /// let error = Error::from(ApiError::new(StatusCode::BAD_GATEWAY, "bad_gateway", "Upstream failed"));
    /// assert!(error.is_server_error());
    /// let error = Error::from(ApiError::new(StatusCode::NOT_FOUND, "not_found", "Pet 42 not found"));
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
    /// use http::StatusCode;
    /// use petstore_client::{ApiError, Error};
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
        matches!(
            self,
            Self::Connect { .. }
                | Self::Connection { .. }
                | Self::Timeout {
                    kind: TimeoutKind::Connect | TimeoutKind::Attempt,
                    ..
                }
        )
    }

    /// Whether a timeout fired, and which.
    #[must_use]
    pub fn timeout_kind(&self) -> Option<TimeoutKind> {
        match self {
            Self::Timeout { kind, .. } => Some(*kind),
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
        matches!(
            self,
            Self::Connect { .. }
                | Self::Timeout {
                    kind: TimeoutKind::Connect,
                    ..
                }
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
            Self::Throttled { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    /// The rate-limit quota reported with the failure, if any.
    #[must_use]
    pub fn quota(&self) -> Option<Quota> {
        match self {
            Self::Api(api) => api.quota(),
            Self::Throttled { quota, .. } => *quota,
            _ => None,
        }
    }

    /// How many requests were sent for this call (zero when it failed before sending).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        match self {
            Self::Api(api) => api.attempts(),
            Self::Timeout { attempts, .. }
            | Self::Connect { attempts, .. }
            | Self::Connection { attempts, .. }
            | Self::Decode { attempts, .. }
            | Self::BodyTooLarge { attempts, .. }
            | Self::Throttled { attempts, .. } => *attempts,
            Self::InvalidArgument { .. } | Self::Config { .. } => 0,
        }
    }

    pub(crate) fn config(reason: impl Into<String>) -> Self {
        Self::Config {
            reason: reason.into(),
        }
    }

    /// Records how many attempts the call made, for the error it ends with.
    pub(crate) fn with_attempts(mut self, made: u32) -> Self {
        match &mut self {
            Self::Api(api) => api.attempts = made,
            Self::Timeout { attempts, .. }
            | Self::Connect { attempts, .. }
            | Self::Connection { attempts, .. }
            | Self::Decode { attempts, .. }
            | Self::BodyTooLarge { attempts, .. }
            | Self::Throttled { attempts, .. } => *attempts = made,
            Self::InvalidArgument { .. } | Self::Config { .. } => {}
        }
        self
    }
}

impl From<ApiError> for Error {
    fn from(error: ApiError) -> Self {
        Self::Api(Box::new(error))
    }
}

/// An error response from the service.
///
/// When the body is the specification's error object (`{code, message, status}`), its `code`
/// and `message` are here; when it is not (an HTML page from a proxy, an empty or cut body),
/// [`ApiError::body_snippet`] holds its start instead. The `Display` form is a sentence with
/// the status, the service's message and code, and for a 429 the wait it asked for.
///
/// `ApiError::new` lets you build one to test your own error handling:
///
/// ```
/// use std::time::Duration;
/// use http::StatusCode;
/// use petstore_client::{ApiError, Error};
///
/// let error = Error::from(
///     ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "Rate limit exceeded")
///         .with_retry_after(Duration::from_secs(30)),
/// );
/// assert!(error.is_rate_limited());
/// assert_eq!(error.retry_after(), Some(Duration::from_secs(30)));
/// assert_eq!(
///     error.to_string(),
///     "the Pet Store API answered 429 Too Many Requests: Rate limit exceeded \
///      (code `rate_limited`); retry after 30s",
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    code: Option<String>,
    message: Option<String>,
    body_snippet: Option<String>,
    quota: Option<Quota>,
    retry_after: Option<Duration>,
    attempts: u32,
}

/// The specification's error object; only `code` and `message` are used.
#[derive(Deserialize)]
struct ErrorObject {
    code: String,
    message: String,
}

const SNIPPET_BYTES: usize = 512;

impl ApiError {
    /// An error response with the specification's error object, as if the call had made one
    /// request; add what the response's head said with [`with_retry_after`](Self::with_retry_after)
    /// and [`with_quota`](Self::with_quota).
    ///
    /// ```
    /// use http::StatusCode;
    /// use petstore_client::ApiError;
    ///
    /// let api = ApiError::new(StatusCode::NOT_FOUND, "not_found", "Pet 42 not found");
    /// assert_eq!(api.status(), StatusCode::NOT_FOUND);
    /// assert_eq!(api.code(), Some("not_found"));
    /// ```
    #[must_use]
    pub fn new(status: StatusCode, code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            status,
            code: Some(code.into()),
            message: Some(message.into()),
            body_snippet: None,
            quota: None,
            retry_after: None,
            attempts: 1,
        }
    }

    /// Sets the wait the service asked for.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// Sets the quota reported with the response.
    #[must_use]
    pub fn with_quota(mut self, quota: Quota) -> Self {
        self.quota = Some(quota);
        self
    }

    /// The one mapping from an error response to an error; `retry_after` as read at its head.
    pub(crate) fn from_response(
        status: StatusCode,
        body: &[u8],
        quota: Option<Quota>,
        retry_after: Option<Duration>,
    ) -> Self {
        let object = serde_json::from_slice::<ErrorObject>(body).ok();
        let (code, message, body_snippet) = match object {
            Some(ErrorObject { code, message }) => (Some(code), Some(message), None),
            None => (None, None, Some(snippet(body))),
        };
        Self {
            status,
            code,
            message,
            body_snippet,
            quota,
            retry_after,
            attempts: 1,
        }
    }

    /// The HTTP status.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The error object's machine-readable `code`, when the body was the error object.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    /// The error object's human-readable `message`, when the body was the error object.
    #[must_use]
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// The start of the body (at most 512 bytes, lossily decoded), when it was not the
    /// error object.
    #[must_use]
    pub fn body_snippet(&self) -> Option<&str> {
        self.body_snippet.as_deref()
    }

    /// The quota reported with the response.
    #[must_use]
    pub fn quota(&self) -> Option<Quota> {
        self.quota
    }

    /// The wait the service asked for in `Retry-After`, measured from when the response
    /// arrived.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// How many requests the call sent before giving up with this response.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the Pet Store API answered {}", self.status.as_u16())?;
        if let Some(reason) = self.status.canonical_reason() {
            write!(f, " {reason}")?;
        }
        match (&self.message, &self.code, &self.body_snippet) {
            (Some(message), Some(code), _) => write!(f, ": {message} (code `{code}`)")?,
            (_, _, Some(snippet)) if snippet.is_empty() => f.write_str(" with an empty body")?,
            (_, _, Some(snippet)) => {
                write!(f, " with a body that is not an error object: {snippet:?}")?
            }
            _ => {}
        }
        if let Some(wait) = self.retry_after {
            write!(f, "; retry after {}s", whole_secs(wait))?;
        }
        write!(f, "{}", Attempts(self.attempts))
    }
}

impl std::error::Error for ApiError {}

/// The first [`SNIPPET_BYTES`] of a body, cut on a character boundary.
pub(crate) fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(SNIPPET_BYTES)]);
    let mut text = text.into_owned();
    if body.len() > SNIPPET_BYTES {
        // A multi-byte character cut at the limit decodes as U+FFFD; drop it.
        if text.ends_with('\u{FFFD}') {
            text.pop();
        }
        text.push('…');
    }
    text
}

/// Whether a status says the failure is transient, so that the same request may succeed
/// later: 429, 500, 502, 503 and 504. Other 5xx (501 Not Implemented, 505 HTTP Version Not
/// Supported, ...) state a lasting condition.
pub(crate) fn is_transient_status(status: StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16) -> Error {
        let status = StatusCode::from_u16(status).unwrap();
        Error::from(ApiError::new(status, "code", "message"))
    }

    fn throttled(cause: ThrottleCause, retry_after: Duration) -> Error {
        Error::Throttled {
            retry_after,
            quota: None,
            cause,
            attempts: 0,
        }
    }

    fn timeout(kind: TimeoutKind) -> Error {
        Error::Timeout {
            kind,
            after: Some(Duration::from_secs(1)),
            attempts: 1,
        }
    }

    fn connect() -> Error {
        Error::Connect {
            address: "127.0.0.1:9".to_owned(),
            reason: "Connection refused (os error 111)".to_owned(),
            attempts: 1,
        }
    }

    fn connection() -> Error {
        Error::Connection {
            address: "127.0.0.1:9".to_owned(),
            reason: "connection closed before message completed".to_owned(),
            attempts: 1,
        }
    }

    fn decode() -> Error {
        Error::Decode {
            operation: "listPets",
            status: StatusCode::OK,
            path: ".".to_owned(),
            message: "expected a sequence".to_owned(),
            snippet: "{}".to_owned(),
            attempts: 1,
        }
    }

    fn body_too_large() -> Error {
        Error::BodyTooLarge {
            status: StatusCode::OK,
            limit: 16,
            attempts: 1,
        }
    }

    fn invalid_argument() -> Error {
        Error::InvalidArgument {
            name: "limit",
            value: "0".to_owned(),
            expected: "the API accepts 1 to 100",
        }
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
        let after_two = throttled(ThrottleCause::Unavailable, Duration::MAX).with_attempts(2);
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
    fn connection_failures_name_the_address_and_the_root_cause_once() {
        let refused = connect().with_attempts(4);
        assert_eq!(
            refused.to_string(),
            "could not connect to the Pet Store API at 127.0.0.1:9: \
             Connection refused (os error 111) (after 4 attempts)"
        );
        assert!(std::error::Error::source(&refused).is_none());
        let closed = connection();
        assert_eq!(
            closed.to_string(),
            "the connection to the Pet Store API at 127.0.0.1:9 failed before the response was \
             complete: connection closed before message completed"
        );
        assert!(std::error::Error::source(&closed).is_none());
    }

    #[test]
    fn an_api_error_shows_its_wait_rounded_up_to_whole_seconds() {
        let limited = |wait: Duration| {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "slow down")
                .with_retry_after(wait)
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
