//! The rules that decide whether a request goes now (`docs/DESIGN.md`, "Rules"), in the order
//! the page gives them: Z, C, P, S, B, W, F. Each returns at its first hold.

use std::time::Duration;

use tokio::time::Instant;

use super::budget::{Budget, Known};
use super::gate::Gate;

/// How a client spends the rate-limit budget the service reports.
///
/// Set it with [`PetStoreClientBuilder::pacing`](crate::PetStoreClientBuilder::pacing). Every mode
/// holds all requests while the service asked for quiet (after a 429, or a 503 with `Retry-After`),
/// then lets one through before the rest.
///
/// | mode | budget spent | for |
/// | --- | --- | --- |
/// | [`Shared`](Self::Shared) (default) | as fast as calls come while no other instance is seen spending the key, never held while the reported budget lasts (more than one request on the wire at once while each is at most a ninth of what is left); once others are seen, this process's share of what is left, spread over each window's time left | any process: CLIs and batch jobs alone on their key, and replicas, workers and cron jobs on one key, which know nothing of each other (up to 9 of them; more share a `RedisState`, feature `redis`) |
/// | [`Sole`](Self::Sole) | as fast as calls come, all at once, until the window's budget is spent, whatever the answers show | a process known to be the key's only user that wants concurrent requests on the wire |
/// | [`Off`](Self::Off) | not paced: only 429s hold requests back | a service that does not meter by these headers |
///
/// `Shared` and `Sole` assume nothing of a window until a response reports it: at the start, and
/// whenever a window resets, one request goes alone and the others wait for its answer.
///
/// ```
/// use petstore_client::{Pacing, PetStoreClient};
///
/// let client = PetStoreClient::builder()
///     .base_url("https://petstore.example.com/v1")
///     .api_key("my-api-key")
///     .pacing(Pacing::Sole) // this batch job is the key's only user
///     .build()?;
/// # Ok::<(), petstore_client::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Pacing {
    /// Spend as fast as calls come while seen alone on the key; spread a share once others are.
    #[default]
    Shared,
    /// Spend the budget as fast as calls come: this process is the key's only user.
    Sole,
    /// Do not pace by the reported budget.
    Off,
}

/// Rule W: more than one request on the wire only while what is left covers this many times
/// those, the next, and one each of [`UNSEEN`] others: the instances the contract covers, each
/// taking itself for the only user, then cannot empty the window before those requests arrive.
const BURST_SHARE: u64 = 9;

/// Rule C: how much later another's `Retry-After` may end than ours: it is whole seconds, rounded
/// up from another instant.
const ROUNDING: Duration = Duration::from_secs(1);

/// Rule W: the other instances, unseen, that the contract covers beside this one.
const UNSEEN: u64 = 8;

/// Rule S: without rate-limit headers, a key's only user keeps at most 2^(answers in a row − 1)
/// requests on the wire, and at most 2^this (also in an assumed window): the first 429 finds at
/// most 8 of an instance's, too few for a service that bans at the tenth. With others seen, one.
const MAX_DOUBLINGS: u32 = 3;

/// Why a request waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hold {
    /// The gate is closed after a response that asked for quiet.
    Cooldown,
    /// Another request is finding out the budget (rule P); this one goes when it is answered.
    Probe,
    /// The budget of a window is spent (counting requests in flight).
    Spent,
    /// A window allows no request at all (`X-RateLimit-Limit: 0`).
    ZeroLimit,
    /// Spreading the budget over the window, or waiting for an answer before more go at once.
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

const GO: Decision = Decision::Go { probe: false };

