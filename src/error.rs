//! The crate's error type, and the one mapping from an HTTP error response to an error.

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;

use crate::quota::Quota;

/// A `Result` whose error defaults to this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong with a call.
///
/// Match on the variant, or use the predicates ([`Error::is_not_found`],
/// [`Error::is_rate_limited`], ...), which stay meaningful as variants are added.
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
/// use petstore_client::{Error, NewPet};
///
/// match client.create_pet(NewPet::new("Rex", 3)).send().await {
///     Ok(pet) => println!("created {}", pet.id),
///     Err(e) if e.is_rate_limited() => println!("slow down; retry after {:?}", e.retry_after()),
///     Err(Error::Api(api)) if api.status() == 400 => println!("rejected: {:?}", api.message()),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
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
    #[error(
        "the request was not sent: {cause} for another {}s, longer than this call may wait{}",
        ceil_secs(*retry_after),
        Attempts(*attempts)
    )]
    Throttled {
        /// How long until the service accepts requests again.
        retry_after: Duration,
        /// The quota the service last reported, if any.
        quota: Option<Quota>,
        /// Why the service asked for quiet.
        cause: ThrottleCause,
        /// Requests this call sent before it was held back.
        attempts: u32,
    },

    /// A timeout elapsed.
    #[error("the {kind} timeout{} elapsed{}", Of(*after), Attempts(*attempts))]
    Timeout {
        /// Which timeout fired.
        kind: TimeoutKind,
        /// The configured duration of that timeout; `None` when it belongs to a
        /// user-supplied `reqwest::Client`, whose settings this crate cannot read.
        after: Option<Duration>,
        /// Attempts made, including the one that timed out.
        attempts: u32,
    },

    /// No connection to the service could be made; the request was not sent.
    #[error("could not connect to the Pet Store API{}", Attempts(*attempts))]
    Connect {
        /// Attempts made.
        attempts: u32,
        /// The underlying transport error.
        source: BoxError,
    },

    /// The connection failed after the request may have been sent (reset, closed early, body
    /// cut short), so whether the service processed it is unknown.
    #[error("the connection to the Pet Store API failed before the response was complete{}", Attempts(*attempts))]
    Connection {
        /// Attempts made.
        attempts: u32,
        /// The underlying transport error.
        source: BoxError,
    },

    /// A successful response whose body is not what the specification says.
    #[error("could not decode the {operation} response at `{path}`: {message}{}", Attempts(*attempts))]
    Decode {
        /// The operation (`listPets`, `createPet`, `getPet`).
        operation: &'static str,
        /// The HTTP status of the response.
        status: u16,
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
    #[error("the response body is larger than the {limit}-byte limit (HTTP {status}){}", Attempts(*attempts))]
    BodyTooLarge {
        /// The HTTP status of the response.
        status: u16,
        /// The configured limit, see
        /// [`PetStoreClientBuilder::max_response_body`](crate::PetStoreClientBuilder::max_response_body).
        limit: usize,
        /// Requests the call sent, this one included.
        attempts: u32,
    },

    /// An argument is outside what the specification allows; nothing was sent.
    #[error("invalid {name} {value}: {expected}")]
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
            Self::Unavailable => "the service asked for quiet while unavailable",
        })
    }
}

fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
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
    #[must_use]
    pub fn api_error(&self) -> Option<&ApiError> {
        match self {
            Self::Api(api) => Some(api),
            _ => None,
        }
    }

    /// The HTTP status of an error response from the service.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        self.api_error().map(ApiError::status)
    }

    /// Whether the service answered 400: the request had missing or invalid values.
    #[must_use]
    pub fn is_bad_request(&self) -> bool {
        self.status() == Some(400)
    }

    /// Whether the service answered 401: the API key is missing or invalid.
    #[must_use]
    pub fn is_unauthorized(&self) -> bool {
        self.status() == Some(401)
    }

    /// Whether the service answered 404: the pet does not exist.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    /// Whether the call failed on the rate limit: a 429 from the service, or a request the
    /// client held back ([`Error::Throttled`]).
    #[must_use]
    pub fn is_rate_limited(&self) -> bool {
        matches!(self, Self::Throttled { .. }) || self.status() == Some(429)
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
/// use petstore_client::{ApiError, Error};
///
/// let error = Error::from(
///     ApiError::new(429, "rate_limited", "Rate limit exceeded")
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
    status: u16,
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
    /// An error response with the specification's error object.
    #[must_use]
    pub fn new(status: u16, code: impl Into<String>, message: impl Into<String>) -> Self {
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
            status: status.as_u16(),
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
    pub fn status(&self) -> u16 {
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
        let status = StatusCode::from_u16(self.status).ok();
        let reason = status.and_then(|s| s.canonical_reason()).unwrap_or("");
        write!(f, "the Pet Store API answered {} {reason}", self.status)?;
        match (&self.message, &self.code, &self.body_snippet) {
            (Some(message), Some(code), _) => write!(f, ": {message} (code `{code}`)")?,
            (_, _, Some(snippet)) if snippet.is_empty() => f.write_str(" with an empty body")?,
            (_, _, Some(snippet)) => {
                write!(f, " with a body that is not an error object: {snippet:?}")?
            }
            _ => {}
        }
        if let Some(wait) = self.retry_after {
            write!(f, "; retry after {}s", wait.as_secs())?;
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
