//! What this process has yet to tell the fleet's store, kept until the store takes it.

// Without the `redis` feature no store exists, and nothing is ever told.
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::lease::Return;
use super::lock::lock;

/// How long one instance may probe a period the fleet does not know before another may; the
/// probe's answer normally releases the others at once.
pub(crate) const PROBE_FOR: Duration = Duration::from_secs(2);

/// The most instants, told at once, at which requests sent without the store's admission were
/// answered: while the store does not answer, an instance sends about its share of a window.
const MAX_ADMITTED_HERE: usize = 64;

/// How long a request sent without the store's admission may count in a window: the longest, a day.
const ADMITTED_HERE_COUNTS_FOR: Duration = Duration::from_secs(86_400);

/// One window's budget as a response reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowReport {
    pub(crate) limit: u64,
    pub(crate) remaining: u64,
    /// The period's end on the service's clock (unix seconds): which period this is.
    pub(crate) period: i64,
    /// The local instant the period ends; sent as time left, so no two hosts' clocks need agree.
    pub(crate) ends_at: Instant,
    /// The answered request's admission number (0: none): later admissions are not in `remaining`.
    pub(crate) admitted: u64,
    /// When the request answered was sent: `remaining` counts what this process sent before.
    pub(crate) sent_at: Instant,
}

/// What a reported response asked of every instance on the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Nothing (a report sent along with the next request).
    Nothing,
    /// No quiet: the service answers normally, and a probe is over.
    Normal,
    /// Quiet for this long from now (a 429, or a 503 with `Retry-After`).
    Quiet(Duration),
}

/// The most windows reported, and leases given back, kept for one state (the spec has two windows).
const MAX_PENDING: usize = 4;

/// The most reports kept for one state: one per answer the store numbered, so that it can tell
/// each answer counted after the one that opened its window.
const MAX_REPORTS: usize = 16;

/// The most states whose reports wait for the store at once.
const MAX_UNSENT: usize = 64;

/// What the fleet has yet to hear from this process about one state: kept until the store takes
/// it (see [`Taken`]), so that neither a cancelled call nor a store's timeout loses it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Unsent {
    /// The reports of each window, the lowest first: one per answer the store numbered while
    /// there is room, otherwise merged into the lowest.
    windows: Vec<WindowReport>,
    /// The end of the longest quiet responses asked for.
    quiet_until: Option<Instant>,
    /// A response came without quiet (a probe is over); by then the probe would have expired.
    normal_until: Option<Instant>,
    /// Requests sent without the store's admission (it did not answer), by answer instant, in
    /// order: the service counts them, so must each fleet window whose opening answer may not. At
    /// most [`MAX_ADMITTED_HERE`] instants, the earliest merged into the next.
    admitted_here: Vec<(Instant, u64)>,
    /// Until when they may count in an open window: [`ADMITTED_HERE_COUNTS_FOR`] after the last.
    admitted_until: Option<Instant>,
    /// Leased requests not spent.
    returns: Vec<Return>,
}

/// Whether `report` says less is left than `than` of one window: the store takes off admissions
/// after each report's own, so two it numbered compare by `remaining + admitted` (saturating).
fn lower(report: &WindowReport, than: &WindowReport) -> bool {
    if report.admitted > 0 && than.admitted > 0 {
        report.remaining.saturating_add(report.admitted)
            < than.remaining.saturating_add(than.admitted)
    } else {
        report.remaining < than.remaining
    }
}

impl Unsent {
    pub(super) fn of(reports: &[WindowReport], outcome: Outcome, now: Instant) -> Self {
        let mut unsent = Self::default();
        for report in reports {
            unsent.queue(*report);
        }
        match outcome {
            Outcome::Nothing => {}
            Outcome::Normal => unsent.normal_until = Some(now + PROBE_FOR),
            Outcome::Quiet(wait) => unsent.quiet_until = Some(now + wait),
        }
        unsent
    }

    /// A request sent without the store's admission, answered (or given up on) at `now`.
    pub(super) fn admitted_here(now: Instant) -> Self {
        Self {
            admitted_here: vec![(now, 1)],
            admitted_until: Some(now + ADMITTED_HERE_COUNTS_FOR),
            ..Self::default()
        }
    }

    /// Keeps `report`; the store opens a window from its first report, so the lowest goes first.
    fn queue(&mut self, report: WindowReport) {
        let Some(first) = self.windows.iter().position(|w| w.period == report.period) else {
            let periods = self
                .windows
                .iter()
                .map(|w| w.period)
                .collect::<HashSet<_>>();
            if periods.len() == MAX_PENDING {
                let oldest = self.windows[0].period;
                self.windows.retain(|w| w.period != oldest);
            } else if self.windows.len() == MAX_REPORTS {
                // Fewer windows than reports: the last one kept apart makes room.
                let apart = self.windows.iter().enumerate().rposition(|(i, w)| {
                    self.windows[..i]
                        .iter()
                        .any(|before| before.period == w.period)
                });
                if let Some(apart) = apart {
                    self.windows.remove(apart);
                }
            }
            self.windows.push(report);
            return;
        };
        let lower = lower(&report, &self.windows[first]);
        let kept_apart = report.admitted > 0
            && self.windows.len() < MAX_REPORTS
            && !self
                .windows
                .iter()
                .any(|w| w.period == report.period && w.admitted == report.admitted);
        match (kept_apart, lower) {
            (true, true) => self.windows.insert(first, report),
            (true, false) => self.windows.push(report),
            (false, true) => self.windows[first] = report,
            (false, false) => {}
        }
    }

