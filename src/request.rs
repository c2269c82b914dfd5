//! [`PetStoreClient::request`]: endpoints the crate does not wrap (store orders, say), sent
//! through the same path as the typed operations, so that they share the key's rate
//! discipline.

use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use url::Url;

use crate::client::PetStoreClient;
use crate::error::{Cause, Error, Result};
use crate::execute::{Call, Operation, Target};
use crate::response::Response;
use crate::retry::RetryPolicy;

impl PetStoreClient {
    /// A request to an endpoint this crate does not wrap, such as the store orders the
    /// specification mentions without describing. `path` is relative to the base URL
    /// (`store/orders` goes to `https://…/v1/store/orders`).
    ///
    /// It goes through everything the typed operations go through: the API key, the user
    /// agent, the rate discipline shared by every client of the key (pacing, the cooldown
    /// after a 429, which then holds the typed operations too, and the reverse), retries,
    /// timeouts, and the mapping of the specification's error object. Retries follow the
    /// method: a 429 and a failed connect (nothing was sent) are retried for any method; 5xx,
    /// per-attempt timeouts and dropped connections only for the idempotent ones (`GET`,
    /// `HEAD`, `PUT`, `DELETE`, `OPTIONS`), never for `POST` or `PATCH`.
    ///
    /// ```no_run
    /// use petstore_client::reqwest::Method;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize)]
    /// struct Order {
    ///     id: i64,
    ///     status: String,
    /// }
    ///
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// let orders: Vec<Order> = client
    ///     .request(Method::GET, "store/orders")
    ///     .query(&[("status", "placed")])
    ///     .send()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn request(&self, method: Method, path: impl Into<String>) -> RawRequest {
        RawRequest {
            client: self.clone(),
            method,
            path: path.into(),
            query: String::new(),
            body: None,
            retry: None,
            invalid: None,
        }
    }
}

/// The request builder of [`PetStoreClient::request`].
///
/// Setters never fail: a path, query or body that cannot be sent is reported by `send` as
/// [`Error::InvalidArgument`], before anything goes out.
#[derive(Debug, Clone)]
#[must_use = "a request does nothing until it is sent with `.send().await`"]
pub struct RawRequest {
    client: PetStoreClient,
    method: Method,
    path: String,
    /// Percent-encoded; empty for none.
    query: String,
    body: Option<Bytes>,
    retry: Option<RetryPolicy>,
    /// The first argument that could not be serialized: its name, what it must be, and why
    /// it is not.
    invalid: Option<(&'static str, &'static str, Cause)>,
}

impl RawRequest {
    /// Appends to the query string, as reqwest's `RequestBuilder::query` does, from anything
    /// that serializes as a flat list of pairs: a struct, a map, or a slice of `(name, value)`
    /// tuples. Percent-encoded here. Each call adds its pairs after those of earlier calls, a
    /// name given twice included.
    ///
    /// ```no_run
    /// use petstore_client::reqwest::Method;
    ///
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// // GET …/v1/store/orders?status=placed&status=approved&limit=5
    /// let orders = client
    ///     .request(Method::GET, "store/orders")
    ///     .query(&[("status", "placed"), ("status", "approved")])
    ///     .query(&[("limit", 5)])
    ///     .send_for_bytes()
    ///     .await?;
    /// println!("{} bytes", orders.value().len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn query<Q: Serialize + ?Sized>(mut self, query: &Q) -> Self {
        match serde_urlencoded::to_string(query) {
            Ok(pairs) => {
                if !self.query.is_empty() && !pairs.is_empty() {
                    self.query.push('&');
                }
                self.query.push_str(&pairs);
            }
            Err(error) => self.reject("query", "a flat list of name and value pairs", error),
        }
        self
    }

    /// The body, serialized as JSON and sent with `Content-Type: application/json`. A value
    /// that does not serialize fails `send` with [`Error::InvalidArgument`] before anything is
    /// sent.
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// use petstore_client::reqwest::Method;
    /// use serde_json::json;
    ///
    /// let order: serde_json::Value = client
    ///     .request(Method::POST, "store/orders")
    ///     .json(&json!({ "petId": 1, "quantity": 2 }))
    ///     .send()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn json<B: Serialize + ?Sized>(mut self, body: &B) -> Self {
        match serde_json::to_vec(body) {
            Ok(body) => self.body = Some(Bytes::from(body)),
            Err(error) => self.reject("body", "a value that serializes to JSON", error),
        }
        self
    }

    /// Overrides the client's [`RetryPolicy`] for this call.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Sends the request and decodes the JSON body of the success response as `T`. An answer
    /// without a body (a 204) is JSON `null`: ask for `()` or an `Option`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] before anything is sent when the path is not a path under
    /// the base URL (a scheme or host, `//host`, a `.` or `..` segment, a query or fragment),
    /// or the query or body could not be serialized; [`Error::Decode`], with the JSON path of
    /// the problem, when the body is not a `T`; otherwise any [`Error`] of the call.
    pub async fn send<T: DeserializeOwned>(self) -> Result<T> {
        self.send_with_meta().await.map(Response::into_value)
    }

    /// Sends the request and returns the decoded value with the response's metadata.
    ///
    /// # Errors
    ///
    /// As for [`send`](Self::send).
    pub async fn send_with_meta<T: DeserializeOwned>(self) -> Result<Response<T>> {
        let (client, call) = self.into_call()?;
        client.execute(call).await
    }

    /// Sends the request and returns the success body as it came, undecoded.
    ///
    /// # Errors
    ///
    /// As for [`send`](Self::send), without the decoding.
    pub async fn send_for_bytes(self) -> Result<Response<Vec<u8>>> {
        let (client, call) = self.into_call()?;
        client.execute_bytes(call).await
    }

    fn reject(
        &mut self,
        name: &'static str,
        expected: &'static str,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) {
        self.invalid
            .get_or_insert_with(|| (name, expected, Arc::new(cause)));
    }

    fn into_call(self) -> Result<(PetStoreClient, Call)> {
        if let Some((name, expected, cause)) = self.invalid {
            return Err(Error::unserializable(name, expected, cause));
        }
        let mut url = resolve(&self.client.inner.base_url, &self.path)?;
        url.set_query(Some(self.query.as_str()).filter(|query| !query.is_empty()));
        let call = Call {
            operation: Operation::Request,
            method: self.method,
            target: Target::Url(url),
            body: self.body,
            retry: self.retry,
        };
        Ok((self.client, call))
    }
}

