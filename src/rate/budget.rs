//! The budgets of the service's rate-limit windows, as responses report them.
//!
//! The headers show whichever window binds (a minute, a day), so the budgets are kept per
//! window period, told apart by the end its reset names (to within the second by which a
//! reset in seconds from now can place it): never by the limit, which a minute and a day may
//! share. Nothing is assumed about a period no response has reported: once a
//! window's reset has passed, its budget is unknown until a later response reports again.

use std::time::Duration;

use tokio::time::Instant;

use crate::clock;
use crate::headers::Quota;

/// Windows the service can report at once; the specification has two.
const MAX_WINDOWS: usize = 4;

/// Responses without rate-limit headers, in a row and with no window known, after which the
/// service is taken not to meter this key. One such response (a proxy's error page) is not
/// enough to give up the one-request-at-a-time start.
const UNMETERED_AFTER: u32 = 8;

/// Reports in a row explained by this process's own requests after which a process that saw
/// others spend the key takes itself to be alone again.
const ALONE_AGAIN_AFTER: u32 = 8;

/// How far past a window's end a 429 of that window can hold the key: the service rounds its
/// `Retry-After` up to whole seconds.
const RETRY_AFTER_ROUNDING: Duration = Duration::from_secs(1);

/// How far apart, per instance, the instances seen sharing the key send their first request
/// of a new period, at most [`STAGGER_SHARE`] of the window: where a backend ahead of the
/// limiter placed the end early, the first to call meets a 429, and the others must not all
/// call into its `Retry-After` at once.
const STAGGER_PER_INSTANCE: Duration = Duration::from_millis(100);

/// The share of a window's length (as far as this process has seen it) over which the
/// instances' first requests of its next period are staggered: one part in this many.
const STAGGER_SHARE: u32 = 10;

/// By how many seconds answers of one period can disagree on its end (see [`Window::names`]).
const RESET_ROUNDING: u64 = 1;

/// The share of a window's limit kept from a burst while the window ends within
/// [`RESERVE_WITHIN`]: one part in this many, a fifth. A process alone on its key that spent a
/// short window at once would leave nothing for the first request of a process starting after
/// it, and each such request would meet a 429 and strike toward a ban (a tenth still let 9 of
/// 16 processes started 5 ms apart call into one cooldown, one short of the sandbox's ban).
pub(super) const RESERVE_SHARE: u64 = 5;

/// How soon a window must end for its last fifth to be kept in reserve: a minute, so that a
/// day's budget is never held back.
pub(super) const RESERVE_WITHIN: Duration = Duration::from_secs(60);

/// The largest number of instances the fleet estimate believes in.
pub(super) const MAX_INSTANCES: f64 = 1_000.0;

/// This process's own requests when a response arrived: how many it had admitted in all, and
/// how many were in flight (the answered one included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Own {
    pub(crate) sent: u64,
    pub(crate) in_flight: u64,
    /// When the answered request was sent; `None` for when it was answered. The service
    /// counted its `remaining` at some instant between the two.
    pub(crate) answered_sent_at: Option<Instant>,
}

#[derive(Debug)]
pub(crate) struct Budgets {
    windows: Vec<Window>,
    /// How many instances share the key, as this process reckons from the budget falling
    /// faster than its own requests explain; at least 1.
    instances: f64,
    /// Every report so far is explained by this process's own requests: no other instance is
    /// seen spending the key.
    alone: bool,
    /// Reports in a row whose fall this process's own requests explain.
    explained_in_a_row: u32,
    /// The end of the latest period others were seen spending: until then they may be only
    /// waiting their turn.
    others_until: Option<Instant>,
    /// Some window was reported before: a period first reported now began while this
    /// process was watching, so what was spent of it before its first answer was spent by
    /// others.
    watched: bool,
    /// While the fleet estimate is a new process's guess from a short window down to its
    /// reserve (each request spent before its first answer taken for an instance), the
    /// fleet the falls show. The guess guards that window only: a later period starts from
    /// what was shown, unless it too is mostly spent as this process first sees it. Carried
    /// over, one guess of 193 after a fast instance's burst paced 15 of 16 instances at a
    /// request a period, and the fleet used a quarter of the next period's budget (soak seed
    /// 14406); dropped in a period a new instance's burst had spent, 10 instances took the
    /// guess's reserve at once (seed 1682).
    shown_beside_guess: Option<f64>,
    without_quota: u32,
    /// Requests the service had counted in the period of this process's first answer, its
    /// own included: where it stands among instances that started together, which places its
    /// first request of each new period in the fleet's stagger.
    rank: Option<u64>,
}

/// One period of one window.
#[derive(Debug, Clone, Copy)]
struct Window {
    limit: u64,
    /// The period's end on the service's clock (unix seconds): which period this is.
    reset: i64,
    /// The local instant the period ends.
    reset_at: Instant,
    /// The latest local instant it may end, should a `Date` that placed `reset_at` have come
    /// from a backend a second ahead (see `ServerTime::latest_instant_of`): others' 429s may
    /// hold the key to a second after it.
    latest_end: Instant,
    /// The budget left: the lowest `remaining` reported (responses arrive out of order), less
    /// the requests this process spent on doubt since.
    remaining: u64,
    /// The highest and lowest `remaining` reported, and how many of this process's responses
    /// reported this period: the fleet estimate.
    highest: u64,
    lowest: u64,
    reports: u32,
    /// The fall the latest new `lowest` showed, per answer since the one before: the fleet as
    /// it spends now. The average over the period lags a fleet that grows in mid-period (the
    /// instances that waited out a second of grace join all at once) by as many answers as
    /// the period has shown (soak seed 69479).
    recent: f64,
    /// Answers since the one that showed `lowest`.
    since_lowest: u32,
    /// When the request of the report that showed `lowest` was sent.
    lowest_sent: Instant,
    /// The first report of the period: its `remaining`, when it arrived, and this process's
    /// own requests then.
    first: u64,
    first_at: Instant,
    first_own: Own,
    /// When the latest report arrived.
    last_at: Instant,
    /// When the request of the latest report was sent: what the service counted since may
    /// be in no answer yet, for an answer's `remaining` may be as old as its request.
    as_of: Instant,
    /// How many instances its first report showed spending it as it began: each instance
    /// sends a request as a period begins, then waits its turn, so the falls later answers
    /// show between this process's requests may hide them.
    began_with: f64,
    /// The fleet that what was spent of a short window before this process's first answer, if
    /// more than half of it, would make, had others spent it. A new process cannot tell
    /// others from its own earlier runs, so it counts them only once it sees others spend the
    /// key (less than half spent, their falls show them soon enough): one that
    /// started after the fleet had spent two thirds of a window, and whose requests alone
    /// spent it for a moment, otherwise reckoned the fleet of 32 at 2 (soak seed 40805).
    before_first: f64,
    /// Until when what answers show spent beyond this process's own requests is taken for
    /// the others' first requests of the period, one an instance: set where this process,
    /// having seen others, called in a new period before they could (they wait out a
    /// possible `Retry-After`, then their place in the stagger). It would otherwise reckon
    /// the fleet from the falls of its own pace, which dwarf the others' single requests:
    /// one that spent most of each period reckoned 32 instances at 1 to 2 (soak seed 44675).
    counting_until: Option<Instant>,
    /// How long the window is, as reckoned at its first report (see [`window_length`]).
    #[cfg(feature = "metrics")]
    length: Duration,
}

