//! The rate-limit scenario matrix: the ways users run the crate that used to get a key banned
//! (independent instances on one key, a skewed server clock, two windows, cancellation, odd
//! answers, backends whose clocks disagree behind one limiter, a step of the service's clock, a
//! plan change in mid-window, a late answer across a cooldown), each run against the sandbox
//! for ten windows under tokio's paused clock, with the figures every cell is judged by. `tests/ban_matrix.rs` asserts them; `benches/goodput.rs`
//! prints them as a table.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, UNIX_EPOCH};

use chrono::TimeDelta;
use petstore_client::{Error, Pacing, PetStoreClient, RateLimitScope, RetryPolicy};
use petstore_sandbox::{Fault, LoggedRequest, Plan, QuotaFields, Sandbox, WindowKind};
use tokio::time::Instant;

// Beside this file, so that `benches/goodput.rs`, which includes this file alone, finds it.
#[path = "holds.rs"]
pub mod holds;
#[path = "served.rs"]
pub mod served;

/// Tasks per instance, each calling back to back.
pub const TASKS: usize = 16;
/// The length of the sandbox's minute window, in seconds.
pub const MINUTE: u64 = 60;
/// How long each cell runs, in minute windows.
pub const WINDOWS: u64 = 10;

/// The Unix time each cell's sandbox starts at, whatever the wall clock reads: half a minute
/// into a minute (2027-01-15T08:00:30Z), so that a run covers a whole day window between two
/// partial ones.
pub const CLOCK_START_UNIX: u64 = 1_800_000_030;

/// How the instances of a cell relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Each instance has its own rate-limit state, as separate processes or hosts would.
    Independent,
    /// Clones of one client.
    Clones,
    /// Clients built separately in one process with the default settings (one state per key).
    SeparatelyBuilt,
}

/// A step of the service's whole clock (limiter included), as an NTP correction would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockStep {
    /// When, after the sandbox starts.
    pub after: Duration,
    /// By how much, in seconds (negative: back).
    pub by: i64,
}

/// The key's plan changing while the cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanChange {
    /// When, after the sandbox starts.
    pub after: Duration,
    pub per_minute: u32,
    pub per_day: u32,
}

/// What a cell must achieve besides never getting the key banned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    /// At least this share of what the service could have served in the full minute windows
    /// (the minute and day budgets, the plan in force: [`served`]).
    Goodput(f64),
    /// Every full day window uses all of the day budget, and no more.
    DayBudget,
    /// The plan allows nothing: no call succeeds, and none waits for long.
    Nothing,
}

#[derive(Debug, Clone)]
pub struct Cell {
    pub name: String,
    pub instances: usize,
    /// Tasks per instance, each calling back to back.
    pub tasks: usize,
    pub sharing: Sharing,
    /// The sandbox's clock minus the client's, in seconds.
    pub offset: i64,
    pub per_minute: u32,
    /// The length of the "minute" window in seconds.
    pub minute: u64,
    /// How long the cell runs, in minute windows.
    pub windows: u64,
    pub per_day: u32,
    /// The length of the "day" window in seconds (shortened so that days pass in a run).
    pub day: u64,
    /// Half the calls are cancelled at a random point within 3 s.
    pub cancel_half: bool,
    /// Injected at the start.
    pub faults: Vec<Fault>,
    /// How the sandbox shows the quota.
    pub quota_fields: QuotaFields,
    /// Each backend's clock minus the limiter's, in seconds, answering in turn behind the one
    /// limiter; empty: one backend on the limiter's clock.
    pub backends: Vec<i64>,
    /// A step of the service's clock.
    pub clock_step: Option<ClockStep>,
    /// A change of the key's plan.
    pub plan_change: Option<PlanChange>,
    /// 429s a window may see beyond one per instance (those injected on purpose), or `None`
    /// where the count is not bounded (see `common::simulation`).
    pub extra_429s: Option<usize>,
    pub expect: Expect,
    /// How long after the one before each instance starts calling, as processes started one
    /// after another do.
    pub start_gap: Duration,
    /// How the sandbox's windows count requests.
    pub window_kind: WindowKind,
    /// Every other instance (or, with clones, every other clone's client) names the service
    /// `localhost` instead of `127.0.0.1`: one service under two host names.
    pub two_hosts: bool,
    /// Requests an earlier run of the program sent on the key just before the instances
    /// start, one after another; past the budget they meet a 429, whose `Retry-After` the
    /// instances start into.
    pub earlier_run: u32,
}

/// The most requests an instance has on the wire before an answer shows the budget (rule S).
pub const MOST_UNREPORTED: usize = 8;

/// Independent instances that the rate contract keeps from a ban without shared state, against
/// the sandbox's ban at the tenth request inside one `Retry-After`.
pub const CONTRACT_INSTANCES: usize = 9;

impl Default for Cell {
    fn default() -> Self {
        Self::new("", 1)
    }
}

impl Cell {
    /// Whether the rate contract promises this cell no ban: clones or clients of one process,
    /// or at most [`CONTRACT_INSTANCES`] independent instances.
    pub fn within_contract(&self) -> bool {
        let instances = if self.headerless() {
            1
        } else {
            CONTRACT_INSTANCES
        };
        self.sharing != Sharing::Independent || self.instances <= instances
    }

    /// Whether the answers show no budget before a 429 (rule S's slow start): the first 429
    /// may find up to [`MOST_UNREPORTED`] requests of an instance on the wire, so the
    /// contract keeps one such instance from a ban, not several.
    pub fn headerless(&self) -> bool {
        matches!(
            self.quota_fields,
            QuotaFields::Absent | QuotaFields::OnlyOn429
        )
    }

    /// The most requests an instance may send inside one `Retry-After`.
    pub fn most_in_a_cooldown(&self) -> usize {
        if self.headerless() {
            MOST_UNREPORTED
        } else {
            1
        }
    }

    /// Whether every instance is in one process (one state): contract 2's sole user.
    pub fn one_process(&self) -> bool {
        self.sharing != Sharing::Independent || self.instances == 1
    }

