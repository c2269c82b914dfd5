//! The rate discipline: every request of every client on one key waits here until the service's
//! rate limits allow it, and every response head reports back here.
//!
//! One idea per file: [`budget`] keeps the budgets of the windows the headers report; [`gate`]
//! is the cooldown after a response that asks for quiet; [`pacer`] decides whether a request
//! may go; [`line`](mod@line) keeps held requests first in first out; [`registry`] gives
//! every client of one key in a process the same state; [`store`] is the state a fleet shares
//! (in Redis, with the `redis` feature), and [`lease`] the share of it this process spends
//! without a round trip each. The request path sees only [`RateLimiter`] and its
//! [`Permit`].
//!
//! This module reads response heads through `headers` and time through `clock`, and imports
//! nothing else of the crate: it says why a request is held ([`Held`]), and `execute` makes
//! that an error. The backoff of its cooldown comes from the caller, as a function.

mod budget;
mod gate;
mod identity;
mod lease;
mod line;
mod lock;
mod pacer;
#[cfg(feature = "redis")]
mod redis;
mod registry;
mod store;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Once};

pub(crate) use lock::lock;
use std::task::Poll;
use std::time::Duration;

use http::StatusCode;
use tokio::sync::Notify;
use tokio::time::Instant;
use url::Url;

use crate::clock::{self, Clock, ServerClock, ServerTime};
use crate::headers::{self, Head, Quiet, Quota, QuotaReading, ResetGiven};
use budget::{Budgets, Known, Own};
use gate::Gate;
pub(crate) use identity::is_loopback;
use lease::{Grant, Lease};
use line::{Line, Turn};
pub(crate) use pacer::Hold;
pub use pacer::Pacing;
use pacer::{Decision, View, Wire};
#[cfg(feature = "redis")]
pub(crate) use redis::{
    Topology as RedisTopology, cluster_client as redis_cluster_client, store as redis_store,
};
pub use registry::RateLimitScope;
pub(crate) use store::SharedStore;
use store::{Exchange, Heard, Outcome, Present, Seen, Told, Verdict, WindowReport};

/// A hold at least this long is logged at INFO; shorter ones at DEBUG.
const NOTICEABLE_HOLD: Duration = Duration::from_secs(1);

/// At most one hold a key's state logs at INFO in this time: a fleet paced call by call would
/// otherwise log every call.
const NOTICE_EVERY: Duration = Duration::from_secs(10);

/// A request that goes alone to find out the budget.
const PROBE: Decision = Decision::Go { probe: true };

/// How long an instance whose first admission found no state, while others listen, waits for
/// their answers to its ask for a quiet: a Redis that evicts the state as soon as it is
/// written keeps no cooldown for instances that start during one.
const ASK_FOR: Duration = Duration::from_millis(50);

/// Independent instances that the discipline keeps from a ban without shared state, against a
/// service that bans at the tenth request inside one `Retry-After`.
const CONTRACT_INSTANCES: f64 = 9.0;

/// One key's rate-limit state, shared by every client that uses it.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Held requests wait in line here.
    line: Line,
    /// Wakes the first held request when a response changes what is known.
    changed: Notify,
    /// Wakes a first admission waiting to hear how many instances listen on the key.
    counted: Notify,
    clock: Clock,
}

/// One key's state in this process, by concern.
#[derive(Debug, Default)]
struct State {
    gate: Gate,
    budgets: Budgets,
    wire: Wire,
    server_clock: ServerClock,
    /// The lowest `remaining` of the newest period any response reported.
    latest: Option<Quota>,
    store: Exchange,
    /// The first in line is waiting for a change (its last decision was a hold).
    front_waiting: bool,
    warned_not_sole: bool,
    warned_fleet: bool,
    /// When a hold was last logged at INFO.
    noticed_at: Option<Instant>,
}

impl Shared {
    fn new() -> Self {
        Self {
            state: Mutex::default(),
            line: Line::new(),
            changed: Notify::new(),
            counted: Notify::new(),
            clock: Clock::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Logs that `operation` is held by `hold` for `wait` (`None`: until an answer) from `now`:
    /// at INFO a wait a user would notice, so that a CLI is not silent, one in
    /// [`NOTICE_EVERY`] at most; the others at DEBUG.
    fn log_hold(&self, operation: &'static str, hold: Hold, wait: Option<Duration>, now: Instant) {
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

    /// Another instance met a quiet of `wait`, told through the store: every request on the
    /// key holds as long, as for the fleet's hold, and the lease is void.
    fn heard_quiet(&self, wait: Duration, store: &SharedStore, name: &str) {
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

    /// Another instance, which found no state, asks for the quiet this one keeps: what holds
    /// every request here, a cooldown or a spent window, is told to every instance.
    fn asked(&self, store: &Arc<SharedStore>, name: &str) {
        let now = Instant::now();
        let Some(left) = self.lock().quiet_left(now) else {
            return;
        };
        let (store, name) = (Arc::clone(store), name.to_owned());
        tokio::spawn(async move { store.publish(&name, Some(left)).await });
    }

    /// Tells the first in line that what is known changed, if it is waiting.
    fn wake(&self, front_waiting: bool) {
        if front_waiting {
            self.changed.notify_waiters();
        }
    }
}

/// A client's handle on its key's rate-limit state.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    shared: Arc<Shared>,
    pacing: Pacing,
    store: Option<StoreLink>,
}

/// The state the fleet shares for this client's key.
#[derive(Debug)]
struct StoreLink {
    store: Arc<SharedStore>,
    /// The key's state in the store.
    name: String,
    /// Hears the quiets other instances report, from the first call on (it needs a runtime).
    listening: Once,
    /// A call has waited to hear how many instances listen ([`RateLimiter::hear_the_fleet`]).
    counted_once: AtomicBool,
    /// Without the `redis` feature no link can be made, and no code for one is built.
    present: Present,
}

/// A permit's link to the fleet's store, by value uninhabited without the `redis` feature.
#[derive(Clone, Copy)]
struct Linked<'a> {
    link: &'a StoreLink,
    _present: Present,
}

impl std::ops::Deref for Linked<'_> {
    type Target = StoreLink;

    fn deref(&self) -> &StoreLink {
        self.link
    }
}

impl StoreLink {
    fn linked(&self) -> Linked<'_> {
        Linked {
            link: self,
            _present: self.present,
        }
    }

