//! What each kind of [`Error`](super::Error) other than an API error holds, behind accessors so
//! that a release can add to it without breaking a caller.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;

use super::{Attempts, ThrottleCause, TimeoutKind, whole_secs};
use crate::call_info::CallInfo;
use crate::headers::Quota;

/// A lower-level error kept as the cause of one of this crate's. An `Arc`, so that a request
/// builder (which is `Clone`) can keep the first argument it could not serialize.
pub(crate) type Cause = Arc<dyn StdError + Send + Sync>;

/// The innermost error of `cause`'s chain: what the operating system, the TLS library or the
/// JSON parser said. The layers above it (reqwest's "error sending request for url", hyper's
/// "client error (Connect)") say again what this crate's message says.
fn root(cause: &Cause) -> &(dyn StdError + 'static) {
    let mut error: &(dyn StdError + 'static) = &**cause;
    while let Some(inner) = error.source() {
        error = inner;
    }
    error
}

/// The request was not sent: the service asked for quiet (a `Retry-After`, or a spent quota)
/// for longer than the call may wait. The error of [`Error::Throttled`](super::Error::Throttled).
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) {
/// use petstore_client::Error;
///
/// if let Err(Error::Throttled(held)) = client.list_pets().send().await {
///     println!("not sent ({:?}); the service accepts requests again in {:?}", held.cause(), held.retry_after());
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ThrottledError {
    pub(crate) retry_after: Duration,
    pub(crate) quota: Option<Quota>,
    pub(crate) cause: ThrottleCause,
    pub(crate) call: Box<CallInfo>,
}

impl ThrottledError {
    /// How long until the service accepts requests again, exactly, from when the call gave
    /// up (`Display` rounds it up to whole seconds).
    #[must_use]
    pub fn retry_after(&self) -> Duration {
        self.retry_after
    }

    /// The quota the service last reported, if any.
    #[must_use]
    pub fn quota(&self) -> Option<Quota> {
        self.quota
    }

    /// Why the service asked for quiet: the rate limit, or a 503.
    #[must_use]
    pub fn cause(&self) -> ThrottleCause {
        self.cause
    }

    /// Requests this call sent before it was held back.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.call.attempts()
    }
}

impl fmt::Display for ThrottledError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the request was not sent: ")?;
        if self.retry_after.is_zero() {
            // Held for a response still in flight, or at the deadline already.
            write!(f, "{}, and this call may wait no longer", self.cause)?;
        } else {
            write!(
                f,
                "{} for another {}s, longer than this call may wait",
                self.cause,
                whole_secs(self.retry_after)
            )?;
        }
        write!(f, "{}", Attempts(self.call.attempts()))
    }
}

impl StdError for ThrottledError {}

/// One of the client's timeouts fired. The error of [`Error::Timeout`](super::Error::Timeout).
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) {
/// use petstore_client::Error;
///
/// if let Err(Error::Timeout(timeout)) = client.list_pets().send().await {
///     println!("the {} timeout ({:?}) fired", timeout.kind(), timeout.after());
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TimeoutError {
    pub(crate) kind: TimeoutKind,
    pub(crate) after: Option<Duration>,
    pub(crate) call: Box<CallInfo>,
}

impl TimeoutError {
    /// Which timeout fired.
    #[must_use]
    pub fn kind(&self) -> TimeoutKind {
        self.kind
    }

    /// The configured duration of that timeout; `None` when it belongs to a user-supplied
    /// `reqwest::Client`, whose settings this crate cannot read.
    #[must_use]
    pub fn after(&self) -> Option<Duration> {
        self.after
    }

    /// Attempts made, including the one that timed out.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.call.attempts()
    }
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} timeout", self.kind)?;
        if let Some(after) = self.after {
            write!(f, " of {after:?}")?;
        }
        write!(f, " elapsed{}", Attempts(self.call.attempts()))
    }
}

impl StdError for TimeoutError {}

/// Where a connect or connection error happened, why, and after how many attempts.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) address: String,
    pub(crate) cause: Cause,
    pub(crate) call: Box<CallInfo>,
}

