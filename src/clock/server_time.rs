//! The service's clock, read from a response's `Date`. `X-RateLimit-Reset` and an HTTP-date
//! `Retry-After` are instants on it; a skewed local clock would make their waits too short (a
//! burst into a window not yet open) or too long. `Date`, anchored to the local monotonic instant
//! the response head arrived, maps any server timestamp to a local instant whatever the skew.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::HeaderValue;
use tokio::time::Instant;

use super::local::{Clock, after_from};

/// What the service's clock read at a local instant.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerTime {
    /// Unix seconds on the service's clock (from `Date`, or the local clock without one).
    unix: f64,
    /// The local instant the response head arrived.
    at: Instant,
    /// Read from a `Date` header (this response's or an earlier one's), not the local clock.
    dated: bool,
}

impl ServerTime {
    /// The service's time at `at`: the response's `Date`, else the local wall clock's. `Date` is
    /// truncated (the clock read within `[Date, Date + 1 s)`), so taking it places every later
    /// server instant at its latest possible local instant: waits come late, never early.
    pub(crate) fn of_response(date: Option<&HeaderValue>, at: Instant, local: &Clock) -> Self {
        Self::of_date(date.and_then(unix_of_date), at, local)
    }

    /// [`of_response`](Self::of_response) of a `Date` as Unix seconds (`None`: absent or invalid).
    fn of_date(date: Option<f64>, at: Instant, local: &Clock) -> Self {
        Self {
            unix: date.unwrap_or_else(|| local.unix_at(at)),
            at,
            dated: date.is_some(),
        }
    }

    /// The local instant the service's clock reads `unix` seconds; `at` once that has passed.
    pub(crate) fn instant_of(&self, unix: i64) -> Instant {
        let ahead = unix as f64 - self.unix;
        if ahead <= 0.0 {
            return self.at;
        }
        let wait = Duration::try_from_secs_f64(ahead).unwrap_or(Duration::MAX);
        after_from(self.at, wait)
    }

    /// How long from `at` until the service's clock reads `date` (an HTTP-date); zero if passed.
    pub(crate) fn until(&self, date: SystemTime) -> Duration {
        let unix = date
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64());
        Duration::try_from_secs_f64((unix - self.unix).max(0.0)).unwrap_or(Duration::MAX)
    }

    /// Unix seconds on the service's clock at the instant of this reading.
    pub(crate) fn unix(&self) -> f64 {
        self.unix
    }

    /// Seconds the service's clock is ahead of the `local` wall clock (negative: behind); `None`
    /// without a readable `Date`, as the reading is then the local clock's.
    pub(crate) fn offset(&self, local: &Clock) -> Option<f64> {
        self.dated.then(|| self.unix - local.unix_at(self.at))
    }

    /// What this reading says the service's clock reads at `at`.
    fn predict(&self, at: Instant) -> f64 {
        self.unix + self.since(at)
    }

    /// Seconds from this reading's instant to `at` (negative: before it).
    fn since(&self, at: Instant) -> f64 {
        if at >= self.at {
            (at - self.at).as_secs_f64()
        } else {
            -(self.at - at).as_secs_f64()
        }
    }

    /// This reading with `by` seconds taken off.
    fn less(self, by: f64) -> Self {
        Self {
            unix: self.unix - by,
            ..self
        }
    }

    /// The service's clock read `unix` seconds at `at`.
    #[cfg(test)]
    pub(crate) fn at_unix(unix: i64, at: Instant) -> Self {
        Self {
            unix: unix as f64,
            at,
            dated: true,
        }
    }
}

/// The Unix seconds an HTTP-date names; `None` when the value is not one.
fn unix_of_date(value: &HeaderValue) -> Option<f64> {
    let date = httpdate::parse_http_date(value.to_str().ok()?.trim()).ok()?;
    Some(date.duration_since(UNIX_EPOCH).ok()?.as_secs_f64())
}

/// The seconds one `Date` value spans: it is truncated to the second.
const DATE_SECOND: f64 = 1.0;

/// How long a reading stays the best one: beyond that, clock drift could add up to an early wait.
const READING_KEPT_FOR: Duration = Duration::from_secs(60);

/// Seconds within which a request counts as sent at a reset's placed instant: `f64` rounding.
const AT_THE_INSTANT: f64 = 1e-6;

/// Floor on a kept reading's uncertainty (s): a `Date`'s second may end before its answer arrives.
const LEAST_SLACK: f64 = 0.1;

