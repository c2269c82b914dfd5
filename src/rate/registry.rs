//! One rate-limit state per service and API key in a process, shared by every client built
//! for them, held weakly so that it goes with the last client.

use std::any::Any;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use url::Url;

use super::identity::service;
use super::lock::lock;

/// Which clients share one rate-limit state (budgets, cooldown, the queue of held requests).
///
/// Set it with [`rate_limit_scope`](crate::PetStoreClientBuilder::rate_limit_scope) on the builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum RateLimitScope {
    /// Every client in this process built for the same base URL and API key shares one state, so a
    /// client built per request or per module cannot defeat the discipline. The state is found by a
    /// hash of the key, never the key, and freed with the last client using it.
    ///
    /// Base URLs are compared by scheme, port and path, never by the host's spelling (a trailing
    /// dot, a public and an internal name, a name and its address), since one key is one budget.
    /// Two services on one port and path that meter one key apart need [`Client`](Self::Client)
    /// (and, with a shared state, a Redis each: it names the state by service and key alone).
    #[default]
    Process,
    /// This client and its clones have a state of their own, as if in a process of their own
    /// (for tests that play several independent instances).
    Client,
}

/// Keyed by a hash of the service and the key, seeded per process; the key is never stored.
type Registry = Mutex<HashMap<u64, Weak<dyn Any + Send + Sync>>>;

fn id(base_url: &Url, key: &str) -> u64 {
    static SEED: OnceLock<RandomState> = OnceLock::new();
    let mut hasher = SEED.get_or_init(RandomState::new).build_hasher();
    service(base_url).hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish()
}

/// The state for `base_url` and `key`, made with `new` if no live client has one.
pub(super) fn shared<T: Any + Send + Sync>(base_url: &Url, key: &str, new: fn() -> T) -> Arc<T> {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    let mut registry = lock(REGISTRY.get_or_init(Registry::default));
    registry.retain(|_, state| state.strong_count() > 0);
    let id = id(base_url, key);
    let live = registry.get(&id).and_then(Weak::upgrade);
    if let Some(state) = live.and_then(|state| state.downcast::<T>().ok()) {
        return state;
    }
    let state = Arc::new(new());
    let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(&state) as _;
    registry.insert(id, weak);
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state of its own type, so that no other test's state answers for it.
    #[derive(Default)]
    struct State;

    #[test]
    fn clients_of_one_key_share_a_state_that_goes_with_the_last_of_them() {
        let url = Url::parse("http://127.0.0.1:9/v1/").unwrap();
        let other = Url::parse("http://127.0.0.1:10/v1/").unwrap();
        let a = shared(&url, "registry-test-key", State::default);
        let b = shared(&url, "registry-test-key", State::default);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(
            &a,
            &shared(&url, "another-key", State::default)
        ));
        assert!(!Arc::ptr_eq(
            &a,
            &shared(&other, "registry-test-key", State::default)
        ));
        // Another spelling of the same service: another host name, no trailing slash.
        let spelt = Url::parse("http://localhost:9/v1").unwrap();
        assert!(Arc::ptr_eq(
            &a,
            &shared(&spelt, "registry-test-key", State::default)
        ));
        let weak = Arc::downgrade(&a);
        drop((a, b));
        assert!(weak.upgrade().is_none(), "the registry keeps nothing alive");
    }
}
