//! Wall-clock time derived from tokio's clock.
//!
//! Anchoring the wall clock to a tokio instant once, and deriving "now" from tokio's clock
//! afterwards, keeps the two consistent: waits computed from a wall time are exact under a
//! paused clock in tests, and immune to wall-clock jumps in production. It is only the fallback
//! for a response without `Date` ([`server_time`] reads the service's clock from it).

mod server_time;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

pub(crate) use server_time::{ServerClock, ServerTime};

#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// Unix seconds on the wall clock at `instant`, converted once: every response reads it.
    anchor: f64,
    instant: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            anchor: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |since| since.as_secs_f64()),
            instant: Instant::now(),
        }
    }

    /// Unix seconds on the local wall clock at `at`.
    pub(crate) fn unix_at(&self, at: Instant) -> f64 {
        self.anchor + self.since_anchor(at)
    }

    /// The whole second nearest `at`, counted on this clock from the whole second it was
    /// anchored in: a name for an instant that, unlike [`unix_at`](Self::unix_at) rounded, does
    /// not depend on where in its second the wall clock read when the clock was made.
    pub(crate) fn second_of(&self, at: Instant) -> i64 {
        self.anchor.floor() as i64 + self.since_anchor(at).round() as i64
    }

    /// Seconds from the anchor's instant to `at`; negative before it.
    fn since_anchor(&self, at: Instant) -> f64 {
        if at >= self.instant {
            (at - self.instant).as_secs_f64()
        } else {
            -(self.instant - at).as_secs_f64()
        }
    }
}

/// The instant `wait` from now; see [`after_from`].
pub(crate) fn after(wait: Duration) -> Instant {
    after_from(Instant::now(), wait)
}

/// The instant `wait` after `start`; a wait too long to represent (a `Retry-After` of 10^20
/// seconds) saturates to a far future instead of overflowing.
pub(crate) fn after_from(start: Instant, wait: Duration) -> Instant {
    start
        .checked_add(wait)
        .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 86_400))
}
