//! What the Redis shared state (feature `redis`) costs a call: the latency of a call made with
//! `shared_state(RedisState)` on a loopback `redis-server`, as a ratio to the same call made
//! without it, in the same run, against the embedded sandbox. With the state, every admission
//! is one script round trip to Redis before the request is sent.
//!
//! Two clients, each with a rate-limit state of its own (`RateLimitScope::Client`) and the
//! default pacing, each on a sandbox key of its own whose limits never bind, so that no call
//! is ever held; calls are made one at a time. Criterion measures each side first; then the
//! two sides alternate (ABBA) batch after batch, as in `benches/paired.rs`, and a final line
//! per operation gives each side's mean and median latency, their ratios, and how many calls
//! took over a millisecond (a held call would), followed by how many script runs Redis
//! counted for the calls made with it, per call. The same comparison is then made with
//! `CONCURRENT` tasks calling back to back on each client: the ratio of the two sides' times
//! for the same calls, and Redis's script runs per call. Last, a caller slower than one call
//! per lease: each of its calls is a round trip to Redis.
//!
//! Run with `cargo bench --bench redis --features redis` (`redis-server` must be on `PATH`).

#[allow(dead_code)] // the bench uses part of the tests' helper
#[path = "../tests/common/redis_server.rs"]
mod redis_server;
mod support;

use std::time::{Duration, Instant};

use criterion::Criterion;
use petstore_client::{NewPet, PetStoreClient, RateLimitScope, RedisState};
use petstore_sandbox::{Plan, Sandbox};
use redis_server::RedisServer;
use support::{rounds, runtime};
use tokio::runtime::Runtime;

/// Limits that never bind. The minute's is the lower, so the sandbox always reports that one
/// window.
const PLAN: Plan = Plan::Enterprise {
    per_minute: 1_000_000_000,
    per_day: u32::MAX,
};
const KEY_WITHOUT: &str = "bench-without-redis";
const KEY_WITH: &str = "bench-with-redis";

const ROUNDS: usize = 41;
const CALLS_PER_BATCH: usize = 100;
/// Calls made on each side before anything is measured: the first Redis call connects and
/// loads the script.
const WARM_UP_CALLS: usize = 200;
/// The tasks calling at once on one client in the concurrent comparison.
const CONCURRENT: usize = 16;
/// Calls each task makes in one batch of the concurrent comparison.
const CALLS_PER_TASK: usize = 50;
/// On loopback a call takes microseconds; one this slow was held, or something is wrong.
const SLOW: Duration = Duration::from_millis(1);
/// The gap between two calls of a caller slower than one call per lease (a lease is spent for
/// 100 ms, `docs/redis.md`): each of its calls asks Redis.
const SPACED: Duration = Duration::from_millis(150);
/// Calls in one batch of the spaced comparison.
const SPACED_CALLS: usize = 5;
/// Rounds of the spaced comparison: each takes `4 × SPACED_CALLS × SPACED` per operation.
const SPACED_ROUNDS: usize = 9;

#[derive(Clone, Copy)]
enum Call {
    List,
    Create,
}

const CALLS: [(&str, Call); 2] = [
    ("list_pets(limit 1)", Call::List),
    ("create_pet", Call::Create),
];

impl Call {
    async fn on(self, client: &PetStoreClient) {
        match self {
            Call::List => {
                client.list_pets().limit(1).send().await.unwrap();
            }
            Call::Create => {
                client
                    .create_pet(NewPet::new("Rex", 3))
                    .send()
                    .await
                    .unwrap();
            }
        }
    }

    /// The criterion group's name.
    fn group(self) -> &'static str {
        match self {
            Call::List => "redis_list_pets_limit_1",
            Call::Create => "redis_create_pet",
        }
    }
}

/// The same client, without and with the Redis state.
struct Sides {
    without: PetStoreClient,
    with: PetStoreClient,
}