    /// Keeps `back` with what else goes back to the same windows.
    pub(super) fn give_back(&mut self, back: Return) {
        match self.returns.iter_mut().find(|r| r.periods == back.periods) {
            Some(same) => {
                same.units = same.units.saturating_add(back.units);
                // The later lease's number: given back only where both were lent.
                same.first = same.first.max(back.first);
                same.until = same.until.max(back.until);
            }
            None => {
                if self.returns.len() == MAX_PENDING {
                    self.returns.remove(0);
                }
                self.returns.push(back);
            }
        }
    }

    fn merge(&mut self, other: Self) {
        for report in other.windows {
            self.queue(report);
        }
        self.admitted_here.extend(other.admitted_here);
        self.admitted_here.sort_unstable();
        while self.admitted_here.len() > MAX_ADMITTED_HERE {
            let (_, earliest) = self.admitted_here.remove(0);
            self.admitted_here[0].1 = self.admitted_here[0].1.saturating_add(earliest);
        }
        self.admitted_until = self.admitted_until.max(other.admitted_until);
        for back in other.returns {
            self.give_back(back);
        }
        self.quiet_until = self.quiet_until.max(other.quiet_until);
        self.normal_until = self.normal_until.max(other.normal_until);
    }

    /// What to tell the store at `now`: a quiet over a normal answer, the more careful of the
    /// two. A quiet already over is still told (as the shortest), so that the fleet probes.
    fn outcome(&self, now: Instant) -> Outcome {
        match (self.quiet_until, self.normal_until) {
            (Some(until), _) => Outcome::Quiet(until.saturating_duration_since(now)),
            (None, Some(_)) => Outcome::Normal,
            (None, None) => Outcome::Nothing,
        }
    }

    /// What to tell the store at `now`.
    pub(super) fn news(&self, now: Instant) -> News<'_> {
        News {
            reports: &self.windows,
            outcome: self.outcome(now),
            admitted_here: &self.admitted_here,
            returns: &self.returns,
        }
    }

    /// Until when any of it matters: a quiet or window over, or a probe expired, needs no telling.
    pub(super) fn matters_until(&self) -> Option<Instant> {
        let windows = self.windows.iter().map(|w| w.ends_at).max();
        let returns = self.returns.iter().map(|r| r.until).max();
        self.quiet_until
            .max(self.normal_until)
            .max(windows)
            .max(returns)
            .max(self.admitted_until)
    }
}

/// The reports of every state of this store that wait for it, by the state's name.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    pub(super) unsent: HashMap<String, Unsent>,
    /// The states whose reports a task tries again until the store takes them.
    pub(super) retrying: HashSet<String>,
}

impl Outbox {
    pub(super) fn put(&mut self, name: &str, unsent: Unsent, now: Instant) {
        if unsent == Unsent::default() {
            return;
        }
        if let Some(waiting) = self.unsent.get_mut(name) {
            waiting.merge(unsent);
            return;
        }
        if self.unsent.len() >= MAX_UNSENT {
            self.unsent
                .retain(|_, unsent| unsent.matters_until().is_some_and(|until| until > now));
        }
        if self.unsent.len() >= MAX_UNSENT {
            // Bounded: what matters for the shortest time goes first.
            let first = self
                .unsent
                .iter()
                .min_by_key(|(_, unsent)| unsent.matters_until())
                .map(|(name, _)| name.clone());
            if let Some(first) = first {
                self.unsent.remove(&first);
            }
        }
        self.unsent.insert(name.to_owned(), unsent);
    }
}

/// What waited for the store for one state, taken out to be sent, and put back unless the
/// store took it, whatever ends the sending: a failure, a timeout, a cancelled call.
pub(super) struct Taken<'a> {
    outbox: &'a Mutex<Outbox>,
    name: &'a str,
    pub(super) unsent: Unsent,
    pub(super) delivered: bool,
}

impl<'a> Taken<'a> {
    pub(super) fn new(outbox: &'a Mutex<Outbox>, name: &'a str) -> Self {
        let unsent = lock(outbox).unsent.remove(name).unwrap_or_default();
        Self {
            outbox,
            name,
            unsent,
            delivered: false,
        }
    }
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        if !self.delivered {
            let unsent = std::mem::take(&mut self.unsent);
            lock(self.outbox).put(self.name, unsent, Instant::now());
        }
    }
}

/// A task retries `name`'s reports; dropped before it `ended` (runtime shut down), another may.
pub(super) struct Retrying<'a> {
    pub(super) outbox: &'a Mutex<Outbox>,
    pub(super) name: &'a str,
    pub(super) ended: bool,
}