    /// Starts hearing, for `shared` as long as it lives, the quiets other instances report.
    fn listen(&self, shared: &Arc<Shared>) {
        self.listening.call_once(|| {
            let (weak, store, name) = (
                Arc::downgrade(shared),
                Arc::clone(&self.store),
                self.name.clone(),
            );
            let heard: Heard = Arc::new(move |told| {
                let Some(shared) = weak.upgrade() else {
                    return false;
                };
                match told {
                    Told::Quiet(wait) => shared.heard_quiet(wait, &store, &name),
                    Told::Listeners(listeners) => {
                        shared.lock().store.listeners = listeners;
                        shared.counted.notify_waiters();
                    }
                    Told::Uncounted => shared.counted.notify_waiters(),
                    Told::Asked => shared.asked(&store, &name),
                    Told::Nothing => {}
                }
                true
            });
            self.store.listen(&self.name, heard);
        });
    }

    /// Tells the store that this process's probe is over, unsent, so that another probes.
    fn probe_over(&self) {
        let (store, name) = (Arc::clone(&self.store), self.name.clone());
        tokio::spawn(async move { store.report(&name, &[], Outcome::Normal).await });
    }

    /// Gives `back` what a lease did not spend, with the next round trip.
    fn give_back(&self, back: Option<lease::Return>) {
        if let Some(back) = back {
            self.store.give_back(&self.name, back);
        }
    }
}

/// What a request asks the fleet's store.
#[derive(Debug, Clone, Copy)]
struct Ask {
    /// Whether to spend from the window budgets, or only obey the cooldown.
    metered: bool,
    /// What the store gave this process ([`Exchange::seen`]).
    seen: Seen,
    /// Admitted as if the store counted every instance: without its verdict, decided again.
    exact: bool,
    /// How many requests to admit at once: more than one asks for a lease.
    want: u64,
    /// Uninhabited without the `redis` feature, as [`StoreLink`]'s.
    _present: Present,
}

impl RateLimiter {
    pub(crate) fn new(
        scope: RateLimitScope,
        pacing: Pacing,
        base_url: &Url,
        key: &str,
        store: Option<Arc<SharedStore>>,
    ) -> Self {
        let shared = match scope {
            RateLimitScope::Process => registry::shared(base_url, key, Shared::new),
            RateLimitScope::Client => Arc::new(Shared::new()),
        };
        let store = store.map(|store| StoreLink {
            name: store.name(base_url, key),
            present: store.present,
            store,
            listening: Once::new(),
            counted_once: AtomicBool::new(false),
        });
        Self {
            shared,
            pacing,
            store,
        }
    }

    /// The lowest `remaining` of the newest window period any response reported.
    pub(crate) fn latest(&self) -> Option<Quota> {
        self.shared.lock().latest
    }

    /// How many instances are seen spending the key's budget, whether the fleet's shared
    /// state answered last (`None` without one), and how many times it lost the state.
    #[cfg(feature = "metrics")]
    pub(crate) fn fleet(&self) -> (f64, Option<bool>, u64) {
        let state = self.shared.lock();
        let live = self.store.as_ref().map(|_| state.store.live);
        (state.budgets.instances(), live, state.store.losses.total)
    }

    /// [`admit`](Self::admit) when the request may go at once, as most do: nobody in line, no
    /// fleet's store to ask, and this process's discipline lets it go. `None`, having changed
    /// nothing, when it may not: then `admit` decides.
    pub(crate) fn try_admit(&self) -> Option<(Permit<'_>, Waited)> {
        if self.store.is_some() {
            return None;
        }
        let shared = &*self.shared;
        let _turn = shared.line.try_join()?;
        let now = Instant::now();
        let mut state = shared.lock();
        let Decision::Go { probe } = state.decide(self.pacing, now, false) else {
            return None;
        };
        state.front_waiting = false;
        let (mut permit, _) = self.admitted(&mut state, now, probe);
        permit.handed_out = true;
        Some((permit, Waited::default()))
    }

