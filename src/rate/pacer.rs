//! The pacer: whether a request may go now, given the gate, what is known of the budget, and
//! the requests in flight.
//!
//! [`Pacing::Shared`] spends what remains of a window evenly over the time that remains,
//! scaled by how many instances share the key. Instances that know nothing of each other and
//! each do so cannot empty a window before its end: as the budget falls, every one of them
//! slows down, and each sees the fall in the next response it gets. Between answers each
//! takes the others to go on spending at that pace, and a window that their pace would empty
//! before its end (a day that binds) is spread over all the time it has left.

use std::time::Duration;

use tokio::time::Instant;

use super::Pacing;
use super::budget::{Known, MAX_INSTANCES, RESERVE_SHARE, RESERVE_WITHIN};
use super::gate::Gate;

/// The longest span over which a budget is spread while the pace it falls at leaves some at
/// its end: a day's budget is then not rationed over the whole day, only kept from being
/// spent faster than over a minute, the service's shorter window.
const HORIZON: Duration = Duration::from_secs(60);

/// Confirmations after which a key's only user sends as many at once as the budget allows.
const MAX_DOUBLINGS: u32 = 20;

/// Why a request waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// The gate is closed after a response that asked for quiet.
    Cooldown,
    /// Another request is finding out the budget (at the start, after a window ended, or
    /// after a cooldown); this one goes when it is answered.
    Probe,
    /// The budget of a window is spent (counting requests in flight).
    Spent,
    /// A window allows no request at all (`X-RateLimit-Limit: 0`).
    ZeroLimit,
    /// Spreading the budget over the window.
    Pace,
}

impl Hold {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Cooldown => "the service asked for quiet",
            Self::Probe => "waiting for a response to tell the rate-limit budget",
            Self::Spent => "the rate-limit budget of the window is spent",
            Self::ZeroLimit => "the rate limit allows no request in this window",
            Self::Pace => "spreading the rate-limit budget over the window",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Send now; a probe goes alone.
    Go { probe: bool },
    /// Wait until then, or until a response changes what is known.
    Until(Instant, Hold),
    /// Wait for a response.
    ForResponse(Hold),
}

/// What the pacer looks at.
pub(crate) struct View<'a> {
    pub(crate) gate: &'a Gate,
    /// A hold the fleet's shared state asked for, while it lasts.
    pub(crate) remote: Option<(Instant, Hold)>,
    pub(crate) known: Known,
    pub(crate) instances: f64,
    /// Every report is explained by this process's own requests.
    pub(crate) alone: bool,
    /// Reports in a row this process's own requests explained.
    pub(crate) confirmed: u32,
    pub(crate) wire: Wire,
}

/// The requests admitted to the wire whose answers are not in yet.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wire {
    pub(crate) in_flight: u64,
    /// Requests admitted in all.
    pub(crate) sent: u64,
    /// A probe is among them: nothing else goes until it is answered.
    pub(crate) probe: bool,
    pub(crate) last_admit: Option<Instant>,
}

impl Wire {
    pub(crate) fn admit(&mut self, now: Instant, probe: bool) {
        self.in_flight += 1;
        self.sent += 1;
        self.probe |= probe;
        self.last_admit = Some(now);
    }

    pub(crate) fn release(&mut self, probe: bool) {
        self.in_flight -= 1;
        if probe {
            self.probe = false;
        }
    }
}

