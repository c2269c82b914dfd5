//! The seeded simulation explorer's worlds: each seed generates one world (how many instances
//! share the key and how, the plan and its windows, the sandbox's clock offset, how it shows the
//! quota, latency, injected 429s and 503s with every form of `Retry-After`, cancellations,
//! backends whose clocks disagree behind the one limiter, a step of the service's clock, a plan
//! change, instances that start one after another), run by the scenario matrix's runner
//! (`matrix::run`) and checked by its invariants.
//!
//! `SIM_MAX_INSTANCES` (default [`DEFAULT_MAX_INSTANCES`]) caps the independent instances of
//! a world; above 8, worlds of 16 and 32 independent instances are drawn too, as drawn, and held
//! to the contract's count (at most one request per instance inside any `Retry-After`), not to
//! the absence of a ban. Every world is held to a goodput floor stated for its kind
//! ([`goodput_floor`]); past the contract, only in a run that meets no ban.

use std::time::{Duration, UNIX_EPOCH};

use petstore_client::RetryPolicy;
use petstore_sandbox::{Fault, QuotaFields, WindowKind};

use super::matrix::served::{allowance, server_millis, server_unix};
use super::matrix::{
    CLOCK_START_UNIX, Cell, ClockStep, Expect, MOST_UNREPORTED, PlanChange, Sharing,
};

/// The most independent instances a world has unless `SIM_MAX_INSTANCES` says otherwise: 211
/// of the first 2,000 worlds have 16 or 32 independent instances on one key.
pub const DEFAULT_MAX_INSTANCES: usize = 32;

/// `SIM_MAX_INSTANCES`, or [`DEFAULT_MAX_INSTANCES`].
pub fn max_instances() -> usize {
    match std::env::var("SIM_MAX_INSTANCES") {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("SIM_MAX_INSTANCES must be a whole number, not {value:?}")),
        Err(_) => DEFAULT_MAX_INSTANCES,
    }
}

/// SplitMix64: a small generator whose whole state is the seed, so a world is one number.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One of `choices`.
    pub fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.below(choices.len() as u64) as usize]
    }
}