    /// Waits, first in first out, until a request may be sent, and says how long it waited
    /// and why. Fails with what holds it ([`Held`]) at once when a hold would last past
    /// `give_up_at`, and at `give_up_at` when the request is still waiting then: in line, for
    /// another request's answer, or out a hold.
    pub(crate) async fn admit(
        &self,
        operation: &'static str,
        give_up_at: Instant,
    ) -> Result<(Permit<'_>, Waited), Held> {
        if let Some(link) = &self.store {
            link.listen(&self.shared);
            self.hear_the_fleet(link).await;
        }
        let mut logged = None;
        let mut holds = Holds::default();
        loop {
            let (permit, ask) = self
                .admit_here(operation, give_up_at, &mut logged, &mut holds)
                .await?;
            // The line's turn is left before the store's round trip: waiting for Redis holds
            // no other call. Held by the fleet, the call joins the line again, where the
            // fleet's hold now holds every call of the process.
            // Without a round trip to the store, the permit is handed out at the instant the
            // process admitted it: the clock need not be read again.
            let (permit, asked) = match ask {
                Some(ask) => (self.ask_store(permit, ask).await, true),
                None => (Some(permit), false),
            };
            if let Some(mut permit) = permit {
                // The last hold ended where the process admitted it, as it handed it out.
                let now = if asked {
                    Instant::now()
                } else {
                    permit.sent_at
                };
                permit.handed_out = true;
                permit.sent_at = now;
                return Ok((permit, holds.end(now)));
            }
        }
    }

    /// On the first call, waits, at most the store's timeout, until the store has said how
    /// many instances listen on the key, or that it cannot: a state the store loses as soon as
    /// it writes it counts no one, and a fleet starting at once would otherwise spend a window
    /// as if each instance were alone.
    async fn hear_the_fleet(&self, link: &StoreLink) {
        if link.counted_once.load(Ordering::Relaxed) {
            return;
        }
        let counted = self.shared.counted.notified();
        let mut counted = pin!(counted);
        counted.as_mut().enable();
        if self.shared.lock().store.listeners == 0 {
            let _ = tokio::time::timeout(link.store.timeout(), counted).await;
        }
        link.counted_once.store(true, Ordering::Relaxed);
    }

    /// [`admit`](Self::admit) by this process's own discipline: the permit, and what to ask
    /// the fleet's store, unless there is none or this process's lease admits it; what held
    /// it is added to `holds`.
    async fn admit_here(
        &self,
        operation: &'static str,
        give_up_at: Instant,
        logged: &mut Option<Hold>,
        holds: &mut Holds,
    ) -> Result<(Permit<'_>, Option<Ask>), Held> {
        let shared = &*self.shared;
        let turn = match self.join_line(give_up_at, holds).await {
            Ok(turn) => turn,
            Err((until, hold)) => {
                let now = Instant::now();
                return Err(self.throttled(
                    now,
                    Decision::Until(until, hold),
                    std::mem::take(holds).end(now),
                ));
            }
        };
        // Most requests go at once and need no wake-up: only one that will wait registers for
        // it, then decides again.
        {
            let now = Instant::now();
            let mut state = shared.lock();
            if let Decision::Go { probe } = state.decide(self.pacing, now, self.store.is_some()) {
                holds.at(now, None);
                state.front_waiting = false;
                return Ok(self.admitted(&mut state, now, probe));
            }
        }
        loop {
            let mut changed = pin!(shared.changed.notified());
            changed.as_mut().enable();
            let now = Instant::now();
            let decision = {
                let mut state = shared.lock();
                let decision = state.decide(self.pacing, now, self.store.is_some());
                holds.at(now, held_by(decision, state.store.remote));
                // Responses wake the first in line only while it waits.
                state.front_waiting = !matches!(decision, Decision::Go { .. });
                if let Decision::Go { probe } = decision {
                    return Ok(self.admitted(&mut state, now, probe));
                }
                decision
            };
            let (until, hold) = match decision {
                Decision::Until(until, hold) => (Some(until), hold),
                Decision::ForResponse(hold) => (None, hold),
                Decision::Go { .. } => unreachable!("admitted above"),
            };
            let too_long = match until {
                Some(until) => until > give_up_at,
                None => now >= give_up_at,
            };
            if hold == Hold::ZeroLimit || too_long {
                return Err(self.throttled(now, decision, std::mem::take(holds).end(now)));
            }
            if let Some(until) = until {
                turn.held(until, hold);
            }
            if *logged != Some(hold) {
                *logged = Some(hold);
                shared.log_hold(operation, hold, until.map(|until| until - now), now);
            }
            // Woken or timed out, either way: look again.
            let wake_at = until.map_or(give_up_at, |until| until.min(give_up_at));
            let _ = tokio::time::timeout_at(wake_at, changed).await;
        }
    }

