//! [`Response`]: a call's value with the metadata of the response it came from.

use http::{HeaderMap, StatusCode};

use crate::call_info::CallInfo;
use crate::headers::Deprecation;
use crate::headers::Quota;

/// A call's decoded value together with the response's metadata: status, headers, the
/// rate-limit [`Quota`], and any [`Deprecation`] notice.
///
/// Every request builder returns one from `send_with_meta()`; `send()` returns the value alone.
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
/// let response = client.list_pets().limit(10).send_with_meta().await?;
/// if let Some(quota) = response.quota() {
///     println!("{} of {} requests left until {}", quota.remaining, quota.limit, quota.reset);
/// }
/// let pets = response.into_value();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Response<T> {
    value: T,
    status: StatusCode,
    headers: HeaderMap,
    quota: Option<Quota>,
    deprecation: Option<Deprecation>,
    call: CallInfo,
}

impl<T> Response<T> {
    pub(crate) fn new(
        value: T,
        status: StatusCode,
        headers: HeaderMap,
        quota: Option<Quota>,
        deprecation: Option<Deprecation>,
        call: CallInfo,
    ) -> Self {
        Self {
            value,
            status,
            headers,
            quota,
            deprecation,
            call,
        }
    }

    /// The decoded value.
    #[must_use]
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The decoded value, dropping the metadata.
    #[must_use]
    pub fn into_value(self) -> T {
        self.value
    }

    /// The HTTP status, such as `200 OK` or `201 Created` (it compares equal to its number).
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The value of a response header (case-insensitive name), if present once or more and
    /// valid text; the first one when repeated.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Every response header.
    #[must_use]
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The rate-limit quota this response reported.
    #[must_use]
    pub fn quota(&self) -> Option<Quota> {
        self.quota
    }

    /// The deprecation notice (`Deprecation` and `Sunset` headers) of this response.
    #[must_use]
    pub fn deprecation(&self) -> Option<&Deprecation> {
        self.deprecation.as_ref()
    }

    /// How many requests the call sent to get this response (1 when it was not retried).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.call.attempts()
    }

    /// How the call went: attempts, how long the rate discipline held it and why, backoff
    /// between retries, and the time it took.
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// let response = client.list_pets().send_with_meta().await?;
    /// let call = response.call_info();
    /// println!("{} attempts, held {:?}, in {:?}", call.attempts(), call.held(), call.elapsed());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn call_info(&self) -> &CallInfo {
        &self.call
    }
}
