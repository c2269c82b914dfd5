//! The one execute path every operation goes through: admission (cooldown gate and quota
//! pacer), the request with its headers, the bounded body read, quota and deprecation
//! bookkeeping, classification, retries, and decoding.

use std::sync::atomic::{AtomicU32, Ordering};

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use serde::de::DeserializeOwned;
use tracing::Instrument;
use url::Url;

use crate::client::PetStoreClient;
use crate::deprecation::Deprecation;
use crate::error::{ApiError, Error, Result, TimeoutKind, snippet};
use crate::quota::Quota;
use crate::response::Response;
use crate::retry::{Action, RetryPolicy, classify_failure, classify_status};

/// The specification's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    ListPets,
    CreatePet,
    GetPet,
}

impl Operation {
    pub(crate) const COUNT: usize = 3;

    /// The operation name the specification uses.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::ListPets => "listPets",
            Self::CreatePet => "createPet",
            Self::GetPet => "getPet",
        }
    }

    fn method(self) -> Method {
        match self {
            Self::ListPets | Self::GetPet => Method::GET,
            Self::CreatePet => Method::POST,
        }
    }
}

/// One call, as an operation builder describes it.
pub(crate) struct Call {
    pub(crate) operation: Operation,
    pub(crate) url: Url,
    pub(crate) body: Option<Bytes>,
    pub(crate) retry: Option<RetryPolicy>,
}

/// A response, read whole (up to the body limit).
struct Exchange {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
    truncated: bool,
}

/// Error bodies are only read for their error object or a snippet; more is not needed.
const ERROR_BODY_CAP: usize = 64 * 1024;

