//! One key's rate-limit state in this process, and the decision whether a request goes now.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::budget::{Budgets, Known, Own};
use super::exchange::Exchange;
use super::gate::Gate;
use super::lease::Lease;
use super::line::Line;
use super::link::StoreLink;
use super::lock::lock;
use super::pacer::{self, Decision, Hold, Pacing, View, Wire};
use super::store::{self, SharedStore};
use crate::clock::{self, Clock, ServerClock};
use crate::headers::{Quota, QuotaReading};

/// A hold at least this long is logged at INFO; shorter ones at DEBUG.
const NOTICEABLE_HOLD: Duration = Duration::from_secs(1);

/// At most one INFO hold log per key in this time, or a fleet paced call by call logs every call.
const NOTICE_EVERY: Duration = Duration::from_secs(10);

/// A request that goes alone to find out the budget.
pub(super) const PROBE: Decision = Decision::Go { probe: true };

/// Instances sharing nothing that contract 1 keeps from a tenth request in one `Retry-After`.
const CONTRACT_INSTANCES: f64 = 9.0;

/// One key's rate-limit state, shared by every client that uses it.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    pub(super) line: Line,
    /// Wakes the first held request when a response changes what is known.
    pub(super) changed: Notify,
    /// Wakes a first admission waiting to hear how many instances listen on the key.
    pub(super) counted: Notify,
    pub(super) clock: Clock,
}

/// One key's state in this process, by concern.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) gate: Gate,
    pub(super) budgets: Budgets,
    pub(super) wire: Wire,
    pub(super) server_clock: ServerClock,
    /// The lowest `remaining` of the newest period any response reported.
    pub(super) latest: Option<Quota>,
    pub(super) store: Exchange,
    /// The first in line is waiting for a change (its last decision was a hold).
    pub(super) front_waiting: bool,
    warned_not_sole: bool,
    warned_fleet: bool,
    noticed_at: Option<Instant>,
}