/// The world of `seed`.
pub fn world(seed: u64) -> Cell {
    let mut rng = SplitMix::new(seed);
    let (instances, sharing) = match rng.below(10) {
        // Clones and clients built separately in one process share one state: any number.
        0 | 1 => (rng.pick(&[2, 4, 16]), Sharing::Clones),
        2 => (rng.pick(&[2, 4, 16]), Sharing::SeparatelyBuilt),
        _ => (
            rng.pick(&[1, 1, 1, 1, 2, 2, 3, 4, 4, 8]),
            Sharing::Independent,
        ),
    };
    let minute = rng.pick(&[2, 5, 10, 30, 60]);
    let per_minute = rng.pick(&[5, 10, 20, 30, 60]);
    let mut cell = Cell {
        name: format!("seed {seed}"),
        // The matrix's cells allow one 429 per instance per window; in a world with latency,
        // cancellations and injected 429s an instance can have several requests on the wire
        // when a window runs out. What the worlds bound is the ban: requests inside a
        // `Retry-After`, at most one per instance.
        extra_429s: None,
        instances,
        tasks: 1 + rng.below(4) as usize,
        sharing,
        per_minute: per_minute as u32,
        minute,
        // Three windows at least: the first and the last are partial.
        windows: 3 + rng.below(2),
        ..Cell::default()
    };
    if rng.chance(0.3) {
        // A day window of a few minutes, whose budget binds or equals the minute's.
        cell.day = minute * (2 + rng.below(4));
        cell.per_day = if rng.chance(0.3) {
            cell.per_minute
        } else {
            cell.per_minute * (1 + rng.below(3) as u32)
        };
    }
    if rng.chance(0.5) {
        cell.offset = rng.below(601) as i64 - 300;
    }
    cell.quota_fields = match rng.below(12) {
        0 => QuotaFields::RepeatedRemaining,
        1 => QuotaFields::NegativeRemaining,
        2 => QuotaFields::ResetInSeconds,
        3 => QuotaFields::Ietf,
        _ => QuotaFields::XRateLimit,
    };
    cell.cancel_half = rng.chance(0.15);
    if rng.chance(0.3) {
        let delay = Duration::from_millis(1 + rng.below(500));
        let fraction = rng.pick(&[0.1, 0.5, 1.0]);
        cell.faults.push(Fault::latency(delay).fraction(fraction));
    }
    if rng.chance(0.3) {
        let times = 1 + rng.below(3);
        let (fault, form) = retry_after_form(&mut rng, &cell, 429);
        cell.faults.push(fault.times(times));
        cell.name
            .push_str(&format!(", 429 × {times} with Retry-After {form}"));
    }
    if rng.chance(0.15) {
        let times = 1 + rng.below(3);
        let (fault, form) = retry_after_form(&mut rng, &cell, 503);
        cell.faults.push(fault.times(times));
        cell.name
            .push_str(&format!(", 503 × {times} with Retry-After {form}"));
    }
    if rng.chance(0.1) {
        cell.faults.push(
            Fault::non_json_body(502)
                .without_rate_limit_headers()
                .times(1 + rng.below(3)),
        );
    }
    // The kinds added later draw after the older ones, so that a seed keeps its older draws.
    let many = rng.pick(&[16, 32]);
    if sharing == Sharing::Independent && rng.chance(0.15) && many <= max_instances() {
        cell.instances = many;
        cell.name
            .push_str(&format!(", {many} independent instances"));
    }
    if rng.chance(0.2) {
        let wide = rng.chance(0.2);
        let backends = 2 + rng.below(2) as usize;
        cell.backends = (0..backends)
            .map(|_| {
                if wide {
                    rng.below(601) as i64 - 300
                } else {
                    rng.below(7) as i64 - 3
                }
            })
            .collect();
    }
    let run = cell.minute * cell.windows * 1_000;
    if rng.chance(0.15) {
        let after = Duration::from_millis(rng.below(run));
        let by = (1 + rng.below(30) as i64) * if rng.chance(0.5) { 1 } else { -1 };
        cell.clock_step = Some(ClockStep { after, by });
    }
    if rng.chance(0.15) {
        let after = Duration::from_millis(rng.below(run));
        let per_minute = rng.pick(&[5, 10, 20, 30, 60]);
        cell.plan_change = Some(PlanChange {
            after,
            per_minute,
            per_day: cell.per_day,
        });
    }
    if rng.chance(0.2) {
        cell.start_gap = Duration::from_millis(1 + rng.below(2_000));
        cell.name.push_str(&format!(
            ", instances start {} ms apart",
            cell.start_gap.as_millis()
        ));
    }
    draw_newer_kinds(&mut rng, &mut cell);
    if !cell.backends.is_empty() {
        let offsets: Vec<String> = cell.backends.iter().map(|s| format!("{s:+}")).collect();
        cell.name
            .push_str(&format!(", backends at [{}] s", offsets.join(", ")));
    }
    if let Some(step) = cell.clock_step {
        cell.name.push_str(&format!(
            ", clock steps {:+} s at {:.3} s",
            step.by,
            step.after.as_secs_f64()
        ));
    }
    if let Some(change) = cell.plan_change {
        cell.name.push_str(&format!(
            ", plan {} → {}/min at {:.3} s",
            cell.per_minute,
            change.per_minute,
            change.after.as_secs_f64()
        ));
    }
    let held = hardships(&cell).iter().all(|(_, share)| *share > 0.0);
    if held {
        // A world held to a floor runs long enough for two full windows after the quiet
        // (`quiet`), and for those a step back of the clock gives again: the windows in the
        // quiet may serve nothing, and a floor wants windows to be measured by.
        let quiet = (quiet(&cell) / cell.minute as f64).ceil() as u64;
        cell.windows = cell.windows.max(quiet + stepped_back(&cell) + 3);
        // Backends off the limiter's clock by half a window or more reopen each window up
        // to twice that late (`hardships`): three such stretches are measured.
        if let Some(apart) = far_apart(&cell) {
            cell.windows = cell.windows.max(stretched_windows(cell.minute, apart));
        }
        // A sliding day that binds frees its budget once a day: three of its refills are
        // measured, as a minute's are, rather than one that a second's lateness can miss.
        let days = refill_period(&cell) / cell.minute;
        if cell.window_kind == WindowKind::Sliding && days > 1 {
            cell.windows = cell.windows.max(3 * days + 2);
        }
    }
    cell.expect = Expect::Goodput(goodput_floor(&cell));
    cell.extra_429s = Some(most_429s(&cell).saturating_sub(cell.instances));
    cell
}

