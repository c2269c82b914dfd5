//! Generated worlds of a fleet sharing its rate-limit state through a real `redis-server`:
//! each seed draws a world (how many instances, their tasks, the windows, and up to two Redis
//! faults at instants of the run), which [`run`] plays on the real clock against the sandbox
//! and a `redis-server` of its own on a loopback port, stopped by its PID when the world ends.
//!
//! The draw reads nothing but the seed (SplitMix, as the explorer's), so a seed is its world
//! on any machine; what the real clock makes of it may differ from run to run, which is why a
//! world asserts safety only ([`Outcome::check`]).

use std::collections::BTreeSet;
use std::fmt;
use std::ops::RangeInclusive;
use std::time::{Duration, UNIX_EPOCH};

use petstore_client::{PetStoreClient, RedisState, RetryPolicy};
use petstore_sandbox::{Fault, LoggedRequest, Plan, QuotaFields, Sandbox, WindowKind};
use tokio::time::Instant;

use super::matrix::most_in_a_cooldown;
use super::redis_fleet::{Calls, KEY, hammer_with, instance_builder, limited};
use super::redis_world_faults::Redis;
use super::simulation::SplitMix;

/// The most independent instances that the contract keeps from a ban without shared state
/// (`docs/DESIGN.md`, contract 1).
pub const WITHOUT_SHARED_STATE: usize = 9;

/// How long a world's fleet calls: two or three windows.
const RUN: Duration = Duration::from_secs(6);

/// A fault of the world's Redis.
#[derive(Clone, Debug, PartialEq)]
pub enum RedisFault {
    /// Killed (SIGKILL), down for a while, then started again on its port, empty.
    Restart { down: Duration },
    /// Frozen (SIGSTOP) for a while, then let go on (SIGCONT): connections stay open.
    Freeze { lasting: Duration },
    /// `FLUSHALL` once.
    Flush,
    /// `FLUSHALL` every 20 ms for a while: a Redis that keeps losing the state.
    FlushAgainAndAgain { lasting: Duration },
    /// `maxmemory` set just above what Redis uses, `allkeys-lru`, and other data written until
    /// the state is evicted.
    Evict,
    /// A failover to a replica that follows the master `lag` behind: the replica is promoted,
    /// the instances' address moves to it, and the master is killed with what the replica has
    /// not received.
    Failover { lag: Duration },
    /// Every chunk to and from Redis delayed by an amount in a range, for a while.
    SlowReplies {
        delays: RangeInclusive<Duration>,
        lasting: Duration,
    },
}

impl RedisFault {
    /// Whether Redis may stop answering the fleet for a while: killed, frozen, failed over
    /// (the old master's connections break), or slower than an instance's timeout. Meanwhile
    /// each instance goes on under its own discipline, as without shared state.
    pub fn stops_answering(&self) -> bool {
        matches!(
            self,
            Self::Restart { .. }
                | Self::Freeze { .. }
                | Self::Failover { .. }
                | Self::SlowReplies { .. }
        )
    }
}

/// One world: what the seed drew.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    pub seed: u64,
    pub instances: usize,
    pub tasks: usize,
    /// The sandbox's minute window, shortened to seconds.
    pub window: Duration,
    pub per_window: u32,
    pub sliding: bool,
    /// A day window of a few minute windows, and its budget, which binds or equals the
    /// minute's.
    pub day: Option<(Duration, u32)>,
    /// Each fault and when it begins, from the start of the run, in order.
    pub faults: Vec<(Duration, RedisFault)>,
    /// How the service writes the quota: as specified, in another shape, only on 429s, or not
    /// at all.
    pub quota_fields: QuotaFields,
    /// A delay on every answer of the service.
    pub round_trip: Option<Duration>,
}

impl World {
    /// The longest a call waits for the rate limit in all: two windows, so that a call held
    /// until a spent window ends, or through a `Retry-After` (the sandbox asks at most a
    /// window), waits.
    pub fn max_server_wait(&self) -> Duration {
        2 * self.window
    }

    /// Every call ends within its waits for the rate limit and one window for its one attempt,
    /// whose admission and report are Redis operations that may each time out, with slack for
    /// a loaded machine.
    pub fn bound(&self) -> Duration {
        self.max_server_wait() + self.window + Duration::from_secs(3)
    }