/// `path` under `base` (which ends in `/`), refusing anything that could send the key
/// elsewhere or outside the API's version: a scheme or host, `//host`, a backslash, `.` or
/// `..` segments (also percent-encoded), a query or fragment. Percent-encoding is kept.
fn resolve(base: &Url, path: &str) -> Result<Url> {
    let invalid = |expected: &'static str| Error::invalid_argument("path", path, expected);
    if path.starts_with("//") || path.contains("://") || path.contains('\\') {
        return Err(invalid(
            "a path under the base URL, such as `store/orders`: no scheme or host",
        ));
    }
    if path.contains(['?', '#']) {
        return Err(invalid("a path without query or fragment: use `query()`"));
    }
    let relative = path.strip_prefix('/').unwrap_or(path);
    if relative.is_empty() || relative.chars().any(char::is_control) {
        return Err(invalid("a path under the base URL, such as `store/orders`"));
    }
    let dots = |segment: &str| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    };
    if relative.split('/').any(dots) {
        return Err(invalid("a path without `.` or `..` segments"));
    }
    let url = base
        .join(relative)
        .map_err(|_| invalid("a path under the base URL, such as `store/orders`"))?;
    if url.origin() != base.origin() || !url.path().starts_with(base.path()) {
        return Err(invalid("a path under the base URL, such as `store/orders`"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://petstore.example.com/v1/").unwrap()
    }

    #[test]
    fn paths_resolve_under_the_base_url_with_their_encoding_kept() {
        for (path, expected) in [
            (
                "store/orders",
                "https://petstore.example.com/v1/store/orders",
            ),
            (
                "/store/orders",
                "https://petstore.example.com/v1/store/orders",
            ),
            (
                "store/orders/",
                "https://petstore.example.com/v1/store/orders/",
            ),
            ("store/a%2Fb", "https://petstore.example.com/v1/store/a%2Fb"),
            (
                "store/caf%C3%A9",
                "https://petstore.example.com/v1/store/caf%C3%A9",
            ),
            ("store/...", "https://petstore.example.com/v1/store/..."),
        ] {
            assert_eq!(resolve(&base(), path).unwrap().as_str(), expected, "{path}");
        }
    }

    #[test]
    fn a_query_that_does_not_serialize_keeps_the_serializer_error_as_the_source() {
        let client = PetStoreClient::builder()
            .base_url("http://127.0.0.1:9/v1")
            .api_key("FAKE-key")
            .build()
            .unwrap();

        let Err(error) = client
            .request(Method::GET, "store/orders")
            .query(&5)
            .into_call()
        else {
            panic!("expected a number to be refused as a query");
        };

        let Error::InvalidArgument(invalid) = &error else {
            panic!("expected an invalid argument, got {error:?}");
        };
        assert_eq!(
            (invalid.name(), invalid.value()),
            ("query", None),
            "expected the query named, with no value to show"
        );
        assert_eq!(
            error.to_string(),
            "invalid query: a flat list of name and value pairs"
        );
        let source = std::error::Error::source(&error).expect("the serializer's error");
        assert!(
            source.is::<serde_urlencoded::ser::Error>(),
            "expected the serializer's error as the source, got {source:?}"
        );
    }

    #[test]
    fn paths_that_could_leave_the_base_url_are_refused() {
        for path in [
            "https://evil.example/steal",
            "//evil.example/steal",
            "http:evil",
            "../v2/pets",
            "store/../../admin",
            "store/%2e%2e/x",
            "store/%2E%2E",
            "./store",
            "store/./x",
            "\\\\evil.example\\x",
            "store?x=1",
            "store#top",
            "",
            "/",
            "store/\norders",
        ] {
            let error = resolve(&base(), path).unwrap_err();
            assert!(
                matches!(&error, Error::InvalidArgument(invalid) if invalid.name() == "path"),
                "{path:?}: {error:?}"
            );
        }
    }
}
