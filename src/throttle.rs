//! The client-wide rate-limit discipline shared by every clone of a client: the cooldown gate
//! (after a 429, nobody sends until the wait is over) and the quota pacer (when the reported
//! budget is spent, hold requests until the window resets instead of sending them into a 429).

use std::pin::pin;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::clock::{self, Clock};
use crate::error::Error;
use crate::quota::Quota;

/// `X-RateLimit-Reset` has one-second resolution and servers round it either way, so the pacer
/// waits this much past a reset before spending the next window's budget.
const RESET_MARGIN: TimeDelta = TimeDelta::seconds(1);

#[derive(Debug)]
pub(crate) struct Throttle {
    state: Mutex<State>,
    changed: Notify,
    pacing: bool,
    clock: Clock,
}

#[derive(Debug, Default)]
struct State {
    cooldown_until: Option<Instant>,
    latest: Option<Quota>,
    window: Option<Window>,
    /// The service answered without rate-limit headers, so there is no budget to pace by.
    unmetered: bool,
    in_flight: u64,
}

/// The budget of the current rate-limit window, as last reported by the service.
#[derive(Debug)]
struct Window {
    limit: u64,
    /// The lowest `remaining` reported for this window: responses can arrive out of order, and
    /// a stale one must not give back budget that was spent.
    remaining: u64,
    /// `None` once the reported reset has passed and no response of the new window arrived.
    reset: Option<DateTime<Utc>>,
}

/// Why a request is being held.
#[derive(Debug, Clone, Copy)]
enum Hold {
    Cooldown(Instant),
    Quota(Option<Instant>),
}

/// A request on the wire; it counts against the budget until completed or dropped.
pub(crate) struct Permit<'a> {
    throttle: &'a Throttle,
}

impl Throttle {
    pub(crate) fn new(pacing: bool, clock: Clock) -> Self {
        Self {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            pacing,
            clock,
        }
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The latest quota any response reported.
    pub(crate) fn latest(&self) -> Option<Quota> {
        self.lock().latest
    }

    /// Waits until a request may be sent, or fails at once with [`Error::Throttled`] when that
    /// would take longer than `max_wait`.
    pub(crate) async fn admit(
        &self,
        operation: &'static str,
        max_wait: Duration,
    ) -> Result<Permit<'_>, Error> {
        if let Ok(permit) = self.try_admit() {
            return Ok(permit);
        }
        loop {
            let mut changed = pin!(self.changed.notified());
            changed.as_mut().enable();
            // Look again, now that no change can be missed.
            let (hold, quota) = match self.try_admit() {
                Ok(permit) => return Ok(permit),
                Err(held) => held,
            };
            let deadline = match hold {
                Hold::Cooldown(until) | Hold::Quota(Some(until)) => Some(until),
                Hold::Quota(None) => None,
            };
            let wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if let Some(wait) = wait.filter(|w| *w > max_wait) {
                return Err(Error::Throttled {
                    retry_after: wait,
                    quota,
                });
            }
            tracing::debug!(
                operation,
                reason = match hold {
                    Hold::Cooldown(_) => "cooldown after a rate-limit response",
                    Hold::Quota(_) => "quota spent for this window",
                },
                wait = ?wait,
                "holding request"
            );
            match deadline {
                Some(deadline) => {
                    // Woken or timed out, either way: look again.
                    let _ = tokio::time::timeout_at(deadline, changed).await;
                }
                None => changed.await,
            }
        }
    }

    /// A permit if a request may go now; otherwise why not, with the latest quota.
    fn try_admit(&self) -> Result<Permit<'_>, (Hold, Option<Quota>)> {
        let mut state = self.lock();
        match self.hold(&mut state) {
            None => {
                state.in_flight += 1;
                Ok(Permit { throttle: self })
            }
            Some(hold) => Err((hold, state.latest)),
        }
    }

    /// Whether a request must wait now, and until when.
    fn hold(&self, state: &mut State) -> Option<Hold> {
        let now = Instant::now();
        if let Some(until) = state.cooldown_until {
            if until > now {
                return Some(Hold::Cooldown(until));
            }
            state.cooldown_until = None;
        }
        if !self.pacing {
            return None;
        }
        let Some(window) = state.window.as_mut() else {
            // Until a response tells the budget, one request at a time: a burst of concurrent
            // first calls could otherwise overshoot the limit, and the overshoot counts as
            // calling on after a 429.
            return (!state.unmetered && state.in_flight > 0).then_some(Hold::Quota(None));
        };
        let mut reopens_in = window.reset.map(|reset| {
            reset
                .checked_add_signed(RESET_MARGIN)
                .map_or(Duration::MAX, |at| self.clock.until(at))
        });
        if reopens_in == Some(Duration::ZERO) {
            // A new window: assume the full limit until its first response says otherwise.
            window.remaining = window.limit;
            window.reset = None;
            reopens_in = None;
        }
        if window.remaining > state.in_flight {
            return None;
        }
        Some(Hold::Quota(reopens_in.map(clock::after)))
    }

    /// Holds every request of every clone until `wait` has passed.
    pub(crate) fn cool_down(&self, wait: Duration) {
        let until = clock::after(wait);
        let mut state = self.lock();
        if state.cooldown_until.is_none_or(|current| current < until) {
            state.cooldown_until = Some(until);
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every await point, so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Permit<'_> {
    /// The request got a response; resynchronise the budget with the quota it reported.
    pub(crate) fn complete(self, quota: Option<Quota>) {
        let throttle = self.throttle;
        // Released here, under the same lock as the resynchronisation, rather than in `drop`.
        std::mem::forget(self);
        let mut state = throttle.lock();
        state.in_flight -= 1;
        if quota.is_none() && state.window.is_none() {
            state.unmetered = true;
        }
        if let Some(quota) = quota {
            state.unmetered = false;
            state.latest = Some(quota);
            match &mut state.window {
                Some(window) if window.reset == Some(quota.reset) => {
                    window.remaining = window.remaining.min(quota.remaining);
                    window.limit = quota.limit;
                }
                Some(window) if window.reset.is_some_and(|reset| reset > quota.reset) => {}
                window => {
                    *window = Some(Window {
                        limit: quota.limit,
                        remaining: quota.remaining,
                        reset: Some(quota.reset),
                    });
                }
            }
        }
        drop(state);
        throttle.changed.notify_waiters();
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.throttle.lock().in_flight -= 1;
        self.throttle.changed.notify_waiters();
    }
}