impl Window {
    /// Whether a report whose period ends at `reset` (unix seconds) reports this period. A
    /// reset given in seconds from now is counted from the service's clock read to the
    /// millisecond and rounded up, so answers of one period name its end a second apart.
    /// Periods of a window a second long would read as one: more careful, never less.
    fn names(&self, reset: i64) -> bool {
        self.reset.abs_diff(reset) <= RESET_ROUNDING
    }

    /// The budget spent per second since the first report, by every instance; 0 until a
    /// later report shows it.
    fn falling(&self) -> f64 {
        let fallen = self.first.saturating_sub(self.lowest) as f64;
        let watched = self
            .last_at
            .saturating_duration_since(self.first_at)
            .as_secs_f64();
        if watched > 0.0 { fallen / watched } else { 0.0 }
    }

    /// What is left now if every instance went on spreading the budget over the period's
    /// time left since the last report's request was sent, as paced instances do: the others'
    /// requests since then are in no answer yet.
    fn projected(&self, now: Instant) -> f64 {
        let left = self.reset_at.saturating_duration_since(now).as_secs_f64();
        let then = self
            .reset_at
            .saturating_duration_since(self.as_of)
            .as_secs_f64();
        if then > 0.0 {
            self.remaining as f64 * (left / then).min(1.0)
        } else {
            0.0
        }
    }

    /// Whether the budget, falling at the pace it has since the first report, runs out before
    /// the period ends.
    fn runs_out(&self, now: Instant) -> bool {
        let left = self.reset_at.saturating_duration_since(now).as_secs_f64();
        self.falling() * left > self.remaining as f64
    }
}

/// What is left of one window, for pacing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WindowLeft {
    pub(crate) remaining: u64,
    /// When this process may call again once the period ends (see [`Budgets::known`]).
    pub(crate) reopens: Instant,
    /// What is left now if every instance went on spreading the budget evenly since the last
    /// report: the others' requests since then are in no answer yet.
    pub(crate) projected: f64,
    pub(crate) reset_at: Instant,
    /// Falling as fast as it has since this process first saw it, the budget runs out before
    /// the window ends.
    pub(crate) runs_out: bool,
}

/// What is known of the budget at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "made and read once per admission on the stack; a box would allocate each time"
)]
pub(crate) enum Known {
    /// Nothing, or a window's period has ended with no report of the next: probe.
    Unknown,
    /// The service does not meter this key (no rate-limit headers, many times).
    Unmetered,
    /// The budget of the windows in force.
    Budget(Budget),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Budget {
    /// The least budget left in any window (before subtracting requests in flight).
    pub(crate) remaining: u64,
    /// When the window that has the least left reopens (see [`WindowLeft::reopens`]).
    pub(crate) reset_at: Instant,
    /// A window allows no request at all (`X-RateLimit-Limit: 0`).
    pub(crate) zero_limit: bool,
    /// The limit of the window that has the least left.
    pub(crate) limit: u64,
    /// Every window, for pacing.
    windows: [WindowLeft; MAX_WINDOWS],
    count: usize,
}

impl Budget {
    /// Every window in force.
    pub(crate) fn windows(&self) -> &[WindowLeft] {
        &self.windows[..self.count]
    }
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            windows: Vec::with_capacity(MAX_WINDOWS),
            instances: 1.0,
            alone: true,
            explained_in_a_row: 0,
            others_until: None,
            watched: false,
            shown_beside_guess: None,
            without_quota: 0,
            rank: None,
        }
    }
}

impl Budgets {
    /// [`report_placed`](Self::report_placed) of a period whose end is placed for sure.
    #[cfg(test)]
    pub(crate) fn report(&mut self, quota: Quota, reset_at: Instant, at: Instant, own: Own) {
        self.report_placed(quota, reset_at, reset_at, at, own);
    }

