//! [`ApiError`], and the one mapping from an HTTP error response to it.

use std::fmt;
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;

use super::{Attempts, whole_secs};
use crate::call_info::CallInfo;
use crate::headers::Quota;

/// An error response from the service.
///
/// When the body is the specification's error object (`{code, message, status}`), its `code`
/// and `message` are here; when it is not (an HTML page from a proxy, an empty or cut body),
/// [`ApiError::body_snippet`] holds its start instead. The `Display` form is a sentence with
/// the status, the service's message and code, and for a 429 the wait it asked for.
///
/// [`ApiError::new`] and [`ApiError::builder`] let you build one to test your own error
/// handling:
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
    pub(super) call: CallInfo,
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
    /// request; [`ApiError::builder`] adds what the response's head said.
    ///
    /// ```
    /// use petstore_client::{ApiError, StatusCode};
    ///
    /// let api = ApiError::new(StatusCode::NOT_FOUND, "not_found", "pet 42 does not exist");
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
            call: CallInfo::of_attempts(1),
        }
    }

    /// A builder of an error response with the specification's error object, as if the call
    /// had made one request, that adds what the response's head said.
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_client::{ApiError, StatusCode};
    ///
    /// let api = ApiError::builder(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "try later")
    ///     .retry_after(Duration::from_secs(5))
    ///     .build();
    /// assert_eq!(api.retry_after(), Some(Duration::from_secs(5)));
    /// ```
    pub fn builder(
        status: StatusCode,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> ApiErrorBuilder {
        ApiErrorBuilder {
            error: Self::new(status, code, message),
        }
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
            call: CallInfo::of_attempts(1),
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
        self.call.attempts()
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
        write!(f, "{}", Attempts(self.call.attempts()))
    }
}

impl std::error::Error for ApiError {}

/// The setters of 0.1, kept so that code written for it compiles, with a warning.
impl ApiError {
    /// Sets the wait the service asked for in `Retry-After`.
    #[deprecated(
        since = "0.3.0",
        note = "use `ApiError::builder(..).retry_after(d).build()`"
    )]
    #[must_use]
    pub fn with_retry_after(self, retry_after: Duration) -> Self {
        ApiErrorBuilder { error: self }
            .retry_after(retry_after)
            .build()
    }

    /// Sets the quota reported with the response.
    #[deprecated(since = "0.3.0", note = "use `ApiError::builder(..).quota(q).build()`")]
    #[must_use]
    pub fn with_quota(self, quota: Quota) -> Self {
        ApiErrorBuilder { error: self }.quota(quota).build()
    }
}

/// Builds an [`ApiError`] with what a response's head said, to test your own error handling;
/// see [`ApiError::builder`].
///
/// ```
/// use chrono::DateTime;
/// use petstore_client::{ApiError, Quota, StatusCode};
///
/// let reset = DateTime::from_timestamp(1_900_000_000, 0).unwrap();
/// let api = ApiError::builder(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "slow down")
///     .quota(Quota::new(60, 0, reset))
///     .build();
/// assert_eq!(api.quota().map(|q| q.remaining), Some(0));
/// ```
#[must_use]
#[derive(Debug, Clone)]
pub struct ApiErrorBuilder {
    error: ApiError,
}

impl ApiErrorBuilder {
    /// Sets the wait the service asked for in `Retry-After`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_client::{ApiError, StatusCode};
    ///
    /// let api = ApiError::builder(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "slow down")
    ///     .retry_after(Duration::from_secs(30))
    ///     .build();
    /// assert_eq!(api.retry_after(), Some(Duration::from_secs(30)));
    /// ```
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.error.retry_after = Some(retry_after);
        self
    }

    /// Sets the quota reported with the response.
    ///
    /// ```
    /// use chrono::DateTime;
    /// use petstore_client::{ApiError, Quota, StatusCode};
    ///
    /// let reset = DateTime::from_timestamp(1_900_000_000, 0).unwrap();
    /// let api = ApiError::builder(StatusCode::NOT_FOUND, "not_found", "no such pet")
    ///     .quota(Quota::new(60, 59, reset))
    ///     .build();
    /// assert_eq!(api.quota().map(|q| q.limit), Some(60));
    /// ```
    pub fn quota(mut self, quota: Quota) -> Self {
        self.error.quota = Some(quota);
        self
    }

    /// The error.
    ///
    /// ```
    /// use petstore_client::{ApiError, StatusCode};
    ///
    /// let api = ApiError::builder(StatusCode::NOT_FOUND, "not_found", "no such pet").build();
    /// assert_eq!(api, ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such pet"));
    /// ```
    #[must_use]
    pub fn build(self) -> ApiError {
        self.error
    }
}

impl ApiError {
    /// Masks `secret` as `***` in what the answer said.
    pub(crate) fn mask(&mut self, secret: &str) {
        for text in [&mut self.code, &mut self.message, &mut self.body_snippet]
            .into_iter()
            .flatten()
        {
            mask(text, secret);
        }
    }
}

/// Masks `secret` as `***` in `text`; whether it was there.
pub(crate) fn mask(text: &mut String, secret: &str) -> bool {
    let found = !secret.is_empty() && text.contains(secret);
    if found {
        *text = text.replace(secret, "***");
    }
    found
}

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

    #[test]
    #[allow(deprecated)]
    fn the_setters_of_0_1_set_what_the_builder_sets() {
        let quota = Quota::new(60, 0, chrono::DateTime::UNIX_EPOCH);
        let old = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "slow down")
            .with_retry_after(Duration::from_secs(3))
            .with_quota(quota);
        let new = ApiError::builder(StatusCode::TOO_MANY_REQUESTS, "rate_limited", "slow down")
            .retry_after(Duration::from_secs(3))
            .quota(quota)
            .build();
        assert_eq!(
            old, new,
            "each 0.1 setter sets what its builder setter does"
        );
    }
}
