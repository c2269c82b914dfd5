//! What the rate discipline costs a process that is its key's only user, on the real clock (a
//! multi-threaded runtime) against the embedded sandbox on loopback: each job of [`JOBS`] with
//! the default client (`Pacing::Shared`: no pacing setting), with `Pacing::Sole`, and with raw
//! `reqwest` + `serde_json` in a minimal loop that sleeps `Retry-After` after a 429.
//!
//! Every job of every column gets a fresh sandbox whose clock starts at the job's second of a
//! minute window (`SandboxBuilder::clock_start` anchors the sandbox's clock when it starts,
//! then it runs on with the real clock; the job starts a few milliseconds later), and a fresh
//! client with `RateLimitScope::Client`, so that no job inherits a window or a rate state.
//!
//! The table: the time each column took, default/raw, whether the default is within 5% or
//! 50 ms of raw (whichever is larger; for a batch that needs a second window, within 5% of the
//! physical minimum, 60 s), and the 429s each column met. Nothing is asserted: a bench reports.
//!
//! Run with `cargo bench --bench sole_user` (a few minutes: the batch that needs a second
//! window takes at least 60 s in each column). `SOLE_USER_QUICK=1 cargo bench --bench sole_user`
//! skips the jobs whose physical minimum is 60 s.

mod support;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use petstore_client::{NewPet, Pacing, PetStoreClient, RateLimitScope};
use petstore_sandbox::{Plan, Sandbox};
use support::{Raw, http_client, runtime};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// A Unix time at which a minute window opens (a multiple of 60).
const WINDOW_OPENS: u64 = 1_800_000_000;

/// Pets in the catalogue at start, so that `listPets` answers a realistic body.
const CATALOGUE: usize = 20;

#[derive(Clone, Copy)]
enum Call {
    ListPets,
    CreatePet,
}

/// What the default is judged against.
#[derive(Clone, Copy)]
enum Target {
    /// Within 5% or 50 ms of raw reqwest, whichever is larger.
    Raw,
    /// Within 5% of the physical minimum.
    Floor(Duration),
}

struct Job {
    name: &'static str,
    plan: Plan,
    /// The second of the sandbox's minute window at which the job starts.
    second: u64,
    call: Call,
    calls: usize,
    /// Tasks sharing the calls: 1 is sequential.
    tasks: usize,
    target: Target,
}

const MINUTE: Duration = Duration::from_secs(60);

const JOBS: [Job; 6] = [
    Job {
        name: "CLI: 5 sequential listPets at second 0",
        plan: Plan::Free,
        second: 0,
        call: Call::ListPets,
        calls: 5,
        tasks: 1,
        target: Target::Raw,
    },
    Job {
        name: "CLI: 5 sequential listPets at second 30",
        plan: Plan::Free,
        second: 30,
        call: Call::ListPets,
        calls: 5,
        tasks: 1,
        target: Target::Raw,
    },
    Job {
        name: "10 concurrent listPets at a window start",
        plan: Plan::Free,
        second: 0,
        call: Call::ListPets,
        calls: 10,
        tasks: 10,
        target: Target::Raw,
    },
    Job {
        name: "100 createPet by 8 tasks (needs the second window)",
        plan: Plan::Free,
        second: 0,
        call: Call::CreatePet,
        calls: 100,
        tasks: 8,
        target: Target::Floor(MINUTE),
    },
    Job {
        name: "Pro: import 100 pets by 8 tasks at second 0",
        plan: Plan::Pro,
        second: 0,
        call: Call::CreatePet,
        calls: 100,
        tasks: 8,
        target: Target::Raw,
    },
    Job {
        name: "Pro: import 100 pets by 8 tasks at second 55",
        plan: Plan::Pro,
        second: 55,
        call: Call::CreatePet,
        calls: 100,
        tasks: 8,
        target: Target::Raw,
    },
];

/// What one column made of one job.
struct Outcome {
    took: Duration,
    /// 429s met.
    limited: u64,
    /// Calls that ended in an error.
    failed: u64,
}

/// A fresh sandbox whose clock reads the job's second of a minute window now.
async fn sandbox_for(job: &Job) -> Sandbox {
    Sandbox::builder()
        .clock_start(UNIX_EPOCH + Duration::from_secs(WINDOW_OPENS + job.second))
        .pets((0..CATALOGUE).map(|i| NewPet::new(format!("Pet {i}"), 3)))
        .start()
        .await
        .unwrap()
}