    /// The request's turn in line, its wait for it added to `holds`; what holds the one ahead
    /// when that lasts past `give_up_at`.
    async fn join_line(
        &self,
        give_up_at: Instant,
        holds: &mut Holds,
    ) -> Result<Turn<'_>, (Instant, Hold)> {
        let line = &self.shared.line;
        if let Some(turn) = line.try_join() {
            // Nobody in line: no future to make.
            return Ok(turn);
        }
        let mut join = pin!(line.join(give_up_at));
        // Polled once first, so that a call with nobody ahead records no wait in line.
        match std::future::poll_fn(|cx| Poll::Ready(join.as_mut().poll(cx))).await {
            Poll::Ready(joined) => joined,
            Poll::Pending => {
                holds.at(Instant::now(), Some(HeldBy::Line));
                let joined = join.await;
                holds.at(Instant::now(), None);
                joined
            }
        }
    }

    /// Admits a request at `now` (a probe if `probe`): the permit, and what to ask the fleet's
    /// store, unless there is none or this process's lease admits it.
    fn admitted(&self, state: &mut State, now: Instant, probe: bool) -> (Permit<'_>, Option<Ask>) {
        state.wire.admit(now, probe);
        let mut permit = Permit {
            shared: &self.shared,
            pacing: self.pacing,
            generation: state.gate.generation(),
            probe,
            fleet: Fleet {
                link: self.store.as_ref().map(StoreLink::linked),
                period_known: (self.store.as_ref().and(state.latest))
                    .map(|quota| quota.reset.timestamp()),
                ..Fleet::default()
            },
            sent_at: now,
            handed_out: false,
            settled: false,
        };
        let Some(link) = self.store.as_ref() else {
            return (permit, None);
        };
        // The first request after the fleet's hold asks alone whether it is over,
        // so that the others do not all ask again and again.
        if let Some((_, hold)) = state.store.remote.take() {
            state.store.asking_again = Some(hold);
            permit.fleet.asks_again = true;
        }
        let metered = self.pacing != Pacing::Off && !state.budgets.unmetered();
        let leased = match &mut state.store.lease {
            Some(lease) if !permit.fleet.asks_again => lease.spend(now, metered),
            _ => None,
        };
        if let Some(admitted) = leased {
            permit.fleet.admitted = admitted;
            return (permit, None);
        }
        // What a lease whose time is over did not spend goes back with this
        // round trip.
        if let Some(lease) = state.store.lease.as_mut().filter(|l| l.over(now)) {
            link.give_back(lease.end());
        }
        let want = state.store.want(now);
        if want > 1 {
            state.store.leasing = true;
            permit.fleet.leasing = true;
        }
        let ask = Ask {
            metered,
            seen: state.store.seen,
            exact: state.store.exact(now),
            want,
            _present: link.present,
        };
        (permit, Some(ask))
    }

    /// The store's verdict on `ask`, and whether it found no state while others listen: a
    /// state lost as soon as it is written keeps no cooldown, so the others are asked for the
    /// quiet they keep, and given [`ASK_FOR`] to answer, before the probe goes.
    async fn verdict(&self, link: &StoreLink, ask: &Ask) -> (Option<Verdict>, bool) {
        let verdict = (link.store)
            .admit(&link.name, ask.metered, ask.seen, ask.want)
            .await;
        let found_none = verdict.as_ref().is_some_and(Verdict::opens_the_state)
            && self.shared.lock().store.listeners > 1;
        if found_none {
            link.store.publish(&link.name, None).await;
            tokio::time::sleep(ASK_FOR).await;
        }
        (verdict, found_none)
    }

    /// Asks the fleet's shared state whether the request the process admitted may go;
    /// `None` if the fleet holds it (the process then holds every request as long).
    async fn ask_store<'a>(&'a self, mut permit: Permit<'a>, ask: Ask) -> Option<Permit<'a>> {
        let link = self.store.as_ref()?;
        let asked = Instant::now();
        let (verdict, found_none) = self.verdict(link, &ask).await;
        let shared = permit.shared;
        let mut probe_over = false;
        let (permit, wake) = {
            let mut state = shared.lock();
            state.store.verdict(verdict.as_ref(), asked);
            let answered = permit.answered(&mut state);
            // A response of this process asked for quiet while the store decided, too late for
            // the store to have heard of it, or another instance answered the ask with one.
            let told = found_none && state.store.held_for_quiet(Instant::now());
            probe_over |= told;
            let quiet_since = state.gate.generation() != permit.generation || told;
            match verdict {
                Some(Verdict::Go {
                    probe,
                    lost,
                    lost_since,
                    admitted,
                    lease,
                }) if !quiet_since => {
                    if lost {
                        state.store.lost(asked);
                    }
                    if lost_since {
                        state.store.lost_since(asked);
                    }
                    // A loss this instance did not know of: a Redis that evicts the state loses
                    // it for every instance at once, and each probes only as rule N draws it. One
                    // that sits out tells the store its probe is over, so that another probes.
                    if lost && ask.exact && state.draw(Instant::now()) != PROBE {
                        probe_over = true;
                        (None, answered | permit.release(&mut state))
                    } else {
                        // The first admission of a state it did not hold: it may have been lost
                        // before this instance saw it, until a later admission finds it kept.
                        state.store.unconfirmed = admitted == 1;
                        permit.fleet.probe = probe;
                        permit.fleet.admitted = admitted;
                        self.take_lease(&mut state, link, lease, admitted, ask.metered, asked);
                        (Some(permit), answered)
                    }
                }
                // Not sent: the call waits out the quiet in line like the others; what it
                // leased goes back.
                Some(Verdict::Go {
                    admitted, lease, ..
                }) => {
                    if let Some(grant) = lease {
                        link.give_back(Lease::new(grant, admitted, ask.metered, asked).end());
                    }
                    (None, answered | permit.release(&mut state))
                }
                _ if quiet_since => (None, answered | permit.release(&mut state)),
                // Admitted trusting the store to count the others: not sent, so that the
                // process's own count of them decides it.
                None if ask.exact => (None, answered | permit.release(&mut state)),
                // Without an answer the process's own discipline decides alone, and the fleet
                // hears of the request later.
                None => {
                    permit.fleet.unadmitted = ask.metered;
                    (Some(permit), answered)
                }
                // It was not sent, and the process holds every request as long.
                Some(Verdict::Hold(wait, hold, spent)) => {
                    state.held_by_store(link, wait, hold, spent);
                    (None, answered | permit.release(&mut state))
                }
            }
        };
        shared.wake(wake);
        if probe_over {
            link.probe_over();
        }
        permit
    }

    /// The fleet's store admitted a request asked at `asked` as its `admitted`-th, with `lease`
    /// if it granted one. A request admitted alone starts the next lease's sizing, so that
    /// requests coming faster are leased; one admitted beside a lease, asked for or granted,
    /// leaves it be.
    fn take_lease(
        &self,
        state: &mut State,
        link: &StoreLink,
        lease: Option<Grant>,
        admitted: u64,
        metered: bool,
        asked: Instant,
    ) {
        let beside = state.store.leasing
            || (state.store.lease.as_ref()).is_some_and(|l| l.open(Instant::now()));
        if lease.is_some() || !beside {
            let grant = lease.unwrap_or_else(Grant::single);
            let mut lease = Lease::new(grant, admitted, metered, asked);
            if let Some(mut last) = state.store.lease.take() {
                link.give_back(last.end());
            }
            // A hold another call met meanwhile ends it at once.
            if state.store.remote.is_some() {
                link.give_back(lease.end());
            }
            if lease.open(asked) {
                tokio::spawn(give_back_when_over(
                    Arc::clone(&self.shared),
                    Arc::clone(&link.store),
                    link.name.clone(),
                    lease.first(),
                    lease.until(),
                ));
            }
            state.store.lease = Some(lease);
        }
    }

    /// What held back a request at `now` by `decision`, after it `waited`.
    fn throttled(&self, now: Instant, decision: Decision, waited: Waited) -> Held {
        let state = self.shared.lock();
        let (retry_after, hold) = match decision {
            Decision::Until(until, hold) => (until.saturating_duration_since(now), Some(hold)),
            Decision::ForResponse(hold) => (Duration::ZERO, Some(hold)),
            Decision::Go { .. } => (Duration::ZERO, None),
        };
        // Held by a 503's quiet: while the gate is closed, or while the one probe after it is
        // out. Every other hold is the rate limit's.
        let after_unavailable = matches!(state.gate.cause(), Some(Quiet::Unavailable(_)));
        let unavailable = match hold {
            Some(Hold::Cooldown) => after_unavailable,
            Some(Hold::Probe) => after_unavailable && state.gate.half_open(),
            _ => false,
        };
        Held {
            retry_after,
            quota: state.latest,
            unavailable,
            waited,
        }
    }
}

