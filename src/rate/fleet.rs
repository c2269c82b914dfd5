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

/// How long an instance whose admission found no state while others listen waits for answers to
/// its ask for a quiet: a Redis evicting on write keeps no cooldown for instances starting in one.
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

    /// First call only: waits (at most the store's timeout) until the store says how many instances
    /// listen on the key, or that it cannot. A state lost on write counts no one: a fleet starting
    /// at once would otherwise spend a window as if each instance were alone.
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

    /// The store's verdict on `ask`, and whether it found no state while others listen: then the
    /// others are asked for the quiet they keep, and given [`ASK_FOR`], before the probe goes.
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

    /// Asks the fleet's store whether `permit` may go; `None` if the fleet holds it (the process
    /// then holds every request as long).
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
            // A quiet came while the store decided: from a response here, too late for the store
            // to have heard of it, or from another instance answering the ask.
            let told = found_none && state.store.held_for_quiet(Instant::now());
            probe_over |= told;
            let quiet_since = state.gate.generation() != permit.generation || told;
            let sent = match verdict {
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
                    // A loss this instance did not know of: an evicting Redis loses the state
                    // for every instance at once, so each probes only as rule N draws. One that
                    // sits out tells the store its probe is over, so that another probes.
                    let sits_out = lost && ask.exact && state.draw(Instant::now()) != PROBE;
                    probe_over |= sits_out;
                    if !sits_out {
                        // The first admission of a state it did not hold: it may have been lost
                        // before this instance saw it, until a later admission finds it kept.
                        state.store.unconfirmed = admitted == 1;
                        permit.fleet.probe = probe;
                        permit.fleet.admitted = admitted;
                        self.take_lease(shared, &mut state, lease, admitted, ask.metered, asked);
                    }
                    !sits_out
                }
                // Not sent: it waits out the quiet in line like the others; its lease goes back.
                Some(Verdict::Go {
                    admitted, lease, ..
                }) => {
                    if let Some(grant) = lease {
                        self.give_back(Lease::new(grant, admitted, ask.metered, asked).end());
                    }
                    false
                }
                _ if quiet_since => false,
                // Admitted trusting the store to count the others: not sent, so that the
                // process's own count of them decides it.
                None if ask.exact => false,
                // No answer: this process's discipline decides; the fleet hears of it later.
                None => {
                    permit.fleet.unadmitted = ask.metered;
                    true
                }
                Some(Verdict::Hold(wait, hold, spent)) => {
                    state.held_by_store(self, wait, hold, spent);
                    false
                }
            };
            let wake = answered | (!sent && permit.release(&mut state));
            (sent.then_some(permit), wake)
        };
        shared.wake(wake);
        if probe_over {
            self.probe_over();
        }
        permit
    }

    /// The store admitted a request asked at `asked` as its `admitted`-th, with `lease` if granted.
    /// One admitted alone starts the next lease's sizing, so that faster requests are leased; one
    /// beside a lease, asked for or granted, leaves it be.
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

/// When lease `first` is over, gives back at once what it did not spend: the others, held while
/// the budget is out on leases, get it then, not at the next call here, maybe after the window.
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