/// The kinds of world added after the first ones, drawn after them so that a seed keeps its
/// older draws: sliding windows, windows of minutes to a day, quota headers only on 429s or
/// none, two host names for the service, an earlier run that spent the key, a round trip on
/// every request, and a plan change that changes the limit.
fn draw_newer_kinds(rng: &mut SplitMix, cell: &mut Cell) {
    if rng.chance(0.15) {
        cell.window_kind = WindowKind::Sliding;
        cell.name.push_str(", sliding windows");
    }
    if rng.chance(0.15) {
        // The paused clock makes a long window cost what its requests cost: the limits stay
        // modest, and the run three windows long.
        let length = rng.pick(&[120, 600, 1_800, 3_600, 86_400]);
        let scale = |d: Duration| d.mul_f64(length as f64 / cell.minute as f64);
        if cell.day < 86_400 {
            cell.day = cell.day / cell.minute * length;
        }
        if let Some(step) = &mut cell.clock_step {
            step.after = scale(step.after);
        }
        if let Some(change) = &mut cell.plan_change {
            change.after = scale(change.after);
        }
        cell.minute = length;
        cell.windows = 3;
    }
    if rng.chance(0.15) {
        cell.quota_fields = rng.pick(&[QuotaFields::OnlyOn429, QuotaFields::Absent]);
        cell.name.push_str(match cell.quota_fields {
            QuotaFields::OnlyOn429 => ", quota headers only on 429s",
            _ => ", no quota headers",
        });
    }
    if rng.chance(0.2) {
        cell.two_hosts = true;
        cell.name
            .push_str(", every other instance names the service localhost");
    }
    if rng.chance(0.15) {
        // Half the budget, all of it, or all of it and a 429 whose wait the instances meet.
        let budget = cell.per_minute.min(cell.per_day);
        cell.earlier_run = rng.pick(&[budget / 2, budget, budget + 1]);
        cell.name.push_str(&format!(
            ", an earlier run sent {} requests just before",
            cell.earlier_run
        ));
    }
    if rng.chance(0.2) {
        let rtt = Duration::from_millis(50 + rng.below(251));
        cell.faults.push(Fault::latency(rtt));
        cell.name
            .push_str(&format!(", every answer {} ms late", rtt.as_millis()));
    }
    let up = rng.chance(0.5);
    if let Some(change) = cell
        .plan_change
        .as_mut()
        .filter(|c| c.per_minute == cell.per_minute)
    {
        // A change of plan that keeps the limit is none: up or down by half.
        change.per_minute = if up {
            cell.per_minute * 2
        } else {
            cell.per_minute / 2
        };
    }
}

/// An injected `status` with one of the forms `Retry-After` takes, and that form in words.
fn retry_after_form(rng: &mut SplitMix, cell: &Cell, status: u16) -> (Fault, String) {
    let fault = Fault::status(status);
    match rng.below(6) {
        0 => {
            let seconds = rng.below(31);
            (fault.retry_after(seconds), format!("{seconds}"))
        }
        1 => (fault.retry_after_value("1.5"), "1.5".to_owned()),
        2 => {
            // An HTTP-date on the sandbox's clock, a few seconds after its start.
            let start = CLOCK_START_UNIX.saturating_add_signed(cell.offset);
            let at = UNIX_EPOCH + Duration::from_secs(start + 1 + rng.below(20));
            let date = httpdate::fmt_http_date(at);
            (fault.retry_after_value(&date), format!("date {date}"))
        }
        3 => (
            fault.retry_after_value("Thu, 01 Jan 1970 00:00:00 GMT"),
            "a past date".to_owned(),
        ),
        4 => (fault.retry_after_value("soon"), "garbage".to_owned()),
        _ => (fault, "missing".to_owned()),
    }
}

