//! A rate-limit state shared by every instance on a key, across processes and hosts: the
//! window budgets, spent before each request, and the cooldown.
//!
//! [`Store`] is what a store provides; [`SharedStore`] wraps one with the rule that a store is
//! never a single point of failure: every operation has a short timeout, and while the store
//! fails, calls go on under the process's own discipline (which always runs), with one `WARN`
//! per outage and one try per [`RETRY_EVERY`] to find the store back. Without a store, the
//! process's own state (the rest of this module) is the whole of the discipline.

// Without the `redis` feature no store exists, and the parts only a store uses go unused.
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use url::Url;

use super::lease::{Grant, Lease, Return};
use super::lock::lock;
use super::pacer::{Decision, Hold};
use crate::clock;

/// How long a store may take to answer, unless its owner sets another.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// While a store fails, how often one call tries it again.
pub(crate) const RETRY_EVERY: Duration = Duration::from_secs(1);

/// How long one instance may probe a window period the fleet does not know yet before
/// another may: the probe's answer normally releases the others at once.
pub(crate) const PROBE_FOR: Duration = Duration::from_secs(2);

/// The most instants at which requests sent without the store's admission were answered, told
/// at once: an instance sends about its share of a window while the store does not answer.
const MAX_ADMITTED_HERE: usize = 64;

/// How long a request sent without the store's admission may count in a window: a day, the
/// longest window a service reports.
const ADMITTED_HERE_COUNTS_FOR: Duration = Duration::from_secs(86_400);

/// While another instance probes, how often a held request asks again.
pub(crate) const PROBE_POLL: Duration = Duration::from_millis(20);

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One window's budget as a response reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowReport {
    pub(crate) limit: u64,
    pub(crate) remaining: u64,
    /// The period's end on the service's clock (unix seconds): which period this is.
    pub(crate) period: i64,
    /// The local instant the period ends; sent as a duration from the moment of sending, so
    /// that no two hosts need agree on the time.
    pub(crate) ends_at: Instant,
    /// The store's number for the admission of the request answered (0: not admitted by the
    /// store): the requests admitted after it are not in `remaining` yet.
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

/// The fleet's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Send it; a probe finds out a period the fleet does not know, and must report at once.
    /// `admitted` numbers the admission, for the reports of its answer; `lease`, asked for with
    /// more than one request, is what the store granted with it.
    Go {
        probe: bool,
        /// The state this instance saw was lost (evicted, flushed, a failover): it probes.
        lost: bool,
        /// Another instance found lost, while it admitted requests, the state that admitted
        /// this one's: its admissions may be on the wire, counted by no window.
        lost_since: bool,
        admitted: u64,
        lease: Option<Grant>,
    },
    /// Hold it this long, for this reason; held by a spent window, that window.
    Hold(Duration, Hold, Option<Spent>),
}

/// A spent window of the fleet's, as the store told it: its limit, how long until its period
/// ends, and the period (the service's reset, unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spent {
    pub(crate) limit: u64,
    pub(crate) ends_in: Duration,
    pub(crate) period: i64,
}

impl Verdict {
    /// The highest admission number it gives (a lease's last), or 1 for a hold: what an
    /// instance tells the store it was given, so that a store counting fewer reads as lost.
    pub(crate) fn highest_admitted(&self) -> u64 {
        match self {
            Self::Go {
                admitted, lease, ..
            } => admitted.saturating_add(lease.as_ref().map_or(0, |g| g.units.saturating_sub(1))),
            Self::Hold(..) => 1,
        }
    }

    /// Whether it admits the probe of a state the store did not hold, as its first admission.
    pub(crate) fn opens_the_state(&self) -> bool {
        matches!(
            self,
            Self::Go {
                probe: true,
                lost: false,
                admitted: 1,
                ..
            }
        )
    }
}

