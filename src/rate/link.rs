//! A client's link to the state its fleet shares in a store: what a request asks of it.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Once};

use super::lease;
use super::outbox::Outcome;
use super::store::{Present, Seen, SharedStore};

/// The state the fleet shares for this client's key.
#[derive(Debug)]
pub(super) struct StoreLink {
    pub(super) store: Arc<SharedStore>,
    /// The key's state in the store.
    pub(super) name: String,
    /// Hears the quiets other instances report, from the first call on (it needs a runtime).
    pub(super) listening: Once,
    /// A call has waited to hear how many instances listen ([`StoreLink::hear_the_fleet`]).
    pub(super) counted_once: AtomicBool,
    /// Without the `redis` feature no link can be made, and no code for one is built.
    pub(super) present: Present,
}

/// A permit's link to the fleet's store, by value uninhabited without the `redis` feature.
#[derive(Clone, Copy)]
pub(super) struct Linked<'a> {
    link: &'a StoreLink,
    _present: Present,
}

impl std::ops::Deref for Linked<'_> {
    type Target = StoreLink;

    fn deref(&self) -> &StoreLink {
        self.link
    }
}

impl StoreLink {
    pub(super) fn linked(&self) -> Linked<'_> {
        Linked {
            link: self,
            _present: self.present,
        }
    }

    /// Tells the store that this process's probe is over, unsent, so that another probes.
    pub(super) fn probe_over(&self) {
        let (store, name) = (Arc::clone(&self.store), self.name.clone());
        tokio::spawn(async move { store.report(&name, &[], Outcome::Normal).await });
    }

    /// Gives `back` what a lease did not spend, with the next round trip.
    pub(super) fn give_back(&self, back: Option<lease::Return>) {
        if let Some(back) = back {
            self.store.give_back(&self.name, back);
        }
    }
}

/// What a request asks the fleet's store.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask {
    /// Whether to spend from the window budgets, or only obey the cooldown.
    pub(super) metered: bool,
    /// What the store gave this process ([`Exchange::seen`](super::exchange::Exchange::seen)).
    pub(super) seen: Seen,
    /// Admitted as if the store counted every instance: without its verdict, decided again.
    pub(super) exact: bool,
    /// How many requests to admit at once: more than one asks for a lease.
    pub(super) want: u64,
    /// Uninhabited without the `redis` feature, as [`StoreLink`]'s.
    pub(super) _present: Present,
}