/// The service's clock as its answers' `Date`s read. Each bounds the service's time at arrival
/// from below, and a second more from above; one clock's answers narrow this to a tenth of a
/// second under a steady flow (so short windows are placed no later than they end). A `Date`
/// outside the bounds is another clock (a backend apart, or a step) and is followed at once: the
/// resets it places are bounded by the requests counted before them
/// ([`place_reset`](Self::place_reset)).
#[derive(Debug, Default)]
pub(crate) struct ServerClock {
    /// The `Date` last seen, when first, and its Unix seconds. It is read again only when it
    /// changes or recurs a second or more later (one clock shows a value under a second, so
    /// that is another clock, a second or more behind), and parsed only when it changes.
    last_date: Option<(HeaderValue, Instant, Option<f64>)>,
    best: Option<ServerTime>,
    /// Seconds the service's clock may read past `best`'s prediction: 1 for a lone reading (a
    /// `Date` truncates), narrowed by the same clock's later ones, never below [`LEAST_SLACK`]; a
    /// `Date` claiming more is a clock ahead.
    slack: f64,
    /// Tightest bound on the clock writing `X-RateLimit-Reset`: at the instant a request was
    /// sent, it read under the reset (Unix seconds).
    reset_bound: Option<(Instant, i64)>,
}

impl ServerClock {
    /// The service's time at `at`, when a response with `date` (its first `Date`) arrived.
    pub(crate) fn read(
        &mut self,
        date: Option<&HeaderValue>,
        at: Instant,
        local: &Clock,
    ) -> ServerTime {
        let Some(date) = date else {
            return ServerTime::of_response(None, at, local);
        };
        let seen = self.last_date.as_ref().is_some_and(|(value, first, _)| {
            value == date && at.saturating_duration_since(*first) < Duration::from_secs(1)
        });
        if !seen {
            let unix = match &self.last_date {
                Some((value, _, unix)) if value == date => *unix,
                _ => unix_of_date(date),
            };
            self.last_date = Some((date.clone(), at, unix));
            let reading = ServerTime::of_date(unix, at, local);
            self.best = Some(match self.best {
                Some(best) => self.keep_or_replace(best, reading),
                None => {
                    self.slack = DATE_SECOND;
                    reading
                }
            });
        }
        match self.best {
            Some(best) => ServerTime {
                unix: best.predict(at),
                at,
                dated: best.dated,
            },
            None => ServerTime::of_response(Some(date), at, local),
        }
    }

    /// The local instant the period with reset `unix` ends, as `reading` places it, for a request
    /// sent at `sent`. The service counted each request before its period's end on the reset's
    /// clock, so a reading past the reset at a request's sending (backends ahead of their limiter)
    /// is at least that far ahead of it: resets are placed that much later, by the tightest such
    /// bound within [`READING_KEPT_FOR`].
    pub(crate) fn place_reset(
        &mut self,
        reading: &ServerTime,
        unix: i64,
        sent: Instant,
    ) -> Instant {
        let ahead = |since: f64, reset: i64| reading.unix + since - reset as f64;
        let this = (sent, unix);
        let this_ahead = ahead(reading.since(sent), unix);
        let (bound, shown) = match self.reset_bound {
            Some(kept) => {
                let since = reading.since(kept.0);
                let kept_ahead = ahead(since, kept.1);
                if -since < READING_KEPT_FOR.as_secs_f64() && kept_ahead >= this_ahead {
                    (kept, kept_ahead)
                } else {
                    (this, this_ahead)
                }
            }
            None => (this, this_ahead),
        };
        self.reset_bound = Some(bound);
        // A reading that reached a reset before the service did is ahead of the clock that
        // writes it by more than the bound shows, by up to the second a `Date` is given to.
        let behind = if shown > -AT_THE_INSTANT {
            shown.max(0.0) + DATE_SECOND
        } else {
            0.0
        };
        reading.less(behind).instant_of(unix)
    }