/// What this process heard from the shared store.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    /// Held by the store until then.
    pub(crate) remote: Option<(Instant, Hold)>,
    /// A request asks the store whether its hold (of this kind) is over, and the others wait
    /// for the answer.
    pub(crate) asking_again: Option<Hold>,
    /// The store answered the last admission: it meters the budget exactly, so this process
    /// need not guess how many others spend it.
    pub(crate) live: bool,
    /// The highest admission number the store gave this process, or 1 once it answered without
    /// one: a store that holds no state, or counts fewer admissions, lost it.
    pub(crate) seen: Seen,
    /// The store's last admission opened the state: it has counted no other instance yet.
    pub(crate) unconfirmed: bool,
    /// How many instances the store last said hear the key's quiets.
    pub(crate) listeners: u64,
    /// The times the store said it lost the state.
    pub(crate) losses: Losses,
    /// The last lease granted, spent or not.
    pub(crate) lease: Option<Lease>,
    /// A request asks the store for a lease: the others ask for themselves meanwhile, so
    /// that no two leases are out at once.
    pub(crate) leasing: bool,
    /// The fleet's window as answers and the store showed it, kept through a loss of the state.
    pub(crate) periods: Periods,
}

/// The highest admission number the store gave this process for the state (1 if it answered
/// without one, 0 if it never answered), and when it last admitted a request of it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) number: u64,
    pub(crate) admitted_at: Option<Instant>,
}

/// The periods of the fleet's window, as this instance saw them end: rule N shares their
/// probes out while the store does not count the fleet.
#[derive(Debug, Default)]
pub(crate) struct Periods {
    limit: u64,
    /// The latest period seen (the service's reset, unix seconds), when it ends, and when this
    /// instance first saw it: the window is at least as long as it was seen.
    latest: Option<(i64, Instant, Instant)>,
    /// The least step seen between two periods, two seconds at least (a reset given in
    /// seconds from now moves by one within a period): the window's length, or a multiple.
    length: Option<Duration>,
    /// The end of the period last drawn for, and whether this instance sits it out.
    drawn: Option<(Instant, bool)>,
}

impl Periods {
    /// The `period` of the window that allows `limit` ends at `ends`, as seen at `at`.
    pub(crate) fn saw(&mut self, limit: u64, period: i64, ends: Instant, at: Instant) {
        if let Some((latest, ..)) = self.latest {
            let step = period.saturating_sub(latest);
            if step < LEAST_LENGTH.as_secs() as i64 {
                return;
            }
            let length = Duration::from_secs(step.unsigned_abs());
            self.length = Some(self.length.map_or(length, |least| least.min(length)));
        }
        self.limit = limit;
        self.latest = Some((period, ends, at));
    }

    /// Rule N: the probes of a period, made by instances that do not hear each other's
    /// answers, are about as many as its limit allows: this instance, one of `instances`,
    /// probes a period that began by `now` with the chance `limit ÷ instances`, drawn once a
    /// period, and otherwise sits it out, reopening a second after it ends, as with others seen.
    /// Before two periods are seen, the window is taken to be as long as the latest was seen.
    pub(crate) fn draw(&mut self, instances: f64, now: Instant) -> Decision {
        const GO: Decision = Decision::Go { probe: true };
        let reopens = |end: Instant| clock::after_from(end, Duration::from_secs(1));
        match self.drawn {
            Some((end, true)) if reopens(end) > now => {
                return Decision::Until(reopens(end), Hold::Pace);
            }
            Some((end, false)) if end > now => return GO,
            _ => {}
        }
        let Some((_, ends, since)) = self.latest else {
            return GO;
        };
        let seen_for = ends.saturating_duration_since(since).max(LEAST_LENGTH);
        let length = self.length.unwrap_or(seen_for);
        let Some(over) = now.checked_duration_since(ends) else {
            return GO;
        };
        let periods = over.as_nanos() / length.as_nanos() + 1;
        let end = clock::after_from(
            ends,
            length.saturating_mul(u32::try_from(periods).unwrap_or(u32::MAX)),
        );
        let sits_out = fastrand::f64() * instances >= self.limit as f64;
        self.drawn = Some((end, sits_out));
        if sits_out {
            Decision::Until(reopens(end), Hold::Pace)
        } else {
            GO
        }
    }
}

/// The shortest window rule N reckons with: a reset given in seconds from now moves by one
/// within a period.
const LEAST_LENGTH: Duration = Duration::from_secs(2);

/// How long after the store last lost the state this process's own discipline counts the
/// others as if there were no store, and the least time between two log lines of losses.
pub(crate) const LOST_FOR: Duration = Duration::from_secs(60);

