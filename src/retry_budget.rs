//! The retry budget: retries limited to a share of a client's recent answers, so that a
//! failing service meets a little extra load, not every call's retries at once.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How many retries a client's calls may make, together, over the last 10 seconds: a share of
/// the answers that needed no retry in that time, plus a minimum, so that a caller that just
/// started is not refused its first retries.
///
/// Every clone of a client spends one budget. When it is spent, a call that would retry ends
/// at once with the error it got, and the refusal is logged at INFO. Retries then come back as
/// answers do (each success, or each answer not worth a retry such as a 404, adds `share` of a
/// retry) and as retries made more than 10 seconds ago stop counting. The default share, 20%,
/// is the extra load reqwest's budget allows, with a smaller minimum of 10: against a service
/// that fails everything, `n` calls within 10 seconds send at most `n + 10` requests, where a
/// policy of 3 retries alone would send `4 × n`.
///
/// ```
/// use petstore_client::{RetryBudget, RetryPolicy};
///
/// let careful = RetryPolicy::builder().retry_budget(RetryBudget::new(0.1, 5)).build();
/// assert_eq!(careful.retry_budget(), RetryBudget::new(0.1, 5));
/// assert_eq!(RetryPolicy::default().retry_budget(), RetryBudget::default());
/// assert_ne!(RetryBudget::unlimited(), RetryBudget::default());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudget {
    /// `None`: unlimited.
    limit: Option<Limit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Limit {
    /// The retry each answer adds, in [`UNIT`]s.
    per_answer: u64,
    /// The retries allowed with no answer at all.
    minimum: u64,
}

impl Default for RetryBudget {
    fn default() -> Self {
        Self::new(0.2, 10)
    }
}

impl RetryBudget {
    /// A budget of `share` of a retry for each recent answer that needed none (0.2: one retry
    /// for five answers), and `minimum` retries more. A `share` below 0 (or NaN) is taken as
    /// 0, only the minimum; one above 1000 as 1000; it counts to a thousandth.
    ///
    /// ```
    /// use petstore_client::{RetryBudget, RetryPolicy};
    ///
    /// // Retries of at most 10% extra load, and 3 for a caller that just started.
    /// let policy = RetryPolicy::builder().retry_budget(RetryBudget::new(0.1, 3)).build();
    /// # assert_eq!(policy.retry_budget(), RetryBudget::new(0.1, 3));
    /// ```
    #[must_use]
    pub fn new(share: f32, minimum: u32) -> Self {
        // `as` saturates, and takes NaN to 0.
        let per_answer = (f64::from(share.clamp(0.0, 1000.0)) * UNIT as f64).round() as u64;
        Self {
            limit: Some(Limit {
                per_answer,
                minimum: u64::from(minimum),
            }),
        }
    }

    /// No budget: every call retries as its policy says, whatever the others do. A service
    /// in trouble then meets every call's retries at once.
    ///
    /// ```
    /// use petstore_client::{RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::builder().retry_budget(RetryBudget::unlimited()).build();
    /// # assert_eq!(policy.retry_budget(), RetryBudget::unlimited());
    /// ```
    #[must_use]
    pub fn unlimited() -> Self {
        Self { limit: None }
    }
}

/// A thousandth of a retry: the unit the budget counts in, so that a share given to three
/// decimals adds up exactly (five answers at 0.2 make one retry).
const UNIT: u64 = 1000;

/// How long an answer or a retry counts toward the budget, as in reqwest and tower.
const WINDOW: Duration = Duration::from_secs(10);

/// The window leaves counts behind a slot at a time.
const SLOTS: usize = 10;

/// The answers and retries of a client's recent calls, shared by its clones.
#[derive(Debug)]
pub(crate) struct RetryWindow {
    slots: Mutex<Slots>,
}

#[derive(Debug)]
struct Slots {
    /// When the current slot began.
    start: Instant,
    current: usize,
    answers: [u64; SLOTS],
    retries: [u64; SLOTS],
}