    /// The reading to keep of `best` and a new one, `reading`.
    fn keep_or_replace(&mut self, best: ServerTime, reading: ServerTime) -> ServerTime {
        let predicted = best.predict(reading.at);
        let raise = reading.unix - predicted;
        if raise < self.slack {
            // The same clock, one further behind, or the service's clock stepping back.
            let stale = reading.at.duration_since(best.at) >= READING_KEPT_FOR;
            if stale {
                self.slack = DATE_SECOND;
                return reading;
            }
            if raise <= -DATE_SECOND {
                // A clock a second or more behind the kept one: it reads under the kept one less a
                // second, so a reading above that is the clock ahead, not this one nearer its tick.
                self.slack = (-raise - DATE_SECOND).clamp(LEAST_SLACK, DATE_SECOND);
                return reading;
            }
            // The same clock: it reads within both readings' bounds.
            let upper = (predicted + self.slack).min(reading.unix + DATE_SECOND);
            let (kept, lower) = if raise > 0.0 {
                (reading, reading.unix)
            } else {
                (best, predicted)
            };
            self.slack = (upper - lower).max(LEAST_SLACK);
            return kept;
        }
        // Another clock ahead, or a step forward.
        reading
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_date(date: &str) -> HeaderValue {
        HeaderValue::from_str(date).unwrap()
    }

    // 2026-11-22T12:00:00Z
    const NOON: i64 = 1_795_348_800;

    #[tokio::test(start_paused = true)]
    async fn a_reset_is_placed_by_the_date_header_whatever_the_local_clock_says() {
        let local = Clock::new();
        let at = Instant::now();
        let server = ServerTime::of_response(
            Some(&with_date("Sun, 22 Nov 2026 12:00:00 GMT")),
            at,
            &local,
        );
        assert_eq!(server.instant_of(NOON + 30), at + Duration::from_secs(30));
        assert_eq!(server.instant_of(NOON - 30), at, "a past reset is now");
        assert_eq!(
            server.until(UNIX_EPOCH + Duration::from_secs(NOON as u64 + 7)),
            Duration::from_secs(7)
        );
        assert_eq!(server.until(UNIX_EPOCH), Duration::ZERO);
        assert!(server.offset(&local).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_date_the_local_clock_is_used_and_there_is_no_offset() {
        let local = Clock::new();
        let at = Instant::now();
        let server = ServerTime::of_response(None, at, &local);
        let now = local.unix_at(at);
        let reset = now.ceil() as i64 + 10;
        let expected = Duration::from_secs_f64(reset as f64 - now);
        let got = server.instant_of(reset) - at;
        assert!(got.abs_diff(expected) < Duration::from_millis(1), "{got:?}");
        assert_eq!(server.offset(&local), None);
        for bad in ["yesterday", "", "Sun, 22 Nov 2026 25:00:00 GMT"] {
            let server = ServerTime::of_response(Some(&with_date(bad)), at, &local);
            assert!((server.unix - now).abs() < 0.001, "{bad:?}");
            assert_eq!(server.offset(&local), None, "{bad:?}");
        }
    }

    /// Equal but for the rounding of seconds as `f64`.
    #[track_caller]
    fn assert_close(got: Instant, expected: Instant) {
        let off = if got > expected {
            got - expected
        } else {
            expected - got
        };
        assert!(off < Duration::from_micros(1), "{got:?} vs {expected:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_answer_of_each_second_narrows_the_reading_of_the_service_clock() {
        let local = Clock::new();
        let mut clock = ServerClock::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // The service's clock reads NOON + 0.7 s at t0: `Date` says NOON.
        let noon = with_date("Sun, 22 Nov 2026 12:00:00 GMT");
        let second = with_date("Sun, 22 Nov 2026 12:00:01 GMT");
        assert_close(
            clock.read(Some(&noon), t0, &local).instant_of(NOON + 3),
            t0 + ms(3_000),
        );
        // 0.4 s later the service reads NOON + 1.1 s: the next second, seen 0.1 s after it
        // began; every later placement is 0.1 s late instead of 0.7 s.
        let t1 = t0 + ms(400);
        assert_close(
            clock.read(Some(&second), t1, &local).instant_of(NOON + 3),
            t1 + ms(2_000),
        );
        // A later answer of that second is a looser bound than the reading kept.
        let t2 = t0 + ms(800);
        assert_close(
            clock.read(Some(&second), t2, &local).instant_of(NOON + 3),
            t1 + ms(2_000),
        );
        // Seen 0.2 s into the next second: the reading kept is still the closer bound.
        let t3 = t0 + ms(1_500);
        let late = with_date("Sun, 22 Nov 2026 12:00:02 GMT");
        assert_close(
            clock.read(Some(&late), t3, &local).instant_of(NOON + 3),
            t1 + ms(2_000),
        );
        // The service's clock stepped back by 5 s: the new reading wins at once.
        let t4 = t0 + ms(1_600);
        let back = with_date("Sun, 22 Nov 2026 11:59:57 GMT");
        assert_close(
            clock.read(Some(&back), t4, &local).instant_of(NOON + 3),
            t4 + ms(6_000),
        );
    }

    /// A `Date` outside the kept reading's bounds, a backend ahead or a step forward, is another
    /// clock and followed at once, as one behind is: each answer places resets by its own clock.
    #[tokio::test(start_paused = true)]
    async fn a_date_outside_the_bounds_is_another_clock_followed_at_once() {
        let mut clock = ServerClock::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        #[track_caller]
        fn end(clock: &mut ServerClock, date: &str, at: Instant) -> Instant {
            let reading = clock.read(Some(&with_date(date)), at, &Clock::new());
            reading.instant_of(NOON + 60)
        }
        assert_close(
            end(&mut clock, "Sun, 22 Nov 2026 12:00:00 GMT", t0),
            t0 + ms(60_000),
        );
        let t1 = t0 + ms(100);
        assert_close(
            end(&mut clock, "Sun, 22 Nov 2026 12:00:05 GMT", t1),
            t1 + ms(55_000),
        );
        let t2 = t0 + ms(200);
        assert_close(
            end(&mut clock, "Sun, 22 Nov 2026 12:00:00 GMT", t2),
            t2 + ms(60_000),
        );
    }

    /// Found by the simulation explorer's soak (seed 3570: 32 instances, one of two backends
    /// a second ahead of the limiter): an instance whose first answer came from the backend
    /// ahead skipped the `Date` of the one behind, equal to what the first had shown a
    /// second before, and placed every window's end a second early.
    #[tokio::test(start_paused = true)]
    async fn a_date_seen_again_a_second_later_is_another_clock_behind() {
        let local = Clock::new();
        let mut clock = ServerClock::default();
        let t0 = Instant::now();
        // The limiter reads NOON + 0.5 s at t0, the backend ahead NOON + 1.5 s.
        let date = with_date("Sun, 22 Nov 2026 12:00:01 GMT");
        let early = clock.read(Some(&date), t0, &local).instant_of(NOON + 60);
        assert_eq!(early, t0 + Duration::from_millis(59_000));
        // A second later the backend behind, on the limiter's clock, shows the same value.
        let later = t0 + Duration::from_secs(1);
        let end = clock.read(Some(&date), later, &local).instant_of(NOON + 60);
        assert!(
            end >= t0 + Duration::from_millis(59_500),
            "the end placed {:?} before the limiter's",
            (t0 + Duration::from_millis(59_500)).duration_since(end)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn far_timestamps_saturate() {
        let local = Clock::new();
        let at = Instant::now();
        let server = ServerTime::of_response(
            Some(&with_date("Sun, 22 Nov 2026 12:00:00 GMT")),
            at,
            &local,
        );
        assert!(server.instant_of(i64::MAX) > at + Duration::from_secs(86_400 * 365));
        assert_eq!(server.instant_of(i64::MIN), at);
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_is_placed_no_earlier_than_the_requests_counted_before_it_allow() {
        let mut clock = ServerClock::default();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // A backend whose `Date` reads 44 s ahead of the limiter, which reads NOON at t0 and
        // writes resets: a period ending at NOON + 1 counted a request sent at t0.
        let reading = ServerTime::at_unix(NOON + 44, t0 + ms(90));
        assert_eq!(
            reading.instant_of(NOON + 1),
            t0 + ms(90),
            "by the Date alone: passed"
        );
        // The reading is more than 42.91 s ahead, and up to a second more.
        let end = clock.place_reset(&reading, NOON + 1, t0);
        assert_close(end, t0 + ms(1_000));
        // The next period's reset, at NOON + 11, is placed by that bound, at its true end.
        let later = ServerTime::at_unix(NOON + 49, t0 + ms(5_000));
        let end = clock.place_reset(&later, NOON + 11, t0 + ms(4_900));
        assert_close(end, t0 + ms(11_000));
        // A bound a minute old no longer counts: the two clocks may have drifted since. This
        // answer's own bound is looser, 9 s below the true end, which was t0 + 70 s.
        let much_later = ServerTime::at_unix(NOON + 105, t0 + ms(61_000));
        let end = clock.place_reset(&much_later, NOON + 70, t0 + ms(60_990));
        assert_close(end, t0 + ms(61_990));
        // Of a backend in step with the limiter, the `Date` places resets.
        let mut clock = ServerClock::default();
        let in_step = ServerTime::at_unix(NOON, t0 + ms(90));
        let end = clock.place_reset(&in_step, NOON + 10, t0);
        assert_eq!(end, in_step.instant_of(NOON + 10));
    }
}
