//! The seeded simulation explorer's worlds: each seed generates one world (how many instances
//! share the key and how, the plan and its windows, the sandbox's clock offset, how it shows the
//! quota, latency, injected 429s and 503s with every form of `Retry-After`, cancellations,
//! backends whose clocks disagree behind the one limiter, a step of the service's clock, a plan
//! change, instances that start one after another), run by the scenario matrix's runner
//! (`matrix::run`) and checked by its invariants.
//!
//! `SIM_MAX_INSTANCES` (default [`DEFAULT_MAX_INSTANCES`]) caps the independent instances of
//! a world; above 8, worlds of 16 and 32 independent instances are drawn too, only of the kinds
//! such a fleet can keep without shared state (see `within_reach_of_independent_instances`). `SIM_STRICT=1`
//! holds worlds with a plan change, or with a backend off the limiter's clock by more than a
//! tenth of the window, to the goodput floor as well (by default only their safety is checked:
//! today's client falls short of the floor in some of them).

use std::time::{Duration, UNIX_EPOCH};

use petstore_sandbox::{Fault, QuotaFields};

use super::matrix::{CLOCK_START_UNIX, Cell, ClockStep, Expect, PlanChange, Sharing};

/// The most independent instances a world has unless `SIM_MAX_INSTANCES` says otherwise: 211
/// of the first 2,000 worlds have 16 or 32 independent instances on one key.
pub const DEFAULT_MAX_INSTANCES: usize = 32;

/// Whether `SIM_STRICT` asks for the goodput floor in every world that allows one.
fn strict() -> bool {
    std::env::var("SIM_STRICT").is_ok_and(|value| !value.is_empty() && value != "0")
}

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
    let mut injected_429 = None;
    if rng.chance(0.3) {
        let times = 1 + rng.below(3);
        let (fault, form) = retry_after_form(&mut rng, &cell, 429);
        let words = format!(", 429 × {times} with Retry-After {form}");
        injected_429 = Some((cell.faults.len(), words.clone()));
        cell.faults.push(fault.times(times));
        cell.name.push_str(&words);
    }
    let unavailable_first = rng.chance(0.15);
    if unavailable_first {
        let times = 1 + rng.below(3);
        let (fault, form) = retry_after_form(&mut rng, &cell, 503);
        cell.faults.push(fault.times(times));
        cell.name
            .push_str(&format!(", 503 × {times} with Retry-After {form}"));
    }
    let quota_less_first = rng.chance(0.1);
    if quota_less_first {
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
    if cell.instances > ALWAYS_WITHIN_REACH {
        let held_first = quota_less_first || unavailable_first;
        within_reach_of_independent_instances(&mut cell, injected_429, held_first);
    }
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
    cell.expect = Expect::Goodput(goodput_floor(&cell));
    cell
}

/// How far ahead of the limiter's clock a backend's may run in a world of more independent
/// instances than [`ALWAYS_WITHIN_REACH`]: the second by which instances that have seen
/// others wait past a window's end.
const AHEAD_WITHIN_REACH: i64 = 1;

/// Independent instances up to which every world is within reach: fewer than the sandbox's
/// ban threshold (10 requests inside one `Retry-After`).
const ALWAYS_WITHIN_REACH: usize = 8;