/// How long after the store said another instance found the state lost while it admitted
/// requests this process counts the others itself: that state's admissions are answered by
/// then (`LOST_SINCE` in `redis.lua`).
pub(crate) const LOST_SINCE_FOR: Duration = Duration::from_secs(2);

/// The times the store said it lost the state.
#[derive(Debug, Default)]
pub(crate) struct Losses {
    /// The last, and when one was last logged.
    last: Option<Instant>,
    /// When the store last said another instance found it lost while it admitted requests.
    lost_since: Option<Instant>,
    logged: Option<Instant>,
    /// Since the last log line.
    unlogged: u64,
    /// In all.
    pub(crate) total: u64,
}

impl Exchange {
    /// Whether the fleet holds every request of this process for a quiet at `now`.
    pub(crate) fn held_for_quiet(&self, now: Instant) -> bool {
        matches!(self.remote, Some((until, Hold::Cooldown)) if until > now)
    }

    /// The store lost the state at `now`: once a minute at most, a WARN says so and what to
    /// change.
    pub(crate) fn lost(&mut self, now: Instant) {
        let losses = &mut self.losses;
        losses.last = Some(now);
        losses.unlogged += 1;
        losses.total += 1;
        if losses
            .logged
            .is_some_and(|logged| now.saturating_duration_since(logged) < LOST_FOR)
        {
            return;
        }
        losses.logged = Some(now);
        let losses = std::mem::take(&mut losses.unlogged);
        tracing::warn!(
            losses,
            "Redis lost the shared rate-limit state ({losses} times in the last minute at \
             most): evicted, flushed, or a failover to a replica that lagged; each instance \
             goes on counting the others itself meanwhile; set maxmemory-policy to \
             noeviction, or give the state a Redis of its own"
        );
    }

    /// The store's `verdict` on an admission asked at `asked` (`None`: it gave none in time).
    pub(crate) fn verdict(&mut self, verdict: Option<&Verdict>, asked: Instant) {
        self.live = verdict.is_some();
        let given = verdict.map_or(0, Verdict::highest_admitted);
        self.seen.number = self.seen.number.max(given);
        if let Some(Verdict::Go { .. }) = verdict {
            self.seen.admitted_at = Some(asked);
        }
    }

    /// Another instance found the state lost while it admitted requests, the store said at
    /// `now`.
    pub(crate) fn lost_since(&mut self, now: Instant) {
        self.losses.lost_since = Some(now);
    }

    /// Whether the store counts every instance at `now`: it answered the last admission, which
    /// found the state kept, and has not lost it within [`LOST_FOR`], after which it may lose
    /// it again, nor said within [`LOST_SINCE_FOR`] that another found it lost.
    pub(crate) fn exact(&self, now: Instant) -> bool {
        let over = |at: Option<Instant>, lasts| {
            at.is_none_or(|at| now.saturating_duration_since(at) >= lasts)
        };
        self.live
            && !self.unconfirmed
            && over(self.losses.last, LOST_FOR)
            && over(self.losses.lost_since, LOST_SINCE_FOR)
    }

    /// How many requests to ask the store for: one while a lease is asked for, and while
    /// there is no last lease to size the next by.
    pub(crate) fn want(&self, now: Instant) -> u64 {
        match &self.lease {
            Some(lease) if !self.leasing => lease.want(now),
            _ => 1,
        }
    }
}

/// The most windows whose reports, and the most leases given back, kept for one state; the
/// specification has two windows.
const MAX_PENDING: usize = 4;

/// The most reports kept for one state: one per answer numbered by the store, so that the
/// store can tell each answer counted after the one that opened its window.
const MAX_REPORTS: usize = 16;

/// The most states whose reports wait for the store at once.
const MAX_UNSENT: usize = 64;

