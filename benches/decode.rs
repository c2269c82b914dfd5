//! The crate's decode path for a list of pets against `serde_json::from_slice::<Vec<Pet>>`,
//! measured so that machine noise cancels out: batches of each side alternate (ABBA) round after
//! round in one process, and the median of the per-round ratios is reported with its
//! interquartile range.
//!
//! Target: ratio <= 1.05. Run with `cargo bench --bench decode`.

mod support;

use std::hint::black_box;
use std::time::{Duration, Instant};

use petstore_client::Pet;
use support::rounds;

/// Paired rounds per case (`BENCH_QUICK=1`: 3).
const ROUNDS: usize = 41;

/// How long one batch of decodes takes, about: long enough that the timer's resolution and a
/// stray interrupt do not matter, short enough that a round sees one machine state.
const BATCH: Duration = Duration::from_millis(5);

#[derive(Clone, Copy)]
enum Side {
    /// `petstore_client`'s own decode path.
    Crate,
    /// `serde_json::from_slice`.
    Raw,
    /// UTF-8 validated first, then `serde_json::from_str`.
    FromStr,
}

/// Decodes `body` `times` times by `side`, and returns the time taken.
fn batch(body: &[u8], side: Side, times: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..times {
        match side {
            Side::Crate => {
                black_box(petstore_client::__private::decode_pets(black_box(body)).unwrap());
            }
            Side::Raw => {
                black_box(serde_json::from_slice::<Vec<Pet>>(black_box(body)).unwrap());
            }
            Side::FromStr => {
                let text = std::str::from_utf8(black_box(body)).unwrap();
                black_box(serde_json::from_str::<Vec<Pet>>(text).unwrap());
            }
        }
    }
    start.elapsed()
}

/// The median, first and third quartiles of `side`'s time over raw's, ABBA round after round.
fn paired(body: &[u8], side: Side, times: u32, rounds: usize) -> (f64, f64, f64) {
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|round| {
            let order = if round % 2 == 0 {
                [side, Side::Raw, Side::Raw, side]
            } else {
                [Side::Raw, side, side, Side::Raw]
            };
            let (mut ours, mut theirs) = (Duration::ZERO, Duration::ZERO);
            for each in order {
                let took = batch(body, each, times);
                match each {
                    Side::Raw => theirs += took,
                    Side::Crate | Side::FromStr => ours += took,
                }
            }
            ours.as_secs_f64() / theirs.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    (
        ratios[rounds / 2],
        ratios[rounds / 4],
        ratios[3 * rounds / 4],
    )
}

fn main() {
    let rounds = rounds(ROUNDS);
    println!("| case | median ratio to `from_slice` | interquartile range | target |");
    println!("| --- | --- | --- | --- |");
    for n in [100usize, 1000] {
        let body = support::pets_json(n).into_bytes();
        // Warms both paths, and sizes a batch by raw's speed.
        batch(&body, Side::Crate, 10);
        let once = batch(&body, Side::Raw, 10) / 10;
        let times = (BATCH.as_secs_f64() / once.as_secs_f64().max(1e-9)).clamp(1.0, 1e6) as u32;
        let (median, low, high) = paired(&body, Side::Crate, times, rounds);
        println!("| decode {n} pets, crate | {median:.3} | {low:.3} to {high:.3} | <= 1.05 |");
        // Which of the two the crate uses is decided by this row.
        let (median, low, high) = paired(&body, Side::FromStr, times, rounds);
        println!(
            "| decode {n} pets, `from_utf8` + `from_str` | {median:.3} | {low:.3} to {high:.3} | |"
        );
    }
}
