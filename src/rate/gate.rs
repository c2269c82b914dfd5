//! The cooldown gate: after a response asking for quiet (a 429, or a 503 with `Retry-After`), no
//! request of any clone goes out until the wait is over; then one probes before the rest, so held
//! requests do not all fire at once into a service still refusing.
//!
//! Only fresh evidence opens it: each closing starts a generation, each request carries the one
//! it was admitted under, and the answer to a request sent before the last closing (a late 2xx)
//! can neither open the gate nor reset the backoff.

use std::time::Duration;

use tokio::time::Instant;

use crate::clock;
use crate::headers::{Quiet, QuotaReading};

#[derive(Debug, Default)]
pub(crate) struct Gate {
    until: Option<Instant>,
    /// Quiet answers in a row: each closes for longer, so a steady `Retry-After: 0` is backed off.
    strikes: u32,
    /// The gate has closed and no response since has said the service is answering normally.
    half_open: bool,
    cause: Option<Quiet>,
    /// How many times the gate has closed: the generation of its state.
    generation: u64,
    /// Its last closing showed others spending the key: their `Retry-After`s may end later.
    contested: bool,
    /// A response that closed it, now or before, showed others spending the key.
    others_shown: bool,
}

impl Gate {
    /// A response at `at` to a request of `generation` asked for quiet: close for the longer of
    /// that and `backoff` of the strikes before it. An answer to a request sent before the last
    /// closing is of the burst that closed it: no strike of its own, and no new generation.
    pub(crate) fn close(
        &mut self,
        at: Instant,
        quiet: Quiet,
        generation: u64,
        backoff: &dyn Fn(u32) -> Duration,
    ) {
        let fresh = generation == self.generation;
        let strikes = if fresh {
            self.strikes
        } else {
            self.strikes.saturating_sub(1)
        };
        let wait = quiet.wait().max(backoff(strikes));
        if fresh {
            self.strikes = self.strikes.saturating_add(1);
            self.generation += 1;
            self.contested = false;
        }
        let until = clock::after_from(at, wait);
        if self.until.is_none_or(|current| current < until) {
            self.until = Some(until);
            self.cause = Some(quiet);
        }
        self.half_open = true;
    }

    /// The response that last closed the gate showed others spending the key.
    pub(crate) fn contest(&mut self) {
        self.contested = true;
        self.others_shown = true;
    }

    /// Whether others were seen spending the key as the gate last closed.
    pub(crate) fn contested(&self) -> bool {
        self.contested
    }

    /// Whether a 429 read as `reading`, after `sent` own requests (`in_period` at most in its
    /// period), shows others: its window was spent by more than `sent` (it may be a longer
    /// window's), is untouched (quiet left from the window before), or has budget left (another's
    /// quiet) once a 429 showed others or more were used than `in_period`; unreadable, it may.
    pub(crate) fn shows_others(&self, reading: &QuotaReading, sent: u64, in_period: u64) -> bool {
        match reading {
            QuotaReading::Read(quota, _) => {
                quota.used() > sent
                    || quota.remaining == quota.limit
                    || (quota.remaining > 0 && (self.others_shown || quota.used() > in_period))
            }
            QuotaReading::Unreadable => true,
            QuotaReading::Absent => false,
        }
    }

    /// A non-quiet answer to a request of `generation`: the service answers again if that request
    /// was sent since the last closing.
    pub(crate) fn open(&mut self, generation: u64) {
        if generation == self.generation {
            self.strikes = 0;
            self.half_open = false;
        }
    }

