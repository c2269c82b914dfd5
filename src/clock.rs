//! Wall-clock time derived from tokio's clock.
//!
//! The service speaks in unix timestamps (`X-RateLimit-Reset`, `Retry-After` dates) while every
//! wait is a tokio timer. Anchoring the wall clock to a tokio instant once, and deriving "now"
//! from tokio's clock afterwards, keeps the two consistent: waits computed from a timestamp are
//! exact under a paused clock in tests, and immune to wall-clock jumps in production.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    wall: SystemTime,
    instant: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            wall: SystemTime::now(),
            instant: Instant::now(),
        }
    }

    pub(crate) fn now_utc(&self) -> DateTime<Utc> {
        DateTime::from(self.wall + self.instant.elapsed())
    }

    /// How long until the wall clock reads `at`; zero if that is in the past.
    pub(crate) fn until(&self, at: DateTime<Utc>) -> Duration {
        (at - self.now_utc()).to_std().unwrap_or(Duration::ZERO)
    }
}

/// The instant `wait` from now; a wait too long to represent (a `Retry-After` of 10^20 seconds)
/// saturates to a far future instead of overflowing.
pub(crate) fn after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 86_400))
}