    /// Whether the instances reach Redis through a link of the test's: one that moves at a
    /// failover, or slows replies down.
    pub fn needs_a_link(&self) -> bool {
        self.faults.iter().any(|(_, fault)| {
            matches!(
                fault,
                RedisFault::Failover { .. } | RedisFault::SlowReplies { .. }
            )
        })
    }

    /// Whether the world is held to no ban: a fleet the contract keeps safe without shared
    /// state, or one whose Redis answers throughout. A fleet of more than
    /// [`WITHOUT_SHARED_STATE`] whose Redis stops answering for a while is held to the
    /// contract's count alone, as any fleet without shared state (`docs/DESIGN.md`, contract 1).
    pub fn held_to_no_ban(&self) -> bool {
        self.instances <= WITHOUT_SHARED_STATE
            || !self.faults.iter().any(|(_, fault)| fault.stops_answering())
    }

    /// The world as drawn before the quota's shapes and round trips were drawn: what the
    /// worlds replayed by name were found in.
    pub fn first_drawn(self) -> Self {
        Self {
            quota_fields: QuotaFields::XRateLimit,
            round_trip: None,
            ..self
        }
    }

    /// How far behind the master its replica follows, when the world fails over.
    pub fn lag(&self) -> Option<Duration> {
        self.faults.iter().find_map(|(_, fault)| match fault {
            RedisFault::Failover { lag } => Some(*lag),
            _ => None,
        })
    }
}

impl fmt::Display for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} instances × {} tasks, {} per {} s {} window",
            self.instances,
            self.tasks,
            self.per_window,
            self.window.as_secs(),
            if self.sliding { "sliding" } else { "fixed" },
        )?;
        if let Some((length, per_day)) = self.day {
            write!(f, ", {per_day} per {} s day", length.as_secs())?;
        }
        if self.quota_fields != QuotaFields::XRateLimit {
            write!(f, ", quota {:?}", self.quota_fields)?;
        }
        if let Some(round_trip) = self.round_trip {
            write!(f, ", {} ms round trips", round_trip.as_millis())?;
        }
        if self.faults.is_empty() {
            write!(f, ", no fault")?;
        }
        for (at, fault) in &self.faults {
            write!(f, ", at {:.2} s {fault:?}", at.as_secs_f64())?;
        }
        Ok(())
    }
}

fn millis(rng: &mut SplitMix, range: RangeInclusive<u64>) -> Duration {
    let span = range.end() - range.start() + 1;
    Duration::from_millis(range.start() + rng.below(span))
}

/// The world of `seed`.
pub fn world(seed: u64) -> World {
    let mut rng = SplitMix::new(seed);
    // Half the fleets within what the contract keeps safe without shared state, half past it.
    let instances = if rng.chance(0.5) {
        4 + rng.below(6)
    } else {
        10 + rng.below(55)
    } as usize;
    let tasks = 1 + rng.below(4) as usize;
    // The explorer's windows, a few seconds long so that a world runs in a few seconds.
    let window = Duration::from_secs(rng.pick(&[2, 3]));
    let per_window = rng.pick(&[5, 10, 20, 30, 60]);
    let sliding = rng.chance(0.15);
    let day = rng.chance(0.3).then(|| {
        let length = window * (2 + rng.below(4) as u32);
        let per_day = if rng.chance(0.3) {
            per_window
        } else {
            per_window * (1 + rng.below(3) as u32)
        };
        (length, per_day)
    });
    let count = rng.below(3);
    let mut faults = Vec::new();
    for _ in 0..count {
        let at = millis(&mut rng, 500..=RUN.as_millis() as u64 - 1_500);
        let failover_drawn = faults
            .iter()
            .any(|(_, fault)| matches!(fault, RedisFault::Failover { .. }));
        let fault = draw_fault(&mut rng, failover_drawn);
        faults.push((at, fault));
    }
    faults.sort_by_key(|(at, _)| *at);
    // Drawn after the rest, so that a seed keeps what it drew before they were added.
    let quota_fields = if rng.chance(0.15) {
        rng.pick(&[QuotaFields::OnlyOn429, QuotaFields::Absent])
    } else {
        match rng.below(12) {
            0 => QuotaFields::RepeatedRemaining,
            1 => QuotaFields::NegativeRemaining,
            2 => QuotaFields::ResetInSeconds,
            3 => QuotaFields::Ietf,
            _ => QuotaFields::XRateLimit,
        }
    };
    let round_trip = rng.chance(0.15).then(|| millis(&mut rng, 50..=300));
    World {
        seed,
        instances,
        tasks,
        window,
        per_window,
        sliding,
        day,
        faults,
        quota_fields,
        round_trip,
    }
}