/// The share of what the service could have served in the run's full minute windows
/// (`matrix::served`) a world must use: the contract's own share for who spends the key,
/// scaled down by each thing the world makes hard ([`hardships`]), by the share of the full
/// windows an injected fault's wait leaves free, and by the requests round trips this long
/// leave room for. Past the contract (more than 9 independent instances, or more than one
/// without rate-limit headers) a ban is allowed, and a run that meets one is held to its
/// safety alone (`Figures::floor_in_force`).
pub fn goodput_floor(cell: &Cell) -> f64 {
    // Contract 2: a key's only user is never held while the budget lasts; a fleet within
    // contract 1 paces its shares over each window (rule F) and reopens a second late.
    let base = if processes(cell) == 1 { 0.9 } else { 0.5 };
    let hard: f64 = hardships(cell).iter().map(|(_, share)| share).product();
    base * hard * free_of_quiet(cell) * room_for_round_trips(cell)
}

/// What each kind of world makes hard that a floor is scaled for, in words and as the share of
/// the floor kept. Long windows, a day window, two host names, an earlier run, instances
/// started apart, and the reset in seconds or the IETF fields keep the whole floor: the
/// contract promises them as they are.
pub fn hardships(cell: &Cell) -> Vec<(&'static str, f64)> {
    let mut hard = Vec::new();
    let fleet = processes(cell) > 1;
    let least = cell.plan_change.map_or(cell.per_minute, |change| {
        change.per_minute.min(cell.per_minute)
    });
    if fleet && least < 2 * processes(cell) as u32 {
        // Under two requests a window for each instance: a window the others spent first is
        // a 429's wait, and rule C's second after it.
        hard.push(("under two requests a window per instance", 0.5));
    }
    if cell.headerless() {
        // Rule S: the budget is learnt from 429s, each the retry policy's backoff long, in an
        // assumed window refilled to a share.
        hard.push(("quota headers only on 429s, or none", 0.55));
    }
    if matches!(
        cell.quota_fields,
        QuotaFields::RepeatedRemaining | QuotaFields::NegativeRemaining
    ) {
        // A field the client cannot read as one number: the window is read as unknown.
        hard.push(("a quota field repeated or negative", 0.5));
    }
    if cell.cancel_half {
        // A cancelled probe leaves the window unknown until the next call's answer (rule P).
        hard.push(("half the calls cancelled", 0.5));
    }
    if cell.clock_step.is_some() {
        // A window shortened, skipped or gone back to: a 429 no header foretold, and ends
        // placed through `Date` off by the step until the next answer.
        hard.push(("a step of the service's clock", 0.5));
    }
    if cell.plan_change.is_some() {
        // Contract 5: an upgrade is spent from the first answer that shows it; a downgrade
        // bans nothing, and the windows after it are learnt afresh.
        hard.push(("a plan change", 0.5));
    }
    let apart = cell.backends.iter().map(|s| s.unsigned_abs()).max();
    if let Some(apart) = far_apart(cell) {
        // A `Date` off from the limiter's clock by half a window or more cannot place the
        // window's end: the client places it by the clock of the backend that answered last,
        // no earlier than the requests counted before it allow (`clock/server_time.rs`), up
        // to twice the backends' offset and the `Date`s' seconds late: a window's budget in
        // each such stretch, and half of them, as an answer from a backend ahead places an end
        // early and its 429's wait can take the next.
        // Measured over three such stretches, where they fit in [`MOST_WINDOWS`]; else
        // safety alone.
        let length = cell.minute as f64;
        hard.push(if stretches_fit(cell.minute, apart) {
            (
                "backends off the limiter's clock by half a window or more",
                0.5 * length / (length + 2.0 * apart as f64 + 2.0),
            )
        } else {
            (TOO_FAR_OFF, 0.0)
        });
    } else if apart.is_some_and(|apart| apart * 10 > cell.minute) {
        // Ends placed through `Date` from backends off the limiter's clock by more than a
        // tenth of the window: a share of each window spent waiting or in a 429's wait.
        hard.push((
            "backends off the limiter's clock by over a tenth of the window",
            0.2,
        ));
    }
    if cell.window_kind == WindowKind::Sliding {
        // A sliding window frees each request a window after it (the day's where the day
        // binds, `refill_period`), and the reset names that to
        // the second, rounded up, through `Date`: a period up to 2 s and a round trip longer
        // than the window, and bursts that fall across the full windows' edges.
        let period = refill_period(cell);
        let length = period as f64;
        let late = longest_latency(cell).as_secs_f64();
        let full = (cell.windows.saturating_sub(1) * cell.minute / period).max(2) as f64;
        let share = length / (length + 2.0 + late) * (1.0 - 1.0 / full);
        hard.push(("sliding windows", share));
    }
    if fleet && cell.window_kind == WindowKind::Sliding {
        // Instances that share nothing race for each request a sliding window frees.
        hard.push(("a fleet on sliding windows", 0.5));
    }
    hard
}

