//! The rate-limit state shared by every instance on a key, across hosts: the window budgets,
//! spent before each request, and the cooldown. [`SharedStore`] wraps a [`Store`] so that it is
//! never a single point of failure: each operation has a short timeout, and while the store fails,
//! calls go on under the process's own discipline (which always runs, and is the whole of it
//! without a store), with one `WARN` per outage and one try per [`RETRY_EVERY`].

// Without the `redis` feature no store exists, and the parts only a store uses go unused.
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use url::Url;

use super::lease::{Grant, Return};
use super::lock::lock;
use super::outbox::{News, Outbox, Outcome, Retrying, Taken, Unsent, WindowReport};
use super::pacer::Hold;
use crate::clock;

/// How long a store may take to answer, unless its owner sets another.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// While a store fails, how often one call tries it again.
pub(crate) const RETRY_EVERY: Duration = Duration::from_secs(1);

/// While another instance probes, how often a held request asks again.
pub(crate) const PROBE_POLL: Duration = Duration::from_millis(20);

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The fleet's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Send it: a `probe` learns a period the fleet does not know, and must report at once.
    /// `admitted` numbers it for its answer's reports; `lease` is the grant when `want` > 1.
    Go {
        probe: bool,
        /// The state this instance saw was lost (evicted, flushed, a failover): it probes.
        lost: bool,
        /// Another instance found lost, while it still admitted, the state that admitted this
        /// instance's requests: its admissions may be on the wire, counted by no window.
        lost_since: bool,
        admitted: u64,
        lease: Option<Grant>,
    },
    /// Hold it this long, for this reason; held by a spent window, that window.
    Hold(Duration, Hold, Option<Spent>),
}

/// A spent window, as the store told it; `period` is the service's reset, in unix seconds.
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

/// The highest admission number the store gave this process (1: it answered without one; 0:
/// never), and when it last admitted one: a store that holds no state or counts fewer lost it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) number: u64,
    pub(crate) admitted_at: Option<Instant>,
}

/// One admission as the store receives it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission<'a> {
    /// What the store has yet to hear.
    pub(crate) news: News<'a>,
    /// Whether budgets are spent, or only the cooldown obeyed (no pacing, or an unmetered key).
    pub(crate) metered: bool,
    /// What the store gave this process, by which a store finds it lost the state ([`Seen`]).
    pub(crate) seen: Seen,
    /// How many requests to admit at once, this one included: more than one asks for a lease.
    pub(crate) want: u64,
}

/// What the store tells an instance as it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Told {
    /// Another instance reported a quiet of this long.
    Quiet(Duration),
    /// The fleet's size: instances hearing the key's quiets; kept through a lost state or outage.
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

    /// Applies `admission.news`, then spends `want` from each window's current period, or holds.
    fn admit<'a>(
        &'a self,
        name: &'a str,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Verdict, String>>;

    /// Applies `news`.
    fn report<'a>(&'a self, name: &'a str, news: News<'a>) -> BoxFuture<'a, Result<(), String>>;

    /// Tells `heard` of each quiet reported for `name` from now on (even when the store loses the
    /// state), of each ask for one, and, once a [`RETRY_EVERY`], of how many instances listen.
    fn listen(&self, name: &str, heard: Heard);

    /// Tells every instance listening for `name` of a quiet this long; `None` asks for theirs.
    fn publish<'a>(
        &'a self,
        name: &'a str,
        quiet: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// A store with its timeout, health and waiting reports, shared by every client configured with it.
pub(crate) struct SharedStore {
    store: Arc<dyn Store>,
    timeout: Duration,
    health: Arc<Mutex<Health>>,
    outbox: Arc<Mutex<Outbox>>,
    pub(crate) present: Present,
}

/// Uninhabited without the `redis` feature: no store can be made, and paths using one compile out.
#[cfg(feature = "redis")]
pub(crate) type Present = ();
#[cfg(not(feature = "redis"))]
pub(crate) type Present = std::convert::Infallible;

#[derive(Debug, Default)]
struct Health {
    /// Set while the store has failed and not answered since: when to try it again.
    down: Option<Instant>,
    /// The smoothed round trip of the store's answers and its variation (RFC 6298).
    round_trip: Option<(Duration, Duration)>,
    /// Operations in a row that the store did not answer in time.
    timeouts: u32,
}

/// The most a store that answers slower than its timeout is waited for, as a multiple of it.
const MOST_STRETCH: u32 = 8;

impl Health {
    /// At least `timeout`; for a store seen slower, its round trip plus four variations (as TCP
    /// waits for an ack), doubled per timeout in a row, at most `MOST_STRETCH` times `timeout`:
    /// a slow store is waited for, and so stays exact, rather than given up on a second at a time.
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

    /// Notes that a request of `name` sent without the store's admission was answered (or given
    /// up on) now, and tells the store from a task of its own, as a report, so that the fleet
    /// spends it from the window it was sent in, not the one open at this process's next admission.
    pub(crate) fn admitted_here(self: &Arc<Self>, name: &str) {
        let now = Instant::now();
        lock(&self.outbox).put(name, Unsent::admitted_here(now), now);
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

    /// The fleet's verdict on `want` requests (`None`: none in time; the request goes by this
    /// process's own discipline alone). What waits for `name` goes along; unanswered, it stays.
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

    /// Tells the fleet from a task a cancelled call cannot stop, retried while the store fails and
    /// the report matters (the next admission of `name` takes it along meanwhile); awaits one try.
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

    /// Sends what waits for `name` until taken or no longer mattering; `tried` hears the first try.
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
                    // A store that has answered before and is late once gets twice the time
                    // next; it is given up on for a while only when late again.
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
}
