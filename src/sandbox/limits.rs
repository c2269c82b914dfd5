//! Per-key rate limiting on two fixed windows, the cooldown after a 429, and the ban.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::TimeDelta;
use tokio::time::Instant;

use super::Plan;

/// Unix time derived from tokio's clock, anchored once at start, so that a paused clock moves
/// the sandbox's notion of "now" exactly.
#[derive(Debug, Clone, Copy)]
pub(super) struct UnixClock {
    wall: Duration,
    instant: Instant,
}

impl UnixClock {
    /// A clock that reads `start` (the system time if `None`) plus `offset` now.
    pub(super) fn new(start: Option<SystemTime>, offset: TimeDelta) -> Self {
        let start = start.unwrap_or_else(SystemTime::now);
        let shifted = match offset.abs().to_std() {
            Ok(by) if offset < TimeDelta::zero() => start.checked_sub(by),
            Ok(by) => start.checked_add(by),
            Err(_) => Some(start),
        };
        Self {
            wall: shifted
                .unwrap_or(start)
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
            instant: Instant::now(),
        }
    }

    /// Time since the unix epoch now.
    pub(super) fn now(&self) -> Duration {
        self.unix(Instant::now())
    }

    /// Time since the unix epoch at `at`.
    fn unix(&self, at: Instant) -> Duration {
        self.wall + at.saturating_duration_since(self.instant)
    }

    /// The instant at which unix time reads `unix`.
    fn instant(&self, unix: Duration) -> Instant {
        self.instant + unix.saturating_sub(self.wall)
    }
}

/// The configuration of the limiter.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) minute_window: Duration,
    pub(super) day_window: Duration,
    pub(super) ban_threshold: u32,
    pub(super) ban_duration: Duration,
    pub(super) clock_start: Option<SystemTime>,
    pub(super) clock_offset: TimeDelta,
}

/// What the rate-limit headers say, for the window that binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Headers {
    pub(super) limit: u64,
    pub(super) remaining: u64,
    pub(super) reset: u64,
}

/// The limiter's verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Counted; go ahead.
    Allowed(Headers),
    /// Over the limit, or calling during the cooldown (`during_cooldown`): 429 with
    /// `Retry-After` seconds.
    Limited {
        headers: Headers,
        retry_after: u64,
        during_cooldown: bool,
    },
    /// Banned for calling on during a cooldown: 429 with `Retry-After` seconds. The request
    /// itself arrived during a cooldown or the ban.
    Banned { headers: Headers, retry_after: u64 },
}

#[derive(Debug, Default, Clone, Copy)]
struct Window {
    index: u128,
    count: u64,
}

#[derive(Debug)]
struct KeyState {
    plan: Plan,
    minute: Window,
    day: Window,
    cooldown_until: Option<Instant>,
    strikes: u32,
    banned_until: Option<Instant>,
}

impl KeyState {
    /// The key was told to wait until `until`; its strikes count afresh.
    fn cool_down(&mut self, until: Instant) {
        self.cooldown_until = Some(until);
        self.strikes = 0;
    }
}

#[derive(Debug)]
pub(super) struct Limiter {
    limits: Limits,
    clock: UnixClock,
    keys: HashMap<String, KeyState>,
    bans: u64,
    early: u64,
}

impl Limiter {
    pub(super) fn new(
        limits: Limits,
        clock: UnixClock,
        keys: impl IntoIterator<Item = (String, Plan)>,
    ) -> Self {
        Self {
            limits,
            clock,
            keys: keys
                .into_iter()
                .map(|(key, plan)| {
                    let state = KeyState {
                        plan,
                        minute: Window::default(),
                        day: Window::default(),
                        cooldown_until: None,
                        strikes: 0,
                        banned_until: None,
                    };
                    (key, state)
                })
                .collect(),
            bans: 0,
            early: 0,
        }
    }

    pub(super) fn knows(&self, key: &str) -> bool {
        self.keys.contains_key(key)
    }

    pub(super) fn bans(&self) -> u64 {
        self.bans
    }

    /// Requests that arrived while their key was told to wait (a `Retry-After` or a ban).
    pub(super) fn early(&self) -> u64 {
        self.early
    }