/// What the fleet has yet to hear from this process about one state. Kept until the store
/// takes it, so that neither a cancelled call nor a store that did not answer in time loses it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Unsent {
    /// The reports of each window, the lowest first: one per answer the store numbered while
    /// there is room, otherwise merged into the lowest.
    windows: Vec<WindowReport>,
    /// The end of the longest quiet responses asked for.
    quiet_until: Option<Instant>,
    /// A response came without quiet (a probe is over); it matters until then, when the probe
    /// would have expired anyway.
    normal_until: Option<Instant>,
    /// Requests this process sent without the store's admission (while it did not answer), by
    /// when they were answered, in order: the service counts them, and so must every window of
    /// the fleet's whose opening answer may not. At most [`MAX_ADMITTED_HERE`] instants, the
    /// earliest merged into the next.
    admitted_here: Vec<(Instant, u64)>,
    /// Until when they may count in a window still open: a day, the longest window, after
    /// the last was sent.
    admitted_until: Option<Instant>,
    /// Leased requests not spent.
    returns: Vec<Return>,
}

/// Whether `report` says less is left than `than`, of one window. The store takes off the
/// admissions after each report's own: of two answers numbered by it, the lower sum says less is
/// left. The service's numbers can be anything: the sums saturate.
fn lower(report: &WindowReport, than: &WindowReport) -> bool {
    if report.admitted > 0 && than.admitted > 0 {
        report.remaining.saturating_add(report.admitted)
            < than.remaining.saturating_add(than.admitted)
    } else {
        report.remaining < than.remaining
    }
}