impl Link {
    pub(crate) fn of_one_attempt(address: String, cause: Cause) -> Self {
        Self {
            address,
            cause,
            call: Box::new(CallInfo::of_attempts(1)),
        }
    }
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("address", &self.address)
            .field("cause", &root(&self.cause))
            .field("call", &self.call)
            .finish()
    }
}

/// Defines the error of a transport failure (a [`Link`]): its accessors, a message naming
/// the address, and the root cause as its source.
macro_rules! transport_error {
    ($(#[$doc:meta])* $name:ident, $message:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name(pub(crate) Link);

        impl $name {
            /// The host and port of the connection, e.g. `petstore.example.com:443`.
            #[must_use]
            pub fn address(&self) -> &str {
                &self.0.address
            }

            /// Attempts made.
            #[must_use]
            pub fn attempts(&self) -> u32 {
                self.0.call.attempts()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, $message, self.0.address)?;
                write!(f, "{}", Attempts(self.0.call.attempts()))
            }
        }

        impl StdError for $name {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(root(&self.0.cause))
            }
        }
    };
}

transport_error!(
    /// No connection to the service could be made, so the request was not sent. The error of
    /// [`Error::Connect`](super::Error::Connect).
    ///
    /// Its message names the address; [`source()`](StdError::source) is the root cause as the
    /// operating system or the TLS library gave it: for a refused connection, a
    /// [`std::io::Error`] of kind [`ConnectionRefused`](std::io::ErrorKind::ConnectionRefused).
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) {
    /// use std::error::Error as _;
    /// use petstore_client::Error;
    ///
    /// if let Err(Error::Connect(connect)) = client.list_pets().send().await {
    ///     let refused = connect
    ///         .source()
    ///         .and_then(|cause| cause.downcast_ref::<std::io::Error>())
    ///         .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
    ///     println!("nothing listens at {}: {refused}", connect.address());
    /// }
    /// # }
    /// ```
    ConnectError,
    "could not connect to the Pet Store API at {}"
);

transport_error!(
    /// The connection failed after the request may have been sent (reset, closed early, body
    /// cut short), so whether the service processed it is unknown. The error of
    /// [`Error::Connection`](super::Error::Connection).
    ///
    /// Its message names the address; [`source()`](StdError::source) is the root cause, such
    /// as a [`std::io::Error`] of kind [`ConnectionReset`](std::io::ErrorKind::ConnectionReset),
    /// or hyper's "connection closed before message completed".
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) {
    /// use petstore_client::Error;
    ///
    /// if let Err(Error::Connection(connection)) = client.list_pets().send().await {
    ///     println!("{} dropped the connection; the request may have been processed", connection.address());
    /// }
    /// # }
    /// ```
    ConnectionError,
    "the connection to the Pet Store API at {} failed before the response was complete"
);

/// A successful response whose body is not what the specification says. The error of
/// [`Error::Decode`](super::Error::Decode).
///
/// Its message names the operation and the JSON path; [`source()`](StdError::source) is
/// what the JSON parser said was wrong there (a `serde_json::Error`, or a
/// [`std::str::Utf8Error`] for a body that is not UTF-8).
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) {
/// use petstore_client::Error;
///
/// if let Err(Error::Decode(decode)) = client.list_pets().send().await {
///     println!("unexpected {} body at {}: {}", decode.operation(), decode.path(), decode.snippet());
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct DecodeError {
    pub(crate) operation: &'static str,
    pub(crate) status: StatusCode,
    pub(crate) path: String,
    pub(crate) snippet: String,
    pub(crate) cause: Cause,
    pub(crate) call: Box<CallInfo>,
}

impl DecodeError {
    /// The operation (`listPets`, `createPet`, `getPet`, or `request` for
    /// [`PetStoreClient::request`](crate::PetStoreClient::request)).
    #[must_use]
    pub fn operation(&self) -> &'static str {
        self.operation
    }

    /// The HTTP status of the response.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Where in the JSON document decoding failed, e.g. `[3].status` (`.` is the root).
    #[must_use]
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The start of the body, at most 512 bytes, for diagnosis.
    #[must_use]
    pub fn snippet(&self) -> &str {
        &self.snippet
    }

    /// Requests the call sent, this one included.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.call.attempts()
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "could not decode the {} response at `{}`{}",
            self.operation,
            self.path,
            Attempts(self.call.attempts())
        )
    }
}

