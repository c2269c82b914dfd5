//! The cooldown gate: after a response that asks for quiet (a 429, or a 503 with
//! `Retry-After`), no request of any clone goes out until the wait is over; then one request
//! probes before the rest are let through, so that held requests do not all fire at once into
//! a service that is still refusing.

use tokio::time::Instant;

use crate::clock;
use crate::retry::{Quiet, RetryPolicy};

#[derive(Debug, Default)]
pub(crate) struct Gate {
    until: Option<Instant>,
    /// Responses in a row that asked for quiet: each closes the gate for longer, so that a
    /// service answering `Retry-After: 0` to every request is still backed off from.
    strikes: u32,
    /// The gate has closed and no response since has said the service is answering normally.
    half_open: bool,
    cause: Option<Quiet>,
}

impl Gate {
    /// A response that arrived at `at` asked for quiet: close for the longer of what it asked
    /// and the policy's backoff for this many strikes in a row.
    pub(crate) fn close(&mut self, at: Instant, quiet: Quiet, policy: &RetryPolicy) {
        let wait = quiet.wait().max(policy.step(self.strikes));
        self.strikes = self.strikes.saturating_add(1);
        let until = clock::after_from(at, wait);
        if self.until.is_none_or(|current| current < until) {
            self.until = Some(until);
            self.cause = Some(quiet);
        }
        self.half_open = true;
    }

    /// A response that asked for no quiet: the service is answering again.
    pub(crate) fn open(&mut self) {
        self.strikes = 0;
        self.half_open = false;
    }

    /// Until when the gate is closed, if it is at `now`.
    pub(crate) fn closed_until(&self, now: Instant) -> Option<Instant> {
        self.until.filter(|until| *until > now)
    }

    /// Whether the next request must go alone, as a probe.
    pub(crate) fn half_open(&self) -> bool {
        self.half_open
    }

    /// What closed the gate last.
    pub(crate) fn cause(&self) -> Option<Quiet> {
        self.cause
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn each_quiet_response_in_a_row_closes_for_longer_never_below_what_was_asked() {
        let policy = RetryPolicy::default();
        let t0 = Instant::now();
        let mut gate = Gate::default();
        let mut closed_for = Vec::new();
        for _ in 0..6 {
            gate.close(t0, Quiet::RateLimited(Duration::ZERO), &policy);
            closed_for.push(gate.closed_until(t0).unwrap() - t0);
        }
        let secs = |s: f64| Duration::from_secs_f64(s);
        assert_eq!(closed_for, [0.5, 1.0, 2.0, 4.0, 8.0, 8.0].map(secs));
        gate.close(t0, Quiet::RateLimited(Duration::from_secs(30)), &policy);
        assert_eq!(gate.closed_until(t0), Some(t0 + Duration::from_secs(30)));
        assert!(gate.half_open());
        gate.open();
        assert!(!gate.half_open());
        gate.close(t0, Quiet::Unavailable(Duration::ZERO), &policy);
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
}