impl Unsent {
    fn of(reports: &[WindowReport], outcome: Outcome, now: Instant) -> Self {
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

    /// Keeps `report`: the store opens a window from its first report, so the lowest goes
    /// first.
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
    fn give_back(&mut self, back: Return) {
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
    fn news(&self, now: Instant) -> News<'_> {
        News {
            reports: &self.windows,
            outcome: self.outcome(now),
            admitted_here: &self.admitted_here,
            returns: &self.returns,
        }
    }

    /// Until when any of it matters to the fleet: a quiet or a window over, or a probe
    /// expired, needs no telling.
    fn matters_until(&self) -> Option<Instant> {
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
struct Outbox {
    unsent: HashMap<String, Unsent>,
    /// The states whose reports a task tries again until the store takes them.
    retrying: HashSet<String>,
}

impl Outbox {
    fn put(&mut self, name: &str, unsent: Unsent, now: Instant) {
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
struct Taken<'a> {
    outbox: &'a Mutex<Outbox>,
    name: &'a str,
    unsent: Unsent,
    delivered: bool,
}

impl<'a> Taken<'a> {
    fn new(outbox: &'a Mutex<Outbox>, name: &'a str) -> Self {
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

/// A task retries the reports of `name`; dropped before it `ended` (its runtime shut down),
/// another task may take over.
struct Retrying<'a> {
    outbox: &'a Mutex<Outbox>,
    name: &'a str,
    ended: bool,
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
    /// Reports not yet sent.
    pub(crate) reports: &'a [WindowReport],
    /// What a response not yet told asked of every instance.
    pub(crate) outcome: Outcome,
    /// Requests sent without the store's admission, by when they were answered, to be spent
    /// from the window budgets.
    pub(crate) admitted_here: &'a [(Instant, u64)],
    /// Leased requests not spent, given back.
    pub(crate) returns: &'a [Return],
}

/// One admission as the store receives it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission<'a> {
    /// What the store has yet to hear.
    pub(crate) news: News<'a>,
    /// Whether the window budgets are spent, or only the cooldown is obeyed (no pacing, or a
    /// service that does not meter the key).
    pub(crate) metered: bool,
    /// What the store gave this process: a store that holds no state, or counts fewer
    /// admissions, lost it, and what it held is unknown.
    pub(crate) seen: Seen,
    /// How many requests to admit at once, this one included: more than one asks for a lease.
    pub(crate) want: u64,
}

/// What the store tells an instance as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Told {
    /// Another instance reported a quiet of this long.
    Quiet(Duration),
    /// This many instances hear the key's quiets: the fleet's size, kept through a loss of the
    /// state and an outage of the store.
    Listeners(u64),
    /// The store cannot count them now (it does not subscribe, or did not answer).
    Uncounted,
    /// An instance that found no state asks the others for the quiet they keep.
    Asked,
    /// Nothing: whether it is still wanted.
    Nothing,
}

/// Told what the store tells; `false`: its client is gone, and the store stops telling it.
pub(crate) type Heard = Arc<dyn Fn(Told) -> bool + Send + Sync>;

/// A store of the state shared by the fleet. Each operation is one round trip.
pub(crate) trait Store: Send + Sync + fmt::Debug {
    /// The name of the state of `api_key` at `base_url` in the store: a hash, never the key.
    fn name(&self, base_url: &Url, api_key: &str) -> String;

    /// Applies `admission.news`, then spends one request (or a lease of `want`) from every
    /// window of the current period, or says how long to hold it.
    fn admit<'a>(
        &'a self,
        name: &'a str,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Verdict, String>>;

    /// Applies `news`.
    fn report<'a>(&'a self, name: &'a str, news: News<'a>) -> BoxFuture<'a, Result<(), String>>;

    /// Tells `heard` of every quiet reported for `name` from now on, as it is reported (the
    /// message reaches the fleet even when the store loses the state itself), of every ask for
    /// one, and of how many instances listen, once a [`RETRY_EVERY`].
    fn listen(&self, name: &str, heard: Heard);

    /// Tells every instance listening for `name` of a quiet this long, or, with `None`, asks
    /// them for theirs.
    fn publish<'a>(
        &'a self,
        name: &'a str,
        quiet: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// A store, with its timeout, its health and the reports that wait for it, shared by every
/// client configured with it.
pub(crate) struct SharedStore {
    store: Arc<dyn Store>,
    timeout: Duration,
    health: Arc<Mutex<Health>>,
    outbox: Arc<Mutex<Outbox>>,
    pub(crate) present: Present,
}

/// `()` with the `redis` feature; without it uninhabited, so that no store can be made and the
/// compiler leaves out every path that uses one.
#[cfg(feature = "redis")]
pub(crate) type Present = ();
#[cfg(not(feature = "redis"))]
pub(crate) type Present = std::convert::Infallible;

#[derive(Debug, Default)]
struct Health {
    /// The store failed and has not answered since; tried again from then on.
    down: Option<Instant>,
    /// The smoothed round trip of the store's answers and its variation (RFC 6298).
    round_trip: Option<(Duration, Duration)>,
    /// Operations in a row that the store did not answer in time.
    timeouts: u32,
}

/// The most a store that answers slower than its timeout is waited for, as a multiple of it.
const MOST_STRETCH: u32 = 8;

impl Health {
    /// How long an operation may take: `timeout`, or longer for a store seen to answer
    /// slower (its round trip and four times its variation, as TCP waits for an
    /// acknowledgement), doubled with each operation in a row it did not answer in time, at
    /// most `MOST_STRETCH` times `timeout`. A slow store is waited for, and so stays exact,
    /// rather than given up on for a second at a time.
    fn timeout(&self, timeout: Duration) -> Duration {
        let expected = self
            .round_trip
            .map_or(timeout, |(smoothed, variation)| smoothed + variation * 4);
        let most = timeout * MOST_STRETCH;
        expected
            .max(timeout)
            .min(most)
            .saturating_mul(1 << self.timeouts.min(MOST_STRETCH.ilog2()))
            .min(most)
    }

    /// The store answered in `round_trip`.
    fn answered(&mut self, round_trip: Duration) {
        self.timeouts = 0;
        self.round_trip = Some(match self.round_trip {
            None => (round_trip, round_trip / 2),
            Some((smoothed, variation)) => {
                let deviation = smoothed.abs_diff(round_trip);
                (
                    (smoothed * 7 + round_trip) / 8,
                    (variation * 3 + deviation) / 4,
                )
            }
        });
    }
}

impl fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedStore")
            .field("store", &self.store)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl SharedStore {
    #[cfg(feature = "redis")]
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            timeout: DEFAULT_TIMEOUT,
            health: Arc::default(),
            outbox: Arc::default(),
            present: (),
        }
    }

    /// The same store and health, with another timeout.
    pub(crate) fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            store: Arc::clone(&self.store),
            timeout,
            health: Arc::clone(&self.health),
            outbox: Arc::clone(&self.outbox),
            present: self.present,
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn name(&self, base_url: &Url, api_key: &str) -> String {
        self.store.name(base_url, api_key)
    }

    /// See [`Store::listen`].
    pub(crate) fn listen(&self, name: &str, heard: Heard) {
        self.store.listen(name, heard);
    }

    /// See [`Store::publish`]; a store that does not answer in time is not waited for.
    pub(crate) async fn publish(&self, name: &str, quiet: Option<Duration>) {
        let _ = tokio::time::timeout(self.timeout, self.store.publish(name, quiet)).await;
    }

    /// Keeps `report` to be sent with the next admission of `name`.
    pub(crate) fn queue(&self, name: &str, report: WindowReport) {
        let now = Instant::now();
        let unsent = Unsent::of(&[report], Outcome::Nothing, now);
        lock(&self.outbox).put(name, unsent, now);
    }

    /// Keeps note that a request of `name` sent without the store's admission was answered (or
    /// given up on) now, to be spent from the fleet's budgets as soon as the store answers:
    /// from a task of its own, as a report is, so that it is spent from the window it was sent
    /// in, not from the one open at this process's next admission.
    pub(crate) fn admitted_here(self: &Arc<Self>, name: &str) {
        let now = Instant::now();
        let unsent = Unsent {
            admitted_here: vec![(now, 1)],
            admitted_until: Some(now + ADMITTED_HERE_COUNTS_FOR),
            ..Unsent::default()
        };
        lock(&self.outbox).put(name, unsent, now);
        // Without a runtime (a call dropped as it shuts down), the next admission tells it.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (tried, _) = tokio::sync::oneshot::channel();
            runtime.spawn(Arc::clone(self).deliver(name.to_owned(), tried));
        }
    }

