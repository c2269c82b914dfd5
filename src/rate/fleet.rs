//! What a client asks the state its fleet shares, and what it hears from it.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::lease::{Grant, Lease};
use super::link::{Ask, StoreLink};
use super::outbox::Outcome;
use super::permit::Permit;
use super::state::{PROBE, Shared, State};
use super::store::{Heard, SharedStore, Told, Verdict};

/// How long an instance whose first admission found no state, while others listen, waits for
/// their answers to its ask for a quiet: a Redis that evicts the state as soon as it is
/// written keeps no cooldown for instances that start during one.
const ASK_FOR: Duration = Duration::from_millis(50);

impl StoreLink {
    /// Starts hearing, for `shared` as long as it lives, the quiets other instances report.
    pub(super) fn listen(&self, shared: &Arc<Shared>) {
        self.listening.call_once(|| {
            let (weak, store, name) = (
                Arc::downgrade(shared),
                Arc::clone(&self.store),
                self.name.clone(),
            );
            let heard: Heard = Arc::new(move |told| {
                let Some(shared) = weak.upgrade() else {
                    return false;
                };
                match told {
                    Told::Quiet(wait) => shared.heard_quiet(wait, &store, &name),
                    Told::Listeners(listeners) => {
                        shared.lock().store.listeners = listeners;
                        shared.counted.notify_waiters();
                    }
                    Told::Uncounted => shared.counted.notify_waiters(),
                    Told::Asked => shared.asked(&store, &name),
                    Told::Nothing => {}
                }
                true
            });
            self.store.listen(&self.name, heard);
        });
    }

    /// On the first call, waits, at most the store's timeout, until the store has said how
    /// many instances listen on the key, or that it cannot: a state the store loses as soon as
    /// it writes it counts no one, and a fleet starting at once would otherwise spend a window
    /// as if each instance were alone.
    pub(super) async fn hear_the_fleet(&self, shared: &Shared) {
        if self.counted_once.load(Ordering::Relaxed) {
            return;
        }
        let counted = shared.counted.notified();
        let mut counted = pin!(counted);
        counted.as_mut().enable();
        if shared.lock().store.listeners == 0 {
            let _ = tokio::time::timeout(self.store.timeout(), counted).await;
        }
        self.counted_once.store(true, Ordering::Relaxed);
    }

    /// The store's verdict on `ask`, and whether it found no state while others listen: a
    /// state lost as soon as it is written keeps no cooldown, so the others are asked for the
    /// quiet they keep, and given [`ASK_FOR`] to answer, before the probe goes.
    async fn verdict(&self, shared: &Shared, ask: &Ask) -> (Option<Verdict>, bool) {
        let verdict = (self.store)
            .admit(&self.name, ask.metered, ask.seen, ask.want)
            .await;
        let found_none = verdict.as_ref().is_some_and(Verdict::opens_the_state)
            && shared.lock().store.listeners > 1;
        if found_none {
            self.store.publish(&self.name, None).await;
            tokio::time::sleep(ASK_FOR).await;
        }
        (verdict, found_none)
    }

