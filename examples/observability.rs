//! What does the client tell about a call, and how does it reach OpenTelemetry?
//! `cargo run --example observability --features metrics`
//!
//! Against the embedded sandbox, with no configuration: a 429 that the client retries after
//! its `Retry-After`, a call held meanwhile by the cooldown, and a 503 retried after the
//! policy's backoff. It prints each call's `CallInfo`. The `tracing` spans go through
//! `tracing-opentelemetry` to OpenTelemetry's stdout exporter as each ends: their fields
//! already carry OpenTelemetry's HTTP client names, so nothing maps them. What the `metrics`
//! facade recorded goes through an OpenTelemetry recorder (`metrics-exporter-otel`) to the
//! same exporter at the end. An application puts an OTLP exporter in their place.

use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use petstore_client::{CallInfo, PetStoreClient, RetryPolicy};
use petstore_sandbox::{Fault, Plan, Sandbox};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn show(call: &str, info: &CallInfo) {
    let cause = info
        .hold_cause()
        .map_or_else(|| "not held".to_owned(), |cause| cause.to_string());
    println!(
        "{call}: {} attempt(s), held {:?} ({cause}), backoff {:?}, took {:?}",
        info.attempts(),
        info.held(),
        info.backoff(),
        info.elapsed()
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Each span is printed as it ends.
    let tracer_provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    // Only the crate's own attributes, to keep the print short: the layer adds the source
    // location, the thread, the target and busy/idle times by default.
    let spans = tracing_opentelemetry::layer()
        .with_tracer(tracer_provider.tracer("example"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false);
    tracing_subscriber::registry()
        .with(spans)
        .with(Targets::new().with_target("petstore_client", LevelFilter::DEBUG))
        .init();
    // The metrics are printed when the provider shuts down, at the end.
    let meter_provider = SdkMeterProvider::builder()
        .with_periodic_exporter(opentelemetry_stdout::MetricExporter::default())
        .build();
    let recorder =
        metrics_exporter_otel::OpenTelemetryRecorder::new(meter_provider.meter("petstore_client"));
    // OpenTelemetry's advised buckets for `http.client.request.duration`, in seconds; the
    // SDK's default ones (0 to 10,000) suit milliseconds.
    let seconds = vec![
        0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    ];
    for name in [
        "http.client.request.duration",
        "petstore.client.hold.duration",
    ] {
        recorder.set_histogram_bounds(&metrics::KeyName::from(name), seconds.clone());
    }
    metrics::set_global_recorder(recorder)?;

    let sandbox = Sandbox::start().await?;
    let client = PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(sandbox.key(Plan::Pro))
        .retry_policy(RetryPolicy::builder().jitter(false).build())
        .build()?;
    show(
        "a first call",
        client.list_pets().send_with_meta().await?.call_info(),
    );

    sandbox.inject(Fault::status(429).retry_after(2).times(1));
    let (retried, held) = tokio::join!(client.list_pets().send_with_meta(), async {
        // Starts once the first call has its 429.
        tokio::time::sleep(Duration::from_millis(200)).await;
        client.list_pets().send_with_meta().await
    });
    show("a call answered 429, retried", retried?.call_info());
    show("a call during the cooldown", held?.call_info());

    sandbox.inject(Fault::status(503).times(1));
    show(
        "a call answered 503, retried",
        client.list_pets().send_with_meta().await?.call_info(),
    );

    println!("\nmetrics:");
    meter_provider.shutdown()?;
    tracer_provider.shutdown()?;
    Ok(())
}