impl Drop for Retrying<'_> {
    fn drop(&mut self) {
        if !self.ended {
            lock(self.outbox).retrying.remove(self.name);
        }
    }
}

/// What an instance tells the store: applied before anything else it asks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct News<'a> {
    pub(crate) reports: &'a [WindowReport],
    /// What a response not yet told asked of every instance.
    pub(crate) outcome: Outcome,
    /// Requests sent without the store's admission, by answer instant, to spend from the budgets.
    pub(crate) admitted_here: &'a [(Instant, u64)],
    pub(crate) returns: &'a [Return],
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(remaining: u64, admitted: u64) -> WindowReport {
        WindowReport {
            limit: u64::MAX,
            remaining,
            period: 1_000,
            ends_at: Instant::now(),
            admitted,
            sent_at: Instant::now(),
        }
    }

    #[test]
    fn unsent_reports_keep_the_longest_quiet_and_tell_it_over_a_normal_answer() {
        let now = Instant::now();
        let secs = Duration::from_secs;
        let mut unsent = Unsent::of(&[], Outcome::Quiet(secs(30)), now);
        unsent.merge(Unsent::of(&[], Outcome::Quiet(secs(5)), now));
        unsent.merge(Unsent::of(&[], Outcome::Normal, now));
        assert_eq!(unsent.outcome(now), Outcome::Quiet(secs(30)));
        assert_eq!(unsent.matters_until(), Some(now + secs(30)));
        // Told after it is over, a quiet is still told, as the shortest: the fleet probes.
        assert_eq!(
            unsent.outcome(now + secs(40)),
            Outcome::Quiet(Duration::ZERO)
        );

        let normal = Unsent::of(&[], Outcome::Normal, now);
        assert_eq!(normal.outcome(now), Outcome::Normal);
        assert_eq!(normal.matters_until(), Some(now + PROBE_FOR));
        let window = Unsent::of(&[report(3, 0)], Outcome::Nothing, now);
        assert_eq!(window.outcome(now), Outcome::Nothing);
        assert_eq!(window.matters_until(), Some(window.windows[0].ends_at));
    }

    #[test]
    fn the_outbox_is_bounded_and_merges_by_state() {
        let now = Instant::now();
        let mut outbox = Outbox::default();
        let quiet = |secs| Unsent::of(&[], Outcome::Quiet(Duration::from_secs(secs)), now);
        for n in 0..MAX_UNSENT as u64 + 8 {
            outbox.put(&format!("state-{n}"), quiet(n + 1), now);
        }
        outbox.put("state-70", quiet(1), now);
        outbox.put("state-70", Unsent::default(), now);
        assert_eq!(outbox.unsent.len(), MAX_UNSENT);
        assert!(
            !outbox.unsent.contains_key("state-0"),
            "the quiet that ends first goes first"
        );
        assert_eq!(
            outbox.unsent["state-70"].quiet_until,
            Some(now + Duration::from_secs(71)),
            "the longest quiet of a state is kept"
        );
    }

    /// Found by an independent test (rate-core issue, failure 5): `remaining + admitted`
    /// overflowed on an "unlimited" `X-RateLimit-Remaining`, a panic in a debug build.
    #[test]
    fn reports_of_any_size_are_queued_without_overflow() {
        let mut unsent = Unsent::default();
        unsent.queue(report(u64::MAX, 5));
        unsent.queue(report(u64::MAX - 1, 7));
        unsent.queue(report(3, 2));
        assert_eq!(
            remaining(&unsent),
            [3, u64::MAX, u64::MAX - 1],
            "expected each answer's report, the lowest first"
        );
    }

    fn remaining(unsent: &Unsent) -> Vec<u64> {
        unsent.windows.iter().map(|w| w.remaining).collect()
    }

    /// Issue 21, a slow Redis: the store counts an answer after its window's opener only if it
    /// hears of it, so the answers between two round trips are not merged into one report.
    #[test]
    fn each_numbered_answer_is_reported_the_lowest_first_within_a_bound() {
        let mut unsent = Unsent::default();
        unsent.queue(report(50, 4));
        unsent.queue(report(52, 2));
        unsent.queue(report(49, 3));
        unsent.queue(report(49, 3));
        assert_eq!(
            remaining(&unsent),
            [49, 50, 52],
            "expected one report per answer, the lowest first (it opens the window)"
        );
        for n in 10..40 {
            unsent.queue(report(100 - n, n));
        }
        unsent.queue(report(0, 0));
        assert_eq!(unsent.windows.len(), MAX_REPORTS);
        assert_eq!(
            unsent.windows[0].remaining, 0,
            "expected an unnumbered report merged into the first, the lowest"
        );
        let mut next = report(7, 1);
        next.period = 2_000;
        unsent.queue(next);
        assert_eq!(unsent.windows.len(), MAX_REPORTS);
        assert_eq!(
            unsent.windows.last(),
            Some(&next),
            "a new window's report makes room"
        );
    }
}
