//! The local wall clock, read through tokio's clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

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

    /// The whole second nearest `at`, counted from the anchor's whole second: a name for an
    /// instant that, unlike a rounded [`unix_at`](Self::unix_at), ignores the anchor's fraction.
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

/// `start + wait`; a wait too long to represent (a huge `Retry-After`) saturates to a far future.
pub(crate) fn after_from(start: Instant, wait: Duration) -> Instant {
    start
        .checked_add(wait)
        .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 86_400))
}