/// What the rules look at.
pub(crate) struct View<'a> {
    pub(crate) gate: &'a Gate,
    /// A hold the fleet's shared state asked for, while it lasts.
    pub(crate) remote: Option<(Instant, Hold)>,
    pub(crate) known: Known,
    /// Instances spending the key (rule O), at least 1; 1 while a shared store counts them all.
    pub(crate) instances: f64,
    /// Another instance spends the key, as rule O or a shared store counts them.
    pub(crate) others: bool,
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
    // Rule Z: no wait helps before the window ends.
    if let (true, Known::Budget(budget)) = (metered, &view.known)
        && let Some(until) = budget.zero_limit
    {
        return Decision::Until(until, Hold::ZeroLimit);
    }
    // Rule C, a `ROUNDING` longer with others seen.
    let grace = if view.instances > 1.0 || view.gate.contested() {
        ROUNDING
    } else {
        Duration::ZERO
    };
    let since = now.checked_sub(grace).unwrap_or(now);
    if let Some(until) = view.gate.closed_until(since) {
        return Decision::Until(until + grace, Hold::Cooldown);
    }
    if let Some((until, hold)) = view.remote {
        return Decision::Until(until, hold);
    }
    // Rule P. A probe after a cooldown into a window shown spent would meet a 429: it waits for
    // the window's end (rule B).
    if view.gate.half_open() || (metered && view.known == Known::Unknown) {
        if let (true, Known::Budget(budget)) = (metered, &view.known)
            && let Some(hold @ Decision::Until(..)) = spent(budget, 0)
        {
            return hold;
        }
        return if view.wire.probe {
            Decision::ForResponse(Hold::Probe)
        } else {
            Decision::Go { probe: true }
        };
    }
    let in_flight = view.wire.in_flight;
    let budget = match &view.known {
        _ if !metered => return GO,
        // Rule S. A first header-less answer may be a proxy's page: doubling starts at the second.
        Known::Unreported(_) if view.others && in_flight > 0 => {
            return Decision::ForResponse(Hold::Pace);
        }
        Known::Unreported(answers) => {
            let most = 1u64 << answers.saturating_sub(1).min(MAX_DOUBLINGS);
            return if in_flight >= most {
                Decision::ForResponse(Hold::Pace)
            } else {
                GO
            };
        }
        Known::Unknown => return Decision::Go { probe: true },
        Known::Budget(budget) => budget,
    };
    if let Some(hold) = spent(budget, in_flight) {
        return hold;
    }
    // Rule S in an assumed window: its budget is a guess that only a 429 corrects.
    let most = if view.others { 1 } else { 1 << MAX_DOUBLINGS };
    if in_flight >= most && budget.windows.iter().any(|w| w.ends.is_none()) {
        return Decision::ForResponse(Hold::Pace);
    }
    if pacing == Pacing::Sole {
        return GO;
    }
    // Rule W.
    if in_flight > 0 && (in_flight + 1 + UNSEEN).saturating_mul(BURST_SHARE) > budget.remaining() {
        return Decision::ForResponse(Hold::Pace);
    }
    if view.instances <= 1.0 {
        return GO;
    }
    fair_share(budget, view, now)
}

/// Rule B: a window the requests in flight spend holds until it reopens; an assumed one (no end
/// known) lets one request at a time find out.
fn spent(budget: &Budget, in_flight: u64) -> Option<Decision> {
    let window = budget.windows.iter().find(|w| w.remaining <= in_flight)?;
    match window.ends {
        Some(span) => Some(Decision::Until(span.reopens, Hold::Spent)),
        None if in_flight == 0 => None,
        None => Some(Decision::ForResponse(Hold::Spent)),
    }
}

