//! What does the client tell about a call, and what does it record?
//! `cargo run --example observability --features metrics`
//!
//! Against the embedded sandbox, with no configuration: a 429 that the client retries after
//! its `Retry-After`, a call held meanwhile by the cooldown, and a 503 retried after the
//! policy's backoff. It prints each call's `CallInfo`, the `tracing` spans as they close (with
//! OpenTelemetry's field names), and what the `metrics` facade recorded, read from
//! `metrics-util`'s debugging recorder; an application installs an exporter instead.

use std::time::Duration;

use metrics_util::debugging::DebuggingRecorder;
use petstore_client::{CallInfo, PetStoreClient, RetryPolicy};
use petstore_sandbox::{Fault, Plan, Sandbox};
use tracing_subscriber::fmt::format::FmtSpan;

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
    tracing_subscriber::fmt()
        .with_env_filter("petstore_client=debug")
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .init();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;

    let sandbox = Sandbox::start().await?;
    let client = PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(sandbox.key(Plan::Pro))
        .retry_policy(RetryPolicy::default().with_jitter(false))
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

    println!("\nrecorded metrics:");
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (_, key) = key.into_parts();
        let labels: Vec<String> = key
            .labels()
            .map(|label| format!("{}={}", label.key(), label.value()))
            .collect();
        println!("  {} {{{}}} {value:?}", key.name(), labels.join(", "));
    }
    Ok(())
}