    /// A response whose head arrived at `at` reported `quota`, whose period ends at
    /// `reset_at`, and at `latest_end` at the latest, when this process's own requests stood
    /// at `own`.
    pub(crate) fn report_placed(
        &mut self,
        quota: Quota,
        reset_at: Instant,
        latest_end: Instant,
        at: Instant,
        own: Own,
    ) {
        self.without_quota = 0;
        self.rank
            .get_or_insert(quota.limit.saturating_sub(quota.remaining));
        let reset = quota.reset.timestamp();
        let mut reset_at = reset_at;
        let mut latest_end = latest_end.max(reset_at);
        // A period that was over when the answer arrived says nothing about the next. One
        // this process keeps is still counting, though its `Date` says over: a backend whose
        // clock runs ahead of the limiter's dated it, and what it spent is this period's.
        if reset_at <= at && !self.windows.iter().any(|w| w.names(reset)) {
            // So is one over before its request was sent: the service counted the request
            // in it, so the answering backend's clock runs ahead, and the period ends later
            // than its `Date` says, by up to the second a `Date` is truncated to. Left
            // unknown, every request would go as a probe, one after another, unpaced.
            if own.answered_sent_at.is_none_or(|sent| sent < reset_at) {
                return;
            }
            reset_at = clock::after_from(at, RETRY_AFTER_ROUNDING);
            latest_end = latest_end.max(reset_at);
        }
        let watched = std::mem::replace(&mut self.watched, true);
        // When the others' first requests of a new period can have been answered, for one
        // that has seen others (see `Window::counting_until`). Reckoned before an ended
        // period leaves, from the windows seen so far; a key's only user skips it.
        let others_answered = (watched && !self.alone).then(|| {
            // The end of the period before, by the service's clock: this process may have
            // placed it later than this answer, from a `Date` truncated to the second.
            let ended = self
                .windows
                .iter()
                .filter(|w| w.reset < reset && !w.names(reset))
                .map(|w| w.reset_at)
                .max();
            (ended, RETRY_AFTER_ROUNDING + self.stagger_span())
        });
        // Any other window whose period had ended is resolved: the headers show the window
        // that binds, so one not shown has at least this much left.
        self.windows.retain(|w| w.reset_at > at || w.names(reset));
        match self.windows.iter_mut().find(|w| w.names(reset)) {
            Some(window) => {
                // Placed from every `Date` seen, never earlier than any of them says: a
                // backend whose clock runs ahead cannot bring the end forward.
                window.reset_at = window.reset_at.max(reset_at);
                window.latest_end = window.latest_end.max(latest_end);
                window.limit = window.limit.min(quota.limit);
                let sent = own.answered_sent_at.unwrap_or(at);
                if quota.remaining > window.lowest && sent > window.lowest_sent {
                    // More left than an answer to an earlier request showed: the limiter
                    // started the period afresh (its clock stepped forward by whole periods,
                    // or the plan grew). What is left stays the least seen, the careful
                    // reading; the fleet is reckoned afresh from here, for the falls before
                    // belong to the period before, though never below the fleet this
                    // process reckoned then.
                    window.began_with = window.began_with.max(self.instances);
                    window.first = quota.remaining;
                    window.first_at = at;
                    window.first_own = own;
                    window.highest = quota.remaining;
                    window.lowest = quota.remaining;
                    window.lowest_sent = sent;
                    window.reports = 0;
                    window.recent = 0.0;
                    window.since_lowest = 0;
                }
                window.remaining = window.remaining.min(quota.remaining);
                let lowest_before = window.lowest;
                window.since_lowest += 1;
                if quota.remaining < window.lowest {
                    window.lowest_sent = sent;
                    window.recent =
                        (window.lowest - quota.remaining) as f64 / f64::from(window.since_lowest);
                    window.since_lowest = 0;
                }
                window.lowest = window.lowest.min(quota.remaining);
                window.highest = window.highest.max(quota.remaining);
                window.reports += 1;
                window.last_at = window.last_at.max(at);
                window.as_of = window.as_of.max(own.answered_sent_at.unwrap_or(at));
                let fallen = window.first.saturating_sub(window.lowest);
                // Own requests that may have been counted since the first report: those sent
                // since, and those on the wire then.
                let own_most = own
                    .sent
                    .saturating_sub(window.first_own.sent)
                    .saturating_add(window.first_own.in_flight.saturating_sub(1));
                if fallen > own_most && self.alone {
                    // The estimate counts from the answer before the first that showed
                    // others: the falls of a burst this process sent alone, one per answer,
                    // would otherwise average the fleet down to about one instance.
                    window.highest = lowest_before.max(quota.remaining);
                    window.reports = 2;
                    window.began_with = window.began_with.max(window.before_first);
                }
                if window.counting_until.is_some_and(|until| at <= until) {
                    let others = fallen.saturating_sub(own_most) as f64;
                    window.began_with = window.began_with.max(others + 1.0);
                }
                let others_and_own = window.highest.saturating_sub(window.lowest) as f64;
                let answered = f64::from(window.reports - 1);
                let falls = if answered > 0.0 {
                    others_and_own / answered
                } else {
                    1.0
                };
                self.instances = falls
                    .max(window.recent)
                    .max(window.began_with)
                    .clamp(1.0, MAX_INSTANCES);
                if let Some(shown) = &mut self.shown_beside_guess {
                    *shown = shown.max(falls);
                }
                // Others who spent the key once may only be waiting their turn, which can
                // come as late as the end of the period they were seen in: alone again only
                // after it, and after many falls in a row that this process's requests
                // explain.
                let until = window.reset_at;
                if fallen > own_most {
                    self.others_seen(until);
                } else {
                    self.explained_in_a_row = self.explained_in_a_row.saturating_add(1);
                    let waited = self.others_until.is_none_or(|until| at >= until);
                    self.alone |= waited && self.explained_in_a_row >= ALONE_AGAIN_AFTER;
                }
                if self.alone {
                    self.instances = 1.0;
                }
            }
            None => {
                if self.windows.len() == MAX_WINDOWS {
                    // The window that ends first has the least to say about what is left.
                    let first = self
                        .windows
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, w)| w.reset_at)
                        .map_or(0, |(i, _)| i);
                    self.windows.remove(first);
                }
                // Spent before this process's first answer of the period, beyond what its
                // own requests on the wire explain.
                let spent_before = quota.limit.saturating_sub(quota.remaining);
                let own_most = own.in_flight.max(1);
                // Others spend the key as this period begins, as many of them as their spend
                // is larger than this process's own. Half a window spent or more is a long
                // window's past (a day that binds late), and a new process cannot tell others
                // from its own earlier runs: both stay as they were until the next answer
                // tells, unless a short window is down to its reserve. Then a new process
                // takes the spend for others' too, since more processes starting like it
                // would each spend a request of the reserve before any answer could tell.
                let short = reset_at.saturating_duration_since(at) <= RESERVE_WITHIN;
                let others_at_start = if watched {
                    spent_before <= quota.limit / 2
                } else {
                    quota.remaining <= quota.limit / RESERVE_SHARE && short
                };
                // Called before the others could: until their first requests, a second and
                // their place in the stagger after the end, can have been answered, as late as
                // this answer came (twice over, for its way there and back).
                let sent = own.answered_sent_at.unwrap_or(at);
                let delay = at.duration_since(sent) * 2;
                if let Some((_, others_return)) = others_answered {
                    // This period began before this request was sent, whatever periods this
                    // process missed: the others it saw may still be waiting their turn, and
                    // it is not alone until their first requests of it can have been
                    // answered (soak seed 3570).
                    self.others_awaited_until(clock::after_from(sent, others_return + delay));
                }
                let counting_until = others_answered.and_then(|(ended, others_return)| {
                    ended
                        .filter(|&end| sent < clock::after_from(end, RETRY_AFTER_ROUNDING))
                        .map(|end| clock::after_from(end, others_return + delay))
                });
                let mut began_with = 1.0;
                let before_first = if !watched && short && spent_before > quota.limit / 2 {
                    (spent_before as f64 / own_most as f64).clamp(1.0, MAX_INSTANCES)
                } else {
                    1.0
                };
                // A period found mostly spent may be one more that a burst left to its reserve:
                // the guess goes on guarding it.
                if watched
                    && others_at_start
                    && let Some(shown) = self.shown_beside_guess.take()
                {
                    self.instances = shown.clamp(1.0, MAX_INSTANCES);
                }
                if spent_before > own_most && others_at_start {
                    self.others_seen(reset_at);
                    began_with = spent_before as f64 / own_most as f64;
                    self.instances = self.instances.max(began_with).clamp(1.0, MAX_INSTANCES);
                    if !watched {
                        self.shown_beside_guess = Some(1.0);
                    }
                }
                self.windows.push(Window {
                    limit: quota.limit,
                    reset,
                    reset_at,
                    latest_end,
                    remaining: quota.remaining,
                    highest: quota.remaining,
                    lowest: quota.remaining,
                    reports: 1,
                    recent: 0.0,
                    since_lowest: 0,
                    lowest_sent: own.answered_sent_at.unwrap_or(at),
                    first: quota.remaining,
                    first_at: at,
                    last_at: at,
                    as_of: own.answered_sent_at.unwrap_or(at),
                    first_own: own,
                    began_with,
                    before_first,
                    counting_until,
                    #[cfg(feature = "metrics")]
                    length: window_length(reset_at.saturating_duration_since(at)),
                });
            }
        }
    }

    /// Others are seen spending a period that ends at `until`.
    fn others_seen(&mut self, until: Instant) {
        self.alone = false;
        self.explained_in_a_row = 0;
        self.others_awaited_until(until);
    }

    /// Others may spend the key until `until`: this process is not alone before it.
    fn others_awaited_until(&mut self, until: Instant) {
        self.others_until = Some(self.others_until.map_or(until, |seen| seen.max(until)));
    }

    /// Every report so far is explained by this process's own requests: no other instance is
    /// seen spending the key.
    pub(crate) fn alone(&self) -> bool {
        self.alone
    }

    /// Reports in a row whose fall this process's own requests explain.
    pub(crate) fn confirmed(&self) -> u32 {
        self.explained_in_a_row
    }

    /// A response arrived without rate-limit headers.
    pub(crate) fn report_none(&mut self) {
        if self.windows.is_empty() {
            self.without_quota = self.without_quota.saturating_add(1);
        }
    }

    /// A response arrived whose rate-limit headers could not be read (repeated, negative,
    /// not numbers): the request counts as spent, and the service is still taken to meter
    /// the key, so that a quota the client cannot read never lifts the pacing.
    pub(crate) fn report_unreadable(&mut self) {
        self.report_metered();
        self.spend_on_doubt();
    }

    /// A 429 without rate-limit headers: the service meters the key after all.
    pub(crate) fn report_metered(&mut self) {
        self.without_quota = 0;
    }

    /// A request may have reached the service and no answer will tell: count it as spent.
    pub(crate) fn spend_on_doubt(&mut self) {
        for window in &mut self.windows {
            window.remaining = window.remaining.saturating_sub(1);
        }
    }

    /// How long the window of the period that ends at `reset` (unix seconds) is, as
    /// reckoned when the period was first reported; `None` for a period no longer kept.
    #[cfg(feature = "metrics")]
    pub(crate) fn length_of(&self, reset: i64) -> Option<Duration> {
        self.windows
            .iter()
            .find(|w| w.names(reset))
            .map(|w| w.length)
    }

    /// How long after the others this process sends its first request of a new period: its
    /// place among the instances, spread over [`STAGGER_PER_INSTANCE`] each, at most
    /// [`STAGGER_SHARE`] of the shortest window in force.
    fn stagger(&self) -> Duration {
        let span = self.stagger_span();
        let instances = self.instances.round().max(1.0) as u64;
        let place = self.rank.unwrap_or(0) % instances;
        span.mul_f64(place as f64 / instances as f64)
    }

    /// Over how long the instances' first requests of a new period are staggered.
    fn stagger_span(&self) -> Duration {
        let seen = self
            .windows
            .iter()
            .map(|w| w.reset_at.saturating_duration_since(w.first_at))
            .min()
            .unwrap_or_default();
        STAGGER_PER_INSTANCE
            .mul_f64(self.instances)
            .min(seen / STAGGER_SHARE)
    }

    /// How many instances this process reckons share the key.
    pub(crate) fn instances(&self) -> f64 {
        self.instances
    }

    pub(crate) fn known(&self, now: Instant) -> Known {
        // Another instance's 429 near a window's end may tell the service to refuse the key
        // until up to a second after it, as `Retry-After` is rounded up to whole seconds:
        // instances that did not get it must not all probe into that second.
        let grace = if self.alone {
            Duration::ZERO
        } else {
            RETRY_AFTER_ROUNDING + self.stagger()
        };
        // Others' 429s are reckoned to follow the latest end the `Date`s seen allow.
        let end = |w: &Window| {
            let end = if self.alone { w.reset_at } else { w.latest_end };
            clock::after_from(end, grace)
        };
        if self.windows.iter().any(|w| end(w) <= now) {
            return Known::Unknown;
        }
        let Some(binding) = self
            .windows
            .iter()
            .min_by_key(|w| (w.remaining, w.reset_at))
        else {
            return if self.without_quota >= UNMETERED_AFTER {
                Known::Unmetered
            } else {
                Known::Unknown
            };
        };
        let mut windows = [WindowLeft {
            remaining: 0,
            reopens: now,
            projected: 0.0,
            reset_at: now,
            runs_out: false,
        }; MAX_WINDOWS];
        for (slot, window) in windows.iter_mut().zip(&self.windows) {
            // A key's only user paces by the answers as they are.
            *slot = if self.alone {
                WindowLeft {
                    remaining: window.remaining,
                    reopens: end(window),
                    projected: window.remaining as f64,
                    reset_at: window.reset_at,
                    runs_out: false,
                }
            } else {
                WindowLeft {
                    remaining: window.remaining,
                    reopens: end(window),
                    projected: window.projected(now),
                    reset_at: window.reset_at,
                    runs_out: window.runs_out(now),
                }
            };
        }
        Known::Budget(Budget {
            remaining: binding.remaining,
            reset_at: end(binding),
            zero_limit: self.windows.iter().any(|w| w.limit == 0),
            limit: binding.limit,
            windows,
            count: self.windows.len(),
        })
    }
}

