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

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use url::Url;

use super::lock;
use super::pacer::Hold;

/// How long a store may take to answer, unless its owner sets another.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_millis(250);

/// While a store fails, how often one call tries it again.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// How long one instance may probe a window period the fleet does not know yet before
/// another may: the probe's answer normally releases the others at once.
pub(crate) const PROBE_FOR: Duration = Duration::from_secs(2);

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Send it; a probe finds out a period the fleet does not know, and must report at once.
    /// `admitted` numbers the admission, for the reports of its answer.
    Go { probe: bool, admitted: u64 },
    /// Hold it this long, for this reason.
    Hold(Duration, Hold),
}

/// What this process heard from the shared store and has yet to tell it.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    /// Held by the store until then.
    pub(crate) remote: Option<(Instant, Hold)>,
    /// A request asks the store whether its hold (of this kind) is over, and the others wait
    /// for the answer.
    pub(crate) asking_again: Option<Hold>,
    /// Reports sent along with the next admission.
    pub(crate) pending: Vec<WindowReport>,
    /// The store answered the last admission: it meters the budget exactly, so this process
    /// need not guess how many others spend it.
    pub(crate) live: bool,
}

/// The most window reports kept for the next admission; the specification has two windows.
const MAX_PENDING: usize = 4;

impl Exchange {
    /// Keeps the newest and lowest report of each window for the next admission.
    pub(crate) fn queue(&mut self, report: WindowReport) {
        match self.pending.iter_mut().find(|w| w.period == report.period) {
            Some(window) => {
                // The store takes off the admissions after each report's own: of two answers
                // numbered by it, the lower sum says less is left. The service's numbers can be
                // anything: the sums saturate.
                let lower = if window.admitted > 0 && report.admitted > 0 {
                    report.remaining.saturating_add(report.admitted)
                        < window.remaining.saturating_add(window.admitted)
                } else {
                    report.remaining < window.remaining
                };
                if lower {
                    *window = report;
                }
            }
            None => {
                if self.pending.len() == MAX_PENDING {
                    self.pending.remove(0);
                }
                self.pending.push(report);
            }
        }
    }
}

/// One admission as the store receives it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission<'a> {
    /// Reports not yet sent, applied before the request is admitted.
    pub(crate) reports: &'a [WindowReport],
    /// Whether the window budgets are spent, or only the cooldown is obeyed (no pacing, or a
    /// service that does not meter the key).
    pub(crate) metered: bool,
}

/// A store of the state shared by the fleet. Each operation is one round trip.
pub(crate) trait Store: Send + Sync + fmt::Debug {
    /// The name of the state of `api_key` at `base_url` in the store: a hash, never the key.
    fn name(&self, base_url: &Url, api_key: &str) -> String;

    /// Applies `admission.reports`, then spends one request from every window of the
    /// current period, or says how long to hold it.
    fn admit<'a>(
        &'a self,
        name: &'a str,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Verdict, String>>;

    /// Applies `reports` and what the response asked for.
    fn report<'a>(
        &'a self,
        name: &'a str,
        reports: &'a [WindowReport],
        outcome: Outcome,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// A store, with its timeout and its health, shared by every client configured with it.
pub(crate) struct SharedStore {
    store: Arc<dyn Store>,
    timeout: Duration,
    health: Arc<Mutex<Health>>,
}

#[derive(Debug, Default)]
struct Health {
    /// The store failed and has not answered since; tried again from then on.
    down: Option<Instant>,
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
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            timeout: DEFAULT_TIMEOUT,
            health: Arc::default(),
        }
    }

    /// The same store and health, with another timeout.
    pub(crate) fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            store: Arc::clone(&self.store),
            timeout,
            health: Arc::clone(&self.health),
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn name(&self, base_url: &Url, api_key: &str) -> String {
        self.store.name(base_url, api_key)
    }

    /// The fleet's verdict, or `None` when the store cannot give one in time: the request
    /// then goes by the process's own discipline alone.
    pub(crate) async fn admit(&self, name: &str, admission: Admission<'_>) -> Option<Verdict> {
        self.guarded(self.store.admit(name, admission)).await
    }

    /// Tells the fleet; `false` if the store could not be told.
    pub(crate) async fn report(
        &self,
        name: &str,
        reports: &[WindowReport],
        outcome: Outcome,
    ) -> bool {
        self.guarded(self.store.report(name, reports, outcome))
            .await
            .is_some()
    }

    async fn guarded<T>(&self, operation: BoxFuture<'_, Result<T, String>>) -> Option<T> {
        let now = Instant::now();
        {
            let health = lock(&self.health);
            if health.down.is_some_and(|next_try| now < next_try) {
                return None;
            }
        }
        let result = match tokio::time::timeout(self.timeout, operation).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {:?}", self.timeout)),
        };
        let mut health = lock(&self.health);
        match result {
            Ok(value) => {
                if health.down.take().is_some() {
                    tracing::info!(
                        "the shared rate-limit state answers again: instances share the budget \
                         and the cooldown again"
                    );
                }
                Some(value)
            }
            Err(error) => {
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

    fn report(remaining: u64, admitted: u64) -> WindowReport {
        WindowReport {
            limit: u64::MAX,
            remaining,
            period: 1_000,
            ends_at: Instant::now(),
            admitted,
        }
    }

    /// Found by an independent test (rate-core issue, failure 5): `remaining + admitted`
    /// overflowed on an "unlimited" `X-RateLimit-Remaining`, a panic in a debug build.
    #[test]
    fn reports_of_any_size_are_queued_without_overflow() {
        let mut exchange = Exchange::default();
        exchange.queue(report(u64::MAX, 5));
        exchange.queue(report(u64::MAX - 1, 7));
        exchange.queue(report(3, 2));
        assert_eq!(
            exchange
                .pending
                .iter()
                .map(|w| w.remaining)
                .collect::<Vec<_>>(),
            [3],
            "expected one report of the period, the lowest"
        );
    }
}