    /// Keeps `back` to be given back with the next round trip of `name`.
    pub(crate) fn give_back(&self, name: &str, back: Return) {
        let now = Instant::now();
        let mut unsent = Unsent::default();
        unsent.give_back(back);
        lock(&self.outbox).put(name, unsent, now);
    }

    /// The fleet's verdict on `want` requests, or `None` when the store cannot give one in
    /// time: the request then goes by the process's own discipline alone. What waits to be
    /// told of `name` goes along, and waits on unless the store answers.
    pub(crate) async fn admit(
        &self,
        name: &str,
        metered: bool,
        seen: Seen,
        want: u64,
    ) -> Option<Verdict> {
        let mut taken = Taken::new(&self.outbox, name);
        let admission = Admission {
            news: taken.unsent.news(Instant::now()),
            metered,
            seen,
            want,
        };
        let verdict = self.guarded(self.store.admit(name, admission)).await;
        taken.delivered = verdict.is_some();
        verdict
    }

    /// Tells the fleet, from a task of its own that a cancelled call cannot stop: it tries
    /// again while the store fails and the report still matters, and the next admission of
    /// `name` takes it along meanwhile. Waits for the first try only.
    pub(crate) async fn report(
        self: &Arc<Self>,
        name: &str,
        reports: &[WindowReport],
        outcome: Outcome,
    ) {
        let now = Instant::now();
        lock(&self.outbox).put(name, Unsent::of(reports, outcome, now), now);
        let (tried, first_try) = tokio::sync::oneshot::channel();
        tokio::spawn(Arc::clone(self).deliver(name.to_owned(), tried));
        let _ = first_try.await;
    }

    /// Sends what waits for `name` until the store takes it or it no longer matters; `tried`
    /// hears of the first try.
    async fn deliver(self: Arc<Self>, name: String, tried: tokio::sync::oneshot::Sender<()>) {
        let done = self.try_deliver(&name).await;
        let _ = tried.send(());
        if done || !lock(&self.outbox).retrying.insert(name.clone()) {
            return;
        }
        let mut retrying = Retrying {
            outbox: &self.outbox,
            name: &name,
            ended: false,
        };
        loop {
            let next_try = lock(&self.health).down;
            tokio::time::sleep_until(next_try.unwrap_or_else(|| clock::after(RETRY_EVERY))).await;
            if self.try_deliver(&name).await {
                let mut outbox = lock(&self.outbox);
                // A report that came while the last try was on its way is this task's too.
                if !outbox.unsent.contains_key(&name) {
                    outbox.retrying.remove(&name);
                    retrying.ended = true;
                    return;
                }
            }
        }
    }

