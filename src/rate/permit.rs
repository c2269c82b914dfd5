//! A request admitted to the wire, and what its answer reports back to the key's state.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tokio::time::Instant;

use super::lease::Lease;
use super::link::Linked;
use super::outbox::{Outcome, WindowReport};
use super::pacer::Pacing;
use super::state::{Shared, State};
use crate::clock::{self, ServerTime};
use crate::headers::{self, Head, Quiet, Quota, QuotaReading, ResetGiven};

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
    /// `quota`'s window length as the budgets reckon it; `None` without one or if over on arrival.
    #[cfg(feature = "metrics")]
    pub(crate) window: Option<Duration>,
}

/// A request admitted to the wire, in the budget until its head is reported. Dropped unreported
/// (cancelled, timed out, connection lost), it counts as spent: the service may have counted it.
pub(crate) struct Permit<'a> {
    pub(super) shared: &'a Shared,
    pub(super) pacing: Pacing,
    /// Gate generation at admission: only answers to requests sent since it last closed open it.
    pub(super) generation: u64,
    pub(super) probe: bool,
    pub(super) fleet: Fleet<'a>,
    /// When it was handed to the caller, which sends it then.
    pub(super) sent_at: Instant,
    /// Handed to the caller, which may send it: only then does a drop count as spent (before, the
    /// call was cancelled while the fleet's store decided).
    pub(super) handed_out: bool,
    pub(super) settled: bool,
}

/// What the fleet's store knows of a permit.
#[derive(Default)]
pub(super) struct Fleet<'a> {
    pub(super) link: Option<Linked<'a>>,
    /// The fleet's probe of a period it does not know: the others wait for its report.
    pub(super) probe: bool,
    /// Asks the store whether the fleet's hold is over: the others wait for its answer.
    pub(super) asks_again: bool,
    /// Asks the store for a lease: the others ask for themselves meanwhile.
    pub(super) leasing: bool,
    /// The fleet's number for this admission.
    pub(super) admitted: u64,
    /// The latest period this process knew of when it admitted the request.
    pub(super) period_known: Option<i64>,
    /// Sent without the store's admission (it did not answer): the fleet's budgets spend it once
    /// answered, when the service has counted it.
    pub(super) unadmitted: bool,
}

/// What a response head said that the fleet's store must hear at once.
pub(crate) struct Tell<'a> {
    link: Linked<'a>,
    report: Option<WindowReport>,
    outcome: Outcome,
}

impl Tell<'_> {
    /// Puts the report in the store's outbox; waits for the first try only if others wait on it.
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
    /// The head arrived at `at`: read the service's clock, quota and `Retry-After`, close the gate
    /// for a quiet, let held requests look again. The fleet hears at once if others wait for it
    /// (a quiet, the fleet's probe) or, without this call waiting, if it was admitted before this
    /// process knew of its period; else with the next admission. The report waits in the store's
    /// outbox until taken: neither this call's cancellation nor a store slow to answer loses it.
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

    /// `at_head` up to telling the fleet: what the head said, and what the fleet must hear. Not
    /// async, so a caller with no fleet to tell keeps no future, nor the head, across an await.
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

    /// [`heard`](Self::heard) in this process; what to tell the fleet at once, if anything.
    fn settle(
        mut self,
        status: StatusCode,
        head: &Head<'_>,
        at: Instant,
        backoff: &(dyn Fn(u32) -> Duration + Sync),
    ) -> (HeadReport, Option<(Option<WindowReport>, Outcome)>) {
        let shared = self.shared;
        let mut read = Read::default();
        let (said, wake, urgent, quiet_until) = {
            let mut state = shared.lock();
            let server = state
                .server_clock
                .read(head.date.first(), at, &shared.clock);
            let reading = Quota::read(head, &server);
            let retry_after = headers::retry_after(head, &server);
            let quiet = headers::quiet(status, retry_after);
            let urgent = self.fleet.link.is_some() && (self.fleet.probe || quiet.is_some());
            match reading {
                QuotaReading::Read(quota, given) => {
                    read = self.report_read(&mut state, quota, given, &server, at, urgent);
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
            // Close the gate before this request stops counting: no held request slips between.
            let quiet_until = self.heed(&mut state, quiet, reading, at, backoff);
            state.warn_of_others(self.pacing, self.fleet.link.is_some());
            let said = HeadReport {
                quota: reading.quota(),
                retry_after,
                quiet,
                // Without `Date` the reading is the local clock's own: no offset.
                clock_offset: server.offset(&shared.clock),
                #[cfg(feature = "metrics")]
                window: read.length,
            };
            (said, self.release(&mut state), urgent, quiet_until)
        };
        shared.wake(wake);
        let tell = (urgent || read.straddles).then(|| {
            let outcome = match quiet_until {
                Some(until) => Outcome::Quiet(until.saturating_duration_since(Instant::now())),
                None if urgent => Outcome::Normal,
                // An answer to an older request never ends the fleet's probe.
                None => Outcome::Nothing,
            };
            (read.report, outcome)
        });
        (said, tell)
    }

    /// Closes the gate for `quiet` (at least `backoff` of the quiet responses in a row before it),
    /// or opens it; until when it is closed. `reading` may show others calling. A quiet voids the
    /// lease: what it did not spend goes back with the report of the quiet.
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

    /// Applies the reported window (`quota`, reset as `given`); what the store must hear at once.
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
        // A reset in seconds is placed from the answer's arrival, whatever clock wrote `Date`:
        // counted from when the answer was written and rounded up, the window has ended by then.
        let unix = quota.reset.timestamp();
        let reset_at = match given {
            ResetGiven::At => (state.server_clock).place_reset(server, unix, self.sent_at),
            ResetGiven::In(secs) => clock::after_from(at, Duration::from_secs(secs)),
        };
        let own = state.own(self.sent_at);
        let period = match given {
            ResetGiven::At => unix,
            // Named on the local clock, where its end is placed whatever the backend's `Date`.
            ResetGiven::In(_) => self.shared.clock.second_of(reset_at),
        };
        (state.budgets).report_placed(quota, period, reset_at, at, own);
        state.remember(quota);
        // A window the lease was not taken from, or its next period: the service counts what the
        // lease would spend there, the store (opening it from this report) does not. Void it.
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
            // Admitted before this process knew of the period: the store, which may have
            // counted it in the period before, counts it in this one only from this report,
            // and must hear it before the rest of the fleet spends the period's budget.
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

    /// The store answered, or failed to: requests that waited on this one look again. Whether the
    /// first in line waits to hear of it.
    pub(super) fn answered(&mut self, state: &mut State) -> bool {
        if std::mem::take(&mut self.fleet.leasing) {
            state.store.leasing = false;
        }
        if !std::mem::take(&mut self.fleet.asks_again) {
            return false;
        }
        state.store.asking_again = None;
        state.front_waiting
    }

    /// Tells the fleet of a request sent without its store's admission, now answered or given up.
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
    pub(super) fn release(&mut self, state: &mut State) -> bool {
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
