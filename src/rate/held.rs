//! Why and how long admission held a request: what `execute` turns into call info and errors.

use std::time::Duration;

use tokio::time::Instant;

use super::pacer::{Decision, Hold};
use crate::headers::Quota;

/// What held a request back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeldBy {
    /// This process's discipline.
    Process(Hold),
    /// The fleet's shared state.
    Store,
    /// The requests ahead of it in line.
    Line,
}

/// What `decision` holds a request by, if anything; `remote` is the fleet's hold in force.
pub(super) fn held_by(decision: Decision, remote: Option<(Instant, Hold)>) -> Option<HeldBy> {
    match decision {
        Decision::Go { .. } => None,
        Decision::Until(until, hold) if remote == Some((until, hold)) => Some(HeldBy::Store),
        Decision::Until(_, hold) | Decision::ForResponse(hold) => Some(HeldBy::Process(hold)),
    }
}

/// How long admission held a request in all, and the longest unbroken hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Waited {
    pub(crate) total: Duration,
    pub(crate) longest: Option<(HeldBy, Duration)>,
}

impl Waited {
    /// Adds the wait of a later admission of the same call.
    pub(crate) fn add(&mut self, later: Waited) {
        self.total += later.total;
        if let Some((by, lasted)) = later.longest {
            self.keep_longest(by, lasted);
        }
    }

    fn keep_longest(&mut self, by: HeldBy, lasted: Duration) {
        if lasted > self.longest.map_or(Duration::ZERO, |(_, longest)| longest) {
            self.longest = Some((by, lasted));
        }
    }
}

/// One admission's holds, one unbroken stretch at a time; deciding or asking the store is no hold.
#[derive(Default)]
pub(super) struct Holds {
    current: Option<(HeldBy, Instant)>,
    waited: Waited,
}

impl Holds {
    /// From `now` on the request is held by `by` (`None`: not held).
    pub(super) fn at(&mut self, now: Instant, by: Option<HeldBy>) {
        if self.current.map(|(held_by, _)| held_by) == by {
            return;
        }
        if let Some((held_by, since)) = self.current.take() {
            let lasted = now - since;
            self.waited.total += lasted;
            self.waited.keep_longest(held_by, lasted);
        }
        self.current = by.map(|by| (by, now));
    }

    pub(super) fn end(mut self, now: Instant) -> Waited {
        self.at(now, None);
        self.waited
    }
}

/// A request the rate discipline would hold past the instant its call gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// How long it would still be held.
    pub(crate) retry_after: Duration,
    /// The latest quota any response reported.
    pub(crate) quota: Option<Quota>,
    /// Held by the quiet a 503 asked for, not by the rate limit.
    pub(crate) unavailable: bool,
    /// How long it was held before it gave up.
    pub(crate) waited: Waited,
}