/// How far the backends' clocks are off the limiter's, in seconds, where it is half a window
/// or more.
fn far_apart(cell: &Cell) -> Option<u64> {
    let apart = cell.backends.iter().map(|s| s.unsigned_abs()).max();
    apart.filter(|apart| apart * 2 >= cell.minute)
}

/// The kind of world held to safety alone: backends so far off the limiter's clock that three
/// windows reopened as late as they allow do not fit in [`MOST_WINDOWS`].
pub const TOO_FAR_OFF: &str = "backends too far off the limiter's clock to measure in a run";

/// The most windows a world held to a floor runs to measure backends far off the limiter's
/// clock: a run's cost grows with its windows.
const MOST_WINDOWS: u64 = 40;

/// The windows of `minute` seconds a run takes to measure three stretches of a window reopened
/// as late as backends `apart` seconds off the limiter's clock allow, and two more.
fn stretched_windows(minute: u64, apart: u64) -> u64 {
    let stretch = minute + 2 * apart + 2;
    3 * stretch.div_ceil(minute) + 2
}

/// Whether [`stretched_windows`] fit in [`MOST_WINDOWS`].
fn stretches_fit(minute: u64, apart: u64) -> bool {
    stretched_windows(minute, apart) <= MOST_WINDOWS
}

/// How often a key spent as fast as it may is refilled, in seconds: the day window where the
/// run lasts a day and the day allows less than its minute windows together, else the minute.
fn refill_period(cell: &Cell) -> u64 {
    let day_binds = u64::from(cell.per_day) * cell.minute < u64::from(cell.per_minute) * cell.day;
    if day_binds && cell.day <= cell.minute * cell.windows {
        cell.day
    } else {
        cell.minute
    }
}

/// The share of what the run's full windows (on the limiter's clock, to the run's end) allow
/// that is in windows beginning after the longest the key may be kept quiet ([`quiet`]),
/// counted from the start: those before may serve nothing. Weighed by each window's allowance
/// (`served::allowance`), as goodput is: a plan change makes windows allow unequal shares.
fn free_of_quiet(cell: &Cell) -> f64 {
    let quiet = quiet(cell);
    if quiet == 0.0 {
        return 1.0;
    }
    let start = (CLOCK_START_UNIX as i64 + cell.offset) as f64;
    let length = cell.minute as f64;
    let first = (start / length).floor() as i64 + 1;
    let run = Duration::from_secs(cell.minute * cell.windows);
    let last = (server_unix(cell, run) as f64 / length).floor() as i64 - 1;
    if last < first {
        return 1.0;
    }
    let allows = |i: i64| allowance(cell, u64::try_from(i).unwrap_or(0));
    let all: u64 = (first..=last).map(allows).sum();
    let free: u64 = (first..=last)
        .filter(|i| *i as f64 * length >= start + quiet)
        .map(allows)
        .sum();
    if all > 0 {
        free as f64 / all as f64
    } else {
        1.0
    }
}