    /// The generation a request admitted now is sent under.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Until when the gate is closed, if it is at `now`.
    pub(crate) fn closed_until(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|until| *until > now)
    }

    /// Whether the next request must go alone, as a probe.
    pub(crate) fn half_open(&self) -> bool {
        self.half_open
    }

    pub(crate) fn cause(&self) -> Option<Quiet> {
        self.cause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default retry policy's steps: 0.5 s, doubled each time, up to 8 s.
    fn backoff(strikes: u32) -> Duration {
        (Duration::from_millis(500) * 2u32.pow(strikes.min(4))).min(Duration::from_secs(8))
    }

    #[test]
    fn each_quiet_response_in_a_row_closes_for_longer_never_below_what_was_asked() {
        let t0 = Instant::now();
        let mut gate = Gate::default();
        let mut closed_for = Vec::new();
        for _ in 0..6 {
            gate.close(
                t0,
                Quiet::RateLimited(Duration::ZERO),
                gate.generation(),
                &backoff,
            );
            closed_for.push(gate.closed_until(t0).unwrap() - t0);
        }
        let secs = |s: f64| Duration::from_secs_f64(s);
        assert_eq!(closed_for, [0.5, 1.0, 2.0, 4.0, 8.0, 8.0].map(secs));
        let generation = gate.generation();
        gate.close(
            t0,
            Quiet::RateLimited(Duration::from_secs(30)),
            generation,
            &backoff,
        );
        assert_eq!(gate.closed_until(t0), Some(t0 + Duration::from_secs(30)));
        assert!(gate.half_open());
        gate.open(gate.generation());
        assert!(!gate.half_open());
        gate.close(
            t0,
            Quiet::Unavailable(Duration::ZERO),
            gate.generation(),
            &backoff,
        );
        assert_eq!(
            gate.closed_until(t0),
            Some(t0 + Duration::from_secs(30)),
            "never shortened"
        );
        assert_eq!(
            gate.cause(),
            Some(Quiet::RateLimited(Duration::from_secs(30)))
        );
    }

    #[test]
    fn a_429_with_budget_left_shows_others_once_a_429_showed_them() {
        let read = |remaining| {
            let reset = chrono::DateTime::from_timestamp(1_800_000_060, 0).unwrap();
            QuotaReading::Read(
                crate::headers::Quota::new(20, remaining, reset),
                crate::headers::ResetGiven::At,
            )
        };
        let mut gate = Gate::default();
        // Budget left and no one seen: a fault, or a limit the headers do not show.
        assert!(!gate.shows_others(&read(18), 2, 2));
        assert!(
            gate.shows_others(&read(0), 2, 2),
            "spent by 20 where 2 were sent"
        );
        assert!(gate.shows_others(&read(20), 2, 2), "untouched");
        assert!(gate.shows_others(&QuotaReading::Unreadable, 2, 2));
        assert!(!gate.shows_others(&QuotaReading::Absent, 2, 2));
        assert!(
            gate.shows_others(&read(18), 2, 1),
            "budget left after more than this process sent into the period"
        );
        assert!(
            !gate.shows_others(&read(0), 20, 1),
            "a spent period may be a longer window's: judged by all sent"
        );
        gate.close(
            Instant::now(),
            Quiet::RateLimited(Duration::ZERO),
            gate.generation(),
            &backoff,
        );
        gate.contest();
        gate.close(
            Instant::now(),
            Quiet::RateLimited(Duration::ZERO),
            gate.generation(),
            &backoff,
        );
        assert!(!gate.contested(), "each closing is judged anew");
        // Once others were shown, a 429 with budget left is another's quiet.
        assert!(gate.shows_others(&read(18), 2, 2));
    }

    #[test]
    fn only_an_answer_to_a_request_sent_after_the_closing_opens_the_gate() {
        let quiet = Quiet::RateLimited(Duration::ZERO);
        let t0 = Instant::now();
        let mut gate = Gate::default();
        let sent_before = gate.generation();
        gate.close(t0, quiet, gate.generation(), &backoff);
        gate.close(t0, quiet, gate.generation(), &backoff);
        gate.open(sent_before);
        assert!(
            gate.half_open(),
            "an answer to a request sent before the 429s skipped the probe"
        );
        gate.close(t0, quiet, gate.generation(), &backoff);
        assert_eq!(
            gate.closed_until(t0),
            Some(t0 + Duration::from_secs(2)),
            "expected the third closing in a row to back off 2 s: a stale answer reset the count"
        );
        gate.open(gate.generation());
        assert!(!gate.half_open(), "an answer to the probe opens the gate");
        let later = t0 + Duration::from_secs(10);
        gate.close(later, quiet, gate.generation(), &backoff);
        assert_eq!(
            gate.closed_until(later),
            Some(later + Duration::from_millis(500)),
            "expected the backoff to start over after the gate opened"
        );
    }

    #[test]
    fn the_quiet_answers_of_one_burst_are_one_strike() {
        let quiet = Quiet::RateLimited(Duration::ZERO);
        let t0 = Instant::now();
        let mut gate = Gate::default();
        let burst = gate.generation();
        for _ in 0..8 {
            gate.close(t0, quiet, burst, &backoff);
        }
        assert_eq!(
            gate.closed_until(t0),
            Some(t0 + Duration::from_millis(500)),
            "expected eight 429s to requests sent together to back off as one"
        );
        gate.close(t0, quiet, gate.generation(), &backoff);
        assert_eq!(
            gate.closed_until(t0),
            Some(t0 + Duration::from_secs(1)),
            "expected the probe's 429 to be the second strike"
        );
    }
}
