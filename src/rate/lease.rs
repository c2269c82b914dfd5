//! A lease: requests the fleet's store grants this process at once, spent here with no round trip
//! each; what is not spent goes back with the next round trip.
//!
//! Sized by the rate the last lease was spent at, over [`LEASE_FOR`] (as Envoy's quota service and
//! Google's Doorman do); the store caps it by the window's time left and a share of what is left
//! (`redis.lua`), so the fleet never overspends and leaves little unspent at a window's end.

// Without the `redis` feature no store exists, and the parts only a store uses go unused.
#![cfg_attr(not(feature = "redis"), allow(dead_code))]

use std::time::Duration;

use tokio::time::Instant;

/// How long a lease may be spent, and so how late a quiet another instance met (a 429's
/// `Retry-After`) reaches a steady caller, who asks the store at least this often.
pub(crate) const LEASE_FOR: Duration = Duration::from_millis(100);

/// Bounds what a call cancelled while its lease is granted leaves unspent until the window ends.
const LARGEST: u64 = 1_024;

/// What the store granted with an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Grant {
    /// Requests in all, the admitted one included.
    pub(crate) units: u64,
    /// How long the lease may be spent, from when it was asked for.
    pub(crate) lasts: Duration,
    /// How long until the last of its windows ends.
    pub(crate) windows_last: Duration,
    /// The periods of the windows it was taken from (none: the key is not metered).
    pub(crate) periods: Vec<i64>,
}

impl Grant {
    /// One admission and no lease: sizes the next lease when requests come one by one.
    pub(crate) fn single() -> Self {
        Self {
            units: 1,
            lasts: Duration::ZERO,
            windows_last: Duration::ZERO,
            periods: Vec::new(),
        }
    }
}

/// Leased requests not spent, to be given back to the windows they were taken from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Return {
    pub(crate) units: u64,
    /// The store's number for the lease's first admission: a store whose count of admissions is
    /// lower lost the state since, and the windows it holds now never lent these.
    pub(crate) first: u64,
    pub(crate) periods: Vec<i64>,
    /// When the last of its windows ends: given back later, it gives nothing.
    pub(crate) until: Instant,
}

/// This process's lease, spent or not: what it has left, and what sizes the next one.
#[derive(Debug)]
pub(crate) struct Lease {
    first: u64,
    /// The store's number for the next admission spent from it.
    next: u64,
    left: u64,
    until: Instant,
    /// Whether it was taken from the window budgets, or only obeys the cooldown.
    metered: bool,
    periods: Vec<i64>,
    windows_until: Instant,
    /// Requests spent from it, the asking one included: the rate the next is sized by.
    spent: u64,
    granted_at: Instant,
}

impl Lease {
    /// The lease of `grant`, asked for at `asked` (its time runs from then, never later than the
    /// store's); admission `first`, the asking request's own, is spent already.
    pub(crate) fn new(grant: Grant, first: u64, metered: bool, asked: Instant) -> Self {
        Self {
            first,
            next: first.saturating_add(1),
            left: grant.units.saturating_sub(1),
            until: asked + grant.lasts,
            metered,
            periods: grant.periods,
            windows_until: asked + grant.windows_last,
            spent: 1,
            granted_at: Instant::now(),
        }
    }

    /// Spends one at `now`: its admission number, or `None` if none is left or `metered` differs.
    pub(crate) fn spend(&mut self, now: Instant, metered: bool) -> Option<u64> {
        if self.left == 0 || now >= self.until || self.metered != metered {
            return None;
        }
        self.left -= 1;
        self.spent += 1;
        self.next = self.next.saturating_add(1);
        Some(self.next - 1)
    }

    /// Ends it at once (a quiet, or its time is over): what was not spent, to give back.
    pub(crate) fn end(&mut self) -> Option<Return> {
        let units = std::mem::take(&mut self.left);
        (units > 0 && !self.periods.is_empty()).then(|| Return {
            units,
            first: self.first,
            periods: self.periods.clone(),
            until: self.windows_until,
        })
    }

    /// Which lease it is: the store's number for its first admission.
    pub(crate) fn first(&self) -> u64 {
        self.first
    }

    pub(crate) fn until(&self) -> Instant {
        self.until
    }

    pub(crate) fn over(&self, now: Instant) -> bool {
        now >= self.until
    }

    /// Whether it was taken from the window of `period`, or the key is not metered.
    pub(crate) fn covers(&self, period: i64) -> bool {
        !self.metered || self.periods.contains(&period)
    }

    /// Whether it has requests left to spend at `now`.
    pub(crate) fn open(&self, now: Instant) -> bool {
        self.left > 0 && !self.over(now)
    }

    /// How many to ask for next: this lease's rate from its grant to `now`, over [`LEASE_FOR`].
    pub(crate) fn want(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.granted_at).as_secs_f64();
        let wanted = self.spent as f64 * LEASE_FOR.as_secs_f64() / elapsed.max(1e-6);
        // `as` saturates a float too large, and reads NaN as 0.
        (wanted.ceil() as u64).clamp(1, LARGEST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(units: u64) -> Grant {
        Grant {
            units,
            lasts: LEASE_FOR,
            windows_last: Duration::from_secs(60),
            periods: vec![1_000, 86_400],
        }
    }

    #[test]
    fn a_lease_spends_its_admissions_in_order_until_spent_or_over() {
        let asked = Instant::now();
        let mut lease = Lease::new(grant(3), 7, true, asked);
        assert_eq!(
            lease.spend(asked, false),
            None,
            "not for an unmetered admission"
        );
        assert_eq!(lease.spend(asked, true), Some(8));
        assert_eq!(lease.spend(asked, true), Some(9));
        assert_eq!(lease.spend(asked, true), None, "spent");

        let mut lease = Lease::new(grant(3), 7, true, asked);
        assert_eq!(lease.spend(asked + LEASE_FOR, true), None, "over");
        assert!(lease.over(asked + LEASE_FOR));
        assert_eq!(
            lease.end(),
            Some(Return {
                units: 2,
                first: 7,
                periods: vec![1_000, 86_400],
                until: asked + Duration::from_secs(60),
            }),
            "what was not spent goes back to its windows"
        );
        assert_eq!(lease.end(), None, "given back once");
    }

    #[test]
    fn the_next_lease_is_sized_by_the_rate_the_last_was_spent_at() {
        let mut lease = Lease::new(grant(10), 1, true, Instant::now());
        let start = lease.granted_at;
        for _ in 0..4 {
            lease.spend(start, true);
        }
        // 5 spent in 10 ms: 500 a second, 50 in the next 100 ms.
        assert_eq!(lease.want(start + Duration::from_millis(10)), 50);
        lease.end();
        assert_eq!(
            lease.want(start + Duration::from_millis(10)),
            50,
            "what is given back was not spent"
        );
        assert_eq!(
            lease.want(start + Duration::from_secs(60)),
            1,
            "at least one"
        );
        assert_eq!(lease.want(start), LARGEST, "at most the largest");
    }
}