/// The share of the plan the requests can reach with every answer as late as the longest
/// latency injected: one request on the wire at a time per process (rule W's least), against
/// the larger plan where the plan changes; where it goes down, in the window it comes in, the
/// old plan (`served::allowance`) only as far as the time before it allows.
fn room_for_round_trips(cell: &Cell) -> f64 {
    let late = longest_latency(cell).as_secs_f64();
    if late == 0.0 {
        return 1.0;
    }
    // A window's first second may go to placing its end through `Date`.
    let reach = |seconds: f64| processes(cell) as f64 * (seconds - 1.0).max(0.0) / late;
    let plan = cell.plan_change.map_or(cell.per_minute, |change| {
        change.per_minute.max(cell.per_minute)
    });
    let share = reach(cell.minute as f64) / f64::from(plan.max(1));
    let Some(down) = cell.plan_change.filter(|c| c.per_minute < cell.per_minute) else {
        return share.min(1.0);
    };
    let window = cell.minute as i64 * 1_000;
    let into = server_millis(cell, down.after).rem_euclid(window) as f64 / 1e3;
    let before = reach(into).max(f64::from(down.per_minute));
    share.min(before / f64::from(cell.per_minute)).min(1.0)
}

/// The longest delay a latency fault gives an answer.
fn longest_latency(cell: &Cell) -> Duration {
    cell.faults
        .iter()
        .filter_map(latency)
        .max()
        .unwrap_or_default()
}

/// The delay of a latency fault, from its `Debug` text.
fn latency(fault: &Fault) -> Option<Duration> {
    let text = format!("{fault:?}");
    let value = text.split("kind: Latency(").nth(1)?.split(')').next()?;
    let (number, unit) = value.split_at(value.find(|c: char| c.is_alphabetic() || c == 'µ')?);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "s" => number,
        "ms" => number / 1e3,
        "µs" => number / 1e6,
        _ => number / 1e9,
    };
    Some(Duration::from_secs_f64(seconds))
}

/// How long, in seconds, the client takes a step forward of the service's clock for a backend
/// ahead of the limiter (`clock/server_time.rs` keeps the bound that shows it a minute).
const STEP_TAKEN_FOR_A_BACKEND_AHEAD: f64 = 60.0;

/// How long after the start the key may serve a world nothing, in seconds: the injected
/// faults' waits ([`injected_quiet`]); without quota headers, then the first window rule S's
/// slow start spends and the retry policy's longest backoff after it, as each of the 429s
/// that meet the requests on the wire (up to eight) closes the gate as one more in a row;
/// and the minute after a step forward of the service's clock, taken for a backend ahead of the
/// limiter meanwhile, which places each window's end late by the step.
pub fn quiet(cell: &Cell) -> f64 {
    let mut quiet = injected_quiet(cell);
    if cell.headerless() {
        let start = (CLOCK_START_UNIX as i64 + cell.offset) as f64;
        let length = cell.minute as f64;
        let spent = ((start + quiet) / length).floor() * length + length;
        let backoff = RetryPolicy::default().max_delay().as_secs_f64();
        quiet = spent - start + backoff + longest_latency(cell).as_secs_f64();
    }
    if let Some(step) = cell.clock_step.filter(|step| step.by > 0) {
        let taken_for_a_backend = step.by as f64 + STEP_TAKEN_FOR_A_BACKEND_AHEAD;
        quiet = quiet.max(step.after.as_secs_f64() + taken_for_a_backend);
    }
    quiet
}