/// A random share of `wait`, up to half of it and at most a second, added to the end of a quiet
/// heard from another instance: every instance heard it at once, and ends it at a different
/// instant, rather than all probing the window together.
fn quiet_jitter(wait: Duration) -> Duration {
    let spread = (wait / 2).min(Duration::from_secs(1));
    spread.mul_f64(fastrand::f64())
}

/// Gives back at once what the lease numbered `first` did not spend when its time is over:
/// the other instances, held while the window's budget is out on leases, find it then, not
/// when this process next calls, which may be after the window's end.
async fn give_back_when_over(
    shared: Arc<Shared>,
    store: Arc<SharedStore>,
    name: String,
    first: u64,
    until: Instant,
) {
    tokio::time::sleep_until(until).await;
    let back = {
        let mut state = shared.lock();
        let lease = state.store.lease.as_mut().filter(|l| l.first() == first);
        lease.and_then(Lease::end)
    };
    if let Some(back) = back {
        store.give_back(&name, back);
        store.report(&name, &[], Outcome::Nothing).await;
    }
}

/// What held a request back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldBy {
    /// This process's discipline.
    Process(Hold),
    /// The fleet's shared state.
    Store,
    /// The requests ahead of it in line.
    Line,
}

/// What `decision` holds a request by, if anything; `remote` is the fleet's hold in force.
fn held_by(decision: Decision, remote: Option<(Instant, Hold)>) -> Option<HeldBy> {
    match decision {
        Decision::Go { .. } => None,
        Decision::Until(until, hold) if remote == Some((until, hold)) => Some(HeldBy::Store),
        Decision::Until(_, hold) | Decision::ForResponse(hold) => Some(HeldBy::Process(hold)),
    }
}

/// How long admission held a request in all, and the longest unbroken hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Waited {
    pub(crate) total: Duration,
    pub(crate) longest: Option<(HeldBy, Duration)>,
}

impl Waited {
    /// Adds the wait of a later admission of the same call.
    pub(crate) fn add(&mut self, later: Waited) {
        self.total += later.total;
        if let Some((by, lasted)) = later.longest {
            self.keep_longest(by, lasted);
        }
    }

    fn keep_longest(&mut self, by: HeldBy, lasted: Duration) {
        if lasted > self.longest.map_or(Duration::ZERO, |(_, longest)| longest) {
            self.longest = Some((by, lasted));
        }
    }
}

/// The holds of one admission as they come, one unbroken stretch at a time. Only holds count:
/// the time to decide, or to ask the fleet's store, is not a hold.
#[derive(Default)]
struct Holds {
    current: Option<(HeldBy, Instant)>,
    waited: Waited,
}