impl Shared {
    pub(super) fn new() -> Self {
        Self {
            state: Mutex::default(),
            line: Line::new(),
            changed: Notify::new(),
            counted: Notify::new(),
            clock: Clock::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Logs `operation`'s hold for `wait` (`None`: until an answer): one a user would notice at
    /// INFO, so that a CLI is not silent, one in [`NOTICE_EVERY`] at most; others at DEBUG.
    pub(super) fn log_hold(
        &self,
        operation: &'static str,
        hold: Hold,
        wait: Option<Duration>,
        now: Instant,
    ) {
        // In seconds to the millisecond; no field when the hold lasts until an answer.
        let wait_s = wait.map(|wait| wait.as_millis() as f64 / 1000.0);
        let noticeable = wait.is_some_and(|wait| wait >= NOTICEABLE_HOLD);
        if noticeable && self.lock().notice(now) {
            tracing::info!(
                operation,
                reason = hold.describe(),
                wait_s,
                "holding request"
            );
        } else {
            tracing::debug!(
                operation,
                reason = hold.describe(),
                wait_s,
                "holding request"
            );
        }
    }

    /// The store told of another instance's quiet of `wait`: every request here holds as long,
    /// as for the fleet's hold, and the lease is void.
    pub(super) fn heard_quiet(&self, wait: Duration, store: &SharedStore, name: &str) {
        let until = clock::after(wait + quiet_jitter(wait));
        let wake = {
            let mut state = self.lock();
            if state.store.remote.is_some_and(|(end, _)| end >= until) {
                return;
            }
            tracing::debug!(
                wait_ms = wait.as_millis() as u64,
                "another instance met a quiet"
            );
            state.store.remote = Some((until, Hold::Cooldown));
            if let Some(back) = state.store.lease.as_mut().and_then(Lease::end) {
                store.give_back(name, back);
            }
            state.front_waiting
        };
        self.wake(wake);
    }

    /// An instance that found no state asks for the quiet kept: publishes [`State::quiet_left`].
    pub(super) fn asked(&self, store: &Arc<SharedStore>, name: &str) {
        let now = Instant::now();
        let Some(left) = self.lock().quiet_left(now) else {
            return;
        };
        let (store, name) = (Arc::clone(store), name.to_owned());
        tokio::spawn(async move { store.publish(&name, Some(left)).await });
    }

    /// Tells the first in line that what is known changed, if it is waiting.
    pub(super) fn wake(&self, front_waiting: bool) {
        if front_waiting {
            self.changed.notify_waiters();
        }
    }
}

/// Spreads the ends of a quiet all instances heard at once, so that they do not all probe together.
fn quiet_jitter(wait: Duration) -> Duration {
    let spread = (wait / 2).min(Duration::from_secs(1));
    spread.mul_f64(fastrand::f64())
}

impl State {
    /// Whether a request may go at `now`; `shared_state`: the client has a fleet's store.
    pub(super) fn decide(&mut self, pacing: Pacing, now: Instant, shared_state: bool) -> Decision {
        // A store counting every instance ([`Exchange::exact`]) leaves this process none to count.
        let (exact, metered) = (self.store.exact(now), pacing != Pacing::Off);
        let counted = self.uncounted();
        let view = View {
            gate: &self.gate,
            remote: self.store.remote.filter(|(until, _)| *until > now),
            known: self.budgets.known(now),
            instances: if exact { 1.0 } else { counted },
            others: counted > 1.0,
            wire: self.wire,
        };
        match (pacer::decide(&view, pacing, now), self.store.asking_again) {
            (Decision::Go { .. }, Some(hold)) => Decision::ForResponse(hold),
            (PROBE, None) if shared_state && !exact && metered => self.draw(now),
            (decision, _) => decision,
        }
    }

    /// The fleet's store holds every request of this process `wait` for `hold`; held by a
    /// spent window, `spent` tells of it. A lease is void meanwhile: its requests go back.
    pub(super) fn held_by_store(
        &mut self,
        link: &StoreLink,
        wait: Duration,
        hold: Hold,
        spent: Option<store::Spent>,
    ) {
        if let Some(spent) = spent {
            let now = Instant::now();
            let ends = clock::after_from(now, spent.ends_in);
            (self.store.periods).saw(spent.limit, spent.period, ends, now);
        }
        link.give_back(self.store.lease.as_mut().and_then(Lease::end));
        // Another instance's probe normally answers within milliseconds.
        let wait = match hold {
            Hold::Probe => wait.min(store::PROBE_POLL),
            _ => wait,
        };
        self.store.remote = Some((clock::after(wait), hold));
    }

    /// How long every request here still holds for a quiet or spent window the service told this
    /// process of. What others told it is theirs to tell: each retelling would add its jitter.
    pub(super) fn quiet_left(&self, now: Instant) -> Option<Duration> {
        let spent = match self.budgets.known(now) {
            Known::Budget(budget) => (budget.windows.iter())
                .filter(|w| w.remaining == 0)
                .filter_map(|w| w.ends.map(|span| span.reopens))
                .max(),
            _ => None,
        };
        [self.gate.closed_until(now), spent]
            .into_iter()
            .flatten()
            .max()
            .and_then(|until| until.checked_duration_since(now))
            .filter(|left| !left.is_zero())
    }

    /// The instances this process counts itself: at least as many as the store last said listen.
    fn uncounted(&self) -> f64 {
        self.budgets.instances().max(self.store.listeners as f64)
    }

    /// Rule N's draw, for the period at `now`, among the instances this process counts.
    pub(super) fn draw(&mut self, now: Instant) -> Decision {
        let instances = self.uncounted();
        self.store.periods.draw(instances, now)
    }

    /// Warns once when others spend the key of a process paced as its only user, and once when
    /// they are more than contract 1 keeps from a ban without shared state.
    pub(super) fn warn_of_others(&mut self, pacing: Pacing, shared_state: bool) {
        let instances = self.budgets.instances();
        if pacing == Pacing::Sole && !self.warned_not_sole && instances >= 2.0 {
            self.warned_not_sole = true;
            tracing::warn!(
                "the rate-limit budget falls faster than this process spends it: another \
                 client uses the key too; Pacing::Shared shares it without 429s"
            );
        }
        if !shared_state && !self.warned_fleet && instances > CONTRACT_INSTANCES {
            self.warned_fleet = true;
            tracing::warn!(
                instances,
                "the rate-limit budget falls as if {instances:.0} instances spent the key: more \
                 than {CONTRACT_INSTANCES} that share nothing can get it banned after a 429; \
                 share their rate-limit state with RedisState"
            );
        }
    }

    /// Whether a hold noticed at `now` is logged at INFO: one in [`NOTICE_EVERY`] at most.
    fn notice(&mut self, now: Instant) -> bool {
        let due = self
            .noticed_at
            .is_none_or(|at| now.saturating_duration_since(at) >= NOTICE_EVERY);
        if due {
            self.noticed_at = Some(now);
        }
        due
    }

    /// The most own requests the period a response `reading` reports (at `at`) can have counted.
    pub(super) fn own_in_period(&self, reading: &QuotaReading, at: Instant) -> u64 {
        match reading {
            QuotaReading::Read(quota, _) => self.budgets.own_in_period(quota, at, self.wire.sent),
            _ => self.wire.sent,
        }
    }

    /// This process's own requests as the answer to one sent at `sent_at` arrives.
    pub(super) fn own(&self, sent_at: Instant) -> Own {
        Own {
            sent: self.wire.sent,
            in_flight: self.wire.in_flight,
            answered_sent_at: Some(sent_at),
        }
    }

    pub(super) fn remember(&mut self, quota: Quota) {
        self.latest = match self.latest {
            Some(latest) if latest.reset > quota.reset => Some(latest),
            Some(latest) if latest.reset == quota.reset && latest.limit == quota.limit => {
                Some(Quota::new(
                    quota.limit,
                    latest.remaining.min(quota.remaining),
                    quota.reset,
                ))
            }
            _ => Some(quota),
        };
    }
}