/// The length of a window whose period ends `until_end` after its first report: the
/// shortest of a minute, an hour and a day that the rest of the period fits in (after taking
/// off the second by which a truncated `Date` can overstate it), or whole days beyond.
///
/// The headers show a period's end, never its window's length, and rate-limit windows come in
/// these lengths (the specification's are a minute and a day). So it is a reckoning: a window
/// first reported in its last minute is taken for a minute's, whatever its length. It names
/// windows for metrics only; the budget never depends on it.
#[cfg(feature = "metrics")]
fn window_length(until_end: Duration) -> Duration {
    const DAY: u64 = 86_400;
    let rest = until_end.saturating_sub(Duration::from_secs(1));
    let secs = [60, 3_600, DAY]
        .into_iter()
        .find(|&length| rest <= Duration::from_secs(length))
        .unwrap_or_else(|| rest.as_secs().div_ceil(DAY) * DAY);
    Duration::from_secs(secs)
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;

    fn quota(limit: u64, remaining: u64, reset: i64) -> Quota {
        Quota::new(
            limit,
            remaining,
            DateTime::from_timestamp(reset, 0).unwrap(),
        )
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn a_window_is_named_for_the_shortest_usual_length_its_rest_fits_in() {
        for (until_end, length) in [
            (0, 60),
            (61, 60),
            (62, 3_600),
            (3_601, 3_600),
            (57_540, 86_400),
            (86_401, 86_400),
            (86_402, 172_800),
        ] {
            assert_eq!(
                window_length(secs(until_end)),
                secs(length),
                "{until_end} s before its end"
            );
        }
    }

    fn budget(budgets: &Budgets, now: Instant) -> Budget {
        match budgets.known(now) {
            Known::Budget(budget) => budget,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nothing_is_known_until_a_report_and_after_its_period_ends() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        assert_eq!(budgets.known(t0), Known::Unknown);
        budgets.report(quota(60, 59, 1_000), t0 + secs(30), t0, Own::default());
        assert_eq!(budget(&budgets, t0).remaining, 59);
        assert_eq!(
            budgets.known(t0 + secs(30)),
            Known::Unknown,
            "never assume the full limit"
        );
        budgets.report(
            quota(60, 10, 1_060),
            t0 + secs(90),
            t0 + secs(31),
            Own::default(),
        );
        assert_eq!(budget(&budgets, t0 + secs(31)).remaining, 10);
    }

    #[test]
    fn a_stale_report_gives_back_nothing() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(60, 20, 1_000), t0 + secs(30), t0, Own::default());
        budgets.report(quota(60, 25, 1_000), t0 + secs(30), t0, Own::default());
        budgets.report(quota(60, 50, 940), t0 + secs(30), t0, Own::default());
        assert_eq!(budget(&budgets, t0).remaining, 20);
    }

    #[test]
    fn the_window_with_least_left_binds_and_a_period_over_on_arrival_is_ignored() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(20, 15, 1_000), t0 + secs(30), t0, Own::default());
        budgets.report(quota(25, 3, 90_000), t0 + secs(3_600), t0, Own::default());
        let known = budget(&budgets, t0);
        assert_eq!((known.remaining, known.reset_at), (3, t0 + secs(3_600)));
        assert_eq!(known.windows().len(), 2);
        budgets.report(quota(20, 0, 900), t0, t0, Own::default());
        assert_eq!(budget(&budgets, t0).remaining, 3);
    }

    #[test]
    fn a_window_whose_period_ended_is_resolved_by_any_later_report() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(20, 19, 1_000), t0 + secs(30), t0, own(1, 1));
        budgets.report(quota(20, 0, 1_000), t0 + secs(30), t0, own(20, 1));
        assert_eq!(budgets.known(t0 + secs(30)), Known::Unknown);
        // The day window binds in the new minute: the minute has at least as much left.
        budgets.report(
            quota(25, 5, 90_000),
            t0 + secs(3_600),
            t0 + secs(31),
            Own::default(),
        );
        let known = budget(&budgets, t0 + secs(31));
        assert_eq!((known.remaining, known.windows().len()), (5, 1));
    }

    #[test]
    fn spending_on_doubt_lowers_every_window() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(60, 1, 1_000), t0 + secs(30), t0, Own::default());
        budgets.report(quota(1_000, 999, 9_000), t0 + secs(300), t0, Own::default());
        budgets.spend_on_doubt();
        budgets.spend_on_doubt();
        let known = budget(&budgets, t0);
        assert_eq!(known.remaining, 0);
        assert!(
            known
                .windows()
                .iter()
                .any(|w| (w.remaining, w.reset_at) == (997, t0 + secs(300)))
        );
    }

    #[test]
    fn others_spending_raises_the_fleet_estimate() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(60, 59, 1_000), t0 + secs(60), t0, Own::default());
        assert_eq!(budgets.instances(), 1.0);
        // Our next two requests saw the budget fall by 4 each: three others spend as much.
        budgets.report(quota(60, 55, 1_000), t0 + secs(60), t0, Own::default());
        budgets.report(quota(60, 51, 1_000), t0 + secs(60), t0, Own::default());
        assert_eq!(budgets.instances(), 4.0);
        // Alone again in the next period.
        budgets.report(
            quota(60, 59, 1_060),
            t0 + secs(120),
            t0 + secs(61),
            Own::default(),
        );
        budgets.report(
            quota(60, 58, 1_060),
            t0 + secs(120),
            t0 + secs(61),
            Own::default(),
        );
        assert_eq!(budgets.instances(), 1.0);
    }

    #[test]
    fn zero_limit_and_unmetered_are_told_apart() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        for _ in 0..UNMETERED_AFTER - 1 {
            budgets.report_none();
        }
        assert_eq!(
            budgets.known(t0),
            Known::Unknown,
            "one proxy page is not enough"
        );
        budgets.report_none();
        assert_eq!(budgets.known(t0), Known::Unmetered);
        budgets.report(quota(0, 0, 1_000), t0 + secs(30), t0, Own::default());
        assert!(budget(&budgets, t0).zero_limit);
    }

    #[test]
    fn a_minute_and_a_day_with_the_same_limit_are_kept_apart() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(100, 60, 1_030), t0 + secs(30), t0, Own::default());
        budgets.report(quota(100, 50, 4_600), t0 + secs(3_600), t0, Own::default());
        budgets.report(quota(100, 40, 1_030), t0 + secs(30), t0, Own::default());
        let known = budget(&budgets, t0);
        assert_eq!(
            (known.remaining, known.windows().len()),
            (40, 2),
            "expected the minute's newer report (40 left) to count beside the day's"
        );
    }

    #[test]
    fn a_period_end_is_placed_by_the_latest_reading_never_earlier() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        // Two backends behind one limiter, 2 s apart: the one ahead places the end early.
        budgets.report(quota(60, 50, 1_000), t0 + secs(28), t0, own(1, 1));
        budgets.report(quota(60, 49, 1_000), t0 + secs(30), t0, own(2, 1));
        budgets.report(quota(60, 48, 1_000), t0 + secs(28), t0, own(3, 1));
        assert_eq!(budget(&budgets, t0).reset_at, t0 + secs(30));
    }

    /// Found by the matrix's 32 independent instances: a 429 near a window's end told the
    /// service to refuse the key until a second past it (`Retry-After` rounded up), and every
    /// other instance, held until the end by the spent budget, probed into that second: a ban.
    #[test]
    fn once_others_are_seen_a_window_ends_a_second_late() {
        let t0 = Instant::now();
        let end = t0 + secs(30);
        let mut budgets = Budgets::default();
        budgets.report(quota(60, 50, 1_000), end, t0, own(1, 1));
        assert_eq!(budget(&budgets, t0).reset_at, end, "alone: no grace");
        budgets.report(quota(60, 40, 1_000), end, t0, own(2, 1));
        assert!(!budgets.alone());
        assert_eq!(budget(&budgets, t0).reset_at, end + RETRY_AFTER_ROUNDING);
        assert!(matches!(budgets.known(end), Known::Budget(_)));
        assert_eq!(budgets.known(end + RETRY_AFTER_ROUNDING), Known::Unknown);
    }

    /// Found by the simulation explorer's soak (seed 26252: 32 instances, one of two backends
    /// a second ahead): ends placed early from a `Date` a second ahead, a second's grace after
    /// them fell inside the `Retry-After` of a 429 at the window's true end.
    #[test]
    fn once_others_are_seen_a_window_reopens_a_second_after_its_latest_end() {
        let t0 = Instant::now();
        let (end, latest) = (t0 + secs(30), t0 + secs(30) + Duration::from_millis(900));
        let mut alone = Budgets::default();
        alone.report_placed(quota(60, 50, 1_000), end, latest, t0, own(1, 1));
        assert_eq!(
            budget(&alone, t0).reset_at,
            end,
            "alone: at the end as placed"
        );
        let mut seen = Budgets::default();
        seen.report_placed(quota(60, 50, 1_000), end, latest, t0, own(1, 1));
        seen.report_placed(quota(60, 40, 1_000), end, end, t0, own(2, 1));
        assert!(!seen.alone());
        let spent = budget(&seen, t0);
        assert_eq!(spent.reset_at, latest + RETRY_AFTER_ROUNDING);
        assert_eq!(
            spent.windows()[0].reset_at,
            end,
            "spread up to the end as placed"
        );
        assert!(matches!(
            seen.known(end + RETRY_AFTER_ROUNDING),
            Known::Budget(_)
        ));
        assert_eq!(seen.known(latest + RETRY_AFTER_ROUNDING), Known::Unknown);
    }
    /// Found by the matrix cell of 16 instances started 5 ms apart: each process that started
    /// after the first met a window the first had spent alone, and took itself to be alone.
    #[test]
    fn a_new_process_that_finds_a_short_window_in_its_reserve_sees_others() {
        let t0 = Instant::now();
        let mut fresh = Budgets::default();
        fresh.report(quota(60, 12, 1_000), t0 + secs(60), t0, own(1, 1));
        assert!(!fresh.alone());
        assert_eq!(fresh.instances(), 48.0);
        let mut ample = Budgets::default();
        ample.report(quota(60, 13, 1_000), t0 + secs(60), t0, own(1, 1));
        assert!(
            ample.alone(),
            "more than the reserve left: its own earlier runs, maybe"
        );
        let mut long = Budgets::default();
        long.report(quota(60, 12, 1_000), t0 + secs(61), t0, own(1, 1));
        assert!(long.alone(), "a window that ends later keeps no reserve");
    }

    /// Found by the simulation explorer's soak (seed 69479, 32 instances of one task): half
    /// the fleet called a second early in each period and saw 5 instances spending it; when
    /// the other half joined at once, the average over the period still showed 5, and the
    /// window was spent before its end, into one `Retry-After` 13 requests deep.
    #[test]
    fn a_fleet_that_grows_in_mid_period_is_reckoned_by_the_latest_fall() {
        let t0 = Instant::now();
        let end = t0 + secs(2);
        let mut budgets = Budgets::default();
        budgets.report(quota(96, 90, 1_000), end, t0, own(1, 1));
        for sent in 2..=10 {
            budgets.report(quota(96, 95 - 5 * sent, 1_000), end, t0, own(sent, 1));
        }
        assert_eq!(budgets.instances(), 5.0);
        // Ten more joined: the next request of its own saw the budget fall by 15.
        budgets.report(quota(96, 30, 1_000), end, t0, own(11, 1));
        assert_eq!(budgets.instances(), 15.0);
        // An answer out of order shows no new low, and changes nothing.
        budgets.report(quota(96, 43, 1_000), end, t0, own(12, 1));
        assert_eq!(budgets.instances(), 15.0);
        // Then a fall of 8 over those two answers, 4 an answer: the average over the period,
        // 68 in 12 answers, is the estimate again.
        budgets.report(quota(96, 22, 1_000), end, t0, own(13, 1));
        assert_eq!(budgets.instances(), 68.0 / 12.0);
    }

    fn own(sent: u64, in_flight: u64) -> Own {
        Own {
            sent,
            in_flight,
            answered_sent_at: None,
        }
    }

    /// Found by the simulation explorer's soak (seed 2476, 32 instances): instances that saw
    /// only a backend ahead of the limiter placed a period's end early, and all of them
    /// called at once a second after it, into the 429 of a window that had not ended.
    #[test]
    fn instances_seen_sharing_the_key_stagger_their_first_request_of_a_new_period() {
        let t0 = Instant::now();
        let end = t0 + secs(60);
        // Counted `rank`-th as 32 instances started together; then 31 others' requests.
        let reopens = |rank: u64| {
            let mut budgets = Budgets::default();
            budgets.report(quota(96, 96 - rank, 1_000), end, t0, own(1, 1));
            budgets.report(quota(96, 64 - rank, 1_000), end, t0, own(2, 1));
            assert_eq!(budgets.instances(), 32.0);
            budget(&budgets, t0).reset_at - end
        };
        // 100 ms per instance, 3.2 s in all (less than a tenth of the window seen, 6 s).
        assert_eq!(
            reopens(32),
            secs(1),
            "the first place: a second after the end"
        );
        assert_eq!(reopens(1), Duration::from_millis(1_100));
        assert_eq!(reopens(17), Duration::from_millis(2_700));
        let mut alone = Budgets::default();
        alone.report(quota(96, 95, 1_000), end, t0, own(1, 1));
        assert_eq!(
            budget(&alone, t0).reset_at,
            end,
            "alone: no grace, no stagger"
        );
    }

    /// Found by the simulation explorer's soak (seeds 14846 and 15538, 32 instances, one held
    /// by a first 503 or 502): a process that took itself for the key's only user sent 384
    /// requests, one fall each, and then averaged the others' falls in with those, reckoning
    /// about one instance where 31 more were spending the window's last fifth.
    #[test]
    fn a_burst_sent_alone_is_not_averaged_into_the_others_that_later_answers_show() {
        let t0 = Instant::now();
        let end = t0 + secs(5);
        let mut budgets = Budgets::default();
        budgets.report(quota(480, 479, 1_000), end, t0, own(1, 1));
        for sent in 2..=384 {
            budgets.report(quota(480, 480 - sent, 1_000), end, t0, own(sent, 1));
        }
        assert!(budgets.alone());
        // One more request of its own, and 31 others' first requests of the period.
        budgets.report(quota(480, 64, 1_000), end, t0 + secs(1), own(385, 1));
        assert!(!budgets.alone());
        assert_eq!(
            budgets.instances(),
            32.0,
            "expected the fall that showed the others to count, not the burst before it"
        );
    }

    /// Found by the simulation explorer's soak (seeds 25369 and 44675, 32 instances): as a
    /// period began, the others waited out a possible `Retry-After` and their place in the
    /// stagger, while an instance that called before them reckoned the fleet from the falls
    /// it saw, mostly its own pace's, at 1 to 5, and took the others' shares.
    #[test]
    fn an_instance_that_calls_before_the_others_in_a_new_period_counts_their_first_requests() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let end = t0 + secs(2);
        let early = |others_after: Duration| {
            let mut budgets = Budgets::default();
            budgets.report(quota(96, 95, 1_000), end, t0, own(1, 1));
            budgets.report(quota(96, 63, 1_000), end, t0 + ms(200), own(2, 1));
            assert_eq!(budgets.instances(), 32.0);
            // The next period: its first request, sent 4 ms after the end, then five of its
            // own, and 31 others' first requests, seen over two answers of its own.
            let next = end + secs(2);
            let sent = end + ms(4);
            let first = Own {
                answered_sent_at: Some(sent),
                ..own(3, 1)
            };
            budgets.report(quota(96, 95, 1_002), next, sent + ms(163), first);
            budgets.report(quota(96, 90, 1_002), next, end + ms(500), own(8, 1));
            budgets.report(quota(96, 74, 1_002), next, end + others_after, own(9, 1));
            budgets.report(quota(96, 57, 1_002), next, end + others_after, own(10, 1));
            budgets.instances()
        };
        // The others call a second after the end, staggered over a tenth of the window seen.
        assert_eq!(
            early(ms(1_400)),
            32.0,
            "expected the 31 others' first requests counted as instances"
        );
        // Later, what others spend is their pace, not their number: the latest fall, 17 an
        // answer.
        assert_eq!(early(ms(2_000)), 17.0);
    }

    /// Found by the simulation explorer's soak (seed 3570, 32 instances of two tasks, one of
    /// two backends a second ahead): an instance whose answers placed each end late sent
    /// nothing in one period and called early in the next, before the others, who waited out
    /// their second of grace. The others it had seen were put at the end of the last period it
    /// saw, long past, so eight answers its own requests explained made it a key's only user:
    /// it sent 69 requests at once, and the window was spent as the other 31 came back.
    #[test]
    fn an_instance_that_skipped_a_period_awaits_the_others_first_requests_before_it_is_alone() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let end = t0 + secs(2);
        let next = end + secs(4);
        let skipped = || {
            let mut budgets = Budgets::default();
            budgets.report(quota(96, 95, 1_000), end, t0, own(1, 1));
            budgets.report(quota(96, 63, 1_000), end, t0 + ms(200), own(2, 1));
            assert!(!budgets.alone());
            // Nothing sent in the period after. In the one after that, its first request
            // goes 160 ms in and is answered 150 ms later, then eight more of its own.
            let sent = end + secs(2) + ms(160);
            let first = Own {
                answered_sent_at: Some(sent),
                ..own(3, 1)
            };
            budgets.report(quota(96, 95, 1_004), next, sent + ms(150), first);
            for n in 1..=8 {
                let at = sent + ms(150 + 20 * n);
                budgets.report(quota(96, 95 - n, 1_004), next, at, own(3 + n, 1));
            }
            budgets
        };
        let mut others = skipped();
        assert!(
            !others.alone(),
            "expected the others it saw still awaited: they call a second after the period began"
        );
        assert_eq!(others.instances(), 1.0, "every fall is its own so far");
        // The others' first requests, a second and their place in the stagger after the
        // period began.
        let back = end + secs(3);
        others.report(quota(96, 71, 1_004), next, back + ms(200), own(12, 1));
        assert!(!others.alone());
        assert_eq!(others.instances(), 16.0, "expected the latest fall counted");
        // None by the time theirs could have been answered: alone.
        let mut none = skipped();
        none.report(quota(96, 86, 1_004), next, back + ms(800), own(12, 1));
        assert!(none.alone());
    }

    /// Found by the simulation explorer's soak (seed 40805, 32 instances, half the calls
    /// cancelled): a process whose first answer found two thirds of a 5 s window spent took
    /// that for its own earlier runs, as a new process must, and still did once its falls
    /// showed others, reckoning the fleet at 2 from the few falls per answer it then saw.
    #[test]
    fn a_new_process_counts_what_was_spent_before_it_once_it_sees_others() {
        let t0 = Instant::now();
        let end = t0 + secs(5);
        let mut budgets = Budgets::default();
        budgets.report(quota(96, 33, 1_000), end, t0, own(2, 1));
        for sent in 3..=6 {
            budgets.report(quota(96, 35 - sent, 1_000), end, t0, own(sent, 1));
        }
        assert!(
            budgets.alone(),
            "expected falls its own requests explain to keep it alone"
        );
        budgets.report(quota(96, 27, 1_000), end, t0 + secs(1), own(7, 1));
        assert!(!budgets.alone());
        assert_eq!(
            budgets.instances(),
            63.0,
            "expected the 63 spent before its first answer taken for others' once others show"
        );
        // Less than half spent: the instances that started with it show in the falls soon
        // enough (counted here too, the matrix's 8 instances started together met two 429s,
        // against none).
        let mut third = Budgets::default();
        third.report(quota(96, 64, 1_000), end, t0, own(2, 1));
        third.report(quota(96, 63, 1_000), end, t0, own(3, 1));
        third.report(quota(96, 61, 1_000), end, t0 + secs(1), own(4, 1));
        assert!(!third.alone());
        assert_eq!(third.instances(), 2.0);
        // A window that ends beyond a minute (a day that binds) says nothing of a fleet.
        let mut day = Budgets::default();
        let day_end = t0 + secs(3_600);
        day.report(quota(9_600, 3_300, 1_000), day_end, t0, own(2, 1));
        day.report(quota(9_600, 3_299, 1_000), day_end, t0, own(3, 1));
        day.report(quota(9_600, 3_297, 1_000), day_end, t0 + secs(1), own(4, 1));
        assert!(!day.alone());
        assert_eq!(day.instances(), 2.0);
    }

    /// Found by the simulation explorer's soak (seed 14406, 16 instances started 164 ms
    /// apart, the first bursting alone): a late process guessed the fleet from a window down
    /// to its reserve, and the guess outlived it.
    #[test]
    fn a_new_process_guess_of_the_fleet_holds_only_for_the_window_it_was_made_in() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(240, 40, 1_000), t0 + secs(12), t0, own(1, 1));
        assert_eq!(
            budgets.instances(),
            200.0,
            "expected the 200 spent before its first answer guarded as others' in its window"
        );
        // The next period: 16 spent as this process's first request is answered, once the
        // others' first requests can have been.
        let next = t0 + secs(15);
        budgets.report(quota(240, 224, 1_030), t0 + secs(42), next, own(2, 1));
        assert_eq!(
            budgets.instances(),
            16.0,
            "expected the next period reckoned from what it shows, not from the guess"
        );
        // What the falls showed beside the guess is carried like any estimate.
        let mut borne_out = Budgets::default();
        borne_out.report(quota(240, 40, 1_000), t0 + secs(12), t0, own(1, 1));
        borne_out.report(
            quota(240, 39, 1_000),
            t0 + secs(12),
            t0 + secs(1),
            own(2, 1),
        );
        borne_out.report(quota(240, 0, 1_000), t0 + secs(12), t0 + secs(2), own(3, 1));
        borne_out.report(quota(240, 224, 1_030), t0 + secs(42), next, own(4, 1));
        assert_eq!(borne_out.instances(), 20.0);
        // A next period found mostly spent (seed 1682: a new instance's burst) keeps the guess.
        let mut spent_again = Budgets::default();
        spent_again.report(quota(240, 40, 1_000), t0 + secs(12), t0, own(1, 1));
        spent_again.report(quota(240, 49, 1_030), t0 + secs(42), next, own(2, 1));
        assert_eq!(spent_again.instances(), 200.0);
    }

    /// Found by the simulation explorer's soak (seed 3226, 16 instances, every answer 429 ms
    /// late): the service counts `remaining` when the request arrives, so an answer's figure
    /// is as old as its request, and the others' spending since must be projected from then.
    #[test]
    fn others_spending_is_projected_from_when_the_answered_request_was_sent() {
        let t0 = Instant::now();
        let end = t0 + secs(2);
        let mut budgets = Budgets::default();
        budgets.report(quota(48, 32, 1_000), end, t0, own(1, 1));
        let sent = t0 + Duration::from_millis(1_000);
        let answered = sent + Duration::from_millis(500);
        let late = Own {
            answered_sent_at: Some(sent),
            ..own(2, 1)
        };
        budgets.report(quota(48, 16, 1_000), end, answered, late);
        let known = budget(&budgets, answered);
        assert_eq!(
            known.windows()[0].projected,
            8.0,
            "expected the 16 left a second before the end spent at the others' pace for the half \
             second since the request, not since the answer (16)"
        );
    }

    /// Found by the simulation explorer (seed 832, 32 instances): a reset given in seconds
    /// from now, read in mid-second, named the period's end a second later than the answers
    /// before it, and the process took the rest of the period for a new one it was alone in.
    #[test]
    fn answers_that_place_a_periods_end_a_second_apart_report_one_period() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(96, 60, 1_000), t0 + secs(2), t0, own(1, 1));
        let mid_second = t0 + Duration::from_millis(600);
        budgets.report(quota(96, 30, 1_001), t0 + secs(3), mid_second, own(2, 1));
        let known = budget(&budgets, mid_second);
        assert_eq!((known.remaining, known.windows().len()), (30, 1));
        assert!(
            !budgets.alone(),
            "expected a fall of 30 for one request of its own to show others"
        );
    }

    /// Found by the simulation explorer (seed 1916, 32 instances): a backend ahead of the
    /// limiter's clock dated answers after the end of a period the limiter still counted, and
    /// the fall they showed was ignored with them.
    #[test]
    fn an_answer_dated_after_a_kept_periods_end_still_reports_it() {
        let t0 = Instant::now();
        let end = t0 + secs(3);
        let mut budgets = Budgets::default();
        budgets.report(quota(96, 75, 1_000), end, t0, own(1, 1));
        // Over on arrival by its `Date`, so placed at once: the end stays where it was.
        budgets.report(quota(96, 52, 1_000), t0, t0, own(2, 1));
        let known = budget(&budgets, t0);
        assert_eq!((known.remaining, known.windows()[0].reset_at), (52, end));
        assert!(!budgets.alone());
        let mut fresh = Budgets::default();
        fresh.report(quota(96, 52, 1_000), t0, t0, own(1, 1));
        assert_eq!(
            fresh.known(t0),
            Known::Unknown,
            "a period no answer placed before says nothing when over on arrival"
        );
    }

    /// Found by the simulation explorer's soak (seed 14750, 32 instances, backends a second
    /// ahead of the limiter): an answer dated after its period's end, to a request sent after
    /// that end too, was ignored; the process knew no budget and sent probe after probe.
    #[test]
    fn an_answer_to_a_request_sent_after_its_periods_end_places_the_end_a_second_later() {
        let t0 = Instant::now();
        let sent_after_end = Own {
            answered_sent_at: Some(t0),
            ..own(1, 1)
        };
        let mut budgets = Budgets::default();
        budgets.report(quota(96, 80, 1_000), t0, t0, sent_after_end);
        let known = budget(&budgets, t0);
        assert_eq!(
            (known.remaining, known.windows()[0].reset_at),
            (80, t0 + secs(1))
        );
        let mut late = Budgets::default();
        let sent_before_end = Own {
            answered_sent_at: Some(t0),
            ..own(1, 1)
        };
        let answered = t0 + secs(2);
        late.report(
            quota(96, 80, 1_000),
            t0 + secs(1),
            answered,
            sent_before_end,
        );
        assert_eq!(
            late.known(answered),
            Known::Unknown,
            "a late answer to a request sent before the end says nothing"
        );
    }

    /// Found by the simulation explorer's soak (seed 18652, 32 instances): the service's clock
    /// stepped forward by two whole periods, so that a fresh period ended where the spent one
    /// had; its answers read as the old period's, whose least `remaining` stayed the lowest,
    /// and the falls of the new one were counted from there: a fleet of 32 reckoned as 8.
    #[test]
    fn a_period_started_afresh_under_the_same_end_is_reckoned_afresh_and_carefully() {
        let t0 = Instant::now();
        let end = t0 + secs(10);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let sent_at = |sent: u64, ms: u64| Own {
            answered_sent_at: Some(at(ms)),
            ..own(sent, 1)
        };
        let mut budgets = Budgets::default();
        budgets.report(quota(96, 95, 1_000), end, at(0), sent_at(1, 0));
        budgets.report(quota(96, 63, 1_000), end, at(1), sent_at(2, 1));
        assert_eq!(budgets.instances(), 32.0);
        budgets.report(quota(96, 95, 1_000), end, at(5_000), sent_at(3, 5_000));
        budgets.report(quota(96, 82, 1_000), end, at(6_000), sent_at(4, 6_000));
        budgets.report(quota(96, 57, 1_000), end, at(7_000), sent_at(5, 7_000));
        assert_eq!(
            budgets.instances(),
            32.0,
            "expected the fleet reckoned before the period started afresh to stay the least"
        );
        assert_eq!(
            budget(&budgets, at(7_000)).remaining,
            57,
            "what is left stays the least seen"
        );
        // An earlier request's answer arriving late with more left changes nothing.
        budgets.report(quota(96, 70, 1_000), end, at(7_100), sent_at(5, 6_500));
        assert_eq!(budget(&budgets, at(7_100)).remaining, 57);
        assert_eq!(budgets.instances(), 32.0);
    }

    /// Found by the simulation explorer (seed 1697, 16 instances started apart): a process
    /// saw 15 others' first requests of a period, then only falls its own requests explained
    /// while the others waited their turn, and took itself for one of one, then for alone.
    #[test]
    fn others_seen_as_a_period_begins_are_counted_and_waited_for_until_it_ends() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(160, 100, 970), t0 + secs(1), t0, own(1, 1));
        let (begun, end) = (t0 + secs(2), t0 + secs(31));
        budgets.report(quota(160, 144, 1_000), end, begun, own(2, 1));
        assert_eq!(budgets.instances(), 16.0);
        for sent in 3..20 {
            let (left, at) = (144 - (sent - 2), begun + secs(sent));
            budgets.report(quota(160, left, 1_000), end, at, own(sent, 1));
        }
        assert!(!budgets.alone(), "expected the others to be waited for");
        assert_eq!(
            budgets.instances(),
            16.0,
            "expected the others that began the period to stay counted in it"
        );
        // The next period, its answers over 4 s: alone once the others' first requests could
        // have come, a second and their place in the stagger after its first request.
        let next = end + secs(1);
        for sent in 20..30 {
            let left = 160 - (sent - 19);
            let at = next + Duration::from_millis(400 * (sent - 19));
            budgets.report(quota(160, left, 1_030), end + secs(30), at, own(sent, 1));
        }
        assert!(
            budgets.alone(),
            "expected a later period whose falls its own requests explain to be its own"
        );
    }

    #[test]
    fn a_fall_its_own_requests_explain_keeps_a_process_alone() {
        let t0 = Instant::now();
        let end = t0 + secs(60);
        let mut budgets = Budgets::default();
        assert!(budgets.alone());
        budgets.report(quota(60, 59, 1_000), end, t0, own(1, 1));
        // Two more sent, one with another still on the wire: each fall is its own.
        budgets.report(quota(60, 57, 1_000), end, t0, own(3, 2));
        budgets.report(quota(60, 58, 1_000), end, t0, own(3, 1));
        assert!(budgets.alone());
        assert_eq!(budgets.instances(), 1.0);
    }

    #[test]
    fn a_fall_its_own_requests_do_not_explain_ends_the_unpaced_calls() {
        let t0 = Instant::now();
        let end = t0 + secs(60);
        let mut budgets = Budgets::default();
        budgets.report(quota(60, 59, 1_000), end, t0, own(1, 1));
        // One more request of this process, and the budget fell by four.
        budgets.report(quota(60, 55, 1_000), end, t0, own(2, 1));
        assert!(!budgets.alone());
        assert_eq!(budgets.instances(), 4.0);
    }

    #[test]
    fn a_period_others_spent_as_it_began_is_shared_by_a_running_process() {
        let t0 = Instant::now();
        let mut budgets = Budgets::default();
        budgets.report(quota(60, 59, 1_000), t0 + secs(60), t0, own(1, 1));
        budgets.report(quota(60, 58, 1_000), t0 + secs(60), t0, own(2, 1));
        // The next period's first answer: 5 spent, only this one request of this process.
        let later = t0 + secs(61);
        budgets.report(quota(60, 55, 1_060), t0 + secs(120), later, own(3, 1));
        assert!(!budgets.alone());
        assert_eq!(budgets.instances(), 5.0);
    }

    #[test]
    fn a_new_process_that_finds_the_period_partly_spent_is_not_told_others_spend_it() {
        let t0 = Instant::now();
        let end = t0 + secs(60);
        let mut budgets = Budgets::default();
        // Spent before this process's first request: by others, or by its own earlier run.
        budgets.report(quota(60, 40, 1_000), end, t0, own(1, 1));
        assert!(budgets.alone());
        budgets.report(quota(60, 30, 1_000), end, t0, own(2, 1));
        assert!(
            !budgets.alone(),
            "expected a fall of 10 for one request of its own to show others"
        );
    }
}
