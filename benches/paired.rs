//! The crate's overhead against the same calls made with raw `reqwest` and `serde_json`, measured
//! so that machine noise cancels out: crate and raw batches alternate (ABBA) round after round in one process, and the median of
//! the per-round ratios is reported with its interquartile range. Criterion's separate runs of
//! each side drift apart on a shared, noisy machine; this pairing does not.
//!
//! Run with `cargo bench --bench paired`.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use petstore_client::{NewPet, PetStoreClient};
use support::{Raw, crate_client, fan_out, http_client, rounds, runtime, start_server};
use tokio::runtime::Runtime;

/// Paired rounds per case (`BENCH_QUICK=1`: 3).
const ROUNDS: usize = 41;
const CALLS_PER_BATCH: usize = 256;

#[derive(Clone, Copy)]
enum Side {
    Crate,
    Raw,
}

#[derive(Clone, Copy)]
enum Call {
    List,
    Create,
}

/// Runs `CALLS_PER_BATCH` calls, `concurrency` at a time, and returns the time taken.
fn batch(
    rt: &Runtime,
    client: &PetStoreClient,
    raw: &Arc<Raw>,
    side: Side,
    call: Call,
    concurrency: usize,
) -> Duration {
    let start = Instant::now();
    rt.block_on(async {
        for _ in 0..CALLS_PER_BATCH / concurrency {
            fan_out(concurrency, || {
                let (client, raw) = (client.clone(), raw.clone());
                async move {
                    match (side, call) {
                        (Side::Crate, Call::List) => {
                            client.list_pets().limit(100).send().await.unwrap();
                        }
                        (Side::Raw, Call::List) => {
                            raw.list_pets().await;
                        }
                        (Side::Crate, Call::Create) => {
                            client
                                .create_pet(NewPet::new("Rex", 3))
                                .send()
                                .await
                                .unwrap();
                        }
                        (Side::Raw, Call::Create) => {
                            raw.create_pet(&NewPet::new("Rex", 3)).await;
                        }
                    }
                }
            })
            .await;
        }
    });
    start.elapsed()
}

fn main() {
    let rt = runtime();
    let addr = rt.block_on(start_server());
    let http = http_client();
    let client = crate_client(addr, http.clone());
    let raw = Arc::new(Raw::new(addr, http));
    let rounds = rounds(ROUNDS);

    println!("| case | median ratio crate/raw | interquartile range | target |");
    println!("| --- | --- | --- | --- |");
    for (name, call) in [
        ("list_pets(limit 100)", Call::List),
        ("create_pet", Call::Create),
    ] {
        for concurrency in [1, 32] {
            // Warm the pool and both paths.
            batch(&rt, &client, &raw, Side::Crate, call, concurrency);
            batch(&rt, &client, &raw, Side::Raw, call, concurrency);
            let mut ratios: Vec<f64> = (0..rounds)
                .map(|round| {
                    let order = if round % 2 == 0 {
                        [Side::Crate, Side::Raw, Side::Raw, Side::Crate]
                    } else {
                        [Side::Raw, Side::Crate, Side::Crate, Side::Raw]
                    };
                    let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
                    for side in order {
                        let took = batch(&rt, &client, &raw, side, call, concurrency);
                        match side {
                            Side::Crate => ours += took,
                            Side::Raw => theirs += took,
                        }
                    }
                    ours.as_secs_f64() / theirs.as_secs_f64()
                })
                .collect();
            ratios.sort_by(f64::total_cmp);
            println!(
                "| {name}, concurrency {concurrency} | {:.3} | {:.3} to {:.3} | <= 1.03 |",
                ratios[rounds / 2],
                ratios[rounds / 4],
                ratios[3 * rounds / 4]
            );
        }
    }
}
