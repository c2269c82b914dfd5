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
//! Some jobs start from a window already partly spent, untimed: by the job's own client (its
//! last fifth), or by another client since dropped (a restart, a cold start), and the raw
//! column spends as many first. A CLI job runs fresh clients one after another, each timed
//! from its building. The cold bursts answer every request a round trip late (200 ms): on the
//! sandbox with `Fault::latency`, or on a loopback service that sends no rate-limit headers.
//!
//! The table: the time each column took, default/raw, the default's target and whether it met
//! it, and the 429s each column met. The target is within 5% or 50 ms of raw (whichever is
//! larger); a cold burst may take one round trip more than raw with an ample budget, four
//! without rate-limit headers (slow start), with the same 5%-or-50-ms margin on top; a batch
//! that needs a second window, within 5% of the physical minimum, 60 s. Nothing is asserted: a
//! bench reports.
//!
//! Run with `cargo bench --bench sole_user` (a few minutes: the batch that needs a second
//! window takes at least 60 s in each column). `SOLE_USER_QUICK=1 cargo bench --bench sole_user`
//! skips the jobs whose physical minimum is 60 s.

mod support;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use petstore_client::{NewPet, Pacing, PetStoreClient, RateLimitScope};
use petstore_sandbox::{Fault, Plan, Sandbox};
use support::{KEY, Raw, http_client, runtime, start_server_without_rate_limit_headers};
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
    /// Within this many round trips of the job's latency more than raw, and 5% or 50 ms.
    RawPlusTrips(u32),
    /// Within 5% of the physical minimum.
    Floor(Duration),
}

/// What was spent of the window before the job's timed calls, untimed.
#[derive(Clone, Copy)]
enum Before {
    Nothing,
    /// This many, by the job's own client: the same process, earlier.
    SpentByItself(usize),
    /// This many, by another client, dropped before the job's is built: the job's client is a
    /// new process.
    SpentByAnother(usize),
}

/// The service a job calls.
#[derive(Clone, Copy)]
enum Service {
    /// The sandbox, with the job's plan.
    Sandbox,
    /// A loopback service that sends no rate-limit headers (and limits nothing).
    WithoutRateLimitHeaders,
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
    /// Fresh clients one after another, each making `calls` calls: 1 is one process.
    runs: usize,
    before: Before,
    /// How late every request is answered: the round trip.
    latency: Duration,
    service: Service,
    target: Target,
}

const MINUTE: Duration = Duration::from_secs(60);

/// A distant service's round trip.
const ROUND_TRIP: Duration = Duration::from_millis(200);

/// What a job is unless it says otherwise.
const JOB: Job = Job {
    name: "",
    plan: Plan::Free,
    second: 0,
    call: Call::ListPets,
    calls: 1,
    tasks: 1,
    runs: 1,
    before: Before::Nothing,
    latency: Duration::ZERO,
    service: Service::Sandbox,
    target: Target::Raw,
};