/// Makes a world of more independent instances than [`ALWAYS_WITHIN_REACH`] one that
/// instances which know nothing of each other can keep without a ban, whatever client they
/// run. Each instance learns of the others only from its own answers, and every instance that
/// has not met a 429 calls into its `Retry-After`, so ten of them there are a ban. Out of
/// reach, therefore (the `redis` feature's shared state is for those fleets):
/// - a window that allows fewer than three requests per instance: every instance sends its
///   first request, and the next one before its second answer can show the others; with
///   latencies that differ, the instances answered first send more before the slower ones'
///   requests show, and a window of two per instance runs out with the others still calling;
/// - instances that start one after another, with a window that allows fewer than fifteen
///   requests per instance: the first, alone, may spend all but the fifth it keeps for
///   others, and that fifth must leave each later instance three: its first request, the
///   second it sends before an answer can show the others, and one for the instances pacing
///   on what they saw left (with ten, 32 instances started 0.5 to 1.9 s apart got the key
///   banned: soak seeds 4252, 7565, 7568, 11474, 16504, 17609);
/// - first answers without quota headers (a 502 page), or a 503 with `Retry-After` (soak
///   seeds 14017, 17151), with a window that allows fewer than fifteen requests per instance:
///   an instance so answered learns of the window, or calls again, only after the others
///   have spent their first requests, and every header it then sees is what a key's only
///   user restarted in mid-window sees (a partly spent window that falls by its own requests
///   alone), which must not wait while the budget lasts: it is an instance started after the
///   others, as above;
/// - a plan downgraded in mid-window (soak seeds 10164, 13458, 15491): the window's budget
///   falls at once by the difference, which no answer foretold, and where more than the new
///   limit is spent it is spent at once, and every instance's next request meets its 429;
/// - instances that start one after another, with a day window that binds at all: an
///   instance that starts alone and sees the day bind spends what the day has left (a
///   reserve is kept only of a window that ends within a minute: one of a day would cost a
///   key's only user its day), so the next one to start meets the day's 429, whose
///   `Retry-After` lasts to the day's end, and so does every instance that has not met it;
/// - a day window that allows fewer than the minute's and two more per instance: the headers
///   show whichever window has less left, so a day that falls with the minute is not seen
///   until the minute resets, and then every instance's first request meets the day's 429;
/// - a day window that binds at all, with a minute that allows fewer than ten requests per
///   instance: a minute that begins with the day holding at least the minute's budget shows
///   only the minute, exactly as a world without a day does, where the goodput the matrix
///   asks of independent instances (90%) spends all but less than one request per instance
///   of it; a minute that begins with the day less than one request per instance above the
///   minute's budget (an earlier minute of the day spent the rest, a partial one at the
///   start too) so leaves the day below one request per instance, unseen, and every
///   instance's first request of the next minute meets its 429;
/// - `X-RateLimit-Remaining` that no client can read (`-1`): only 429s show the budget;
/// - backends whose clocks all run ahead of the limiter's: no answer shows when the limiter's
///   windows end, every instance places each end early by as much, and their first requests
///   after it meet the 429 of a window that has not ended;
/// - a backend ahead of the limiter by more than [`AHEAD_WITHIN_REACH`]: instances that start
///   together send their first requests in turn, so that a balancer answering in turn gives
///   each instance's first answers of a window to one backend, and for half the fleet or
///   more that is the one ahead: they are in the world above for that window, and call, each
///   once, into the 429 of a window that has not ended;
/// - instances that start one after another, behind a backend whose clock runs so far behind
///   the limiter's that a window's end is placed more than a minute away: the first, alone,
///   takes the window for a long one, of which it keeps no reserve (as of a day), and the
///   later ones meet a spent window, one 429 each;
/// - a step of the service's clock back: the windows it steps back into may be spent, and
///   their 429 comes as unforeseen as an injected one;
/// - an injected 429, which the sandbox applies to the whole key: every other instance calls
///   into that `Retry-After` until it meets a 429 of its own.
fn within_reach_of_independent_instances(
    cell: &mut Cell,
    injected_429: Option<(usize, String)>,
    held_first: bool,
) {
    let instances = cell.instances as u32;
    let late_starters = !cell.start_gap.is_zero() || held_first;
    let per_instance = if late_starters { 15 } else { 3 };
    let least = per_instance * instances;
    cell.per_minute = cell.per_minute.max(least);
    let (mut least_per_minute, mut most_per_minute) = (cell.per_minute, cell.per_minute);
    if let Some(change) = &mut cell.plan_change {
        change.per_minute = change.per_minute.max(cell.per_minute);
        least_per_minute = least_per_minute.min(change.per_minute);
        most_per_minute = most_per_minute.max(change.per_minute);
    }
    cell.per_day = cell.per_day.max(most_per_minute + 2 * instances);
    if least_per_minute < 10 * instances || late_starters {
        let minutes_in_a_day = u32::try_from(cell.day / cell.minute).unwrap_or(u32::MAX);
        let never_binds = minutes_in_a_day
            .saturating_mul(most_per_minute)
            .saturating_add(instances);
        cell.per_day = cell.per_day.max(never_binds);
    }
    if let Some(change) = &mut cell.plan_change {
        change.per_day = cell.per_day;
    }
    if cell.quota_fields == QuotaFields::NegativeRemaining {
        cell.quota_fields = QuotaFields::XRateLimit;
    }
    let furthest_behind = cell
        .backends
        .iter()
        .map(|offset| -offset)
        .max()
        .unwrap_or(0);
    let placed_beyond_a_minute = cell.minute as i64 + furthest_behind > 60;
    if cell.backends.iter().all(|offset| *offset > 0) || (late_starters && placed_beyond_a_minute) {
        cell.backends.clear();
    }
    for offset in &mut cell.backends {
        *offset = (*offset).min(AHEAD_WITHIN_REACH);
    }
    cell.clock_step = cell.clock_step.filter(|step| step.by > 0);
    if let Some((index, words)) = injected_429 {
        drop(cell.faults.remove(index));
        cell.name = cell.name.replacen(&words, "", 1);
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

/// The share of the minute allowance a world must use. Safety is checked in every world; a
/// floor only where the world allows one: no faults, no cancellations, quota shown as
/// specified, no step of the clock (which shortens or skips windows), and budget enough for
/// every instance, before and after a plan change. Unless `SIM_STRICT` is set, no floor either
/// with a plan change or a backend off the limiter's clock by more than a tenth of the window:
/// today's client uses too little of the allowance after a downgrade, and waits `reset - Date`
/// where a backend behind the limiter dates its answers early.
fn goodput_floor(cell: &Cell) -> f64 {
    let far_backend = cell
        .backends
        .iter()
        .any(|offset| offset.unsigned_abs() * 10 > cell.minute);
    let known_short = cell.plan_change.is_some() || far_backend;
    let clean = cell.faults.is_empty()
        && !cell.cancel_half
        && cell.quota_fields == QuotaFields::XRateLimit
        && cell.per_day >= 1_000_000
        && cell.clock_step.is_none()
        && (!known_short || strict());
    let least = cell.plan_change.map_or(cell.per_minute, |change| {
        change.per_minute.min(cell.per_minute)
    });
    if !clean || least < 2 * cell.instances as u32 {
        return 0.0;
    }
    if cell.instances == 1 { 0.9 } else { 0.5 }
}
