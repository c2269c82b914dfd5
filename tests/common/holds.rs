//! Contract 2 of `docs/DESIGN.md` in the runner's terms: a key's only user is never held while
//! the budget lasts. A call of the one process is held while it is under way, the process has
//! no request on the wire (waiting for an answer, rule W, is no hold), no `Retry-After` is in
//! force (with the gate's quiet after it), and the service's windows still take a request as
//! the sandbox counts them. Computed after the run from the sandbox's log (arrival, answer,
//! what was left) and the runner's record of when each call started and ended.

use std::time::Duration;

use petstore_sandbox::{LoggedRequest, QuotaFields, WindowKind};
use tokio::time::Instant;

use super::{Cell, EARLIER_RUN, Expect};

/// How late the client may place a window's end: `Date` gives the service's clock to the
/// second, so an end placed through it can be up to a second late.
const DATE_GRANULARITY: Duration = Duration::from_secs(1);

/// Rule C: the gate may hold a second past a `Retry-After` (another's, rounded up, may end
/// that much later).
const ROUNDING: Duration = Duration::from_secs(1);

/// The retry policy's backoff after a 429: half a second, doubling with each 429 in a row,
/// jittered up to twice itself, at most 8 s (the defaults of `RetryPolicy`).
fn backoff(in_a_row: u32) -> Duration {
    let step = Duration::from_millis(500).saturating_mul(1 << in_a_row.min(5));
    (step * 2).min(Duration::from_secs(8))
}

/// A stretch this short is the runtime's turn, not a hold.
const LEAST_HOLD: Duration = Duration::from_millis(10);

/// Calls held while the budget lasted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holds {
    /// Calls held at least once, or failed as throttled while the budget lasted.
    pub calls: usize,
    /// The longest stretch one call was held.
    pub longest: Duration,
    /// When the first hold began, after the instances started.
    pub first_at: Option<Duration>,
}

/// One call of the runner: when it started and ended, and whether it failed at once as
/// throttled (the client refused to send it).
#[derive(Debug, Clone, Copy)]
pub struct CallSpan {
    start: Instant,
    end: Instant,
    throttled: bool,
}

impl CallSpan {
    pub fn new(start: Instant, took: Duration, throttled: bool) -> Self {
        Self {
            start,
            end: start + took,
            throttled,
        }
    }
}

/// Whether holds are checked in `cell`: one process, the key's only user (an earlier run
/// aside), on a plan that allows requests, answers that report the budget (contract 2 is
/// about the reported budget), and nothing injected but latency, no step of the clock: those
/// make the client wait for reasons of their own (a 5xx's backoff, a 429 no budget foretold,
/// windows that jump).
pub fn apply(cell: &Cell) -> bool {
    let reported = matches!(
        cell.quota_fields,
        QuotaFields::XRateLimit | QuotaFields::ResetInSeconds | QuotaFields::Ietf
    );
    // A cancelled call's request may be on the wire unseen by the sandbox's log.
    cell.one_process()
        && reported
        && !cell.cancel_half
        && cell.clock_step.is_none()
        && cell.per_minute > 0
        && matches!(cell.expect, Expect::Goodput(_))
        && cell
            .faults
            .iter()
            .all(|fault| format!("{fault:?}").starts_with("Fault { kind: Latency"))
}

/// The holds of the calls in `spans`, by the sandbox's `log`; `started` is when the instances
/// started.
pub fn find(cell: &Cell, log: &[LoggedRequest], spans: &[CallSpan], started: Instant) -> Holds {
    let mut arrivals: Vec<&LoggedRequest> = log.iter().collect();
    arrivals.sort_by_key(|r| r.at);
    let end = spans.iter().map(|s| s.end).max().unwrap_or(started);
    let wire = merge(
        arrivals
            .iter()
            .filter(|r| r.user_agent.as_deref() != Some(EARLIER_RUN))
            .map(|r| (r.at, r.answered_at.unwrap_or(r.at)))
            .collect(),
    );
    let quiet = merge(quiet(&arrivals));
    let budget = merge(budget(cell, &arrivals, started, end));
    let mut holds = Holds::default();
    for span in spans {
        let free = minus(
            &minus(&within(&budget, span.start, span.end), &wire),
            &quiet,
        );
        let longest = free.iter().map(|(a, b)| *b - *a).max().unwrap_or_default();
        let refused = span.throttled
            && covers(&budget, span.start)
            && !covers(&wire, span.start)
            && !covers(&quiet, span.start);
        if longest > LEAST_HOLD || refused {
            holds.calls += 1;
            holds.longest = holds.longest.max(longest);
            let at = free.first().map_or(span.start, |(a, _)| *a) - started;
            holds.first_at = Some(holds.first_at.map_or(at, |first| first.min(at)));
        }
    }
    holds
}