const JOBS: [Job; 12] = [
    Job {
        name: "CLI: 5 sequential listPets at second 0",
        plan: Plan::Free,
        second: 0,
        call: Call::ListPets,
        calls: 5,
        tasks: 1,
        target: Target::Raw,
        ..JOB
    },
    Job {
        name: "CLI: 5 sequential listPets at second 30",
        plan: Plan::Free,
        second: 30,
        call: Call::ListPets,
        calls: 5,
        tasks: 1,
        target: Target::Raw,
        ..JOB
    },
    Job {
        name: "10 concurrent listPets at a window start",
        plan: Plan::Free,
        second: 0,
        call: Call::ListPets,
        calls: 10,
        tasks: 10,
        target: Target::Raw,
        ..JOB
    },
    Job {
        name: "100 createPet by 8 tasks (needs the second window)",
        plan: Plan::Free,
        second: 0,
        call: Call::CreatePet,
        calls: 100,
        tasks: 8,
        target: Target::Floor(MINUTE),
        ..JOB
    },
    Job {
        name: "Pro: import 100 pets by 8 tasks at second 0",
        plan: Plan::Pro,
        second: 0,
        call: Call::CreatePet,
        calls: 100,
        tasks: 8,
        target: Target::Raw,
        ..JOB
    },
    Job {
        name: "Pro: import 100 pets by 8 tasks at second 55",
        plan: Plan::Pro,
        second: 55,
        call: Call::CreatePet,
        calls: 100,
        tasks: 8,
        target: Target::Raw,
        ..JOB
    },
    Job {
        name: "last fifth: 10 sequential listPets at second 50, 48 of 60 spent by the same client",
        second: 50,
        calls: 10,
        before: Before::SpentByItself(48),
        ..JOB
    },
    Job {
        name: "restart: 10 sequential listPets at second 30, 48 of 60 spent by another client",
        second: 30,
        calls: 10,
        before: Before::SpentByAnother(48),
        ..JOB
    },
    Job {
        name: "CLI run 20 times in a row: 3 listPets each, a fresh client per run",
        calls: 3,
        runs: 20,
        ..JOB
    },
    Job {
        name: "cold start with 2 left: 2 listPets at second 30, 58 of 60 spent by another client",
        second: 30,
        calls: 2,
        before: Before::SpentByAnother(58),
        ..JOB
    },
    Job {
        name: "Pro: 16 listPets at once, 200 ms a round trip (cold, ample budget)",
        plan: Plan::Pro,
        calls: 16,
        tasks: 16,
        latency: ROUND_TRIP,
        target: Target::RawPlusTrips(1),
        ..JOB
    },
    Job {
        name: "no rate-limit headers: 16 listPets at once, 200 ms a round trip (cold)",
        calls: 16,
        tasks: 16,
        latency: ROUND_TRIP,
        service: Service::WithoutRateLimitHeaders,
        target: Target::RawPlusTrips(4),
        ..JOB
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

/// A job's service, fresh for each column.
enum Running {
    Sandbox(Sandbox),
    WithoutRateLimitHeaders(SocketAddr),
}

impl Running {
    /// The job's service, answering every request `job.latency` late.
    async fn start(job: &Job) -> Self {
        match job.service {
            Service::Sandbox => {
                let sandbox = sandbox_for(job).await;
                if !job.latency.is_zero() {
                    sandbox.inject(Fault::latency(job.latency));
                }
                Self::Sandbox(sandbox)
            }
            Service::WithoutRateLimitHeaders => Self::WithoutRateLimitHeaders(
                start_server_without_rate_limit_headers(job.latency).await,
            ),
        }
    }

    fn base_url(&self) -> String {
        match self {
            Self::Sandbox(sandbox) => sandbox.base_url().to_string(),
            Self::WithoutRateLimitHeaders(addr) => format!("http://{addr}/v1"),
        }
    }

    fn key(&self, plan: Plan) -> String {
        match self {
            Self::Sandbox(sandbox) => sandbox.key(plan).to_owned(),
            Self::WithoutRateLimitHeaders(_) => KEY.to_owned(),
        }
    }

    /// The 429s the service answered.
    fn limited(&self) -> u64 {
        match self {
            Self::Sandbox(sandbox) => sandbox.stats().answered(429),
            Self::WithoutRateLimitHeaders(_) => 0,
        }
    }
}

/// `n` sequential `listPets` by `client`, untimed; a failure is the job's to show.
async fn spend(client: &PetStoreClient, n: usize) {
    for _ in 0..n {
        let _ = client.list_pets().limit(100).send().await;
    }
}

/// The crate's client: the default (`pacing` is `None`) or with a pacing mode, a fresh one
/// per run, each with a state of its own as a process has. The 429s are the service's count:
/// the client retries them out of sight.
async fn crate_column(job: &Job, pacing: Option<Pacing>) -> Outcome {
    let service = Running::start(job).await;
    let (base_url, key) = (service.base_url(), service.key(job.plan));
    let build = || {
        let mut builder = PetStoreClient::builder()
            .base_url(&base_url)
            .api_key(&key)
            .http_client(http_client())
            .rate_limit_scope(RateLimitScope::Client);
        if let Some(pacing) = pacing {
            builder = builder.pacing(pacing);
        }
        builder.build().unwrap()
    };
    let mut spent_by_itself = None;
    match job.before {
        Before::Nothing => {}
        Before::SpentByItself(n) => {
            let client = build();
            spend(&client, n).await;
            spent_by_itself = Some(client);
        }
        Before::SpentByAnother(n) => spend(&build(), n).await,
    }
    let kind = job.call;
    let start = Instant::now();
    let mut failed = 0;
    for _ in 0..job.runs {
        let client = spent_by_itself.take().unwrap_or_else(&build);
        let (_, _, run_failed) = run(job, move || {
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
        failed += run_failed;
    }
    Outcome {
        took: start.elapsed(),
        limited: service.limited(),
        failed,
    }
}

/// Raw reqwest: the same calls by hand, sleeping `Retry-After` after each 429, which it counts;
/// a fresh `reqwest::Client` per run.
async fn raw_column(job: &Job) -> Outcome {
    let service = Running::start(job).await;
    let (base_url, key) = (service.base_url(), service.key(job.plan));
    let build = || Arc::new(Raw::at(&base_url, &key, http_client()));
    if let Before::SpentByItself(n) | Before::SpentByAnother(n) = job.before {
        let raw = build();
        for _ in 0..n {
            let _ = raw.list_pets_patiently().await;
        }
    }
    let kind = job.call;
    let start = Instant::now();
    let (mut limited, mut failed) = (0, 0);
    for _ in 0..job.runs {
        let raw = build();
        let (_, run_limited, run_failed) = run(job, move || {
            let raw = raw.clone();
            async move {
                match kind {
                    Call::ListPets => raw.list_pets_patiently().await,
                    Call::CreatePet => raw.create_pet_patiently(&NewPet::new("Rex", 3)).await,
                }
            }
        })
        .await;
        (limited, failed) = (limited + run_limited, failed + run_failed);
    }
    Outcome {
        took: start.elapsed(),
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

/// The time the default may take, and how the table names it.
fn bound(job: &Job, raw: &Outcome) -> (Duration, String) {
    let slack = raw.took.mul_f64(0.05).max(Duration::from_millis(50));
    match job.target {
        Target::Raw => (raw.took + slack, "raw + max(5%, 50 ms)".to_owned()),
        Target::RawPlusTrips(trips) => {
            let plural = if trips == 1 { "" } else { "s" };
            (
                raw.took + job.latency * trips + slack,
                format!(
                    "raw + {trips} round trip{plural} ({} ms) + max(5%, 50 ms)",
                    (job.latency * trips).as_millis()
                ),
            )
        }
        Target::Floor(floor) => (floor.mul_f64(1.05), "the floor + 5%".to_owned()),
    }
}

/// Whether the default meets the job's target, and by how much it misses.
fn verdict(job: &Job, default: &Outcome, raw: &Outcome) -> String {
    let (bound, what) = bound(job, raw);
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
        "A sole user on the real clock (multi-threaded runtime, loopback service, fresh per \
         job and column; Free plan 60 a minute unless said){}",
        if quick {
            ", quick: the jobs with a 60 s floor skipped"
        } else {
            ""
        }
    );
    println!(
        "| job | default (Shared) | Sole | raw reqwest | default/raw | target of the default | default meets it | 429s default / Sole / raw |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for job in &JOBS {
        if quick && matches!(job.target, Target::Floor(floor) if floor >= MINUTE) {
            continue;
        }
        let default = rt.block_on(crate_column(job, None));
        let sole = rt.block_on(crate_column(job, Some(Pacing::Sole)));
        let raw = rt.block_on(raw_column(job));
        println!(
            "| {} | {} | {} | {} | {:.2} | {} | {} | {} / {} / {} |",
            job.name,
            seconds(&default),
            seconds(&sole),
            seconds(&raw),
            default.took.as_secs_f64() / raw.took.as_secs_f64(),
            bound(job, &raw).1,
            verdict(job, &default, &raw),
            default.limited,
            sole.limited,
            raw.limited,
        );
    }
}
