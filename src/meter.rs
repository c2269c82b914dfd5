//! What calls record through the [`metrics`] facade (the `metrics` feature).
//!
//! `metrics` rather than `opentelemetry`'s metrics API: `metrics` is a facade, as `log` is
//! for logs, so the library records and the application picks the exporter
//! (`metrics-exporter-prometheus`, `metrics-exporter-opentelemetry`, StatsD, ...) or none, and
//! a call costs an atomic load when no recorder is installed. `opentelemetry`'s API would
//! tie every user to OpenTelemetry's meter provider and its SDK's release train, and bring
//! that stack into the library's dependencies. The names follow the OpenTelemetry HTTP client
//! semantic conventions where one exists, so an OpenTelemetry exporter shows them as its own.
//!
//! No label carries the API key, in any form: a client is told apart by `server.address`
//! and `server.port` only.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use metrics::{
    Label, SharedString, Unit, counter, describe_counter, describe_gauge, describe_histogram,
};
use metrics::{gauge, histogram};

use crate::call_info::CallInfo;
use crate::error::Error;
use crate::headers::Quota;

/// Seconds per HTTP request (each attempt), by method, status or error, server and
/// operation (OpenTelemetry's name).
pub(crate) const REQUEST_DURATION: &str = "http.client.request.duration";
/// Seconds a call was held by the rate discipline, by the cause of its longest hold.
pub(crate) const HOLD_DURATION: &str = "petstore.client.hold.duration";
/// Calls held by the rate discipline, by the cause of their longest hold.
pub(crate) const HOLDS: &str = "petstore.client.holds";
/// Responses 429 and 503, by status.
pub(crate) const THROTTLED: &str = "petstore.client.responses.throttled";
/// Retries, by operation.
pub(crate) const RETRIES: &str = "petstore.client.retries";
/// `remaining` of each rate-limit window, as the latest response that reported it said.
pub(crate) const QUOTA_REMAINING: &str = "petstore.client.quota.remaining";
/// `limit` of each rate-limit window, as the latest response that reported it said.
pub(crate) const QUOTA_LIMIT: &str = "petstore.client.quota.limit";
/// The label that tells the rate-limit windows apart: the window's length in seconds
/// (`60s`, `86400s`), as the rate discipline reckons it from the first report of a period.
pub(crate) const QUOTA_WINDOW: &str = "petstore.quota.window";
/// How many instances the rate discipline sees spending the key's budget.
pub(crate) const INSTANCES: &str = "petstore.client.instances";
/// 1 while the fleet's shared state answers, 0 while it does not (with a shared store only).
pub(crate) const STORE_LIVE: &str = "petstore.client.store.live";
/// Times the shared store was found to have lost the state (evicted, flushed, a failover).
pub(crate) const STORE_LOST: &str = "petstore.client.store.lost";

/// The labels every metric of one client carries, built once with the client.
#[derive(Debug)]
pub(crate) struct Meter {
    server: [Label; 2],
}

impl Meter {
    /// The meter of a client of `host` on `port`; describes the metrics to the recorder.
    pub(crate) fn new(host: &str, port: Option<u16>) -> Self {
        describe_histogram!(
            REQUEST_DURATION,
            Unit::Seconds,
            "Duration of HTTP client requests."
        );
        describe_histogram!(
            HOLD_DURATION,
            Unit::Seconds,
            "Time a call was held by the client's rate discipline."
        );
        describe_counter!(HOLDS, "Calls held by the client's rate discipline.");
        describe_counter!(THROTTLED, "Responses 429 and 503.");
        describe_counter!(RETRIES, "Requests sent again after a failed attempt.");
        describe_gauge!(
            QUOTA_REMAINING,
            "Requests left in each rate-limit window, as last reported."
        );
        describe_gauge!(
            QUOTA_LIMIT,
            "Request limit of each rate-limit window, as last reported."
        );
        describe_gauge!(INSTANCES, "Instances seen spending the key's budget.");
        describe_gauge!(STORE_LIVE, "Whether the shared rate-limit store answers.");
        describe_counter!(
            STORE_LOST,
            "Times the shared rate-limit store lost the state."
        );
        let port = port.map_or_else(String::new, |port| port.to_string());
        // Shared, so that labelling a metric copies no string.
        Self {
            server: [
                Label::new("server.address", Arc::<str>::from(host)),
                Label::new("server.port", Arc::<str>::from(port)),
            ],
        }
    }