pub(crate) fn decide(view: &View<'_>, pacing: Pacing, now: Instant) -> Decision {
    let metered = pacing != Pacing::Off;
    if let Known::Budget(budget) = view.known {
        // No wait helps before the window ends, and waiting out a cooldown for it would
        // queue every call behind one probe per window.
        if metered && budget.zero_limit {
            return Decision::Until(budget.reset_at, Hold::ZeroLimit);
        }
    }
    if let Some(until) = view.gate.closed_until(now) {
        return Decision::Until(until, Hold::Cooldown);
    }
    if let Some((until, hold)) = view.remote {
        return Decision::Until(until, hold);
    }
    if view.gate.half_open() || (metered && view.known == Known::Unknown) {
        return if view.wire.probe {
            Decision::ForResponse(Hold::Probe)
        } else {
            Decision::Go { probe: true }
        };
    }
    let Known::Budget(budget) = view.known else {
        return Decision::Go { probe: false };
    };
    if !metered {
        return Decision::Go { probe: false };
    }
    let in_flight = view.wire.in_flight;
    if budget.remaining <= in_flight {
        let reopens = budget
            .windows()
            .iter()
            .filter(|window| window.remaining <= in_flight)
            .map(|window| window.reopens)
            .max()
            .unwrap_or(budget.reset_at);
        return Decision::Until(reopens, Hold::Spent);
    }
    if pacing == Pacing::Sole {
        return Decision::Go { probe: false };
    }
    // A key's only user, as far as every answer shows, never waits to send while nothing is
    // on the wire; more at once only as the spreading below allows (freely when the budget is
    // ample), because a 429 the budget did not foretell lands on every request on the wire.
    // The last fifth of a window that ends soon is spread like the rest, not spent at once,
    // so that a process starting after this one does not meet a spent window.
    let reserve = if budget.reset_at.saturating_duration_since(now) <= RESERVE_WITHIN {
        budget.limit / RESERVE_SHARE
    } else {
        0
    };
    if view.alone && in_flight == 0 && budget.remaining > reserve {
        return Decision::Go { probe: false };
    }
    // Alone, more at once only as answers in a row confirm it, twice as many with each (TCP's
    // slow start): instances that start together each take themselves to be alone until
    // their second answer, and more of their requests on the wire by then would empty a
    // window that allows a few per instance. Not where the most instances believed in could
    // not empty the window that way (an "unlimited" quota).
    let unconfirmed = in_flight >= 1 << view.confirmed.min(MAX_DOUBLINGS);
    if view.alone && unconfirmed && (in_flight + 1) as f64 * MAX_INSTANCES > budget.remaining as f64
    {
        return Decision::ForResponse(Hold::Pace);
    }
    // This instance's share of what is left, in flight at once.
    if in_flight > 0 && in_flight as f64 >= budget.remaining as f64 / view.instances {
        return Decision::ForResponse(Hold::Pace);
    }
    let Some(last) = view.wire.last_admit else {
        return Decision::Go { probe: false };
    };
    let mut gap = Duration::ZERO;
    let mut first_reset = budget.reset_at;
    for window in budget.windows() {
        let reopens = window.reopens;
        if window.reset_at <= now {
            // Ended but not reopened: another instance's 429 may still hold the key.
            return Decision::Until(reopens, Hold::Pace);
        }
        first_reset = first_reset.min(reopens);
        let span = window.reset_at.saturating_duration_since(now);
        // Once others are seen, a window that the fleet's pace would empty early is spread
        // over all its time: its 429 would hold the key to its end, and every instance that
        // has not met it would call into that `Retry-After`.
        let span = if window.runs_out && !view.alone {
            span
        } else {
            span.min(HORIZON)
        };
        // What the others spent since the last answer is in no answer yet: projected at the
        // pace the budget has fallen, once others are seen.
        let known = if view.alone {
            window.remaining as f64
        } else {
            window.projected
        };
        // The fleet's pace has spent the window: a request now would meet its 429, or the
        // `Retry-After` another instance's 429 near the end holds into the next window.
        if !view.alone && known < 1.0 {
            return Decision::Until(reopens, Hold::Pace);
        }
        let left = (known - in_flight as f64 * view.instances).max(0.0);
        // `left + 1` intervals, so that the last request goes before the reset, not at it.
        gap = gap.max(span.mul_f64(view.instances / (left + 1.0)));
    }
    let next = last
        .checked_add(gap)
        .unwrap_or(first_reset)
        .min(first_reset);
    if next > now {
        Decision::Until(next, Hold::Pace)
    } else {
        Decision::Go { probe: false }
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;
    use crate::headers::{Quiet, Quota};
    use crate::rate::budget::{Budgets, Own};

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// This process's own requests: `sent` in all, one in flight.
    fn own(sent: u64) -> Own {
        Own {
            sent,
            in_flight: 1,
            answered_sent_at: None,
        }
    }

    /// A window of 60 this process spent itself down to `remaining`, one request at a time.
    fn budgets(remaining: u64, reset_in: Duration, t0: Instant) -> Budgets {
        let mut budgets = Budgets::default();
        let reset = DateTime::from_timestamp(1_000, 0).unwrap();
        let end = t0 + reset_in;
        let first = Own {
            sent: 1,
            in_flight: 1,
            answered_sent_at: None,
        };
        budgets.report(Quota::new(60, 59, reset), end, t0, first);
        let since = Own {
            sent: 60 - remaining,
            in_flight: 1,
            answered_sent_at: None,
        };
        budgets.report(Quota::new(60, remaining, reset), end, t0, since);
        budgets
    }

    fn view<'a>(gate: &'a Gate, budgets: &Budgets, now: Instant) -> View<'a> {
        View {
            gate,
            remote: None,
            known: budgets.known(now),
            instances: budgets.instances(),
            alone: false,
            confirmed: 0,
            wire: Wire::default(),
        }
    }

    #[test]
    fn one_probe_at_a_time_until_the_budget_is_known() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let unknown = Budgets::default();
        let mut view = view(&gate, &unknown, t0);
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Go { probe: true }
        );
        view.wire.probe = true;
        view.wire.in_flight = 1;
        assert_eq!(
            decide(&view, Pacing::Sole, t0),
            Decision::ForResponse(Hold::Probe)
        );
        assert_eq!(
            decide(&view, Pacing::Off, t0),
            Decision::Go { probe: false }
        );
    }

    #[test]
    fn shared_pacing_spreads_what_remains_over_what_is_left_of_the_window() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let known = budgets(29, secs(60), t0);
        let mut view = view(&gate, &known, t0);
        view.wire.last_admit = Some(t0);
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Until(t0 + secs(2), Hold::Pace)
        );
        assert_eq!(
            decide(&view, Pacing::Sole, t0),
            Decision::Go { probe: false }
        );
        view.instances = 3.0;
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Until(t0 + secs(6), Hold::Pace)
        );
        // A share smaller than one request waits for the window to end.
        view.instances = 100.0;
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Until(t0 + secs(60), Hold::Pace)
        );
    }

    #[test]
    fn a_spent_budget_holds_until_the_window_ends_counting_requests_in_flight() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let known = budgets(2, secs(40), t0);
        let mut view = view(&gate, &known, t0);
        view.wire.in_flight = 2;
        for pacing in [Pacing::Shared, Pacing::Sole] {
            assert_eq!(
                decide(&view, pacing, t0),
                Decision::Until(t0 + secs(40), Hold::Spent)
            );
        }
        view.wire.in_flight = 1;
        assert_eq!(
            decide(&view, Pacing::Sole, t0),
            Decision::Go { probe: false }
        );
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Go { probe: false }
        );
        // Two instances share the key: one request in flight is this one's share of two.
        view.instances = 2.0;
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::ForResponse(Hold::Pace)
        );
    }

    #[test]
    fn the_gate_holds_every_mode_then_lets_one_probe_through() {
        let t0 = Instant::now();
        let mut gate = Gate::default();
        gate.close(t0, Quiet::RateLimited(secs(30)), &|_| secs(1));
        let known = budgets(50, secs(60), t0);
        for pacing in [Pacing::Shared, Pacing::Sole, Pacing::Off] {
            let view = view(&gate, &known, t0);
            assert_eq!(
                decide(&view, pacing, t0),
                Decision::Until(t0 + secs(30), Hold::Cooldown)
            );
            let later = t0 + secs(30);
            let mut view = View {
                known: known.known(later),
                ..view
            };
            assert_eq!(decide(&view, pacing, later), Decision::Go { probe: true });
            view.wire.probe = true;
            assert_eq!(
                decide(&view, pacing, later),
                Decision::ForResponse(Hold::Probe)
            );
        }
    }

    #[test]
    fn once_others_are_seen_nothing_goes_in_the_second_after_a_window_ends() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let end = t0 + secs(30);
        let mut seen = Budgets::default();
        let reset = DateTime::from_timestamp(1_000, 0).unwrap();
        seen.report(Quota::new(60, 50, reset), end, t0, own(1));
        seen.report(Quota::new(60, 29, reset), end, t0, own(2));
        let mut view = view(&gate, &seen, t0);
        view.wire.last_admit = Some(t0);
        view.instances = 1.0;
        // Spread up to the window's end, not to its reopening.
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Until(t0 + secs(1), Hold::Pace)
        );
        let in_between = end + Duration::from_millis(500);
        view.known = seen.known(in_between);
        // A second, then this instance's place in the fleet's stagger: 10 spent before its
        // first answer, 21 instances, 100 ms each.
        assert_eq!(
            decide(&view, Pacing::Shared, in_between),
            Decision::Until(end + secs(2), Hold::Pace)
        );
    }

    /// Found by the simulation explorer's soak (seed 5609, 32 instances): an instance that
    /// had not sent for a while was let send in a window's last instant, the gap since its
    /// last request being longer than the pace asked, on a report of what was left that the
    /// others' pace had spent since.
    #[test]
    fn once_others_are_seen_nothing_goes_when_their_pace_has_spent_the_window() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let end = t0 + secs(10);
        let mut seen = Budgets::default();
        let reset = DateTime::from_timestamp(1_000, 0).unwrap();
        seen.report(Quota::new(96, 94, reset), end, t0, own(1));
        seen.report(Quota::new(96, 92, reset), end, t0, own(2));
        // 92 left with 10 s to go, spent evenly by two instances; this one last sent then.
        let decide_at = |now: Instant| {
            let mut view = view(&gate, &seen, now);
            view.wire.last_admit = Some(t0);
            decide(&view, Pacing::Shared, now)
        };
        assert_eq!(
            decide_at(end - secs(2)),
            Decision::Go { probe: false },
            "18 left at their pace"
        );
        let spent = decide_at(end - Duration::from_millis(50));
        assert!(
            matches!(spent, Decision::Until(at, Hold::Pace) if at > end),
            "expected less than one request left at their pace to hold until the window \
             reopens, got {spent:?}"
        );
    }

    #[test]
    fn a_keys_only_user_spreads_the_last_fifth_of_a_window_that_ends_soon() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let view = |remaining, reset_in| {
            let known = budgets(remaining, reset_in, t0);
            let mut view = view(&gate, &known, t0);
            view.alone = known.alone();
            view.wire.last_admit = Some(t0);
            view
        };
        assert_eq!(
            decide(&view(13, secs(60)), Pacing::Shared, t0),
            Decision::Go { probe: false }
        );
        assert_eq!(
            decide(&view(11, secs(60)), Pacing::Shared, t0),
            Decision::Until(t0 + secs(5), Hold::Pace),
            "expected the reserve of 12 spread over the minute left"
        );
        assert_eq!(
            decide(&view(11, secs(61)), Pacing::Shared, t0),
            Decision::Go { probe: false },
            "expected no reserve in a window that ends later than a minute from now"
        );
    }

    #[test]
    fn alone_more_go_at_once_only_as_answers_in_a_row_confirm_it() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let known = budgets(50, secs(60), t0);
        let mut view = view(&gate, &known, t0);
        view.alone = true;
        view.instances = 1.0;
        view.wire.in_flight = 1;
        view.wire.last_admit = Some(t0 - secs(10));
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::ForResponse(Hold::Pace),
            "expected a second request to wait for the first answer before any confirms"
        );
        view.confirmed = 1;
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Go { probe: false }
        );
        view.wire.in_flight = 2;
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::ForResponse(Hold::Pace)
        );
        view.confirmed = 2;
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Go { probe: false }
        );

        let mut unlimited = Budgets::default();
        let reset = DateTime::from_timestamp(1_000, 0).unwrap();
        let own = Own {
            sent: 1,
            in_flight: 1,
            answered_sent_at: None,
        };
        unlimited.report(
            Quota::new(u64::MAX, u64::MAX, reset),
            t0 + secs(60),
            t0,
            own,
        );
        let mut view = View {
            known: unlimited.known(t0),
            ..view
        };
        view.confirmed = 0;
        view.wire.in_flight = 7;
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Go { probe: false },
            "expected no wait for confirmations where no fleet could empty the window"
        );
    }

    #[test]
    fn once_others_are_seen_the_budget_is_taken_to_fall_between_answers() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let mut known = Budgets::default();
        let reset = DateTime::from_timestamp(1_000, 0).unwrap();
        known.report(Quota::new(60, 59, reset), t0 + secs(60), t0, own(1));
        // 30 spent for one request of this process's own: others spend the key.
        known.report(Quota::new(60, 29, reset), t0 + secs(60), t0, own(2));
        let now = t0 + secs(30);
        let mut view = view(&gate, &known, now);
        view.instances = 1.0;
        let last = now - Duration::from_millis(1_500);
        view.wire.last_admit = Some(last);
        // Half the time left since the answer: half the budget left, as the others spread it.
        assert_eq!(
            decide(&view, Pacing::Shared, now),
            Decision::Until(last + secs(30).mul_f64(1.0 / 15.5), Hold::Pace)
        );
        let alone = budgets(29, secs(60), t0);
        let mut view = View {
            known: alone.known(now),
            alone: alone.alone(),
            ..view
        };
        view.wire.in_flight = 1;
        view.confirmed = 1;
        assert_eq!(
            decide(&view, Pacing::Shared, now),
            Decision::Go { probe: false },
            "expected a key's only user to take the answers as they are"
        );
    }

    #[test]
    fn a_window_the_fleets_pace_would_empty_early_is_spread_over_all_its_time() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let mut known = Budgets::default();
        let day = DateTime::from_timestamp(9_000, 0).unwrap();
        known.report(Quota::new(1_000, 1_000, day), t0 + secs(300), t0, own(1));
        // 400 spent in 10 s: at that pace the day runs out 15 s on, long before its end.
        let now = t0 + secs(10);
        known.report(Quota::new(1_000, 600, day), t0 + secs(300), now, own(2));
        let mut view = view(&gate, &known, now);
        view.wire.last_admit = Some(now);
        assert_eq!(view.instances, 400.0);
        assert_eq!(
            decide(&view, Pacing::Shared, now),
            Decision::Until(now + secs(290).mul_f64(400.0 / 601.0), Hold::Pace),
            "expected the day's 290 s left, not a minute, to spread the budget over"
        );
    }

    #[test]
    fn a_zero_limit_is_its_own_hold() {
        let t0 = Instant::now();
        let gate = Gate::default();
        let mut known = Budgets::default();
        let reset = DateTime::from_timestamp(1_000, 0).unwrap();
        known.report(Quota::new(0, 0, reset), t0 + secs(10), t0, Own::default());
        let view = view(&gate, &known, t0);
        assert_eq!(
            decide(&view, Pacing::Shared, t0),
            Decision::Until(t0 + secs(10), Hold::ZeroLimit)
        );
    }
}