impl Holds {
    /// From `now` on the request is held by `by` (`None`: not held).
    fn at(&mut self, now: Instant, by: Option<HeldBy>) {
        if self.current.map(|(held_by, _)| held_by) == by {
            return;
        }
        if let Some((held_by, since)) = self.current.take() {
            let lasted = now - since;
            self.waited.total += lasted;
            self.waited.keep_longest(held_by, lasted);
        }
        self.current = by.map(|by| (by, now));
    }

    fn end(mut self, now: Instant) -> Waited {
        self.at(now, None);
        self.waited
    }
}

/// A request the rate discipline would hold past the instant its call gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// How long it would still be held.
    pub(crate) retry_after: Duration,
    /// The latest quota any response reported.
    pub(crate) quota: Option<Quota>,
    /// Held by the quiet a 503 asked for, not by the rate limit.
    pub(crate) unavailable: bool,
    /// How long it was held before it gave up.
    pub(crate) waited: Waited,
}

impl State {
    /// Whether a request may go at `now`; `shared_state`: the client has a fleet's store.
    fn decide(&mut self, pacing: Pacing, now: Instant, shared_state: bool) -> Decision {
        // A store that counts every instance ([`Exchange::exact`]) leaves none to count;
        // otherwise, as without one, this process counts the others itself, as at least the
        // instances the store last said listen.
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
    fn held_by_store(
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

    /// How long every request here still holds, by what the service told this process, for a
    /// quiet or a spent window. What others told it is theirs to tell: told again, each
    /// hearing's jitter would lengthen it.
    fn quiet_left(&self, now: Instant) -> Option<Duration> {
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

    /// The instances this process counts on the key itself: at least as many as the store
    /// last said listen.
    fn uncounted(&self) -> f64 {
        self.budgets.instances().max(self.store.listeners as f64)
    }

    /// Rule N's draw, for the period at `now`, among the instances this process counts.
    fn draw(&mut self, now: Instant) -> Decision {
        let instances = self.uncounted();
        self.store.periods.draw(instances, now)
    }

    /// Warns once when others are seen spending the key beside a process paced as its only
    /// user, and once when they are more than the contract keeps from a ban without shared
    /// state.
    fn warn_of_others(&mut self, pacing: Pacing, shared_state: bool) {
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

    /// This process's own requests as the answer to one sent at `sent_at` arrives.
    /// The most own requests the period a response `reading` reports (at `at`) can have
    /// counted.
    fn own_in_period(&self, reading: &QuotaReading, at: Instant) -> u64 {
        match reading {
            QuotaReading::Read(quota, _) => self.budgets.own_in_period(quota, at, self.wire.sent),
            _ => self.wire.sent,
        }
    }

    fn own(&self, sent_at: Instant) -> Own {
        Own {
            sent: self.wire.sent,
            in_flight: self.wire.in_flight,
            answered_sent_at: Some(sent_at),
        }
    }

    fn remember(&mut self, quota: Quota) {
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

/// What one answer's window report asks of the fleet's store.
#[derive(Default)]
struct Read {
    /// The report to send at once.
    report: Option<WindowReport>,
    /// The request was admitted before this process knew of the period it was counted in.
    straddles: bool,
    /// How long the window is, as the budgets reckon it.
    #[cfg(feature = "metrics")]
    length: Option<Duration>,
}

/// What a response head said about the rate limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadReport {
    pub(crate) quota: Option<Quota>,
    /// The wait `Retry-After` asked for, read on the service's clock.
    pub(crate) retry_after: Option<Duration>,
    /// The quiet the response asks of every request on the key.
    pub(crate) quiet: Option<Quiet>,
    /// Seconds the service's clock, as read from `Date`, is ahead of the local one.
    pub(crate) clock_offset: Option<f64>,
    /// How long the window of `quota` is, as the budgets reckon it; `None` without a quota,
    /// or for one whose period was over on arrival.
    #[cfg(feature = "metrics")]
    pub(crate) window: Option<Duration>,
}

/// A request admitted to the wire. Until its response head is reported it counts against the
/// budget; dropped unreported (cancelled, timed out, connection lost), it counts as spent,
/// since the service may have counted it.
pub(crate) struct Permit<'a> {
    shared: &'a Shared,
    pacing: Pacing,
    /// The gate's generation when the request was admitted: only an answer to a request sent
    /// after the gate last closed may open it.
    generation: u64,
    probe: bool,
    fleet: Fleet<'a>,
    /// When it was handed to the caller, which sends the request then.
    sent_at: Instant,
    /// Handed to the caller, which may send the request: dropped unreported from then on, it
    /// counts as spent. Dropped before, its call was cancelled while the fleet's store
    /// decided, and it spends nothing here.
    handed_out: bool,
    settled: bool,
}

/// What the fleet's store knows of a permit.
#[derive(Default)]
struct Fleet<'a> {
    link: Option<Linked<'a>>,
    /// The fleet admitted this request to find out a period it does not know: the others
    /// wait for its report.
    probe: bool,
    /// This request asks the store whether the fleet's hold is over: the others wait for
    /// its answer.
    asks_again: bool,
    /// This request asks the store for a lease: the others ask for themselves meanwhile.
    leasing: bool,
    /// The fleet's number for this admission.
    admitted: u64,
    /// The latest period this process knew of when it admitted the request.
    period_known: Option<i64>,
    /// Sent without the store's admission, which did not answer: the fleet's budgets spend it
    /// once it is answered, when the service has counted it.
    unadmitted: bool,
}

/// What a response head said that the fleet's store must hear at once.
pub(crate) struct Tell<'a> {
    link: Linked<'a>,
    report: Option<WindowReport>,
    outcome: Outcome,
}

impl Tell<'_> {
    /// Puts the report in the store's outbox, and waits for the first try to deliver it
    /// unless there is nothing the others wait for.
    pub(crate) async fn send(self) {
        let Self {
            link,
            report,
            outcome,
        } = self;
        if outcome == Outcome::Nothing {
            let (store, name) = (Arc::clone(&link.store), link.name.clone());
            tokio::spawn(async move { store.report(&name, report.as_slice(), outcome).await });
        } else {
            link.store
                .report(&link.name, report.as_slice(), outcome)
                .await;
        }
    }
}

impl<'a> Permit<'a> {
    /// The response head arrived at `at`: read the service's clock, quota and `Retry-After`,
    /// close the gate if the response asks for quiet (for at least `backoff` of the quiet
    /// responses in a row before it), then let held requests look again. The
    /// fleet hears of it at once when other instances wait for it (a quiet, or the fleet's
    /// probe), and when the request was admitted before this process knew of the period it
    /// was counted in (without the call waiting for it), otherwise with this process's next
    /// admission. Either way the report waits in the store's outbox until the store takes it:
    /// neither this call's cancellation nor a store that does not answer in time loses it.
    #[cfg(any(fuzzing, petstore_internals))]
    pub(crate) async fn at_head(
        self,
        status: StatusCode,
        head: &Head<'_>,
        at: Instant,
        backoff: &(dyn Fn(u32) -> Duration + Sync),
    ) -> HeadReport {
        let (said, tell) = self.heard(status, head, at, backoff);
        if let Some(tell) = tell {
            tell.send().await;
        }
        said
    }