/// How long after the start the injected faults may keep the key quiet, in seconds: they meet
/// the first requests admitted, one after another, and each keeps the key quiet for a round
/// trip, its `Retry-After` (seconds rounded up, or until an HTTP-date) or the retry policy's
/// backoff at its longest (1 s, doubling with each in a row, at most 8 s), whichever is longer,
/// and rule C's second after it.
fn injected_quiet(cell: &Cell) -> f64 {
    let start = (CLOCK_START_UNIX as i64 + cell.offset) as f64;
    let late = longest_latency(cell).as_secs_f64();
    // The faults meet the first requests the limiter admits: after the window an earlier run
    // spent (the day, where it spent the day's budget).
    let spent = |budget: u32| budget > 0 && cell.earlier_run >= budget;
    let mut quiet: f64 = if spent(cell.per_day) {
        cell.day as f64
    } else if spent(cell.per_minute) {
        cell.minute as f64
    } else {
        0.0
    };
    let mut in_a_row = 0;
    for fault in &cell.faults {
        let text = format!("{fault:?}");
        if text.starts_with("Fault { kind: Latency") {
            continue;
        }
        let value = text
            .split("retry_after: Some(\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next());
        for _ in 0..fault_times(&text) {
            let backoff = f64::from(1u32 << in_a_row.min(3));
            in_a_row += 1;
            let told = value.and_then(|value| {
                let date = httpdate::parse_http_date(value).ok();
                match date.and_then(|at| at.duration_since(UNIX_EPOCH).ok()) {
                    Some(at) => Some((at.as_secs_f64() - start - quiet).max(0.0)),
                    None => value.parse::<f64>().ok().map(f64::ceil),
                }
            });
            quiet += told.unwrap_or(0.0).max(backoff) + 1.0 + late;
        }
    }
    quiet
}

/// How many minute windows a step back of the service's clock takes from the run: the
/// limiter's clock covers that much less of it.
fn stepped_back(cell: &Cell) -> u64 {
    cell.clock_step
        .filter(|step| step.by < 0)
        .map_or(0, |step| step.by.unsigned_abs().div_ceil(cell.minute) + 1)
}

/// How many times a fault applies, from its `Debug` text (once where it does not say).
fn fault_times(text: &str) -> usize {
    text.split("remaining: Some(")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// The most 429s a window of a world within the contract may see: per process, one for each
/// task's request on the wire when the budget runs out (up to rule S's eight where the answers
/// do not show the budget) and one probe into the `Retry-After`; for each injected 429, itself
/// and a probe of each process into its wait; with sliding windows, each process racing the
/// others for each request the window frees, and, where the answers do not show the budget,
/// its own next request after each; and one per process after a step of the clock.
fn most_429s(cell: &Cell) -> usize {
    let processes = processes(cell);
    let injected: usize = cell
        .faults
        .iter()
        .filter(|fault| format!("{fault:?}").contains("status: 429"))
        .map(|fault| fault_times(&format!("{fault:?}")))
        .sum();
    let on_the_wire = if cell.headerless() {
        MOST_UNREPORTED
    } else {
        cell.tasks
    };
    // A sliding window frees its budget one request at a time, and processes that share
    // nothing race for each: the losers meet a 429, and the winner, whose answers a refill
    // shows no others in, may send its next request at the next free, inside a loser's
    // `Retry-After` rounded up past it (contract 1 allows it one). A 429 for each process at
    // each, at most the window's limit.
    let limit = cell.plan_change.map_or(cell.per_minute, |change| {
        change.per_minute.max(cell.per_minute)
    });
    let racing = if cell.window_kind == WindowKind::Sliding && processes > 1 {
        processes * limit as usize
    } else {
        0
    };
    // Without the budget in the answers, a probe after each `Retry-After` (a second at least)
    // can take the one request a spent sliding window freed, and the next request meets a 429.
    let freed = if cell.window_kind == WindowKind::Sliding && budget_untold(cell) {
        processes * (limit as usize).min(cell.minute as usize)
    } else {
        0
    };
    // A step of the clock back into a spent window: a 429 no header foretold, per process.
    let stepped = if cell.clock_step.is_some() {
        processes
    } else {
        0
    };
    processes * (1 + on_the_wire) + injected * (1 + processes) + racing + freed + stepped
}

/// Whether no answer tells the budget: none shows it before a 429, or every one shows it in
/// numbers no one can read (a repeated or negative `X-RateLimit-Remaining`).
fn budget_untold(cell: &Cell) -> bool {
    cell.headerless()
        || matches!(
            cell.quota_fields,
            QuotaFields::RepeatedRemaining | QuotaFields::NegativeRemaining
        )
}

/// The processes spending the key (an earlier run aside).
fn processes(cell: &Cell) -> usize {
    if cell.one_process() {
        1
    } else {
        cell.instances
    }
}