impl Sides {
    fn new(sandbox: &Sandbox, redis: &RedisServer) -> Self {
        let build = |key: &str| {
            PetStoreClient::builder()
                .base_url(sandbox.base_url())
                .api_key(key)
                .rate_limit_scope(RateLimitScope::Client)
        };
        Self {
            without: build(KEY_WITHOUT).build().unwrap(),
            with: build(KEY_WITH)
                .shared_state(RedisState::new(&redis.url()).unwrap())
                .build()
                .unwrap(),
        }
    }

    fn both(&self) -> [(&'static str, &PetStoreClient); 2] {
        [("without_redis", &self.without), ("with_redis", &self.with)]
    }
}

/// Makes `calls` calls one after another, each `gap` after the one before it ended, adding
/// each one's latency to `latencies`: their time, the gaps left out.
fn batch(
    rt: &Runtime,
    client: &PetStoreClient,
    call: Call,
    calls: usize,
    gap: Duration,
    latencies: &mut Vec<Duration>,
) -> Duration {
    rt.block_on(async {
        let mut total = Duration::ZERO;
        for _ in 0..calls {
            if !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            let start = Instant::now();
            call.on(client).await;
            let took = start.elapsed();
            latencies.push(took);
            total += took;
        }
        total
    })
}

/// The comparison of `call` made by a caller slower than one call per lease, `rounds` ABBA
/// rounds: one summary line with each side's mean and median latency, their ratios, and
/// Redis's script runs per call.
fn paired_spaced(rt: &Runtime, sides: &Sides, redis: &str, name: &str, call: Call, rounds: usize) {
    let runs_before = rt.block_on(script_runs(redis));
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let ratios = abba(rounds, |redis| {
        if redis {
            batch(rt, &sides.with, call, SPACED_CALLS, SPACED, &mut with)
        } else {
            batch(rt, &sides.without, call, SPACED_CALLS, SPACED, &mut without)
        }
    });
    let runs = rt.block_on(script_runs(redis)) - runs_before;
    let (mut without, mut with) = (Latencies(without), Latencies(with));
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    let (without_median, with_median) = (without.median(), with.median());
    println!(
        "| {name} | {} / {} | {} / {} | {:.2} / {:.2} | {:.2} ({:.2} to {:.2}) | {runs} / {} = {:.2} |",
        micros(without.mean()),
        micros(without_median),
        micros(with.mean()),
        micros(with_median),
        ratio(with.mean(), without.mean()),
        ratio(with_median, without_median),
        ratios[rounds / 2],
        ratios[rounds / 4],
        ratios[3 * rounds / 4],
        with.0.len(),
        runs as f64 / with.0.len() as f64,
    );
}

/// Makes `per_task` calls one after another on each of `CONCURRENT` tasks at once: how long
/// they all took.
fn concurrent_batch(
    rt: &Runtime,
    client: &PetStoreClient,
    call: Call,
    per_task: usize,
) -> Duration {
    rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..CONCURRENT)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        call.on(&client).await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        start.elapsed()
    })
}

/// The concurrent comparison of `call`, `rounds` ABBA rounds: one summary line with the
/// ratio of the times and Redis's script runs per call.
fn paired_concurrent(
    rt: &Runtime,
    sides: &Sides,
    redis: &str,
    name: &str,
    call: Call,
    rounds: usize,
) {
    let runs_before = rt.block_on(script_runs(redis));
    let (mut total_without, mut total_with) = (Duration::ZERO, Duration::ZERO);
    let ratios = abba(rounds, |redis| {
        if redis {
            let took = concurrent_batch(rt, &sides.with, call, CALLS_PER_TASK);
            total_with += took;
            took
        } else {
            let took = concurrent_batch(rt, &sides.without, call, CALLS_PER_TASK);
            total_without += took;
            took
        }
    });
    let calls = rounds * 2 * CONCURRENT * CALLS_PER_TASK;
    let runs = rt.block_on(script_runs(redis)) - runs_before;
    let per_call = |total: Duration| micros(total / calls as u32);
    println!(
        "| {name} | {} | {} | {:.2} | {:.2} ({:.2} to {:.2}) | {runs} / {calls} = {:.3} |",
        per_call(total_without),
        per_call(total_with),
        total_with.as_secs_f64() / total_without.as_secs_f64(),
        ratios[rounds / 2],
        ratios[rounds / 4],
        ratios[3 * rounds / 4],
        runs as f64 / calls as f64,
    );
}