/// One fault, any of them for any fleet. A world has one replica at most, so one failover.
fn draw_fault(rng: &mut SplitMix, failover_drawn: bool) -> RedisFault {
    #[derive(Clone, Copy)]
    enum Kind {
        Restart,
        Freeze,
        Flush,
        FlushAgainAndAgain,
        Evict,
        Failover,
        SlowReplies,
    }
    let mut kinds = vec![
        Kind::Restart,
        Kind::Freeze,
        Kind::Flush,
        Kind::Evict,
        Kind::FlushAgainAndAgain,
    ];
    if !failover_drawn {
        kinds.push(Kind::Failover);
    }
    kinds.push(Kind::SlowReplies);
    match rng.pick(&kinds) {
        Kind::Restart => RedisFault::Restart {
            down: millis(rng, 0..=1_000),
        },
        Kind::Freeze => RedisFault::Freeze {
            lasting: millis(rng, 200..=1_500),
        },
        Kind::Flush => RedisFault::Flush,
        Kind::FlushAgainAndAgain => RedisFault::FlushAgainAndAgain {
            lasting: millis(rng, 1_000..=3_000),
        },
        Kind::Evict => RedisFault::Evict,
        Kind::Failover => RedisFault::Failover {
            lag: millis(rng, 200..=1_000),
        },
        Kind::SlowReplies => {
            let low = millis(rng, 20..=100);
            let high = low + millis(rng, 0..=300);
            RedisFault::SlowReplies {
                delays: low..=high,
                lasting: millis(rng, 1_000..=3_000),
            }
        }
    }
}

/// What a world's run saw.
#[derive(Debug)]
pub struct Outcome {
    pub calls: Calls,
    pub requests: usize,
    pub limited: usize,
    pub bans: u64,
    /// The most requests one instance sent inside one `Retry-After`.
    pub most_in_a_cooldown: usize,
    /// Requests that arrived while the key was told to wait or banned, and from how many
    /// instances.
    pub during_cooldown: (usize, usize),
    /// Successes over what the minute windows allowed in the run.
    pub goodput: f64,
    /// What playing the faults found, in words.
    pub notes: Vec<String>,
}

impl Outcome {
    /// The invariants: at most one request per instance inside any `Retry-After`, no call
    /// pending past its bound, no call failed but on the rate limit, and no ban where the
    /// world is held to it ([`World::held_to_no_ban`]).
    pub fn check(&self, world: &World) -> Result<(), String> {
        let failed: usize = self.calls.failed.values().sum();
        let mut broken = Vec::new();
        if self.bans > 0 && world.held_to_no_ban() {
            broken.push(format!("{} bans", self.bans));
        }
        if self.most_in_a_cooldown > 1 {
            broken.push(format!(
                "an instance sent {} requests inside one Retry-After",
                self.most_in_a_cooldown
            ));
        }
        if self.calls.past_bound > 0 {
            broken.push(format!(
                "{} calls pending past their bound of {:?}",
                self.calls.past_bound,
                world.bound()
            ));
        }
        if failed > self.calls.rate_limited {
            broken.push(format!(
                "calls failed but on the rate limit: {:?}",
                self.calls.failed
            ));
        }
        if broken.is_empty() {
            Ok(())
        } else {
            Err(broken.join("; "))
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests, {} × 429, {} bans, at most {} per instance inside one Retry-After \
             ({} inside a wait or a ban, from {} instances), goodput {:.0}%, slowest call \
             {:.2} s, failures {:?}",
            self.requests,
            self.limited,
            self.bans,
            self.most_in_a_cooldown,
            self.during_cooldown.0,
            self.during_cooldown.1,
            100.0 * self.goodput,
            self.calls.slowest.as_secs_f64(),
            self.calls.failed,
        )?;
        if !self.notes.is_empty() {
            write!(f, "; {}", self.notes.join("; "))?;
        }
        Ok(())
    }
}