/// Rule F: this process's share of each window's projected budget, spread over its time left.
fn fair_share(budget: &Budget, view: &View<'_>, now: Instant) -> Decision {
    let instances = view.instances;
    let in_flight = view.wire.in_flight;
    let mut gap = Duration::ZERO;
    let mut reopens: Option<Instant> = None;
    for span in budget.windows.iter().filter_map(|w| w.ends) {
        // The others' pace has spent the window: a request now would meet its 429.
        if span.projected < 1.0 {
            return Decision::Until(span.reopens, Hold::Pace);
        }
        if in_flight > 0 && in_flight as f64 >= span.projected / instances {
            return Decision::ForResponse(Hold::Pace);
        }
        let left = (span.projected - in_flight as f64 * instances).max(0.0);
        let time_left = span.reset_at.saturating_duration_since(now);
        // `left + 1` intervals, so that the last request goes before the reset, not at it.
        gap = gap.max(time_left.mul_f64(instances / (left + 1.0)));
        reopens = Some(reopens.map_or(span.reopens, |r| r.min(span.reopens)));
    }
    let Some(last) = view.wire.last_admit else {
        return GO;
    };
    let next = last.checked_add(gap).unwrap_or(last);
    let next = reopens.map_or(next, |r| next.min(r));
    if next > now {
        Decision::Until(next, Hold::Pace)
    } else {
        GO
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;

    use super::*;
    use crate::headers::{Quiet, Quota};
    use crate::rate::budget::{Budgets, Own};

    const T: i64 = 1_800_000_060;

    fn secs(n: f64) -> Duration {
        Duration::from_secs_f64(n)
    }

    /// A budget of `remaining` of 60 in a window that ends `ends_in` after `t0`, reported to a
    /// process that sent one request.
    fn budgets(remaining: u64, ends_in: Duration, t0: Instant) -> Budgets {
        budgets_of(60, remaining, ends_in, t0)
    }

    /// [`budgets`] of a window of `limit`.
    fn budgets_of(limit: u64, remaining: u64, ends_in: Duration, t0: Instant) -> Budgets {
        let mut budgets = Budgets::default();
        let own = Own {
            sent: 1,
            in_flight: 1,
            answered_sent_at: Some(t0),
        };
        let reset = DateTime::from_timestamp(T, 0).unwrap();
        budgets.report(Quota::new(limit, remaining, reset), t0 + ends_in, t0, own);
        budgets
    }

    /// What the rules see of a process whose last request was admitted at `t0`.
    fn view(gate: &Gate, known: Known, instances: f64, in_flight: u64, t0: Instant) -> View<'_> {
        View {
            gate,
            remote: None,
            known,
            instances,
            others: instances > 1.0,
            wire: Wire {
                in_flight,
                sent: in_flight,
                probe: false,
                last_admit: Some(t0),
            },
        }
    }

    #[test]
    fn one_probe_at_a_time_until_the_budget_is_known() {
        let gate = Gate::default();
        let now = Instant::now();
        let mut unknown = view(&gate, Known::Unknown, 1.0, 0, now);
        assert_eq!(
            decide(&unknown, Pacing::Shared, now),
            Decision::Go { probe: true }
        );
        unknown.wire.probe = true;
        assert_eq!(
            decide(&unknown, Pacing::Sole, now),
            Decision::ForResponse(Hold::Probe)
        );
    }

    #[test]
    fn a_keys_only_user_is_never_held_while_the_budget_lasts() {
        let now = Instant::now();
        let gate = Gate::default();
        for remaining in [1, 2, 12] {
            let known = budgets(remaining, secs(5.0), now).known(now);
            let decision = decide(&view(&gate, known, 1.0, 0, now), Pacing::Shared, now);
            assert_eq!(decision, GO, "with {remaining} left");
        }
        let known = budgets(1_000, secs(3_600.0), now).known(now);
        let decision = decide(&view(&gate, known, 1.0, 100, now), Pacing::Shared, now);
        assert_eq!(decision, GO, "an ample budget takes all the wire can carry");
    }

    #[test]
    fn a_spent_budget_holds_until_the_window_ends_counting_requests_in_flight() {
        let now = Instant::now();
        let gate = Gate::default();
        let known = budgets(2, secs(5.0), now).known(now);
        let decision = decide(&view(&gate, known, 1.0, 2, now), Pacing::Sole, now);
        assert_eq!(decision, Decision::Until(now + secs(5.0), Hold::Spent));
    }

    #[test]
    fn more_than_one_on_the_wire_only_while_the_budget_covers_nine_shares_and_eight_others() {
        let now = Instant::now();
        let gate = Gate::default();
        // A second request: (2 + 8) × 9 must be left.
        let known = budgets(89, secs(30.0), now).known(now);
        let held = decide(&view(&gate, known, 1.0, 1, now), Pacing::Shared, now);
        assert_eq!(held, Decision::ForResponse(Hold::Pace));
        let known = budgets(90, secs(30.0), now).known(now);
        assert_eq!(
            decide(&view(&gate, known, 1.0, 1, now), Pacing::Shared, now),
            GO
        );
    }

    #[test]
    fn without_headers_the_wire_doubles_with_each_answer_up_to_eight() {
        let gate = Gate::default();
        let now = Instant::now();
        let first = view(&gate, Known::Unreported(1), 1.0, 1, now);
        let held = decide(&first, Pacing::Shared, now);
        assert_eq!(
            held,
            Decision::ForResponse(Hold::Pace),
            "one answer may be a proxy's"
        );
        let known = Known::Unreported(3);
        let three = view(&gate, known.clone(), 1.0, 3, now);
        assert_eq!(decide(&three, Pacing::Shared, now), GO);
        let four = view(&gate, known, 1.0, 4, now);
        assert_eq!(
            decide(&four, Pacing::Shared, now),
            Decision::ForResponse(Hold::Pace)
        );
        let many = Known::Unreported(40);
        assert_eq!(
            decide(&view(&gate, many.clone(), 1.0, 7, now), Pacing::Shared, now),
            GO
        );
        assert_eq!(
            decide(&view(&gate, many, 1.0, 8, now), Pacing::Shared, now),
            Decision::ForResponse(Hold::Pace),
            "at most 8 on the wire however many answers came"
        );
    }

    #[test]
    fn an_assumed_window_keeps_at_most_eight_on_the_wire_however_ample() {
        let gate = Gate::default();
        let t0 = Instant::now();
        let now = t0 + secs(2.0);
        let mut budgets = budgets_of(1_000, 900, secs(1.0), t0);
        // The reset passed and the answer after it has no rate-limit headers (rule A).
        budgets.report_none(now, Own::default());
        let known = budgets.known(now);
        assert!(
            matches!(&known, Known::Budget(b) if b.windows[0].ends.is_none() && b.remaining() == 1_000),
            "{known:?}"
        );
        for pacing in [Pacing::Shared, Pacing::Sole] {
            let seven = view(&gate, known.clone(), 1.0, 7, now);
            assert_eq!(decide(&seven, pacing, now), GO, "{pacing:?}");
            let eight = view(&gate, known.clone(), 1.0, 8, now);
            assert_eq!(
                decide(&eight, pacing, now),
                Decision::ForResponse(Hold::Pace),
                "{pacing:?}: a 429 from a window the headers never showed finds at most 8"
            );
        }
    }

    #[test]
    fn with_others_seen_and_no_headers_one_request_at_a_time() {
        let gate = Gate::default();
        let t0 = Instant::now();
        let now = t0 + secs(2.0);
        let mut budgets = budgets_of(1_000, 900, secs(1.0), t0);
        budgets.report_none(now, Own::default());
        for known in [Known::Unreported(40), budgets.known(now)] {
            let mut others = view(&gate, known.clone(), 1.0, 0, now);
            others.others = true;
            assert_eq!(decide(&others, Pacing::Shared, now), GO, "{known:?}");
            others.wire.in_flight = 1;
            assert_eq!(
                decide(&others, Pacing::Shared, now),
                Decision::ForResponse(Hold::Pace),
                "{known:?}: the first 429 finds at most one request of this instance"
            );
        }
    }

    #[test]
    fn once_others_are_seen_a_share_is_spread_over_the_time_left() {
        let now = Instant::now();
        let gate = Gate::default();
        let known = budgets(10, secs(11.0), now).known(now);
        // Two instances: this one's next request 11 s × 2 / 11 after its last.
        let decision = decide(
            &view(&gate, known.clone(), 2.0, 0, now),
            Pacing::Shared,
            now,
        );
        assert_eq!(decision, Decision::Until(now + secs(2.0), Hold::Pace));
        assert_eq!(
            decide(
                &view(&gate, known, 2.0, 0, now),
                Pacing::Shared,
                now + secs(2.0)
            ),
            GO
        );
    }

    #[test]
    fn the_gate_holds_every_mode_then_lets_one_probe_through() {
        let now = Instant::now();
        let mut gate = Gate::default();
        let quiet = Quiet::RateLimited(secs(3.0));
        gate.close(now, quiet, gate.generation(), &|_| Duration::ZERO);
        let known = budgets(30, secs(30.0), now).known(now);
        for pacing in [Pacing::Shared, Pacing::Sole, Pacing::Off] {
            let decision = decide(&view(&gate, known.clone(), 1.0, 0, now), pacing, now);
            assert_eq!(decision, Decision::Until(now + secs(3.0), Hold::Cooldown));
            let later = now + secs(3.0);
            let decision = decide(&view(&gate, known.clone(), 1.0, 0, now), pacing, later);
            assert_eq!(decision, Decision::Go { probe: true });
        }
    }

    #[test]
    fn with_others_the_gate_holds_a_second_past_the_retry_after() {
        let now = Instant::now();
        let mut gate = Gate::default();
        gate.close(
            now,
            Quiet::RateLimited(secs(3.0)),
            gate.generation(),
            &|_| Duration::ZERO,
        );
        let known = budgets(30, secs(30.0), now).known(now);
        let seen = decide(
            &view(&gate, known.clone(), 2.0, 0, now),
            Pacing::Shared,
            now,
        );
        assert_eq!(seen, Decision::Until(now + secs(4.0), Hold::Cooldown));
        gate.contest();
        let shown = decide(&view(&gate, known, 1.0, 0, now), Pacing::Shared, now);
        assert_eq!(shown, Decision::Until(now + secs(4.0), Hold::Cooldown));
    }

    #[test]
    fn after_a_cooldown_the_probe_waits_for_the_end_of_a_window_the_429_showed_spent() {
        let now = Instant::now();
        let mut gate = Gate::default();
        gate.close(
            now,
            Quiet::RateLimited(secs(2.0)),
            gate.generation(),
            &|_| Duration::ZERO,
        );
        let known = budgets(0, secs(30.0), now).known(now);
        let later = now + secs(2.0);
        for pacing in [Pacing::Shared, Pacing::Sole] {
            let decision = decide(&view(&gate, known.clone(), 1.0, 0, now), pacing, later);
            assert_eq!(decision, Decision::Until(now + secs(30.0), Hold::Spent));
        }
        let off = decide(&view(&gate, known, 1.0, 0, now), Pacing::Off, later);
        assert_eq!(off, Decision::Go { probe: true });
    }

    #[test]
    fn a_zero_limit_is_its_own_hold() {
        let now = Instant::now();
        let gate = Gate::default();
        let mut zero = Budgets::default();
        let reset = DateTime::from_timestamp(T, 0).unwrap();
        zero.report(
            Quota::new(0, 0, reset),
            now + secs(10.0),
            now,
            Own::default(),
        );
        let decision = decide(
            &view(&gate, zero.known(now), 1.0, 0, now),
            Pacing::Shared,
            now,
        );
        assert_eq!(decision, Decision::Until(now + secs(10.0), Hold::ZeroLimit));
    }
}