impl PetStoreClient {
    pub(crate) async fn execute<T: DeserializeOwned>(&self, call: Call) -> Result<Response<T>> {
        let span = tracing::debug_span!(
            "petstore_client",
            operation = call.operation.name(),
            method = %call.operation.method(),
            path = call.url.path(),
        );
        let attempts = AtomicU32::new(0);
        let run = self.run(&call, &attempts);
        match self.inner.call_timeout {
            Some(limit) => tokio::time::timeout(limit, run)
                .instrument(span)
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Timeout {
                        kind: TimeoutKind::Call,
                        after: Some(limit),
                        attempts: attempts.load(Ordering::Relaxed),
                    })
                }),
            None => run.instrument(span).await,
        }
    }

    async fn run<T: DeserializeOwned>(
        &self,
        call: &Call,
        attempts: &AtomicU32,
    ) -> Result<Response<T>> {
        let inner = &self.inner;
        let policy = call.retry.as_ref().unwrap_or(&inner.retry);
        let operation = call.operation;
        let method = operation.method();
        let mut delays = policy.schedule();
        loop {
            let permit = inner
                .throttle
                .admit(operation.name(), policy.max_server_wait())
                .await?;
            let attempt = attempts.fetch_add(1, Ordering::Relaxed) + 1;
            let span = tracing::debug_span!("attempt", attempt, status = tracing::field::Empty);
            let outcome = self.attempt(call).instrument(span.clone()).await;
            let (action, error) = match outcome {
                Ok(exchange) => {
                    span.record("status", exchange.status.as_u16());
                    let quota = Quota::from_headers(&exchange.headers);
                    if exchange.status.is_success() {
                        permit.complete(quota);
                        return self.finish(operation, exchange, quota, attempt);
                    }
                    let now = inner.throttle.clock().now_utc();
                    let error = ApiError::from_response(
                        exchange.status,
                        &exchange.headers,
                        &exchange.body,
                        quota,
                        now,
                    );
                    let server_wait = error.retry_after();
                    let status = exchange.status;
                    if status == StatusCode::TOO_MANY_REQUESTS
                        || (status == StatusCode::SERVICE_UNAVAILABLE && server_wait.is_some())
                    {
                        inner
                            .throttle
                            .cool_down(server_wait.unwrap_or(policy.initial_delay()));
                    }
                    // Only now, with the gate closed, may a held request look again.
                    permit.complete(quota);
                    (
                        classify_status(&method, status, server_wait),
                        Error::from(error),
                    )
                }
                Err(error) => {
                    drop(permit);
                    (classify_failure(&method, &error), error)
                }
            };
            let error = error.with_attempts(attempt);
            let Action::Retry { server_wait } = action else {
                return Err(error);
            };
            let Some(backoff) = delays.next() else {
                return Err(error);
            };
            let (delay, source) = match server_wait {
                Some(wait) if wait > policy.max_server_wait() => return Err(error),
                Some(wait) => (wait, "Retry-After"),
                None => (backoff, "backoff"),
            };
            tracing::info!(
                operation = operation.name(),
                attempt,
                reason = %error,
                delay = ?delay,
                delay_source = source,
                "retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// One request and its whole response, within the per-attempt timeout.
    async fn attempt(&self, call: &Call) -> Result<Exchange> {
        let inner = &self.inner;
        let mut request = inner
            .http
            .request(call.operation.method(), call.url.clone())
            .header(AUTHORIZATION, inner.authorization.clone())
            .header(USER_AGENT, inner.user_agent.clone())
            .header(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(body) = &call.body {
            request = request
                .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                .body(body.clone());
        }
        let exchange = async {
            let mut response = request.send().await.map_err(|e| self.transport_error(e))?;
            let status = response.status();
            let headers = std::mem::take(response.headers_mut());
            let cap = if status.is_success() {
                inner.max_response_body
            } else {
                inner.max_response_body.min(ERROR_BODY_CAP)
            };
            if status.is_success()
                && response
                    .content_length()
                    .is_some_and(|len| len > cap as u64)
            {
                return Err(Error::BodyTooLarge {
                    status: status.as_u16(),
                    limit: cap,
                });
            }
            let (body, truncated) = read_body(&mut response, cap)
                .await
                .map_err(|e| self.transport_error(e))?;
            Ok(Exchange {
                status,
                headers,
                body,
                truncated,
            })
        };
        match inner.attempt_timeout {
            Some(limit) => tokio::time::timeout(limit, exchange)
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Timeout {
                        kind: TimeoutKind::Attempt,
                        after: Some(limit),
                        attempts: 1,
                    })
                }),
            None => exchange.await,
        }
    }

    fn finish<T: DeserializeOwned>(
        &self,
        operation: Operation,
        exchange: Exchange,
        quota: Option<Quota>,
        attempts: u32,
    ) -> Result<Response<T>> {
        if exchange.truncated {
            return Err(Error::BodyTooLarge {
                status: exchange.status.as_u16(),
                limit: self.inner.max_response_body,
            });
        }
        let value = decode(operation, exchange.status, &exchange.body)?;
        let deprecation = Deprecation::from_headers(&exchange.headers);
        if let Some(notice) = &deprecation {
            self.warn_deprecated_once(operation, notice);
        }
        Ok(Response::new(
            value,
            exchange.status,
            exchange.headers,
            quota,
            deprecation,
            attempts,
        ))
    }

    fn warn_deprecated_once(&self, operation: Operation, notice: &Deprecation) {
        let flag = &self.inner.deprecation_warned[operation as usize];
        if !flag.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                operation = operation.name(),
                deprecated_at = ?notice.deprecated_at,
                sunset = ?notice.sunset,
                "the Pet Store API reports this operation as deprecated; migrate before its sunset"
            );
        }
    }

    fn transport_error(&self, error: reqwest::Error) -> Error {
        if error.is_timeout() {
            let connect = error.is_connect();
            Error::Timeout {
                kind: if connect {
                    TimeoutKind::Connect
                } else {
                    TimeoutKind::Attempt
                },
                after: if connect {
                    self.inner.connect_timeout
                } else {
                    None
                },
                attempts: 1,
            }
        } else if error.is_connect() {
            Error::Connect {
                attempts: 1,
                source: Box::new(error),
            }
        } else {
            Error::Connection {
                attempts: 1,
                source: Box::new(error),
            }
        }
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
    let decode_error = |path: String, message: String| Error::Decode {
        operation: operation.name(),
        status: status.as_u16(),
        path,
        message,
        snippet: snippet(body),
    };
    let text = std::str::from_utf8(body)
        .map_err(|e| decode_error(".".to_owned(), format!("the body is not UTF-8: {e}")))?;
    serde_json::from_str(text).map_err(|error| {
        let (path, message) = locate::<T>(text, &error);
        decode_error(path, message)
    })
}

/// Where in the document decoding failed, and why.
#[cold]
fn locate<T: DeserializeOwned>(text: &str, error: &serde_json::Error) -> (String, String) {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Err(located) => (located.path().to_string(), located.into_inner().to_string()),
        // Trailing data is only caught by the first pass.
        Ok(_) => (".".to_owned(), error.to_string()),
    }
}