/// Runs the job's calls, `job.tasks` at a time, each task taking the next call until none is
/// left. Each call returns the 429s it met, `Err` if it failed. How long all took, the 429s,
/// the calls that failed.
async fn run<C, F>(job: &Job, call: C) -> (Duration, u64, u64)
where
    C: Fn() -> F + Send + Sync + 'static,
    F: Future<Output = Result<u64, u64>> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(AtomicUsize::new(0));
    let calls = job.calls;
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..job.tasks {
        let (call, next) = (call.clone(), next.clone());
        tasks.spawn(async move {
            let (mut limited, mut failed) = (0, 0);
            while next.fetch_add(1, Ordering::Relaxed) < calls {
                match call().await {
                    Ok(seen) => limited += seen,
                    Err(seen) => (limited, failed) = (limited + seen, failed + 1),
                }
            }
            (limited, failed)
        });
    }
    let counts = tasks.join_all().await;
    let took = start.elapsed();
    let sum = |pick: fn(&(u64, u64)) -> u64| counts.iter().map(pick).sum();
    (took, sum(|c| c.0), sum(|c| c.1))
}

/// The crate's client: the default (`pacing` is `None`) or with a pacing mode. The 429s are
/// the sandbox's count: the client retries them out of sight.
async fn crate_column(job: &Job, pacing: Option<Pacing>) -> Outcome {
    let sandbox = sandbox_for(job).await;
    let mut builder = PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(sandbox.key(job.plan))
        .http_client(http_client())
        .rate_limit_scope(RateLimitScope::Client);
    if let Some(pacing) = pacing {
        builder = builder.pacing(pacing);
    }
    let client = builder.build().unwrap();
    let kind = job.call;
    let (took, _, failed) = run(job, move || {
        let client = client.clone();
        async move {
            let result = match kind {
                Call::ListPets => client.list_pets().limit(100).send().await.map(drop),
                Call::CreatePet => client
                    .create_pet(NewPet::new("Rex", 3))
                    .send()
                    .await
                    .map(drop),
            };
            result.map(|()| 0).map_err(|_| 0)
        }
    })
    .await;
    Outcome {
        took,
        limited: sandbox.stats().answered(429),
        failed,
    }
}

/// Raw reqwest: the same calls by hand, sleeping `Retry-After` after each 429, which it counts.
async fn raw_column(job: &Job) -> Outcome {
    let sandbox = sandbox_for(job).await;
    let raw = Arc::new(Raw::at(
        sandbox.base_url().as_str(),
        sandbox.key(job.plan),
        http_client(),
    ));
    let kind = job.call;
    let (took, limited, failed) = run(job, move || {
        let raw = raw.clone();
        async move {
            match kind {
                Call::ListPets => raw.list_pets_patiently().await,
                Call::CreatePet => raw.create_pet_patiently(&NewPet::new("Rex", 3)).await,
            }
        }
    })
    .await;
    Outcome {
        took,
        limited,
        failed,
    }
}

fn seconds(outcome: &Outcome) -> String {
    let took = format!("{:.3} s", outcome.took.as_secs_f64());
    match outcome.failed {
        0 => took,
        failed => format!("{took} ({failed} failed)"),
    }
}

/// Whether the default meets the job's target, and by how much it misses.
fn verdict(target: Target, default: &Outcome, raw: &Outcome) -> String {
    let (bound, what) = match target {
        Target::Raw => {
            let slack = raw.took.mul_f64(0.05).max(Duration::from_millis(50));
            (raw.took + slack, "raw + max(5%, 50 ms)")
        }
        Target::Floor(floor) => (floor.mul_f64(1.05), "the floor + 5%"),
    };
    if default.failed == 0 && default.took <= bound {
        "yes".to_owned()
    } else if default.took <= bound {
        format!("no: {} calls failed", default.failed)
    } else {
        let over = default.took - bound;
        format!("no: {:.3} s over {what}", over.as_secs_f64())
    }
}

fn main() {
    let quick = std::env::var_os("SOLE_USER_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    let rt = runtime();
    println!(
        "A sole user on the real clock (multi-threaded runtime, loopback sandbox, fresh per \
         job and column; Free plan 60 a minute unless said){}",
        if quick {
            ", quick: the jobs with a 60 s floor skipped"
        } else {
            ""
        }
    );
    println!(
        "| job | default (Shared) | Sole | raw reqwest | default/raw | default within 5% or 50 ms of raw (60 s batch: 5% of 60 s) | 429s default / Sole / raw |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for job in &JOBS {
        if quick && matches!(job.target, Target::Floor(floor) if floor >= MINUTE) {
            continue;
        }
        let default = rt.block_on(crate_column(job, None));
        let sole = rt.block_on(crate_column(job, Some(Pacing::Sole)));
        let raw = rt.block_on(raw_column(job));
        println!(
            "| {} | {} | {} | {} | {:.2} | {} | {} / {} / {} |",
            job.name,
            seconds(&default),
            seconds(&sole),
            seconds(&raw),
            default.took.as_secs_f64() / raw.took.as_secs_f64(),
            verdict(job.target, &default, &raw),
            default.limited,
            sole.limited,
            raw.limited,
        );
    }
}