/// The quiet after each 429: its `Retry-After` and rule C's second, or the retry policy's
/// backoff from its answer, whichever ends later.
fn quiet(arrivals: &[&LoggedRequest]) -> Vec<(Instant, Instant)> {
    let mut spans = Vec::new();
    let mut in_a_row = 0;
    for request in arrivals {
        if request.status != Some(429) {
            if request.user_agent.as_deref() != Some(EARLIER_RUN) {
                in_a_row = 0;
            }
            continue;
        }
        let told = request.told_to_wait_until.unwrap_or(request.at) + ROUNDING;
        let backed_off = request.answered_at.unwrap_or(request.at) + backoff(in_a_row);
        spans.push((request.at, told.max(backed_off)));
        in_a_row += 1;
    }
    spans
}

/// When the service's windows took a request, as the sandbox counted: between two arrivals,
/// what the first left lasts (windows only refill between requests), and a spent window takes
/// requests from its refill on, placed up to `DATE_GRANULARITY` late (a second more for a
/// reset given in seconds from now, or a sliding one), plus a round trip, plus as much as the
/// backends' clocks are apart. From a plan change to the end of the window after it, nothing
/// is judged.
fn budget(
    cell: &Cell,
    arrivals: &[&LoggedRequest],
    started: Instant,
    end: Instant,
) -> Vec<(Instant, Instant)> {
    // Backends whose clocks disagree leave the end uncertain by as much as they are apart.
    let behind = cell.backends.iter().map(|o| o.abs()).max().unwrap_or(0);
    // A sliding window's reset is its oldest request's ageing out, rounded up to the second;
    // and a `Date` may have been written anywhere in its answer's round trip.
    let rounded = match cell.window_kind {
        WindowKind::Sliding => Duration::from_secs(1),
        _ => Duration::ZERO,
    };
    // A reset given as seconds from now is counted from the service's clock rounded up, a
    // second more.
    let counted_up = match cell.quota_fields {
        QuotaFields::ResetInSeconds | QuotaFields::Ietf => Duration::from_secs(1),
        _ => Duration::ZERO,
    };
    let late = DATE_GRANULARITY
        + rounded
        + counted_up
        + most_latency(cell)
        + Duration::from_secs(behind.unsigned_abs());
    // A plan change is contract 5's: the window it falls in, and the time to place its end,
    // are not judged here.
    let change = cell.plan_change.map(|change| started + change.after);
    let changing = change.map(|at| {
        let window = Duration::from_secs(cell.minute);
        (at, at + window + late)
    });
    let mut spans = Vec::new();
    if let Some(first) = arrivals.first() {
        spans.push((started, first.at));
    } else {
        spans.push((started, end));
    }
    for (k, request) in arrivals.iter().enumerate() {
        let next = arrivals.get(k + 1).map_or(end.max(request.at), |r| r.at);
        let until = change
            .filter(|at| *at > request.at && *at < next)
            .unwrap_or(next);
        let from = match (request.left, request.refills_at) {
            (Some(left), _) if left > 0 => request.at,
            (_, Some(refill)) => refill + late,
            _ => continue,
        };
        if from < until {
            spans.push((from, until));
        }
    }
    match changing {
        Some(changing) => minus(&merge(spans), &[changing]),
        None => spans,
    }
}

/// The longest latency injected into `cell`'s answers.
pub fn most_latency(cell: &Cell) -> Duration {
    cell.faults
        .iter()
        .filter_map(|fault| {
            let text = format!("{fault:?}");
            let delay = text
                .strip_prefix("Fault { kind: Latency(")?
                .split(')')
                .next()?;
            parse_duration(delay)
        })
        .max()
        .unwrap_or_default()
}

/// `"374ms"`, `"1.5s"`, as `Debug` writes a `Duration`.
fn parse_duration(text: &str) -> Option<Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms
            .parse::<f64>()
            .ok()
            .map(|ms| Duration::from_secs_f64(ms / 1_000.0));
    }
    let seconds = text.strip_suffix('s')?;
    seconds.parse::<f64>().ok().map(Duration::from_secs_f64)
}

/// Sorted, disjoint spans covering the same time as `spans`.
fn merge(mut spans: Vec<(Instant, Instant)>) -> Vec<(Instant, Instant)> {
    spans.retain(|(a, b)| a < b);
    spans.sort();
    let mut merged: Vec<(Instant, Instant)> = Vec::new();
    for (a, b) in spans {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// The parts of sorted, disjoint `spans` within `from..to`.
fn within(spans: &[(Instant, Instant)], from: Instant, to: Instant) -> Vec<(Instant, Instant)> {
    spans
        .iter()
        .map(|(a, b)| ((*a).max(from), (*b).min(to)))
        .filter(|(a, b)| a < b)
        .collect()
}

/// `spans` less `minus`, both sorted and disjoint.
fn minus(spans: &[(Instant, Instant)], cut: &[(Instant, Instant)]) -> Vec<(Instant, Instant)> {
    let mut left = Vec::new();
    for (a, b) in spans {
        let mut from = *a;
        for (c, d) in cut.iter().filter(|(c, d)| c < b && d > a) {
            if *c > from {
                left.push((from, *c));
            }
            from = from.max(*d);
        }
        if from < *b {
            left.push((from, *b));
        }
    }
    left
}

/// Whether sorted, disjoint `spans` cover the instant `at`.
fn covers(spans: &[(Instant, Instant)], at: Instant) -> bool {
    spans.iter().any(|(a, b)| *a <= at && at < *b)
}