impl RetryWindow {
    pub(crate) fn new() -> Self {
        Self {
            slots: Mutex::new(Slots {
                start: Instant::now(),
                current: 0,
                answers: [0; SLOTS],
                retries: [0; SLOTS],
            }),
        }
    }

    /// An answer that needed no retry: it adds to the retries the budget allows.
    pub(crate) fn answered(&self) {
        let mut slots = self.lock();
        let current = slots.current;
        slots.answers[current] += 1;
    }

    /// Takes one retry, if `budget` allows it.
    pub(crate) fn take_retry(&self, budget: RetryBudget) -> bool {
        let mut slots = self.lock();
        if let Some(limit) = budget.limit {
            let answers: u64 = slots.answers.iter().sum();
            let retries: u64 = slots.retries.iter().sum();
            let allowed = limit.minimum * UNIT + limit.per_answer.saturating_mul(answers);
            if (retries + 1) * UNIT > allowed {
                return false;
            }
        }
        let current = slots.current;
        slots.retries[current] += 1;
        true
    }

    /// The counts, with the slots that ended more than a window ago emptied.
    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        // No panic can leave the counts inconsistent, so a poisoned lock is still usable.
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = WINDOW / SLOTS as u32;
        let now = Instant::now();
        let since = now.duration_since(slots.start);
        // Most calls come within the current slot: no division for them.
        if since < slot {
            return slots;
        }
        let ended = since.as_nanos() / slot.as_nanos();
        // After a whole window every slot has ended: each is emptied once, and the slots
        // start again now.
        for _ in 0..ended.min(SLOTS as u128) {
            slots.current = (slots.current + 1) % SLOTS;
            let current = slots.current;
            slots.answers[current] = 0;
            slots.retries[current] = 0;
        }
        slots.start = match u32::try_from(ended) {
            Ok(ended) if ended < SLOTS as u32 => slots.start + slot * ended,
            _ => now,
        };
        slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retries_allowed(window: &RetryWindow, budget: RetryBudget) -> usize {
        (0..1000).take_while(|_| window.take_retry(budget)).count()
    }

    #[tokio::test(start_paused = true)]
    async fn without_answers_only_the_minimum_is_allowed() {
        let window = RetryWindow::new();
        assert_eq!(retries_allowed(&window, RetryBudget::new(0.2, 10)), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn each_answer_adds_its_share_exactly() {
        let window = RetryWindow::new();
        for _ in 0..15 {
            window.answered();
        }
        assert_eq!(retries_allowed(&window, RetryBudget::new(0.2, 0)), 3);
        for _ in 0..10 {
            window.answered();
        }
        assert_eq!(
            retries_allowed(&window, RetryBudget::new(0.7, 0)),
            7 * 25 / 10 - 3
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retries_leave_the_window_after_it_ends() {
        let window = RetryWindow::new();
        let budget = RetryBudget::new(0.2, 2);
        assert_eq!(retries_allowed(&window, budget), 2);
        tokio::time::advance(Duration::from_millis(9_999)).await;
        assert!(!window.take_retry(budget), "the retries still count");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(retries_allowed(&window, budget), 2);
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(retries_allowed(&window, budget), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unlimited_budget_allows_every_retry_and_counts_them() {
        let window = RetryWindow::new();
        assert_eq!(retries_allowed(&window, RetryBudget::unlimited()), 1000);
        assert!(!window.take_retry(RetryBudget::new(1000.0, 999)));
    }

    #[test]
    fn shares_out_of_range_are_clamped() {
        assert_eq!(RetryBudget::new(f32::NAN, 1), RetryBudget::new(0.0, 1));
        assert_eq!(RetryBudget::new(-1.0, 1), RetryBudget::new(0.0, 1));
        assert_eq!(RetryBudget::new(1e9, 1), RetryBudget::new(1000.0, 1));
    }
}