    /// `at_head` up to telling the fleet: what the head said, and what the
    /// fleet must hear, if anything. Not async, so that a caller without a fleet to tell
    /// keeps no future for it, nor the head, across an await.
    pub(crate) fn heard(
        self,
        status: StatusCode,
        head: &Head<'_>,
        at: Instant,
        backoff: &(dyn Fn(u32) -> Duration + Sync),
    ) -> (HeadReport, Option<Tell<'a>>) {
        let store = self.fleet.link;
        self.tell_if_unadmitted();
        let (said, tell) = self.settle(status, head, at, backoff);
        let tell = store.zip(tell).map(|(link, (report, outcome))| Tell {
            link,
            report,
            outcome,
        });
        (said, tell)
    }

    /// [`at_head`](Self::at_head) in this process; what to tell the fleet at once, if anything.
    fn settle(
        mut self,
        status: StatusCode,
        head: &Head<'_>,
        at: Instant,
        backoff: &(dyn Fn(u32) -> Duration + Sync),
    ) -> (HeadReport, Option<(Option<WindowReport>, Outcome)>) {
        let shared = self.shared;
        let mut report = None;
        let mut straddles = false;
        #[cfg(feature = "metrics")]
        let mut length = None;
        let (wake, retry_after, quiet, urgent, quota, clock_offset, quiet_until) = {
            let mut state = shared.lock();
            let server = state
                .server_clock
                .read(head.date.first(), at, &shared.clock);
            // Without `Date` the reading is the local clock's own: no offset.
            let clock_offset = server.offset(&shared.clock);
            let reading = Quota::read(head, &server);
            let quota = reading.quota();
            let retry_after = headers::retry_after(head, &server);
            let quiet = headers::quiet(status, retry_after);
            let urgent = self.fleet.link.is_some() && (self.fleet.probe || quiet.is_some());
            match reading {
                QuotaReading::Read(quota, given) => {
                    let read = self.report_read(&mut state, quota, given, &server, at, urgent);
                    (report, straddles) = (read.report, read.straddles);
                    #[cfg(feature = "metrics")]
                    {
                        length = read.length;
                    }
                }
                // A 429 shows the key is metered, whatever the headers say.
                QuotaReading::Absent if status == StatusCode::TOO_MANY_REQUESTS => {
                    state.budgets.report_metered();
                }
                // A gateway's error page says nothing of the service's headers (rule S).
                QuotaReading::Absent if status.is_server_error() => {}
                QuotaReading::Absent => {
                    let own = state.own(self.sent_at);
                    state.budgets.report_none(at, own);
                }
                QuotaReading::Unreadable => state.budgets.report_unreadable(),
            }
            // The gate closes before this request stops counting, so that no held request
            // slips through between the two.
            let quiet_until = self.heed(&mut state, quiet, reading, at, backoff);
            state.warn_of_others(self.pacing, self.fleet.link.is_some());
            let wake = self.release(&mut state);
            (
                wake,
                retry_after,
                quiet,
                urgent,
                quota,
                clock_offset,
                quiet_until,
            )
        };
        shared.wake(wake);
        let tell = (urgent || straddles).then(|| {
            let outcome = match quiet_until {
                Some(until) => Outcome::Quiet(until.saturating_duration_since(Instant::now())),
                None if urgent => Outcome::Normal,
                // An answer to an older request never ends the fleet's probe.
                None => Outcome::Nothing,
            };
            (report, outcome)
        });
        let head = HeadReport {
            quota,
            retry_after,
            quiet,
            clock_offset,
            #[cfg(feature = "metrics")]
            window: length,
        };
        (head, tell)
    }