    /// Sends what waits for `name`; whether nothing is left to send.
    async fn try_deliver(&self, name: &str) -> bool {
        let now = Instant::now();
        let mut taken = Taken::new(&self.outbox, name);
        if taken
            .unsent
            .matters_until()
            .is_none_or(|until| until <= now)
        {
            taken.delivered = true;
            return true;
        }
        let sent = self.store.report(name, taken.unsent.news(now));
        taken.delivered = self.guarded(sent).await.is_some();
        taken.delivered
    }

    async fn guarded<T>(&self, operation: BoxFuture<'_, Result<T, String>>) -> Option<T> {
        let now = Instant::now();
        let timeout = {
            let health = lock(&self.health);
            if health.down.is_some_and(|next_try| now < next_try) {
                return None;
            }
            health.timeout(self.timeout)
        };
        let (result, timed_out) = match tokio::time::timeout(timeout, operation).await {
            Ok(result) => (result, false),
            Err(_) => (Err(format!("no answer within {timeout:?}")), true),
        };
        let mut health = lock(&self.health);
        match result {
            Ok(value) => {
                health.answered(now.elapsed());
                if health.down.take().is_some() {
                    tracing::info!(
                        "the shared rate-limit state answers again: instances share the budget \
                         and the cooldown again"
                    );
                }
                Some(value)
            }
            Err(error) => {
                if timed_out {
                    health.timeouts = health.timeouts.saturating_add(1);
                    // A store that has answered, late this once, is tried again by the next
                    // operation with twice the time; it is given up on for a while only when
                    // it is late again.
                    if health.timeouts == 1 && health.round_trip.is_some() {
                        drop(health);
                        tracing::debug!(%error, "the shared rate-limit state answered late");
                        return None;
                    }
                }
                let first = health.down.is_none();
                health.down = Some(Instant::now() + RETRY_EVERY);
                drop(health);
                if first {
                    tracing::warn!(
                        %error,
                        "the shared rate-limit state is unreachable: calls go on under this \
                         process's own rate discipline until it answers again"
                    );
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_windows_length_is_the_least_step_between_two_of_its_periods_two_seconds_or_more() {
        let t0 = Instant::now();
        let mut periods = Periods::default();
        periods.saw(5, 1_009, t0 + SECOND * 9, t0);
        assert_eq!(periods.length, None, "one period tells no length");
        periods.saw(5, 1_010, t0 + SECOND * 10, t0);
        assert_eq!(
            periods.length, None,
            "a reset a second later is the same period's"
        );
        periods.saw(5, 1_015, t0 + SECOND * 15, t0);
        assert_eq!(periods.length, Some(SECOND * 6), "two periods apart");
        periods.saw(5, 1_018, t0 + SECOND * 18, t0);
        assert_eq!(periods.length, Some(SECOND * 3));
        periods.saw(5, 1_012, t0 + SECOND * 12, t0);
        assert_eq!(
            periods.latest,
            Some((1_018, t0 + SECOND * 18, t0)),
            "an earlier period changes nothing"
        );
    }

    #[test]
    fn rule_n_probes_a_period_with_the_chance_its_limit_over_the_instances_once_a_period() {
        fastrand::seed(7);
        let t0 = Instant::now();
        let seen = || {
            let mut periods = Periods::default();
            periods.saw(5, 1_003, t0 + SECOND * 3, t0);
            periods.saw(5, 1_006, t0 + SECOND * 6, t0);
            periods
        };
        assert_eq!(
            Periods::default().draw(40.0, t0),
            Decision::Go { probe: true },
            "expected an instance that saw no period to probe, as without the rule"
        );
        // The period from 6 s to 9 s, a second and a half in.
        let now = t0 + Duration::from_millis(7_500);
        let mut probes = 0;
        for _ in 0..4_000 {
            let mut periods = seen();
            let first = periods.draw(40.0, now);
            assert_eq!(
                periods.draw(40.0, now + SECOND),
                first,
                "expected one draw for the period"
            );
            // The next period, from 9 s to 12 s, is drawn for afresh once this one's draw is
            // over: at its end for a probe, a second later for an instance that sat it out.
            periods.draw(40.0, t0 + SECOND * 10);
            assert_eq!(periods.drawn.map(|(end, _)| end), Some(t0 + SECOND * 12));
            match first {
                Decision::Go { probe: true } => probes += 1,
                Decision::Until(until, Hold::Pace) => assert_eq!(
                    until,
                    t0 + SECOND * 10,
                    "expected the period sat out until a second after it ends"
                ),
                other => panic!("expected a probe or the period sat out, got {other:?}"),
            }
        }
        // 5 of 40: 500 of 4,000 expected.
        assert!(
            (400..=600).contains(&probes),
            "expected about 500 of 4,000 instances to probe the period, got {probes}"
        );
        let mut periods = seen();
        assert_eq!(
            periods.draw(4.0, now),
            Decision::Go { probe: true },
            "expected fewer instances than the limit all to probe"
        );
    }

    /// Whole-space Redis world seed 24 (40 instances, 10 per 3 s window, Redis restarted 2.25 s
    /// into the run, in the first period): no instance had seen two periods, and rule N let
    /// each probe. Before a second period is seen, the window is at least as long as the first
    /// was seen. (This alone still left the world banned in 4 of 5 runs; the draw on a loss an
    /// instance finds, `faults::forty_instances_share_out_each_periods_probes_once_redis_evicts_every_write`,
    /// did the rest.)
    #[test]
    fn rule_n_draws_before_a_second_period_is_seen_taking_the_window_as_long_as_seen() {
        fastrand::seed(11);
        let t0 = Instant::now();
        let mut probes = 0;
        for _ in 0..4_000 {
            let mut periods = Periods::default();
            // First seen 0.1 s into a period that ends 3 s from the start.
            periods.saw(10, 1_003, t0 + SECOND * 3, t0 + SECOND / 10);
            let now = t0 + Duration::from_millis(3_050);
            match periods.draw(40.0, now) {
                Decision::Go { probe: true } => probes += 1,
                Decision::Until(until, Hold::Pace) => assert_eq!(
                    until,
                    t0 + Duration::from_millis(6_900),
                    "expected the next period, as long as the first was seen, sat out until a \
                     second after it ends"
                ),
                other => panic!("expected a probe or the period sat out, got {other:?}"),
            }
        }
        // 10 of 40: 1,000 of 4,000 expected.
        assert!(
            (850..=1_150).contains(&probes),
            "expected about 1,000 of 4,000 instances to probe the period, got {probes}"
        );
        let mut periods = Periods::default();
        periods.saw(
            10,
            1_003,
            t0 + SECOND * 3,
            t0 + Duration::from_millis(2_900),
        );
        periods.draw(40.0, t0 + Duration::from_millis(3_050));
        assert_eq!(
            periods.drawn.map(|(end, _)| end),
            Some(t0 + SECOND * 5),
            "expected a period seen for less than two seconds taken as two seconds long"
        );
    }

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

    #[test]
    fn told_that_another_found_the_state_lost_it_counts_the_others_itself_a_while() {
        let now = Instant::now();
        let mut exchange = Exchange {
            live: true,
            ..Exchange::default()
        };
        assert!(exchange.exact(now));
        exchange.lost_since(now);
        assert!(!exchange.exact(now + LOST_SINCE_FOR - Duration::from_millis(1)));
        assert!(exchange.exact(now + LOST_SINCE_FOR));
    }

    #[test]
    fn a_store_that_answers_slower_than_its_timeout_is_waited_for_up_to_eight_times_it() {
        let ms = Duration::from_millis;
        let timeout = ms(250);
        let mut health = Health::default();
        assert_eq!(health.timeout(timeout), timeout);
        let mut doubled = Vec::new();
        for _ in 0..4 {
            health.timeouts += 1;
            doubled.push(health.timeout(timeout));
        }
        assert_eq!(doubled, [ms(500), ms(1_000), ms(2_000), ms(2_000)]);
        // Answers of 400 ms: waited for as TCP would, their round trip and four times its
        // variation.
        health.answered(ms(400));
        assert_eq!(health.timeouts, 0);
        assert_eq!(health.timeout(timeout), ms(1_200));
        // A store that answers fast again is given up on after the timeout again.
        for _ in 0..40 {
            health.answered(ms(1));
        }
        assert_eq!(health.timeout(timeout), timeout);
        health.answered(ms(300));
        assert!(
            health.timeout(timeout) > ms(300),
            "expected a round trip that took longer than usual to stretch the timeout past it"
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