    fn labels(&self, more: impl IntoIterator<Item = Label>) -> Vec<Label> {
        self.server.iter().cloned().chain(more).collect()
    }

    /// One request of `operation` ended after `took`: with a response of some status, or an
    /// error.
    pub(crate) fn request(
        &self,
        operation: &'static str,
        method: &Method,
        outcome: Result<StatusCode, &Error>,
        took: Duration,
    ) {
        let answer = match outcome {
            Ok(status) => Label::new("http.response.status_code", status.as_str().to_owned()),
            Err(error) => Label::new("error.type", error_type(error)),
        };
        let labels = self.labels([
            Label::new("http.request.method", method.as_str().to_owned()),
            Label::new("petstore.operation", operation),
            answer,
        ]);
        histogram!(REQUEST_DURATION, labels).record(took);
        if let Ok(status @ (StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE)) =
            outcome
        {
            let labels = self.labels([Label::new(
                "http.response.status_code",
                status.as_str().to_owned(),
            )]);
            counter!(THROTTLED, labels).increment(1);
        }
    }

    /// A request of `operation` is about to be sent again.
    pub(crate) fn retry(&self, operation: &'static str) {
        let labels = self.labels([Label::new("petstore.operation", operation)]);
        counter!(RETRIES, labels).increment(1);
    }

    /// A response reported `quota`, of a window `length` long.
    pub(crate) fn quota(&self, quota: Quota, length: Duration) {
        // Built once for both gauges: cloning them copies no string.
        let labels = self.labels([Label::new(QUOTA_WINDOW, window_name(length))]);
        gauge!(QUOTA_REMAINING, labels.clone()).set(quota.remaining as f64);
        gauge!(QUOTA_LIMIT, labels).set(quota.limit as f64);
    }

    /// What the rate discipline knows of the fleet: the instances it sees, and whether the
    /// shared store answers (`None` without one).
    pub(crate) fn fleet(&self, instances: f64, store_live: Option<bool>, store_lost: u64) {
        gauge!(INSTANCES, self.labels([])).set(instances);
        if let Some(live) = store_live {
            gauge!(STORE_LIVE, self.labels([])).set(f64::from(u8::from(live)));
            counter!(STORE_LOST, self.labels([])).absolute(store_lost);
        }
    }

    /// A call of `operation` ended, having gone as `call` tells.
    pub(crate) fn call(&self, operation: &'static str, call: &CallInfo) {
        let Some(cause) = call.hold_cause() else {
            return;
        };
        let labels = self.labels([
            Label::new("petstore.operation", operation),
            Label::new("cause", cause.as_str()),
        ]);
        histogram!(HOLD_DURATION, labels.clone()).record(call.held());
        counter!(HOLDS, labels).increment(1);
    }
}

/// A window's label: its length in seconds, without allocating for the usual lengths, and
/// shared otherwise, so that cloning it copies no string.
fn window_name(length: Duration) -> SharedString {
    match length.as_secs() {
        60 => SharedString::const_str("60s"),
        3_600 => SharedString::const_str("3600s"),
        86_400 => SharedString::const_str("86400s"),
        secs => SharedString::from(Arc::<str>::from(format!("{secs}s"))),
    }
}

/// OpenTelemetry's `error.type` of a request that got no response.
fn error_type(error: &Error) -> &'static str {
    match error {
        Error::Timeout(_) => "timeout",
        Error::Connect(_) => "connect_error",
        Error::Connection(_) => "connection_error",
        Error::BodyTooLarge(_) => "body_too_large",
        Error::Decode(_) => "decode_error",
        Error::Api(_) | Error::Throttled(_) | Error::InvalidArgument(_) | Error::Config(_) => {
            "_OTHER"
        }
    }
}
