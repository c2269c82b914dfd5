//! The `tracing` spans as `tracing-opentelemetry` exports them: OpenTelemetry's HTTP client
//! attribute names and types, with nothing mapped, against the sandbox on tokio's paused clock.
//!
//! One test in its own binary: the subscriber is set for the test's thread only, and a sibling
//! test's thread without one could reach the crate's span callsites first and have `tracing`
//! cache them as disabled for the whole process (see `common::capture`).

use crate::common;

use std::collections::BTreeMap;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{SpanId, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use petstore_client::{RateLimitScope, RetryPolicy};
use petstore_sandbox::{Fault, Plan};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;

#[tokio::test(start_paused = true)]
async fn spans_export_to_opentelemetry_under_its_http_client_names() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    // Only the crate's own fields: no source location, thread, target or busy time.
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("test"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(Targets::new().with_target("petstore_client", LevelFilter::DEBUG));
    let _subscriber = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    let sandbox = common::sandbox().await;
    let client = common::sandbox_client(
        &sandbox,
        sandbox.key(Plan::Pro),
        RetryPolicy::builder().jitter(false).build(),
    )
    .rate_limit_scope(RateLimitScope::Client)
    .build()
    .unwrap();
    sandbox.inject(Fault::status(503).times(1));

    client.list_pets().send().await.unwrap();

    // Name, parent and attributes of each span, in the order they ended.
    let spans: Vec<(String, SpanId, BTreeMap<String, Value>)> = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .map(|span| {
            let attributes = span
                .attributes
                .into_iter()
                .map(|kv| (kv.key.to_string(), kv.value))
                .collect();
            (span.name.into_owned(), span.parent_span_id, attributes)
        })
        .collect();
    let call_id = span_id(&exporter, "petstore_client");
    let attributes = |pairs: &[(&str, Value)]| -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), value.clone()))
            .collect()
    };
    let first = (
        "attempt".to_owned(),
        call_id,
        attributes(&[("http.response.status_code", 503.into())]),
    );
    let resent = (
        "attempt".to_owned(),
        call_id,
        attributes(&[
            ("http.request.resend_count", 1.into()),
            ("http.response.status_code", 200.into()),
        ]),
    );
    let port = i64::from(sandbox.base_url().port().unwrap());
    let call = (
        "petstore_client".to_owned(),
        SpanId::INVALID,
        attributes(&[
            ("petstore.operation", "listPets".into()),
            ("http.request.method", "GET".into()),
            ("url.path", "/v1/pets".into()),
            ("server.address", "127.0.0.1".into()),
            ("server.port", port.into()),
        ]),
    );
    assert_eq!(spans, [first, resent, call]);
}

/// The id of the one exported span named `name`.
fn span_id(exporter: &InMemorySpanExporter, name: &str) -> SpanId {
    let spans = exporter.get_finished_spans().unwrap();
    let mut named = spans.iter().filter(|span| span.name == name);
    let span = named.next().expect("the span was exported");
    assert!(named.next().is_none(), "expected one span named {name}");
    span.span_context.span_id()
}
