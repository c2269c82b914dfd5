//! The service's clock, as a response's `Date` header shows it.
//!
//! `X-RateLimit-Reset` and an HTTP-date `Retry-After` are instants on the service's clock. A
//! local clock that runs ahead or behind would turn them into waits that are too short (a burst
//! into a window that has not opened yet) or too long. The `Date` header of the same response
//! says what the service's clock read when it answered; anchored to the local monotonic instant
//! the response head arrived, it turns any server timestamp into a local instant, whatever the
//! skew.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderMap;
use http::header::DATE;
use tokio::time::Instant;

use crate::clock::{self, Clock};

/// What the service's clock read at a local instant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerTime {
    /// Unix seconds on the service's clock (from `Date`, or the local clock without one).
    unix: f64,
    /// The local instant the response head arrived.
    at: Instant,
}

impl ServerTime {
    /// The service's time at `at`, from the response's `Date`; without a usable one, the local
    /// wall clock's.
    ///
    /// `Date` has one-second resolution and is truncated, so the service's clock read somewhere
    /// in `[Date, Date + 1 s)` when the head left; taking `Date` itself places every later
    /// server instant at its latest possible local instant: waits come late, never early.
    pub(crate) fn of_response(headers: &HeaderMap, at: Instant, local: &Clock) -> Self {
        let date = headers
            .get(DATE)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| httpdate::parse_http_date(value.trim()).ok())
            .and_then(|date| date.duration_since(UNIX_EPOCH).ok());
        let unix = match date {
            Some(since_epoch) => since_epoch.as_secs_f64(),
            None => local.unix_at(at),
        };
        Self { unix, at }
    }

    /// The local instant at which the service's clock reads `unix` seconds; `at` itself when
    /// that has already passed.
    pub(crate) fn instant_of(&self, unix: i64) -> Instant {
        let ahead = unix as f64 - self.unix;
        if ahead <= 0.0 {
            return self.at;
        }
        let wait = Duration::try_from_secs_f64(ahead).unwrap_or(Duration::MAX);
        clock::after_from(self.at, wait)
    }

    /// How long from `at` until the service's clock reads `date` (an HTTP-date); zero when it
    /// has passed.
    pub(crate) fn until(&self, date: SystemTime) -> Duration {
        let unix = date
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        Duration::try_from_secs_f64((unix - self.unix).max(0.0)).unwrap_or(Duration::MAX)
    }

    /// The service's clock read `unix` seconds at `at`.
    #[cfg(test)]
    pub(crate) fn at_unix(unix: i64, at: Instant) -> Self {
        Self {
            unix: unix as f64,
            at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_date(date: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(DATE, HeaderValue::from_str(date).unwrap());
        headers
    }

    // 2026-11-22T12:00:00Z
    const NOON: i64 = 1_795_348_800;

    #[tokio::test(start_paused = true)]
    async fn a_reset_is_placed_by_the_date_header_whatever_the_local_clock_says() {
        let local = Clock::new();
        let at = Instant::now();
        let server =
            ServerTime::of_response(&with_date("Sun, 22 Nov 2026 12:00:00 GMT"), at, &local);
        assert_eq!(server.instant_of(NOON + 30), at + Duration::from_secs(30));
        assert_eq!(server.instant_of(NOON - 30), at, "a past reset is now");
        assert_eq!(
            server.until(UNIX_EPOCH + Duration::from_secs(NOON as u64 + 7)),
            Duration::from_secs(7)
        );
        assert_eq!(server.until(UNIX_EPOCH), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_date_the_local_clock_is_used() {
        let local = Clock::new();
        let at = Instant::now();
        let server = ServerTime::of_response(&HeaderMap::new(), at, &local);
        let now = local.unix_at(at);
        let reset = now.ceil() as i64 + 10;
        let expected = Duration::from_secs_f64(reset as f64 - now);
        let got = server.instant_of(reset) - at;
        assert!(got.abs_diff(expected) < Duration::from_millis(1), "{got:?}");
        for bad in ["yesterday", "", "Sun, 22 Nov 2026 25:00:00 GMT"] {
            let server = ServerTime::of_response(&with_date(bad), at, &local);
            assert!((server.unix - now).abs() < 0.001, "{bad:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn far_timestamps_saturate() {
        let local = Clock::new();
        let at = Instant::now();
        let server =
            ServerTime::of_response(&with_date("Sun, 22 Nov 2026 12:00:00 GMT"), at, &local);
        assert!(server.instant_of(i64::MAX) > at + Duration::from_secs(86_400 * 365));
        assert_eq!(server.instant_of(i64::MIN), at);
    }
}
