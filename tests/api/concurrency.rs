//! Cancelling calls (dropping their futures) at every stage leaves the cooldown gate and the
//! quota pacer consistent (a request that may have reached the service counts as spent), and
//! clones can come and go mid-flight.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use petstore_client::{Pacing, PetStoreClient, RetryPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::{Instant, timeout};

const KEY: &str = "FAKE-concurrency-key";

/// A server on the test's runtime whose n-th request (from 1) gets `answer(n)`, where `None`
/// means: never answer.
async fn server(answer: fn(usize) -> Option<String>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        if socket.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                            return;
                        }
                    }
                    buf.clear();
                    let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                    match answer(n) {
                        Some(reply) => {
                            if socket.write_all(reply.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        None => std::future::pending::<()>().await,
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn reply(status: &str, extra_headers: &str) -> String {
    let body = r#"[{"id":1,"name":"Rex","categoryId":3}]"#;
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{extra_headers}\r\n{body}",
        body.len()
    )
}

fn quota(remaining: u64, reset_in: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    format!(
        "x-ratelimit-limit: 2\r\nx-ratelimit-remaining: {remaining}\r\nx-ratelimit-reset: {}\r\n",
        now + reset_in
    )
}

fn client(addr: SocketAddr) -> PetStoreClient {
    client_with(addr, Pacing::default())
}

fn client_with(addr: SocketAddr, pacing: Pacing) -> PetStoreClient {
    PetStoreClient::builder()
        .base_url(format!("http://{addr}/v1"))
        .api_key(KEY)
        .attempt_timeout(None)
        .pacing(pacing)
        .retry_policy(RetryPolicy::builder().jitter(false).build())
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_call_cancelled_after_sending_counts_as_spent() {
    // 1: one request left this window; 2: never answered (the service counted it); 3: fine.
    let (addr, seen) = server(|n| match n {
        1 => Some(reply("200 OK", &quota(1, 60))),
        2 => None,
        _ => Some(reply("200 OK", &quota(1, 60))),
    })
    .await;
    let client = client_with(addr, Pacing::Sole);
    client.list_pets().send().await.unwrap();

    let start = Instant::now();
    let in_flight = timeout(Duration::from_secs(1), client.list_pets().send()).await;
    assert!(in_flight.is_err(), "the call was not cancelled");
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "the cancelled call was sent"
    );
    // Its request may have been counted: the last of the window's budget is spent, so the next
    // call waits for the reset instead of going into a certain 429.
    client.list_pets().send().await.unwrap();

    assert!(
        start.elapsed() >= Duration::from_secs(59),
        "expected the next call to wait for the reset (59 s or more), waited {:?}",
        start.elapsed()
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        3,
        "expected three requests at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_calls_held_by_the_gate_or_in_backoff_leaves_the_client_usable() {
    // 1: a 429 asking for 30 s of quiet; 2: a 503 (retried after 0.5 s); then fine.
    let (addr, seen) = server(|n| match n {
        1 => Some(reply("429 Too Many Requests", "retry-after: 30\r\n")),
        2 => Some(reply("503 Service Unavailable", "")),
        _ => Some(reply("200 OK", "")),
    })
    .await;
    let client = client(addr);
    let first = tokio::spawn({
        let client = client.clone();
        async move { timeout(Duration::from_secs(5), client.list_pets().send()).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Held by the gate, then dropped with the clone that made it.
    let held = timeout(Duration::from_secs(2), client.clone().list_pets().send()).await;
    assert!(
        held.is_err(),
        "expected the held call to be cancelled, got {held:?}"
    );
    assert!(
        first.await.unwrap().is_err(),
        "the retrying call was not cancelled"
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "a request went out during the cooldown"
    );

    // After the cooldown: request 2 gets a 503, and its retry is cancelled mid-backoff.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let retrying = timeout(Duration::from_millis(100), client.list_pets().send()).await;
    assert!(
        retrying.is_err(),
        "expected the call to be cancelled in its backoff, got {retrying:?}"
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "expected the cancelled retry not to be sent"
    );

    let start = Instant::now();
    client.list_pets().send().await.unwrap();
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "expected the next call to go without waiting"
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        3,
        "expected three requests at the server"
    );
}

#[tokio::test(start_paused = true)]
async fn clones_dropped_mid_flight_do_not_disturb_the_others() {
    let (addr, seen) = server(|_| Some(reply("200 OK", &quota(1_000, 60)))).await;
    let client = client(addr);
    let mut tasks = Vec::new();
    for i in 0..100 {
        let clone = client.clone();
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                // Dropped before it completes, together with its clone.
                let _ = timeout(Duration::ZERO, clone.list_pets().send()).await;
                None
            } else {
                Some(clone.list_pets().send().await.unwrap().len())
            }
        }));
    }
    drop(client);
    let mut completed = 0;
    for task in tasks {
        completed += task.await.unwrap().map_or(0, |n| n);
    }
    assert_eq!(
        completed, 50,
        "expected the 50 calls not dropped to complete"
    );
    assert!(
        seen.load(Ordering::SeqCst) >= 50,
        "expected at least the 50 completed calls at the server, it saw {}",
        seen.load(Ordering::SeqCst)
    );
}

#[tokio::test(start_paused = true)]
async fn a_thousand_concurrent_calls_complete_with_a_consistent_quota() {
    let sandbox = common::sandbox_builder()
        .key(
            "big",
            petstore_sandbox::Plan::Enterprise {
                per_minute: 400,
                per_day: 100_000,
            },
        )
        .start()
        .await
        .unwrap();
    // Sole: the client may spend each window's budget as fast as calls come. The last 200
    // calls wait two whole windows, as long as the default `max_server_wait`: allow more.
    let policy = RetryPolicy::builder()
        .max_server_wait(Duration::from_secs(180))
        .build();
    let client = common::sandbox_client(&sandbox, "big", policy)
        .pacing(Pacing::Sole)
        .build()
        .unwrap();

    let calls: Vec<_> = (0..1000)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.list_pets().limit(1).send_with_meta().await })
        })
        .collect();
    let mut remaining_by_window = std::collections::BTreeMap::new();
    for call in calls {
        let quota = call.await.unwrap().unwrap().quota().unwrap();
        remaining_by_window
            .entry(quota.reset)
            .or_insert_with(Vec::new)
            .push(quota.remaining);
    }

    // Each response of a window saw a different `remaining` (every request counted once), no
    // window took more than its 400, and the windows before the last were used to the full.
    let used: Vec<usize> = remaining_by_window.values().map(Vec::len).collect();
    assert_eq!(
        used.iter().sum::<usize>(),
        1000,
        "expected the 1000 calls across the windows, they served {used:?}"
    );
    assert!(
        used[..used.len() - 1].iter().all(|n| *n == 400),
        "expected every window but the last to serve 400 calls, they served {used:?}"
    );
    for remaining in remaining_by_window.values_mut() {
        let responses = remaining.len();
        remaining.sort_unstable();
        remaining.dedup();
        assert_eq!(
            remaining.len(),
            responses,
            "two responses saw the same remaining"
        );
        assert!(
            responses <= 400,
            "expected at most 400 responses in a window, got {responses}"
        );
    }
    assert_eq!(
        sandbox.stats().total(),
        1000,
        "expected one request per call"
    );
    assert!(
        sandbox.request_log().iter().all(|r| r.status == Some(200)),
        "expected every request answered 200, got the statuses {:?}",
        sandbox
            .request_log()
            .iter()
            .map(|r| r.status)
            .collect::<std::collections::BTreeSet<_>>()
    );
    let last = client.quota().unwrap();
    assert_eq!(
        last.reset,
        *remaining_by_window.keys().last().unwrap(),
        "expected the client's quota to be of the last window"
    );
}
