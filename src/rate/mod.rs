//! The rate discipline: every request of every client on one key waits here until the service's
//! rate limits allow it, and every response head reports back here.
//!
//! One idea per file: [`budget`], the budgets of the windows the headers report; [`gate`], the
//! cooldown a response asks for; [`pacer`], whether a request may go; [`state`], one key's state in
//! this process; [`line`](mod@line), held requests first in first out; [`registry`], one state per
//! key in a process; [`permit`], a request on the wire and its answer's report; [`held`], why and
//! how long a request was held; [`store`], the state a fleet shares (with the `redis` feature, in
//! Redis: `redis` runs its script, `topology` connects), asked through [`link`] and [`fleet`],
//! told through [`outbox`], heard in [`exchange`];
//! [`lease`], a share of it spent without a round trip each; [`identity`], the service a base URL
//! names. The request path sees only [`RateLimiter`] and its [`Permit`].
//!
//! Of the crate this module imports only `headers` and `clock`: it says why a request is held
//! ([`Held`]) for `execute` to make an error, and takes its cooldown's backoff as a function.

mod budget;
mod exchange;
mod fleet;
mod gate;
mod held;
mod identity;
mod lease;
mod line;
mod link;
mod lock;
mod outbox;
mod pacer;
mod permit;
#[cfg(feature = "redis")]
mod redis;
mod registry;
mod state;
mod store;
#[cfg(feature = "redis")]
mod topology;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::AtomicBool;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;
use url::Url;

use crate::headers::{Quiet, Quota};
pub(crate) use held::{Held, HeldBy, Waited};
use held::{Holds, held_by};
pub(crate) use identity::is_loopback;
use line::Turn;
use link::{Ask, StoreLink};
use pacer::Decision;
pub(crate) use pacer::Hold;
pub use pacer::Pacing;
use permit::Fleet;
pub(crate) use permit::{HeadReport, Permit};
#[cfg(feature = "redis")]
pub(crate) use redis::store as redis_store;
pub use registry::RateLimitScope;
use state::{Shared, State};
pub(crate) use store::SharedStore;
#[cfg(feature = "redis")]
pub(crate) use topology::{Topology as RedisTopology, cluster_client as redis_cluster_client};

/// A client's handle on its key's rate-limit state.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    shared: Arc<Shared>,
    pacing: Pacing,
    store: Option<StoreLink>,
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

    /// [`admit`](Self::admit) for a request that may go at once, as most do: nobody in line, no
    /// fleet's store, and the discipline lets it go. Else `None`, having changed nothing.
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

    /// Waits, first in first out, until a request may go; says how long and why. Fails with
    /// [`Held`] at once if a hold would outlast `give_up_at`, or at `give_up_at` if still waiting.
    pub(crate) async fn admit(
        &self,
        operation: &'static str,
        give_up_at: Instant,
    ) -> Result<(Permit<'_>, Waited), Held> {
        if let Some(link) = &self.store {
            link.listen(&self.shared);
            link.hear_the_fleet(&self.shared).await;
        }
        let mut logged = None;
        let mut holds = Holds::default();
        loop {
            let (permit, ask) = self
                .admit_here(operation, give_up_at, &mut logged, &mut holds)
                .await?;
            // The turn in line ends before the store's round trip: waiting for Redis holds no other
            // call. Held by the fleet, it rejoins the line, where that hold now holds every call.
            let (permit, asked) = match (ask, &self.store) {
                (Some(ask), Some(link)) => (link.ask(&self.shared, permit, ask).await, true),
                _ => (Some(permit), false),
            };
            if let Some(mut permit) = permit {
                // Without a round trip, the last hold ended at admission: no clock read needed.
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

    /// [`admit`](Self::admit) by this process's own discipline, what held it added to `holds`.
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
        // Most go at once; only a request that will wait registers for a wake-up and decides again.
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

    /// Its turn in line, the wait added to `holds`; or what holds the one ahead past `give_up_at`.
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
        // The first request after the fleet's hold asks alone whether it is over; others wait.
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
        // What a lease whose time is over did not spend goes back with this round trip.
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

    /// What held back a request at `now` by `decision`, after it `waited`.
    fn throttled(&self, now: Instant, decision: Decision, waited: Waited) -> Held {
        let state = self.shared.lock();
        let (retry_after, hold) = match decision {
            Decision::Until(until, hold) => (until.saturating_duration_since(now), Some(hold)),
            Decision::ForResponse(hold) => (Duration::ZERO, Some(hold)),
            Decision::Go { .. } => (Duration::ZERO, None),
        };
        // A 503's quiet holds while the gate is closed or its one probe is out; any other hold
        // is the rate limit's.
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
