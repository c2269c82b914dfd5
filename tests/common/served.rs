//! What the service could have served a run, the measure goodput is taken against: in each of
//! the run's full minute windows (on the limiter's clock), what the sandbox's own limiter would
//! have let an ideal client have. A minute window allows the plan in force, less what injected
//! faults took of it; the minute windows of one day window allow together no more than the day
//! budget had left when the first of them began, less what faults took of them; a window the service's clock stepped over or
//! into by a step forward is not measured. Successes count up to
//! what each allowed, so that goodput is sound where a day binds: the minutes after a spent day
//! are no shortfall.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use petstore_sandbox::{LoggedRequest, WindowKind};

use super::{CLOCK_START_UNIX, Cell};

/// What the run's full minute windows (`minutes`: each window's index and successes) used of
/// what the service could have served in them, and that allowance.
pub fn served(cell: &Cell, run: &[LoggedRequest], minutes: &[(u64, u64)]) -> (u64, u64) {
    let mut days: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let measured: Vec<&(u64, u64)> = minutes
        .iter()
        .filter(|(i, _)| !stepped_over(cell, *i))
        .collect();
    let origin = measured.first().map_or(0, |(i, _)| i * cell.minute);
    for (index, successes) in measured {
        let start = index * cell.minute;
        // A fixed day window is aligned to its length; a sliding one counts any day: the
        // measured windows are taken a day's length at a time from the first.
        let day = match cell.window_kind {
            WindowKind::Sliding => (start - origin) / cell.day.max(1),
            _ => start / cell.day.max(1),
        };
        days.entry(day).or_default().push((*index, *successes));
    }
    let (mut used, mut allowed) = (0, 0);
    for (day, windows) in days {
        // Each minute's allowance less what injected faults took of it: the limiter counted
        // the requests they answered, as it would an ideal client's.
        let allows = |index: u64| {
            let start = index * cell.minute;
            let burned = counted_between(run, start, start + cell.minute, |r| {
                r.status.is_some_and(|status| status != 200)
            });
            allowance(cell, index).saturating_sub(burned)
        };
        let minutes: u64 = windows.iter().map(|(i, _)| allows(*i)).sum();
        // What injected faults took counts against the day as well as its minute.
        let burned: u64 = windows
            .iter()
            .map(|(i, _)| allowance(cell, *i) - allows(*i))
            .sum();
        let first = windows[0].0 * cell.minute;
        let last = (windows[windows.len() - 1].0 + 1) * cell.minute;
        // What counted against the day window before its first full minute: since the day
        // began (a fixed window), or since a day before the last minute ends (a sliding one).
        let since = match cell.window_kind {
            WindowKind::Sliding => last.saturating_sub(cell.day),
            _ => day * cell.day,
        };
        let spent = counted_between(run, since, first, |_| true);
        let day_left = day_budget(cell).saturating_sub(spent + burned);
        let day_allows = minutes.min(day_left);
        let successes: u64 = windows.iter().map(|(i, n)| (*n).min(allows(*i))).sum();
        used += successes.min(day_allows);
        allowed += day_allows;
    }
    (used, allowed)
}

/// The day budget: the lower of the plan's before and after a change.
fn day_budget(cell: &Cell) -> u64 {
    let before = u64::from(cell.per_day);
    cell.plan_change
        .map_or(before, |change| before.min(u64::from(change.per_day)))
}

/// Requests the limiter counted (all but its own 429s) that arrived in `[from, to)`, unix
/// seconds on its clock, and that `also` picks, answered or not (a call cancelled while its
/// request was under way). An injected fault's answer was counted before it was drawn.
fn counted_between(
    run: &[LoggedRequest],
    from: u64,
    to: u64,
    also: impl Fn(&LoggedRequest) -> bool,
) -> u64 {
    let window = Duration::from_secs(from)..Duration::from_secs(to);
    let refused = |r: &LoggedRequest| r.told_to_wait_until.is_some() && !r.injected;
    run.iter()
        .filter(|r| r.left.is_some() && !refused(r) && also(r))
        .filter(|r| {
            r.server_time
                .duration_since(UNIX_EPOCH)
                .is_ok_and(|at| window.contains(&at))
        })
        .count() as u64
}

/// Whether a step forward of the service's clock skipped or shortened the minute window
/// `index`: the limiter allows its whole limit in what is left of it, which no client pacing
/// by the window's time left can spend.
fn stepped_over(cell: &Cell, index: u64) -> bool {
    let Some(step) = cell.clock_step.filter(|step| step.by > 0) else {
        return false;
    };
    // In milliseconds on the limiter's clock: where the step left it, and where it landed.
    let left = (CLOCK_START_UNIX as i64 + cell.offset) * 1_000 + step.after.as_millis() as i64;
    let landed = left + step.by * 1_000;
    let start = (index * cell.minute * 1_000) as i64;
    let end = start + (cell.minute * 1_000) as i64;
    end >= left && start <= landed
}

/// The limiter's clock, in unix seconds, `elapsed` after the sandbox starts.
pub fn server_unix(cell: &Cell, elapsed: Duration) -> i64 {
    server_millis(cell, elapsed).div_euclid(1_000)
}

/// The limiter's clock, in unix milliseconds, `elapsed` after the sandbox starts.
pub fn server_millis(cell: &Cell, elapsed: Duration) -> i64 {
    let step = cell
        .clock_step
        .filter(|step| elapsed >= step.after)
        .map_or(0, |step| step.by);
    (CLOCK_START_UNIX as i64 + cell.offset + step) * 1_000 + elapsed.as_millis() as i64
}

/// What the plan allows in the minute window `index`: the plan in force when it begins. In the
/// window where the plan changes, a client that spent the old allowance before an upgrade
/// cannot learn of it until the window ends, and one may spend the whole old allowance before
/// a downgrade.
pub fn allowance(cell: &Cell, index: u64) -> u64 {
    let old = u64::from(cell.per_minute);
    let Some(change) = cell.plan_change else {
        return old;
    };
    let new = u64::from(change.per_minute);
    // To the millisecond: a change a fraction of a second into a window is in it.
    let at = server_millis(cell, change.after);
    if at <= (index * cell.minute * 1_000) as i64 {
        new
    } else {
        old
    }
}