    /// Closes the gate for the `quiet` a response that arrived at `at` asked for (for at least
    /// `backoff` of the quiet responses in a row before it), or opens it: until when it is
    /// closed. The `reading` of the response's quota may show others calling. The lease is void in the quiet: what it did not spend goes back with the report
    /// of it.
    fn heed(
        &self,
        state: &mut State,
        quiet: Option<Quiet>,
        reading: QuotaReading,
        at: Instant,
        backoff: &(dyn Fn(u32) -> Duration + Sync),
    ) -> Option<Instant> {
        let Some(quiet) = quiet else {
            state.gate.open(self.generation);
            return None;
        };
        state.gate.close(at, quiet, self.generation, backoff);
        if matches!(quiet, Quiet::RateLimited(_))
            && state
                .gate
                .shows_others(&reading, state.wire.sent, state.own_in_period(&reading, at))
        {
            state.gate.contest();
        }
        if let Some(link) = self.fleet.link {
            link.give_back(state.store.lease.as_mut().and_then(Lease::end));
        }
        state.gate.closed_until(at)
    }

    /// What a response whose head arrived at `at` reported of a window (`quota`, its reset
    /// given as `given`) changes in this process, and what the fleet's store must hear at once.
    fn report_read(
        &self,
        state: &mut State,
        quota: Quota,
        given: ResetGiven,
        server: &ServerTime,
        at: Instant,
        urgent: bool,
    ) -> Read {
        let mut read = Read::default();
        // A reset in seconds from now is placed from the answer's arrival, whatever clock
        // wrote its `Date`: counted when the answer was written, and rounded up, the window
        // has ended by then.
        let unix = quota.reset.timestamp();
        let (reset_at, latest_end) = match given {
            ResetGiven::At => (state.server_clock).place_reset(server, unix, self.sent_at),
            ResetGiven::In(secs) => {
                let end = clock::after_from(at, Duration::from_secs(secs));
                (end, end)
            }
        };
        let own = state.own(self.sent_at);
        let period = match given {
            ResetGiven::At => unix,
            // Named on the local clock, where its end is placed whatever the
            // `Date` of the backend that answered.
            ResetGiven::In(_) => self.shared.clock.second_of(reset_at),
        };
        (state.budgets).report_placed(quota, period, reset_at, latest_end, at, own);
        state.remember(quota);
        // A window the lease was not taken from, the next period of one: the
        // service counts what the lease would spend there, and the store, which
        // opens that window from this report, does not. The lease is void.
        if let Some(link) = self.fleet.link {
            let lease = state.store.lease.as_mut().filter(|l| !l.covers(unix));
            link.give_back(lease.and_then(Lease::end));
        }
        if self.fleet.link.is_some() && reset_at > at {
            (state.store.periods).saw(quota.limit, unix, reset_at, at);
            let window = WindowReport {
                limit: quota.limit,
                remaining: quota.remaining,
                period: unix,
                ends_at: reset_at,
                admitted: self.fleet.admitted,
                sent_at: self.sent_at,
            };
            // Admitted before this process knew of the period: the store, which
            // may have counted it in the period before, counts it in this one
            // only from this report, and must hear of it before the rest of the
            // fleet spends the period's budget.
            read.straddles = self
                .fleet
                .period_known
                .is_none_or(|known| known < window.period);
            match self.fleet.link {
                Some(_) if urgent || read.straddles => read.report = Some(window),
                Some(link) => link.store.queue(&link.name, window),
                None => {}
            }
        }
        #[cfg(feature = "metrics")]
        {
            read.length = state.budgets.length_of(period);
        }
        read
    }

    /// The store answered, or failed to: the requests that waited for this one's answer look
    /// again. Whether the first in line waits to hear of it.
    fn answered(&mut self, state: &mut State) -> bool {
        if std::mem::take(&mut self.fleet.leasing) {
            state.store.leasing = false;
        }
        if !std::mem::take(&mut self.fleet.asks_again) {
            return false;
        }
        state.store.asking_again = None;
        state.front_waiting
    }

    /// Tells the fleet of a request sent without its store's admission, now answered or given
    /// up on.
    fn tell_if_unadmitted(&self) {
        if let Some(link) = self.fleet.link.filter(|_| self.fleet.unadmitted) {
            link.store.admitted_here(&link.name);
        }
    }

    /// The request never left: no connection could be made.
    pub(crate) fn not_sent(mut self) {
        let shared = self.shared;
        let wake = self.release(&mut shared.lock());
        shared.wake(wake);
    }

    /// Stops counting the request in flight; whether the first in line waits to hear of it.
    fn release(&mut self, state: &mut State) -> bool {
        self.settled = true;
        state.wire.release(self.probe);
        state.front_waiting
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let shared = self.shared;
        let wake = {
            let mut state = shared.lock();
            if self.handed_out {
                state.budgets.spend_on_doubt();
            }
            self.answered(&mut state) | self.release(&mut state)
        };
        if self.handed_out {
            self.tell_if_unadmitted();
        }
        shared.wake(wake);
    }
}