    pub fn new(name: &str, instances: usize) -> Self {
        Self {
            name: name.to_owned(),
            instances,
            tasks: TASKS,
            sharing: Sharing::Independent,
            offset: 0,
            per_minute: 60,
            minute: MINUTE,
            windows: WINDOWS,
            per_day: 1_000_000,
            day: 86_400,
            cancel_half: false,
            faults: Vec::new(),
            quota_fields: QuotaFields::XRateLimit,
            backends: Vec::new(),
            clock_step: None,
            plan_change: None,
            extra_429s: Some(0),
            expect: Expect::Goodput(if instances == 1 { 0.95 } else { 0.90 }),
            start_gap: Duration::ZERO,
            window_kind: WindowKind::Fixed,
            two_hosts: false,
            earlier_run: 0,
        }
    }
}

/// Every cell of the matrix.
pub fn cells() -> Vec<Cell> {
    let mut cells = vec![
        Cell::new("1 instance", 1),
        Cell::new("2 independent instances", 2),
        Cell::new("4 independent instances", 4),
        Cell::new("8 independent instances", 8),
        // The most the contract keeps from a ban without shared state.
        Cell::new("9 independent instances", 9),
        Cell {
            sharing: Sharing::Clones,
            ..Cell::new("4 clones of one client", 4)
        },
        Cell {
            sharing: Sharing::SeparatelyBuilt,
            ..Cell::new("4 clients built separately, one process", 4)
        },
    ];
    for (name, instances, offset) in [
        ("server clock 300 s behind, 1 instance", 1, -300),
        ("server clock 3 s behind, 1 instance", 1, -3),
        ("server clock 3 s ahead, 1 instance", 1, 3),
        ("server clock 300 s ahead, 1 instance", 1, 300),
        ("server clock 300 s behind, 4 instances", 4, -300),
        ("server clock 3 s behind, 4 instances", 4, -3),
        ("server clock 3 s ahead, 4 instances", 4, 3),
        ("server clock 300 s ahead, 4 instances", 4, 300),
    ] {
        cells.push(Cell {
            offset,
            ..Cell::new(name, instances)
        });
    }
    for (name, instances) in [
        ("minute + day windows, day binds, 1 instance", 1),
        ("minute + day windows, day binds, 4 instances", 4),
    ] {
        cells.push(Cell {
            per_minute: 20,
            per_day: 50,
            day: 300,
            expect: Expect::DayBudget,
            ..Cell::new(name, instances)
        });
    }
    cells.extend([
        Cell {
            cancel_half: true,
            ..Cell::new("half the calls cancelled, 4 instances", 4)
        },
        Cell {
            faults: vec![Fault::status(429).retry_after(30).cut_body().times(1)],
            ..Cell::new("a 429 with a cut body, 4 instances", 4)
        },
        Cell {
            faults: vec![
                Fault::non_json_body(502)
                    .without_rate_limit_headers()
                    .times(1),
            ],
            ..Cell::new("first answer without quota headers, 4 instances", 4)
        },
        Cell {
            per_minute: 0,
            expect: Expect::Nothing,
            ..Cell::new("X-RateLimit-Limit: 0, 4 instances", 4)
        },
    ]);
    cells.extend(many_instances_cells());
    cells.extend(backend_cells());
    cells.extend(clock_step_cells());
    cells.extend([
        // A budget ample enough for two requests on the wire at once, one of them the late.
        Cell {
            faults: late_answer_faults(),
            extra_429s: Some(1),
            per_minute: 300,
            tasks: 2,
            ..Cell::new(
                "a 2xx sent before an injected 429 arrives during its Retry-After, 1 instance",
                1,
            )
        },
        Cell {
            faults: late_answer_faults(),
            extra_429s: Some(1),
            ..Cell::new(
                "a 2xx sent before an injected 429 arrives during its Retry-After, 4 instances",
                4,
            )
        },
    ]);
    for (name, instances) in [
        ("equal minute and day limits, 1 instance", 1),
        ("equal minute and day limits, 4 instances", 4),
    ] {
        cells.push(Cell {
            per_minute: 20,
            per_day: 20,
            day: 300,
            expect: Expect::DayBudget,
            ..Cell::new(name, instances)
        });
    }
    cells.extend(plan_change_cells());
    cells.extend(newer_kind_cells());
    cells
}

/// One sole user (and where it matters, a fleet of 4) in each kind of world added to the
/// explorer: sliding windows, an hour window, quota headers only on 429s or none, two host
/// names for the service, an earlier run that spent the key, a 200 ms round trip, and a plan
/// upgrade and downgrade.
fn newer_kind_cells() -> Vec<Cell> {
    let hour = |name: &str| Cell {
        minute: 3_600,
        windows: 3,
        ..Cell::new(name, 1)
    };
    vec![
        Cell {
            window_kind: WindowKind::Sliding,
            ..Cell::new("sliding windows, 1 instance", 1)
        },
        Cell {
            window_kind: WindowKind::Sliding,
            // A sliding window frees one request at a time, and instances that share nothing
            // race for each: a 429 for each of the 3 others at each of the 60 a window.
            extra_429s: Some(3 * 60),
            ..Cell::new("sliding windows, 4 instances", 4)
        },
        hour("an hour window, 1 instance"),
        Cell {
            quota_fields: QuotaFields::OnlyOn429,
            expect: Expect::Goodput(0.5),
            extra_429s: Some(TASKS),
            ..Cell::new("quota headers only on 429s, 1 instance", 1)
        },
        Cell {
            quota_fields: QuotaFields::Absent,
            expect: Expect::Goodput(0.5),
            extra_429s: Some(TASKS),
            ..Cell::new("no quota headers, 1 instance", 1)
        },
        Cell {
            sharing: Sharing::SeparatelyBuilt,
            two_hosts: true,
            ..Cell::new(
                "4 clients of one process, two host names for the service",
                4,
            )
        },
        Cell {
            earlier_run: 61,
            // The earlier run's own 429, beside the instance's.
            extra_429s: Some(1),
            ..Cell::new(
                "an earlier run spent the window and met a 429, 1 instance",
                1,
            )
        },
        Cell {
            faults: vec![Fault::latency(Duration::from_millis(200))],
            ..Cell::new("every answer 200 ms late, 1 instance", 1)
        },
        Cell {
            plan_change: Some(PlanChange {
                after: Duration::from_secs(135),
                per_minute: 120,
                per_day: 1_000_000,
            }),
            window_kind: WindowKind::Sliding,
            ..Cell::new("plan upgraded 60 → 120/min, sliding windows, 1 instance", 1)
        },
        Cell {
            plan_change: Some(PlanChange {
                after: Duration::from_secs(135),
                per_minute: 30,
                per_day: 1_000_000,
            }),
            window_kind: WindowKind::Sliding,
            ..Cell::new(
                "plan downgraded 60 → 30/min, sliding windows, 1 instance",
                1,
            )
        },
    ]
}