impl StdError for DecodeError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(root(&self.cause))
    }
}

/// The response body was larger than the client accepts; reading stopped at the limit. The
/// error of [`Error::BodyTooLarge`](super::Error::BodyTooLarge).
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) {
/// use petstore_client::Error;
///
/// if let Err(Error::BodyTooLarge(large)) = client.list_pets().send().await {
///     println!("a {} body over {} bytes", large.status(), large.limit());
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct BodyTooLargeError {
    pub(crate) status: StatusCode,
    pub(crate) limit: usize,
    pub(crate) call: Box<CallInfo>,
}

impl BodyTooLargeError {
    /// The HTTP status of the response.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The configured limit, see
    /// [`PetStoreClientBuilder::max_response_body`](crate::PetStoreClientBuilder::max_response_body).
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Requests the call sent, this one included.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.call.attempts()
    }
}

impl fmt::Display for BodyTooLargeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the response body is larger than the {}-byte limit (HTTP {}){}",
            self.limit,
            self.status.as_u16(),
            Attempts(self.call.attempts())
        )
    }
}

impl StdError for BodyTooLargeError {}

/// An argument is outside what the specification allows, or could not be serialized; nothing
/// was sent. The error of [`Error::InvalidArgument`](super::Error::InvalidArgument).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> petstore_client::Result<()> {
/// use petstore_client::{Error, PetStoreClient};
///
/// let client = PetStoreClient::builder()
///     .base_url("http://localhost:8080/v1")
///     .api_key("my-api-key")
///     .build()?;
/// let Err(Error::InvalidArgument(invalid)) = client.list_pets().limit(500).send().await else {
///     panic!("a limit of 500 is refused before sending");
/// };
/// assert_eq!((invalid.name(), invalid.value()), ("limit", Some("500")));
/// assert_eq!(invalid.expected(), "the API accepts 1 to 100");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct InvalidArgumentError {
    pub(crate) name: &'static str,
    pub(crate) value: Option<String>,
    pub(crate) expected: &'static str,
    pub(crate) cause: Option<Cause>,
}

impl InvalidArgumentError {
    /// The parameter, as the specification names it (`limit`, `status`), or the part of a
    /// request (`path`, `query`, `body`, `pet`).
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The rejected value; `None` for a value that could not be serialized, whose
    /// serializer's complaint is the [`source()`](StdError::source).
    #[must_use]
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// What the specification, or the request, allows.
    #[must_use]
    pub fn expected(&self) -> &'static str {
        self.expected
    }
}

impl fmt::Display for InvalidArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}", self.name)?;
        if let Some(value) = &self.value {
            write!(f, " {value}")?;
        }
        write!(f, ": {}", self.expected)
    }
}

impl StdError for InvalidArgumentError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.cause.as_ref().map(root)
    }
}

/// The client could not be built from the given configuration. The error of
/// [`Error::Config`](super::Error::Config).
///
/// Its message says what to change, without the API key or a password; where a lower-level
/// error is behind it (a URL that does not parse, an HTTP client that cannot be created),
/// that error is the [`source()`](StdError::source).
///
/// ```
/// use petstore_client::{Error, PetStoreClient};
///
/// let error = PetStoreClient::builder().api_key("my-api-key").build().unwrap_err();
/// assert!(matches!(error, Error::Config(_)));
/// assert_eq!(
///     error.to_string(),
///     "invalid client configuration: no base URL: call base_url() or set PETSTORE_BASE_URL",
/// );
/// ```
#[derive(Debug, Clone)]
pub struct ConfigError {
    pub(crate) reason: String,
    pub(crate) cause: Option<Cause>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid client configuration: {}", self.reason)
    }
}

impl StdError for ConfigError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.cause.as_ref().map(root)
    }
}