    /// Asks the fleet's shared state whether the request the process admitted may go;
    /// `None` if the fleet holds it (the process then holds every request as long).
    pub(super) async fn ask<'a>(
        &'a self,
        shared: &Arc<Shared>,
        mut permit: Permit<'a>,
        ask: Ask,
    ) -> Option<Permit<'a>> {
        let asked = Instant::now();
        let (verdict, found_none) = self.verdict(shared, &ask).await;
        let mut probe_over = false;
        let (permit, wake) = {
            let mut state = shared.lock();
            state.store.verdict(verdict.as_ref(), asked);
            let answered = permit.answered(&mut state);
            // A response of this process asked for quiet while the store decided, too late for
            // the store to have heard of it, or another instance answered the ask with one.
            let told = found_none && state.store.held_for_quiet(Instant::now());
            probe_over |= told;
            let quiet_since = state.gate.generation() != permit.generation || told;
            match verdict {
                Some(Verdict::Go {
                    probe,
                    lost,
                    lost_since,
                    admitted,
                    lease,
                }) if !quiet_since => {
                    if lost {
                        state.store.lost(asked);
                    }
                    if lost_since {
                        state.store.lost_since(asked);
                    }
                    // A loss this instance did not know of: a Redis that evicts the state loses
                    // it for every instance at once, and each probes only as rule N draws it. One
                    // that sits out tells the store its probe is over, so that another probes.
                    if lost && ask.exact && state.draw(Instant::now()) != PROBE {
                        probe_over = true;
                        (None, answered | permit.release(&mut state))
                    } else {
                        // The first admission of a state it did not hold: it may have been lost
                        // before this instance saw it, until a later admission finds it kept.
                        state.store.unconfirmed = admitted == 1;
                        permit.fleet.probe = probe;
                        permit.fleet.admitted = admitted;
                        self.take_lease(shared, &mut state, lease, admitted, ask.metered, asked);
                        (Some(permit), answered)
                    }
                }
                // Not sent: the call waits out the quiet in line like the others; what it
                // leased goes back.
                Some(Verdict::Go {
                    admitted, lease, ..
                }) => {
                    if let Some(grant) = lease {
                        self.give_back(Lease::new(grant, admitted, ask.metered, asked).end());
                    }
                    (None, answered | permit.release(&mut state))
                }
                _ if quiet_since => (None, answered | permit.release(&mut state)),
                // Admitted trusting the store to count the others: not sent, so that the
                // process's own count of them decides it.
                None if ask.exact => (None, answered | permit.release(&mut state)),
                // Without an answer the process's own discipline decides alone, and the fleet
                // hears of the request later.
                None => {
                    permit.fleet.unadmitted = ask.metered;
                    (Some(permit), answered)
                }
                // It was not sent, and the process holds every request as long.
                Some(Verdict::Hold(wait, hold, spent)) => {
                    state.held_by_store(self, wait, hold, spent);
                    (None, answered | permit.release(&mut state))
                }
            }
        };
        shared.wake(wake);
        if probe_over {
            self.probe_over();
        }
        permit
    }

    /// The fleet's store admitted a request asked at `asked` as its `admitted`-th, with `lease`
    /// if it granted one. A request admitted alone starts the next lease's sizing, so that
    /// requests coming faster are leased; one admitted beside a lease, asked for or granted,
    /// leaves it be.
    fn take_lease(
        &self,
        shared: &Arc<Shared>,
        state: &mut State,
        lease: Option<Grant>,
        admitted: u64,
        metered: bool,
        asked: Instant,
    ) {
        let beside = state.store.leasing
            || (state.store.lease.as_ref()).is_some_and(|l| l.open(Instant::now()));
        if lease.is_some() || !beside {
            let grant = lease.unwrap_or_else(Grant::single);
            let mut lease = Lease::new(grant, admitted, metered, asked);
            if let Some(mut last) = state.store.lease.take() {
                self.give_back(last.end());
            }
            // A hold another call met meanwhile ends it at once.
            if state.store.remote.is_some() {
                self.give_back(lease.end());
            }
            if lease.open(asked) {
                tokio::spawn(give_back_when_over(
                    Arc::clone(shared),
                    Arc::clone(&self.store),
                    self.name.clone(),
                    lease.first(),
                    lease.until(),
                ));
            }
            state.store.lease = Some(lease);
        }
    }
}

/// Gives back at once what the lease numbered `first` did not spend when its time is over:
/// the other instances, held while the window's budget is out on leases, find it then, not
/// when this process next calls, which may be after the window's end.
async fn give_back_when_over(
    shared: Arc<Shared>,
    store: Arc<SharedStore>,
    name: String,
    first: u64,
    until: Instant,
) {
    tokio::time::sleep_until(until).await;
    let back = {
        let mut state = shared.lock();
        let lease = state.store.lease.as_mut().filter(|l| l.first() == first);
        lease.and_then(Lease::end)
    };
    if let Some(back) = back {
        store.give_back(&name, back);
        store.report(&name, &[], Outcome::Nothing).await;
    }
}