/// 16 and 32 independent instances on the Free plan's 60 a minute, four tasks each: fewer
/// requests a minute than instances have tasks; and 16 that start 5 ms apart on 10-second
/// windows, as the processes of `tools/fleet` do.
fn many_instances_cells() -> Vec<Cell> {
    let mut cells: Vec<Cell> = [16, 32]
        .into_iter()
        .map(|instances| Cell {
            tasks: 4,
            ..Cell::new(
                &format!("{instances} independent instances, 4 tasks each"),
                instances,
            )
        })
        .collect();
    cells.push(Cell {
        tasks: 4,
        minute: 10,
        windows: 6,
        start_gap: Duration::from_millis(5),
        ..Cell::new(
            "16 independent instances started 5 ms apart, 10 s windows",
            16,
        )
    });
    // Found by the simulation explorer (seed 1152 with `SIM_MAX_INSTANCES=32`): each
    // instance's second task went before the first's answer, which the latency kept, and
    // answers that came late showed a budget the others had since spent.
    cells.push(Cell {
        tasks: 2,
        per_minute: 96,
        minute: 2,
        windows: 8,
        faults: vec![Fault::latency(Duration::from_millis(382)).fraction(0.5)],
        expect: Expect::Goodput(0.5),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, half the answers 382 ms late, 2 s windows",
            32,
        )
    });
    // Found by the simulation explorer (seed 1084 with `SIM_MAX_INSTANCES=32`): a day that
    // binds was spread over a minute, spent long before its end, and every instance that had
    // not met its 429 called into the wait for the day's end.
    cells.push(Cell {
        tasks: 3,
        per_minute: 96,
        per_day: 160,
        day: 300,
        windows: 6,
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, a day of 160 that binds over 96 a minute",
            32,
        )
    });
    // Found by the simulation explorer (seed 832 with `SIM_MAX_INSTANCES=32`): the IETF
    // fields give the reset in seconds from now, and an answer that came in mid-second (the
    // one after the 503) named the window's end a second later than the answers before it:
    // a new period, in which the instance took itself to be alone and spent the key.
    cells.push(Cell {
        tasks: 1,
        per_minute: 96,
        minute: 2,
        windows: 4,
        quota_fields: QuotaFields::Ietf,
        faults: vec![Fault::status(503).times(1)],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, the reset in seconds from now, 2 s windows",
            32,
        )
    });
    // Found by the simulation explorer (seed 1916 with `SIM_MAX_INSTANCES=32`): a backend 2 s
    // ahead of the limiter dated its answers after the window's end, and each was ignored as
    // a period over on arrival, the fall it showed too: instances took themselves to be alone.
    cells.push(Cell {
        tasks: 1,
        per_minute: 96,
        minute: 2,
        windows: 3,
        offset: -134,
        backends: vec![-1, 2],
        faults: vec![Fault::latency(Duration::from_millis(1)).fraction(0.5)],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, backends 1 s behind and 2 s ahead, 2 s windows",
            32,
        )
    });
    // Found by the simulation explorer (seed 1697 with `SIM_MAX_INSTANCES=32`): an instance
    // that saw the others' first requests of a period took itself, by the falls its own next
    // answers showed while the others waited their turn, for one of one, then for alone,
    // and spent the period down to its reserve; the others' turns came to a spent window.
    cells.push(Cell {
        tasks: 4,
        per_minute: 160,
        minute: 30,
        windows: 4,
        per_day: 192,
        day: 60,
        quota_fields: QuotaFields::Ietf,
        start_gap: Duration::from_millis(737),
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "16 independent instances started 737 ms apart, a day of 192 over 160 a half-minute",
            16,
        )
    });
    // Found by the simulation explorer's soak (seed 3226): every answer came 429 ms after
    // the service counted its request, and an instance took the `remaining` it showed for
    // what was left when it arrived; it sent into a window the others had spent meanwhile,
    // whose 429, rounded up to a second, held the next window's first requests.
    cells.push(Cell {
        tasks: 3,
        per_minute: 48,
        minute: 2,
        windows: 4,
        faults: vec![Fault::latency(Duration::from_millis(429))],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "16 independent instances, every answer 429 ms late, 2 s windows",
            16,
        )
    });
    // Found by the simulation explorer's soak (seed 2083): a backend ahead of the limiter
    // answering after one behind it moved the reading of the service's clock forward, so
    // that an instance placed the window's end early and probed the period the limiter still
    // counted, one request after another, until it was spent.
    cells.push(Cell {
        tasks: 1,
        per_minute: 96,
        minute: 5,
        windows: 3,
        backends: vec![2, -3, 2],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, backends 2 s ahead and 3 s behind, 5 s windows",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 4076, and 833 on the way): the reset
    // given in seconds from now, counted from the `Date` of backends whose clocks disagree,
    // named one period up to 4 s apart; an instance took the period for a new one, half
    // spent before it came, which it was alone in, and spent it.
    cells.push(Cell {
        tasks: 2,
        per_minute: 96,
        minute: 10,
        windows: 3,
        quota_fields: QuotaFields::ResetInSeconds,
        backends: vec![-2, -1, 2],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, the reset in seconds from backends 4 s apart, 10 s windows",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 2476): each instance's two first answers
    // came from one backend, and those of the backend 2 s ahead placed the end early; at the
    // second after it, half the fleet called at once into a window the limiter had not
    // ended, and into the first one's `Retry-After`.
    cells.push(Cell {
        tasks: 1,
        per_minute: 96,
        windows: 3,
        cancel_half: true,
        backends: vec![0, 2],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, half of them answered by a backend 2 s ahead, 60 s windows",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 5609): an instance that had not sent
    // for a while, woken in a window's last instant, sent on an old report of what was left,
    // though the others' pace had spent the window: into the `Retry-After` of another's 429,
    // with nine other instances.
    cells.push(Cell {
        tasks: 2,
        per_minute: 96,
        minute: 5,
        windows: 4,
        cancel_half: true,
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, half the calls cancelled, 5 s windows",
            32,
        )
    });
    // Found by the simulation explorer's soak (seeds 14846 and 15538; 4170, 5754 and 17609
    // too): the instance a first 503 held took itself for the key's only user, spent all but
    // a fifth of a new window at once, and then averaged the others' falls in with the 384 of
    // its own, so that it went on spending the fifth as one of about one instance.
    cells.push(Cell {
        tasks: 2,
        offset: 186,
        per_minute: 480,
        minute: 5,
        windows: 4,
        faults: vec![Fault::status(503).retry_after(4).times(1)],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, one held 4 s by a first 503, 5 s windows",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 14750): the first window had less than a
    // second left, and two of three backends, a second ahead of the limiter, dated every
    // answer after its end; each instance they answered took the window for over, knew no
    // budget, and sent one probe after another, unpaced, until the window was spent.
    cells.push(Cell {
        tasks: 4,
        offset: 155,
        per_minute: 96,
        minute: 2,
        windows: 4,
        backends: vec![1, 1, -1],
        faults: vec![Fault::latency(Duration::from_millis(296)).fraction(0.1)],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, 2 of 3 backends 1 s ahead, a first window of under a second",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 18652): the service's clock stepped 20 s
    // forward, two whole 10 s periods, so that a fresh period ended where the spent one had,
    // its reset given in seconds; instances took its answers for the old period's, counted
    // its falls from the old period's least `remaining`, and reckoned a fleet of 32 as 8.
    cells.push(Cell {
        tasks: 1,
        per_minute: 96,
        minute: 10,
        windows: 3,
        per_day: 224,
        day: 20,
        quota_fields: QuotaFields::ResetInSeconds,
        clock_step: Some(ClockStep {
            after: Duration::from_millis(3_294),
            by: 20,
        }),
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, the clock steps two whole 10 s periods forward",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 25369): as each period began, the others
    // waited out a possible `Retry-After` while a few instances that called early saw only
    // each other's falls, reckoned the fleet at 3 to 5 and took 12 to 24 requests of a
    // period of 96, which ran out 0.22 s before its end.
    cells.push(Cell {
        tasks: 4,
        per_minute: 96,
        minute: 2,
        windows: 4,
        per_day: 512,
        day: 10,
        faults: vec![Fault::latency(Duration::from_millis(163))],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, every answer 163 ms late, 2 s windows and a 10 s day",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 40805): an instance whose first call was
    // cancelled started after the others had spent two thirds of the first window, took that
    // for its own earlier runs, found its next few requests alone in the falls, and then
    // reckoned the fleet of 32 at 2 and took 18 requests of a window of 96: it ran out 1.4 s
    // early, and the others' last requests met its 429.
    cells.push(Cell {
        tasks: 4,
        per_minute: 96,
        minute: 5,
        windows: 4,
        cancel_half: true,
        faults: vec![Fault::latency(Duration::from_millis(87)).fraction(0.1)],
        quota_fields: QuotaFields::Ietf,
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, half the calls cancelled, a tenth of the answers 87 ms late, IETF fields",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 44675): the first three instances were
    // held 18 s by a 503, and the fourth, alone at first, spent most of every 10 s period at
    // a pace of its own. Calling in each new period before the others, it saw falls that were
    // mostly its own, reckoned the fleet at 1 to 2, and the period ran out before its end.
    cells.push(Cell {
        tasks: 1,
        per_minute: 480,
        minute: 10,
        windows: 3,
        per_day: 1_472,
        day: 30,
        faults: vec![Fault::status(503).retry_after(18).times(3)],
        start_gap: Duration::from_millis(235),
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances started 235 ms apart, the first three held 18 s by a 503",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 14406): the first instance, alone, spent
    // 200 of the first 240 at once; each of the 15 that started after it took the 200 for as
    // many instances, as a new process must of a window down to its reserve, and carried the
    // guess into the next period, pacing at a request a period: the fleet used 62 of it.
    cells.push(Cell {
        tasks: 3,
        offset: 109,
        per_minute: 240,
        minute: 30,
        windows: 3,
        backends: vec![-2, -3],
        start_gap: Duration::from_millis(164),
        expect: Expect::Goodput(0.5),
        ..Cell::new(
            "16 independent instances started 164 ms apart after one's burst, backends 2 and 3 s behind",
            16,
        )
    });
    // Found by the simulation explorer on the way to the rule above (seed 1682): where the
    // guess was dropped at every new period, a new instance's burst spent most of one, and
    // ten instances reckoning one took its rest at once.
    cells.push(Cell {
        tasks: 4,
        per_minute: 480,
        minute: 2,
        windows: 4,
        per_day: 992,
        day: 4,
        start_gap: Duration::from_millis(182),
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances started 182 ms apart, 2 s windows and a 4 s day",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 78454): two of three backends a second
    // ahead of the limiter. A `Date` a second ahead passed for the limiter's clock read closer
    // to its tick, and most instances placed each 5 s window's end a second early: they paced
    // for a shorter window, spent it 0.3 s before its end, and reopened into its 429's
    // `Retry-After`.
    cells.push(Cell {
        tasks: 1,
        offset: -92,
        per_minute: 96,
        minute: 5,
        windows: 3,
        per_day: 320,
        day: 15,
        cancel_half: true,
        backends: vec![0, 1, 1],
        plan_change: Some(PlanChange {
            after: Duration::from_millis(7_207),
            per_minute: 96,
            per_day: 320,
        }),
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, half the calls cancelled, 2 of 3 backends a second ahead",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 3570): one of two backends a second ahead.
    // An instance whose first answers came from it skipped the other's `Date`, equal to what
    // it had shown a second before, placed every end a second early, and called first in
    // each new period, alone in the falls: it took 41 of a window of 96.
    cells.push(Cell {
        tasks: 2,
        per_minute: 96,
        minute: 2,
        windows: 3,
        per_day: 224,
        day: 4,
        backends: vec![0, 1],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, one of two backends a second ahead, 2 s windows",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 26252): one of two backends a second
    // ahead, and a window spent to its end. The last request met a 429 3 ms before the end,
    // whose `Retry-After`, rounded up, held the key to a second after it. Six instances had
    // taken a `Date` a second ahead for the limiter's clock read closer to its tick, placed
    // the end 0.1 to 0.8 s early and reopened a second after that; with three pacing on past
    // the end, one probing and the one that met the 429 calling again, 11 requests met that
    // `Retry-After`, one from each of 11 instances.
    cells.push(Cell {
        tasks: 4,
        offset: -103,
        per_minute: 96,
        minute: 2,
        windows: 3,
        per_day: 320,
        day: 6,
        backends: vec![0, 1],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances, one of two backends a second ahead, a window spent to its end",
            32,
        )
    });
    // Found by the simulation explorer's soak (seed 69479): one of two backends a second
    // ahead, one task per instance. Half the fleet placed each end a second early from the
    // backend ahead and, a second of grace later, called first in each new period; its falls
    // showed them 5 to 8 instances, the fleet that was spending. A second later the other 16
    // joined at once, and the estimate, averaged over the period, lagged: the window was
    // spent 0.15 s early, and 13 requests met the `Retry-After` of its first 429.
    cells.push(Cell {
        tasks: 1,
        offset: 0,
        per_minute: 96,
        minute: 2,
        windows: 3,
        per_day: 4_147_232,
        day: 86_400,
        backends: vec![0, 1],
        expect: Expect::Goodput(0.0),
        extra_429s: None,
        ..Cell::new(
            "32 independent instances of one task, one of two backends a second ahead, half the fleet joining each period a second late",
            32,
        )
    });
    cells
}

/// Two backends 2 s apart behind one limiter, in each order, and one behind: a backend ahead
/// of the limiter's clock shows a window's end earlier than the limiter ends it.
fn backend_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for (shape, backends) in [
        ("the second 2 s ahead of the limiter", vec![0, 2]),
        ("the first 2 s ahead of the limiter", vec![2, 0]),
        ("the second 2 s behind the limiter", vec![0, -2]),
    ] {
        for instances in [1, 4] {
            let plural = if instances == 1 { "" } else { "s" };
            cells.push(Cell {
                backends: backends.clone(),
                ..Cell::new(
                    &format!("2 backends, {shape}, {instances} instance{plural}"),
                    instances,
                )
            });
        }
    }
    cells
}

/// The service's clock steps 10 s ahead or back 120 s after start: 30 s into the third
/// window (the cell starts 30 s into a minute), so the step stays in mid-window.
fn clock_step_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for by in [10, -10] {
        for instances in [1, 4] {
            let plural = if instances == 1 { "" } else { "s" };
            cells.push(Cell {
                clock_step: Some(ClockStep {
                    after: Duration::from_secs(120),
                    by,
                }),
                // A clock stepped back into a spent window refuses what no answer foretold: a
                // 429 an instance beside the one each window's end may give it.
                extra_429s: Some(if by < 0 { instances } else { 0 }),
                ..Cell::new(
                    &format!(
                        "service clock steps {by:+} s in mid-window, {instances} instance{plural}"
                    ),
                    instances,
                )
            });
        }
    }
    cells
}

/// The 21st request admitted is answered 5 s late; the 22nd, sent meanwhile, gets an injected
/// 429 with `Retry-After: 10`: the late 2xx arrives inside that wait.
fn late_answer_faults() -> Vec<Fault> {
    vec![
        Fault::latency(Duration::from_secs(5)).skip(20).times(1),
        Fault::status(429).retry_after(10).skip(21).times(1),
    ]
}

/// The plan goes from 60 to 120 a minute, or to 30, 135 s after start: 45 s into the third
/// window, when about 45 of its 60 are used.
fn plan_change_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    for (way, per_minute) in [("upgraded", 120), ("downgraded", 30)] {
        for instances in [1, 4] {
            let plural = if instances == 1 { "" } else { "s" };
            cells.push(Cell {
                plan_change: Some(PlanChange {
                    after: Duration::from_secs(135),
                    per_minute,
                    per_day: 1_000_000,
                }),
                ..Cell::new(
                    &format!("plan {way} 60 → {per_minute}/min in mid-window, {instances} instance{plural}"),
                    instances,
                )
            });
        }
    }
    cells
}

/// What a cell did.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub requests: usize,
    /// Successes in each full minute window.
    pub per_minute: Vec<u64>,
    /// Successes in each full day window.
    pub per_day: Vec<u64>,
    pub goodput: f64,
    pub limited: usize,
    pub most_429_in_a_window: usize,
    /// The most requests one instance sent inside one `Retry-After`.
    pub most_in_a_cooldown: usize,
    pub during_cooldown: u64,
    /// 2xx answers that came after a 429 to requests that arrived before it.
    pub late_answers: usize,
    pub bans: u64,
    /// The longest call that was neither cancelled nor cut off by the end of the run.
    pub slowest_call: Duration,
    pub calls: usize,
    pub errors: BTreeMap<String, usize>,
    /// Calls of a key's only user held while its budget lasted (where that is checked).
    pub holds: holds::Holds,
}

impl Figures {
    /// Whether the run was held to a goodput floor above zero: past the contract, a ban the
    /// contract allows leaves a run its safety alone.
    pub fn floor_in_force(&self, cell: &Cell) -> bool {
        matches!(cell.expect, Expect::Goodput(floor) if floor > 0.0)
            && (cell.within_contract() || self.bans == 0)
    }

    /// Whether the cell met every requirement; if not, which one it missed.
    pub fn check(&self, cell: &Cell) -> Result<(), String> {
        let policy = RetryPolicy::default();
        let mut problems = Vec::new();
        // Past the contract, a fleet is held to its count (at most one request per instance
        // inside any `Retry-After`), not to the absence of a ban.
        let within = cell.within_contract();
        if self.bans > 0 && within {
            problems.push(format!("{} bans", self.bans));
        }
        if self.most_in_a_cooldown > cell.most_in_a_cooldown() {
            problems.push(format!(
                "an instance sent {} requests inside one Retry-After",
                self.most_in_a_cooldown
            ));
        }
        let most_429 = cell
            .extra_429s
            .filter(|_| within)
            .map(|extra| cell.instances + extra);
        if let Some(most) = most_429.filter(|most| self.most_429_in_a_window > *most) {
            problems.push(format!(
                "{} × 429 in one window (at most {most} allowed)",
                self.most_429_in_a_window
            ));
        }
        let bound = Duration::from_secs(cell.minute) + policy.max_server_wait();
        if let Some(pending) = self.errors.get("still pending") {
            problems.push(format!(
                "{pending} calls still pending a second past a window plus max_server_wait"
            ));
        } else if self.slowest_call > bound {
            problems.push(format!(
                "a call took {:?}, more than a window plus max_server_wait",
                self.slowest_call
            ));
        }
        if self.holds.calls > 0 {
            problems.push(format!(
                "{} calls of the key's only user held while its budget lasted (the longest {:?}, the first at {:.3} s)",
                self.holds.calls,
                self.holds.longest,
                self.holds.first_at.unwrap_or_default().as_secs_f64()
            ));
        }
        match cell.expect {
            Expect::Goodput(_) if !self.floor_in_force(cell) => {}
            _ if !within && self.bans > 0 => {}
            Expect::Goodput(least) if self.goodput < least => problems.push(format!(
                "goodput {:.1}% < {:.0}%",
                self.goodput * 100.0,
                least * 100.0
            )),
            Expect::DayBudget => {
                let per_day = u64::from(cell.per_day);
                if self.per_day.is_empty() || self.per_day.iter().any(|n| *n != per_day) {
                    problems.push(format!(
                        "full days used {:?}, not all of {per_day}",
                        self.per_day
                    ));
                }
                if self
                    .per_minute
                    .iter()
                    .any(|n| *n > u64::from(cell.per_minute))
                {
                    problems.push(format!(
                        "a minute used more than its limit: {:?}",
                        self.per_minute
                    ));
                }
            }
            Expect::Nothing if self.per_minute.iter().any(|n| *n > 0) => {
                problems.push("a call succeeded on a plan that allows none".to_owned());
            }
            _ => {}
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// The cell's row of the printed table.
    pub fn row(&self, cell: &Cell) -> String {
        let verdict = match self.check(cell) {
            Ok(()) => "ok".to_owned(),
            Err(problems) => format!("FAILED: {problems}"),
        };
        let goodput = match cell.expect {
            Expect::Goodput(_) => format!("{:.1}%", self.goodput * 100.0),
            Expect::DayBudget => format!("days {:?} of {}", self.per_day, cell.per_day),
            Expect::Nothing => "none allowed".to_owned(),
        };
        let errors: Vec<String> = self
            .errors
            .iter()
            .map(|(kind, n)| format!("{kind} × {n}"))
            .collect();
        format!(
            "| {} | {} | {} | {goodput} | {} | {} | {} | {} | {} | {} | {:.0} s | {} | {} | {verdict} |",
            cell.name,
            self.calls,
            self.requests,
            self.limited,
            self.most_429_in_a_window,
            self.during_cooldown,
            self.most_in_a_cooldown,
            self.late_answers,
            self.bans,
            self.slowest_call.as_secs_f64(),
            self.holds.calls,
            errors.join(", "),
        )
    }
}

/// The header of the printed table.
pub const TABLE_HEADER: &str = "| cell | calls | requests | goodput (full windows) | 429s | most 429s in a window | requests during a Retry-After | most by one instance in one Retry-After | late 2xx (sent before a 429, answered after) | bans | slowest call | calls held while the budget lasted | calls failed or cancelled | verdict |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |";

/// A small seeded generator, so that a cell's cancellations fall the same way every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// How a call ended, and when it started.
enum Outcome {
    Done(Instant, Duration),
    Failed(Instant, Duration, String),
    Cancelled(Instant),
}

/// The user agent of an earlier run's requests ([`Cell::earlier_run`]).
pub const EARLIER_RUN: &str = "earlier-run";

/// Runs one cell; call it on a paused clock.
pub async fn run(cell: &Cell) -> Figures {
    const KEY: &str = "matrix-key";
    let opened = Instant::now();
    let sandbox = start_sandbox(cell, KEY).await;
    // One HTTP client for every instance: building one loads the system's root certificates
    // (through OpenSSL with `native-tls`), which took half the explorer's time, and the
    // connection pool plays no part in the rate discipline.
    // `localhost` resolved here, not by the system's resolver on a blocking thread, whose
    // real time the paused clock would skip through by a different amount each run.
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let http = petstore_client::reqwest::Client::builder()
        .redirect(petstore_client::reqwest::redirect::Policy::none())
        .resolve("localhost", loopback)
        .build()
        .expect("an HTTP client");
    spend_as_an_earlier_run(cell, &sandbox, &http, KEY).await;
    for fault in &cell.faults {
        sandbox.inject(fault.clone());
    }
    let clients = clients(cell, &sandbox, &http, KEY);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(cell.minute * cell.windows);
    let bound = wait_bound(cell);
    let mut tasks = Vec::new();
    for (i, client) in clients.iter().enumerate() {
        for t in 0..cell.tasks {
            let client = client.clone();
            let cancel_half = cell.cancel_half;
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((i * cell.tasks + t) as u64 + 1));
            let starts_at = Instant::now() + cell.start_gap * i as u32;
            tasks.push(tokio::spawn(async move {
                tokio::time::sleep_until(starts_at).await;
                let mut outcomes = Vec::new();
                while Instant::now() < deadline {
                    let start = Instant::now();
                    let call = client.list_pets().limit(1).send();
                    let result = if cancel_half && rng.below(2) == 0 {
                        let at = Duration::from_millis(rng.below(3_000));
                        match tokio::time::timeout(at, call).await {
                            Ok(result) => Some(result),
                            Err(_) => {
                                outcomes.push(Outcome::Cancelled(start));
                                continue;
                            }
                        }
                    } else {
                        // A call may end after the run: it is waited for, up to a second
                        // past the bound on waits, so that one that never ends fails it.
                        tokio::time::timeout(bound + Duration::from_secs(1), call)
                            .await
                            .ok()
                    };
                    let took = start.elapsed();
                    let Some(result) = result else {
                        outcomes.push(Outcome::Failed(start, took, "still pending".to_owned()));
                        break;
                    };
                    match result {
                        Ok(_) => outcomes.push(Outcome::Done(start, took)),
                        Err(error) => {
                            let pause = match &error {
                                // What an application does with a call held back: come back
                                // when the service will take it.
                                Error::Throttled(held) => held.retry_after(),
                                _ => Duration::from_secs(1),
                            };
                            outcomes.push(Outcome::Failed(start, took, kind(&error)));
                            let resume = (Instant::now() + pause).min(deadline);
                            tokio::time::sleep_until(resume).await;
                        }
                    }
                }
                outcomes
            }));
        }
    }
    let mut figures = Figures::default();
    let mut spans = Vec::new();
    for task in tasks {
        for outcome in task.await.expect("a task of the cell") {
            match outcome {
                Outcome::Done(start, took) => {
                    figures.calls += 1;
                    figures.slowest_call = figures.slowest_call.max(took);
                    spans.push(holds::CallSpan::new(start, took, false));
                }
                Outcome::Failed(start, took, kind) => {
                    figures.calls += 1;
                    figures.slowest_call = figures.slowest_call.max(took);
                    let throttled = kind == "throttled";
                    spans.push(holds::CallSpan::new(start, took, throttled));
                    *figures.errors.entry(kind).or_insert(0) += 1;
                }
                Outcome::Cancelled(start) => {
                    spans.push(holds::CallSpan::new(start, start.elapsed(), false));
                    *figures.errors.entry("cancelled".to_owned()).or_insert(0) += 1;
                }
            }
        }
    }
    drop(clients);
    let log = sandbox.request_log();
    if std::env::var_os("SIM_LOG").is_some() {
        print_log(&log);
    }
    if holds::apply(cell) {
        figures.holds = holds::find(cell, &log, &spans, started);
    }
    let stats = sandbox.stats();
    figures.bans = stats.bans();
    figures.during_cooldown = stats.during_cooldown();
    let end = served::server_unix(cell, deadline - opened);
    count_the_log(cell, &log, (deadline, end), &mut figures);
    figures
}

/// The longest a call may take: a window and the longest wait the client sits through.
pub fn wait_bound(cell: &Cell) -> Duration {
    Duration::from_secs(cell.minute) + RetryPolicy::default().max_server_wait()
}

/// The sandbox of `cell`, with `key` on the cell's plan.
async fn start_sandbox(cell: &Cell, key: &str) -> Sandbox {
    let start = std::time::UNIX_EPOCH + Duration::from_secs(CLOCK_START_UNIX);
    let mut builder = Sandbox::builder()
        .clock_start(start)
        .key(
            key,
            Plan::Enterprise {
                per_minute: cell.per_minute,
                per_day: cell.per_day,
            },
        )
        .minute_window(Duration::from_secs(cell.minute))
        .day_window(Duration::from_secs(cell.day))
        .window_kind(cell.window_kind)
        .quota_fields(cell.quota_fields)
        .clock_offset(TimeDelta::seconds(cell.offset))
        .backend_clock_offsets(cell.backends.iter().map(|s| TimeDelta::seconds(*s)));
    if let Some(step) = cell.clock_step {
        builder = builder.clock_step(step.after, TimeDelta::seconds(step.by));
    }
    if let Some(change) = cell.plan_change {
        let plan = Plan::Enterprise {
            per_minute: change.per_minute,
            per_day: change.per_day,
        };
        builder = builder.plan_change(change.after, key, plan);
    }
    builder.start().await.expect("the sandbox starts")
}

/// The requests of an earlier run of the program, sent one after another as the sandbox
/// starts, without the client: what a process that starts finds spent.
async fn spend_as_an_earlier_run(
    cell: &Cell,
    sandbox: &Sandbox,
    http: &petstore_client::reqwest::Client,
    key: &str,
) {
    let url = format!(
        "{}/pets?limit=1",
        sandbox.base_url().as_str().trim_end_matches('/')
    );
    for _ in 0..cell.earlier_run {
        http.get(&url)
            .bearer_auth(key)
            .header("user-agent", EARLIER_RUN)
            .send()
            .await
            .expect("the sandbox answers")
            .bytes()
            .await
            .expect("a body");
    }
}

/// The base URL of instance `i`: with two host names, every other one names the sandbox
/// `localhost`.
fn base_url(cell: &Cell, sandbox: &Sandbox, i: usize) -> url::Url {
    let mut url = sandbox.base_url().clone();
    if cell.two_hosts && i % 2 == 1 {
        url.set_host(Some("localhost")).expect("a host name");
    }
    url
}

/// One client per instance, shared as the cell says.
fn clients(
    cell: &Cell,
    sandbox: &Sandbox,
    http: &petstore_client::reqwest::Client,
    key: &str,
) -> Vec<PetStoreClient> {
    let build = |i: usize, scope: RateLimitScope| {
        PetStoreClient::builder()
            .base_url(base_url(cell, sandbox, i).as_str())
            .http_client(http.clone())
            .api_key(key)
            .user_agent(format!("instance-{i}"))
            .rate_limit_scope(scope)
            .pacing(Pacing::Shared)
            // Seeded, so that a world replays exactly; one seed per instance, so that
            // instances do not retry in lockstep.
            .retry_policy(RetryPolicy::builder().jitter_seed(i as u64).build())
            .build()
            .expect("a valid client")
    };
    match cell.sharing {
        Sharing::Independent => (0..cell.instances)
            .map(|i| build(i, RateLimitScope::Client))
            .collect(),
        // Under two host names, clones of two clients of the process, one for each name.
        Sharing::Clones if cell.two_hosts => {
            let two = [
                build(0, RateLimitScope::Process),
                build(1, RateLimitScope::Process),
            ];
            (0..cell.instances).map(|i| two[i % 2].clone()).collect()
        }
        Sharing::Clones => {
            let one = build(0, RateLimitScope::Client);
            vec![one; cell.instances]
        }
        Sharing::SeparatelyBuilt => (0..cell.instances)
            .map(|i| build(i, RateLimitScope::Process))
            .collect(),
    }
}

/// The figures the sandbox's log gives. Goodput counts the minute windows wholly inside the
/// run, from its first request to its deadline (`end`: the deadline, and the limiter's unix
/// second then; calls still under way then end after it, and their requests are not the
/// run's), against what the service could have served in them ([`served`]): windows where
/// every call was held count, as a run cut short at its last request would hide them.
fn count_the_log(
    cell: &Cell,
    log: &[LoggedRequest],
    (deadline, end): (Instant, i64),
    figures: &mut Figures,
) {
    let run: Vec<LoggedRequest> = log.iter().filter(|r| r.at < deadline).cloned().collect();
    let minutes = windows_before(&run, cell.minute, end.max(0) as u64 / cell.minute);
    figures.per_minute = minutes.iter().map(|(_, n)| *n).collect();
    figures.per_day = successes_per_window(&run, cell.day);
    let (used, allowance) = served::served(cell, &run, &minutes);
    // Where the service could serve nothing (a day spent before the first full window),
    // nothing was missed.
    figures.goodput = if allowance > 0 {
        used as f64 / allowance as f64
    } else {
        1.0
    };
    figures.requests = log.len();
    figures.limited = log.iter().filter(|r| r.status == Some(429)).count();
    figures.most_429_in_a_window = most_429_in_a_window(log, cell.minute);
    figures.most_in_a_cooldown = most_in_a_cooldown(log);
    figures.late_answers = late_answers(log);
}

/// Every request the sandbox received, one line each, in the order it logged them: when,
/// from which instance, the status, and whether it came during a `Retry-After`.
fn print_log(log: &[LoggedRequest]) {
    let Some(first) = log.first() else { return };
    for request in log {
        let wait = request.told_to_wait_until.map_or(String::new(), |until| {
            format!(
                " told to wait until {:.3} s",
                (until - first.at).as_secs_f64()
            )
        });
        let answered = request.answered_at.map_or(String::new(), |at| {
            format!(" answered {:.3} s", (at - first.at).as_secs_f64())
        });
        let left = request
            .left
            .map_or(String::new(), |left| format!(" left {left}"));
        println!(
            "{:>9.3} s {:<12} {:>4} {}{wait}{answered}{left}",
            (request.at - first.at).as_secs_f64(),
            request.user_agent.as_deref().unwrap_or("-"),
            request
                .status
                .map_or("-".to_owned(), |status| status.to_string()),
            if request.during_cooldown {
                "during a Retry-After"
            } else {
                ""
            }
        );
    }
}

fn kind(error: &Error) -> String {
    match error {
        Error::Throttled { .. } => "throttled".to_owned(),
        other => match other.status() {
            Some(status) => format!("http {}", status.as_u16()),
            None => format!("{other}"),
        },
    }
}

fn window_of(request: &LoggedRequest, length: u64) -> u64 {
    let unix = request
        .server_time
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    unix / length
}

/// Successes in each window that lies wholly between the first and the last request (zero
/// where nothing succeeded), on the sandbox's clock.
pub fn successes_per_window(log: &[LoggedRequest], length: u64) -> Vec<u64> {
    full_windows(log, length)
        .into_iter()
        .map(|(_, n)| n)
        .collect()
}

/// [`successes_per_window`] with each window's index (its start in unix seconds / `length`).
fn full_windows(log: &[LoggedRequest], length: u64) -> Vec<(u64, u64)> {
    let Some(last) = log.last() else {
        return Vec::new();
    };
    windows_before(log, length, window_of(last, length))
}

/// Successes in each window after the first request's and before the window `last` (an
/// index), on the sandbox's clock, with each window's index.
fn windows_before(log: &[LoggedRequest], length: u64, last: u64) -> Vec<(u64, u64)> {
    let Some(first) = log.first() else {
        return Vec::new();
    };
    let first = window_of(first, length);
    let mut counts: BTreeMap<u64, u64> = (first + 1..last).map(|w| (w, 0)).collect();
    for request in log.iter().filter(|r| r.status == Some(200)) {
        if let Some(count) = counts.get_mut(&window_of(request, length)) {
            *count += 1;
        }
    }
    counts.into_iter().collect()
}

/// 2xx answers logged (the log is in the order of answers) after a 429 to a request that
/// arrived before that 429 did.
fn late_answers(log: &[LoggedRequest]) -> usize {
    let mut last_429 = None;
    let mut late = 0;
    for request in log {
        match request.status {
            Some(429) => last_429 = Some(request.at),
            // Logged after the 429, so answered after it; arrived no later, so sent before it.
            Some(200..=299) if last_429.is_some_and(|at| request.at <= at) => late += 1,
            _ => {}
        }
    }
    late
}

fn most_429_in_a_window(log: &[LoggedRequest], minute: u64) -> usize {
    let mut per_window: HashMap<u64, usize> = HashMap::new();
    for request in log.iter().filter(|r| r.status == Some(429)) {
        *per_window.entry(window_of(request, minute)).or_default() += 1;
    }
    per_window.into_values().max().unwrap_or(0)
}

/// The most requests one instance (user agent) sent inside the `Retry-After` of one 429, any
/// instance's: from the 429's arrival to the end its `Retry-After` gave, no later than the
/// key's wait it fell in ends (a 429 that did not arrive during a wait starts one, as long as
/// its `Retry-After`; one rounded up to whole seconds can outlast that wait).
pub fn most_in_a_cooldown(log: &[LoggedRequest]) -> usize {
    let mut arrivals: Vec<&LoggedRequest> = log.iter().collect();
    arrivals.sort_by_key(|r| r.at);
    let mut most = 0;
    let mut wait_ends = None;
    for limited in &arrivals {
        // A 429 no one received (its call was cancelled) told no instance to wait.
        let (Some(until), Some(_)) = (limited.told_to_wait_until, limited.status) else {
            continue;
        };
        if !limited.during_cooldown {
            wait_ends = Some(until);
        }
        let end = wait_ends.map_or(until, |ends| until.min(ends));
        let mut counts: HashMap<Option<&str>, usize> = HashMap::new();
        let inside = arrivals
            .iter()
            .filter(|r| r.during_cooldown && r.at > limited.at && r.at < end);
        for request in inside {
            *counts.entry(request.user_agent.as_deref()).or_default() += 1;
        }
        most = most.max(counts.into_values().max().unwrap_or(0));
    }
    most
}