/// One side's latencies in the paired runs.
struct Latencies(Vec<Duration>);

impl Latencies {
    fn mean(&self) -> Duration {
        self.0.iter().sum::<Duration>() / self.0.len() as u32
    }

    fn median(&mut self) -> Duration {
        self.0.sort_unstable();
        self.0[self.0.len() / 2]
    }

    fn slow(&self) -> usize {
        self.0.iter().filter(|took| **took > SLOW).count()
    }

    fn slowest(&self) -> Duration {
        self.0.iter().copied().max().unwrap_or_default()
    }
}

fn micros(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

/// The two sides alternate (ABBA) `rounds` times, each turn a batch that `side` runs with
/// Redis or without and times: each round's ratio of the two, sorted.
fn abba(rounds: usize, mut side: impl FnMut(bool) -> Duration) -> Vec<f64> {
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|round| {
            let order = if round % 2 == 0 {
                [true, false, false, true]
            } else {
                [false, true, true, false]
            };
            let (mut with, mut without) = (Duration::ZERO, Duration::ZERO);
            for redis in order {
                if redis {
                    with += side(true);
                } else {
                    without += side(false);
                }
            }
            with.as_secs_f64() / without.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios
}

/// The two sides alternate (ABBA) `rounds` times; one summary line.
fn paired(rt: &Runtime, sides: &Sides, name: &str, call: Call, rounds: usize) {
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let ratios = abba(rounds, |redis| {
        if redis {
            batch(
                rt,
                &sides.with,
                call,
                CALLS_PER_BATCH,
                Duration::ZERO,
                &mut with,
            )
        } else {
            batch(
                rt,
                &sides.without,
                call,
                CALLS_PER_BATCH,
                Duration::ZERO,
                &mut without,
            )
        }
    });
    let (mut without, mut with) = (Latencies(without), Latencies(with));
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    let (without_median, with_median) = (without.median(), with.median());
    println!(
        "| {name} | {} / {} | {} / {} | {} / {} | {:.2} / {:.2} | {:.2} ({:.2} to {:.2}) | {} / {} of {} | {} / {} |",
        micros(without.mean()),
        micros(without_median),
        micros(with.mean()),
        micros(with_median),
        micros(with.mean().saturating_sub(without.mean())),
        micros(with_median.saturating_sub(without_median)),
        ratio(with.mean(), without.mean()),
        ratio(with_median, without_median),
        ratios[rounds / 2],
        ratios[rounds / 4],
        ratios[3 * rounds / 4],
        without.slow(),
        with.slow(),
        with.0.len(),
        micros(without.slowest()),
        micros(with.slowest()),
    );
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    client.get_multiplexed_async_connection().await.unwrap()
}

/// The latencies of `calls` bare round trips to Redis (`PING`) on `rt`, for reference.
fn pings(rt: &Runtime, url: &str, calls: usize) -> Latencies {
    rt.block_on(async {
        let mut connection = connect(url).await;
        let mut latencies = Vec::with_capacity(calls);
        for i in 0..WARM_UP_CALLS + calls {
            let start = Instant::now();
            let _: String = redis::cmd("PING")
                .query_async(&mut connection)
                .await
                .unwrap();
            if i >= WARM_UP_CALLS {
                latencies.push(start.elapsed());
            }
        }
        Latencies(latencies)
    })
}

/// How many times Redis has run a script (`EVALSHA`, or `EVAL`).
async fn script_runs(url: &str) -> u64 {
    let mut connection = connect(url).await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut connection)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let calls = line
                .strip_prefix("cmdstat_evalsha:calls=")
                .or_else(|| line.strip_prefix("cmdstat_eval:calls="))?;
            calls.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}

fn main() {
    let rt = runtime();
    let redis = RedisServer::start();
    let sandbox = rt
        .block_on(
            Sandbox::builder()
                .key(KEY_WITHOUT, PLAN)
                .key(KEY_WITH, PLAN)
                .start(),
        )
        .unwrap();
    let sides = Sides::new(&sandbox, &redis);
    for (_, call) in CALLS {
        for (_, client) in sides.both() {
            batch(
                &rt,
                client,
                call,
                WARM_UP_CALLS,
                Duration::ZERO,
                &mut Vec::new(),
            );
        }
    }

    let mut criterion = Criterion::default().configure_from_args();
    for (_, call) in CALLS {
        let mut group = criterion.benchmark_group(call.group());
        for (side, client) in sides.both() {
            group.bench_function(side, |b| b.to_async(&rt).iter(|| call.on(client)));
        }
        group.finish();
    }

    // `cargo test --benches` runs a bench without `--bench`: one round shows that it works.
    let rounds = if std::env::args().any(|arg| arg == "--bench") {
        rounds(ROUNDS)
    } else {
        1
    };
    let runs_before = rt.block_on(script_runs(&redis.url()));
    println!();
    println!(
        "Latency per call, one at a time, without and with the Redis shared state \
         ({rounds} paired rounds of {CALLS_PER_BATCH} calls a side):"
    );
    println!();
    println!(
        "| operation | without: mean / median | with Redis: mean / median | added: mean / median \
         | ratio with/without: mean / median | per-round ratio: median (IQR) \
         | calls over 1 ms: without / with | slowest: without / with |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, call) in CALLS {
        paired(&rt, &sides, name, call, rounds);
    }
    let runs = rt.block_on(script_runs(&redis.url())) - runs_before;
    let calls_with = CALLS.len() * rounds * 2 * CALLS_PER_BATCH;
    println!();
    println!(
        "Redis ran the script {runs} times for the {calls_with} paired calls with it, one at a \
         time: {:.3} round trips per call.",
        runs as f64 / calls_with as f64
    );
    println!();
    println!(
        "Time per call with {CONCURRENT} tasks calling at once on each client, without and with \
         the Redis shared state ({rounds} paired rounds of {CONCURRENT} × {CALLS_PER_TASK} calls \
         a side):"
    );
    println!();
    println!(
        "| operation | without | with Redis | ratio with/without | per-round ratio: median (IQR) \
         | script runs / calls with Redis = round trips per call |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, call) in CALLS {
        paired_concurrent(&rt, &sides, &redis.url(), name, call, rounds);
    }
    let spaced_rounds = if rounds == 1 {
        1
    } else {
        support::rounds(SPACED_ROUNDS)
    };
    println!();
    println!(
        "Latency per call of a caller slower than one call per lease, one call every {} ms, \
         without and with the Redis shared state ({spaced_rounds} paired rounds of \
         {SPACED_CALLS} calls a side):",
        SPACED.as_millis()
    );
    println!();
    println!(
        "| operation | without: mean / median | with Redis: mean / median \
         | ratio with/without: mean / median | per-round ratio: median (IQR) \
         | script runs / calls with Redis = round trips per call |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, call) in CALLS {
        paired_spaced(&rt, &sides, &redis.url(), name, call, spaced_rounds);
    }
    let limited = sandbox.stats().answered(429);
    let mut ping = pings(&rt, &redis.url(), CALLS_PER_BATCH * rounds);
    println!();
    println!(
        "The sandbox answered {limited} 429s. For reference, a bare round trip to this \
         redis-server (PING, redis-rs, same runtime): mean {}, median {}.",
        micros(ping.mean()),
        micros(ping.median())
    );
    criterion.final_summary();
}
