//! Held requests, first in first out. Only the first waits on the rate-limit state, so a response
//! wakes one waiter, not all; a request that would give up before the one ahead goes fails at once.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::Poll;

use tokio::sync::watch;
use tokio::time::Instant;

use super::lock::lock;
use super::pacer::Hold;

#[derive(Debug)]
pub(super) struct Line {
    turn: tokio::sync::Mutex<()>,
    /// Until when the first in line is held, and why.
    ahead: watch::Sender<(Instant, Hold)>,
    /// How many requests in line give up at each instant.
    waiting: Mutex<BTreeMap<Instant, usize>>,
}

/// The first place in line; leaving it (admitted, failed or cancelled) lets the next go.
pub(super) struct Turn<'a> {
    line: &'a Line,
    _first: tokio::sync::MutexGuard<'a, ()>,
    /// Whether this turn told the line about a hold, which leaving it must take back.
    published: Cell<bool>,
}

impl Line {
    pub(super) fn new() -> Self {
        Self {
            turn: tokio::sync::Mutex::new(()),
            ahead: watch::Sender::new((Instant::now(), Hold::Pace)),
            waiting: Mutex::default(),
        }
    }

    /// Waits for the first place in line. Fails with the hold of the request ahead when that
    /// lasts past `give_up_at`, or when `give_up_at` comes first.
    pub(super) async fn join(&self, give_up_at: Instant) -> Result<Turn<'_>, (Instant, Hold)> {
        // Nobody in line: the common case costs no registration.
        if let Some(turn) = self.try_join() {
            return Ok(turn);
        }
        let _waiting = Waiting::new(self, give_up_at);
        let mut ahead = self.ahead.subscribe();
        let mut turn = pin!(self.turn.lock());
        let mut held_too_long = pin!(ahead.wait_for(|(until, _)| *until > give_up_at));
        let mut given_up = pin!(tokio::time::sleep_until(give_up_at));
        std::future::poll_fn(|cx| {
            if let Poll::Ready(first) = turn.as_mut().poll(cx) {
                return Poll::Ready(Ok(self.turn_with(first)));
            }
            if let Poll::Ready(Ok(held)) = held_too_long.as_mut().poll(cx) {
                return Poll::Ready(Err(*held));
            }
            if given_up.as_mut().poll(cx).is_ready() {
                let (until, hold) = *self.ahead.borrow();
                return Poll::Ready(Err((until.max(give_up_at), hold)));
            }
            Poll::Pending
        })
        .await
    }
}

impl Line {
    /// The turn, if nobody has it: [`join`](Self::join) without a wait.
    pub(super) fn try_join(&self) -> Option<Turn<'_>> {
        self.turn.try_lock().ok().map(|first| self.turn_with(first))
    }

    fn turn_with<'a>(&'a self, first: tokio::sync::MutexGuard<'a, ()>) -> Turn<'a> {
        Turn {
            line: self,
            _first: first,
            published: Cell::new(false),
        }
    }
}

impl Turn<'_> {
    /// Publishes the hold to later joiners; those in line wake only if one gives up before `until`.
    pub(super) fn held(&self, until: Instant, hold: Hold) {
        let line = self.line;
        let wake = lock(&line.waiting)
            .keys()
            .next()
            .is_some_and(|first| *first < until);
        line.ahead.send_if_modified(|ahead| {
            *ahead = (until, hold);
            wake
        });
        self.published.set(true);
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if !self.published.get() {
            return;
        }
        self.line.ahead.send_if_modified(|ahead| {
            ahead.0 = Instant::now();
            false
        });
    }
}

/// A request in line, registered with the instant it gives up.
struct Waiting<'a> {
    line: &'a Line,
    give_up_at: Instant,
}

impl<'a> Waiting<'a> {
    fn new(line: &'a Line, give_up_at: Instant) -> Self {
        *lock(&line.waiting).entry(give_up_at).or_default() += 1;
        Self { line, give_up_at }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = lock(&self.line.waiting);
        if let Some(count) = waiting.get_mut(&self.give_up_at) {
            *count -= 1;
            if *count == 0 {
                waiting.remove(&self.give_up_at);
            }
        }
    }
}