    /// The untouched minute window of the Free plan, for responses to unauthenticated requests.
    pub(super) fn anonymous(&self) -> Headers {
        let now = self.clock.unix(Instant::now());
        let limit = u64::from(Plan::Free.per_minute());
        Headers {
            limit,
            remaining: limit,
            reset: window_end(now, self.limits.minute_window),
        }
    }

    /// Decides on one request by `key` (which must be known) arriving now.
    pub(super) fn check(&mut self, key: &str) -> Option<Verdict> {
        let limits = self.limits;
        let clock = self.clock;
        let state = self.keys.get_mut(key)?;
        let now = Instant::now();
        let unix = clock.unix(now);
        roll(&mut state.minute, unix, limits.minute_window);
        roll(&mut state.day, unix, limits.day_window);
        let minute = Bucket::new(
            state.minute,
            state.plan.per_minute(),
            unix,
            limits.minute_window,
        );
        let day = Bucket::new(state.day, state.plan.per_day(), unix, limits.day_window);
        let binding = if day.remaining() < minute.remaining() {
            day
        } else {
            minute
        };

        if let Some(until) = state.banned_until.filter(|until| *until > now) {
            self.early += 1;
            return Some(Verdict::Banned {
                headers: binding.headers(),
                retry_after: ceil_secs(until - now),
            });
        }
        if let Some(until) = state.cooldown_until.filter(|until| *until > now) {
            self.early += 1;
            state.strikes += 1;
            if state.strikes >= limits.ban_threshold {
                state.banned_until = Some(now + limits.ban_duration);
                state.cooldown_until = None;
                self.bans += 1;
                return Some(Verdict::Banned {
                    headers: binding.headers(),
                    retry_after: ceil_secs(limits.ban_duration),
                });
            }
            return Some(Verdict::Limited {
                headers: binding.headers(),
                retry_after: ceil_secs(until - now),
                during_cooldown: true,
            });
        }
        let spent = [minute, day]
            .into_iter()
            .filter(|b| b.remaining() == 0)
            .max_by_key(|b| b.end);
        if let Some(spent) = spent {
            let frees_at = clock.instant(Duration::from_secs(spent.end));
            let retry_after = ceil_secs(frees_at.saturating_duration_since(now)).max(1);
            state.cool_down(now + Duration::from_secs(retry_after));
            return Some(Verdict::Limited {
                headers: spent.headers(),
                retry_after,
                during_cooldown: false,
            });
        }
        state.minute.count += 1;
        state.day.count += 1;
        let mut headers = binding.headers();
        headers.remaining -= 1;
        Some(Verdict::Allowed(headers))
    }

    /// Tells `key` to wait `wait` from now, as a 429 with that `Retry-After` does: requests
    /// during the wait strike toward the ban, counted afresh.
    pub(super) fn cool_down(&mut self, key: &str, wait: Duration) {
        if let Some(state) = self.keys.get_mut(key) {
            state.cool_down(Instant::now() + wait);
        }
    }
}

/// A window's numbers at one moment.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    limit: u64,
    used: u64,
    end: u64,
}

impl Bucket {
    fn new(window: Window, limit: u32, unix: Duration, length: Duration) -> Self {
        Self {
            limit: u64::from(limit),
            used: window.count,
            end: window_end(unix, length),
        }
    }

    fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    fn headers(&self) -> Headers {
        Headers {
            limit: self.limit,
            remaining: self.remaining(),
            reset: self.end,
        }
    }
}

/// Windows are aligned to multiples of their length in unix time, so each ends on a whole
/// second and `X-RateLimit-Reset` is exact.
fn window_index(unix: Duration, length: Duration) -> u128 {
    unix.as_nanos() / length.as_nanos().max(1)
}

fn window_end(unix: Duration, length: Duration) -> u64 {
    let end = (window_index(unix, length) + 1) * length.as_nanos().max(1);
    u64::try_from(end / 1_000_000_000).unwrap_or(u64::MAX)
}

fn roll(window: &mut Window, unix: Duration, length: Duration) {
    let index = window_index(unix, length);
    if index != window.index {
        *window = Window { index, count: 0 };
    }
}

fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}