/// The world's sandbox: its plan, windows and kind, how it writes the quota, its round trips.
async fn sandbox(world: &World) -> Sandbox {
    let (day, per_day) = world
        .day
        .unwrap_or((Duration::from_secs(86_400), 1_000_000));
    let sandbox = Sandbox::builder()
        .key(
            KEY,
            Plan::Enterprise {
                per_minute: world.per_window,
                per_day,
            },
        )
        .minute_window(world.window)
        .day_window(day)
        .window_kind(if world.sliding {
            WindowKind::Sliding
        } else {
            WindowKind::Fixed
        })
        .quota_fields(world.quota_fields)
        .start()
        .await
        .expect("the sandbox starts");
    if let Some(round_trip) = world.round_trip {
        sandbox.inject(Fault::latency(round_trip));
    }
    sandbox
}

/// Instance `i` of `world`, of its own (`RateLimitScope::Client`, its own `RedisState`) as a
/// separate process would be, which sends each request once and waits for the rate limit up
/// to the world's `max_server_wait`.
fn instance(world: &World, sandbox: &Sandbox, i: usize, url: &str) -> PetStoreClient {
    instance_builder(sandbox, i)
        .retry_policy(
            RetryPolicy::builder()
                .max_retries(0)
                .max_server_wait(world.max_server_wait())
                .build(),
        )
        .shared_state(RedisState::new(url).expect("a Redis URL"))
        .build()
        .expect("a valid client")
}

/// Runs `world` on the real clock: its fleet calls back to back for the run while its faults
/// are played at their instants, one after another.
pub async fn run(world: &World) -> Outcome {
    let mut redis = Redis::start(world).await;
    let sandbox = sandbox(world).await;
    let url = redis.url();
    let clients: Vec<_> = (0..world.instances)
        .map(|i| instance(world, &sandbox, i, &url))
        .collect();
    let start = Instant::now();
    // The faults are played on this task while the calls run on the runtime's workers: a
    // fault that blocks this thread (a restart waits for the server) holds no call.
    let faults = async {
        let mut notes = Vec::new();
        for (at, fault) in &world.faults {
            tokio::time::sleep_until(start + *at).await;
            notes.extend(redis.play(fault).await);
        }
        notes
    };
    let (calls, notes) = tokio::join!(
        hammer_with(&clients, world.tasks, start + RUN, Some(world.bound())),
        faults
    );
    let log = sandbox.request_log();
    Outcome {
        requests: log.len(),
        limited: limited(&log),
        bans: sandbox.stats().bans(),
        most_in_a_cooldown: most_in_a_cooldown(&log),
        during_cooldown: during_cooldown(&log),
        goodput: goodput(world, &log),
        calls,
        notes,
    }
}

/// How many requests arrived while the key was told to wait or banned, and from how many
/// instances.
fn during_cooldown(log: &[LoggedRequest]) -> (usize, usize) {
    let inside: Vec<_> = log.iter().filter(|r| r.during_cooldown).collect();
    let instances: BTreeSet<_> = inside.iter().map(|r| r.user_agent.as_deref()).collect();
    (inside.len(), instances.len())
}

/// Successes over what the minute windows the requests fell in allowed: printed, never
/// asserted, on the real clock.
fn goodput(world: &World, log: &[LoggedRequest]) -> f64 {
    let succeeded = log.iter().filter(|r| r.status == Some(200)).count();
    let window = |r: &LoggedRequest| {
        let since = r.server_time.duration_since(UNIX_EPOCH).unwrap_or_default();
        since.as_secs() / world.window.as_secs()
    };
    let (Some(first), Some(last)) = (log.iter().map(window).min(), log.iter().map(window).max())
    else {
        return 0.0;
    };
    let allowed = f64::from(world.per_window) * (last - first + 1) as f64;
    succeeded as f64 / allowed
}
