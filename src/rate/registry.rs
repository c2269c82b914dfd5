//! One rate-limit state per service and API key in a process, shared by every client built
//! for them, held weakly so that it goes with the last client.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use url::Url;

use super::identity::service;
use super::{Shared, lock};

/// Keyed by a hash of the service the base URL names and the key (with a random per-process seed); the key
/// itself is never stored.
type Registry = Mutex<HashMap<u64, Weak<Shared>>>;

fn id(base_url: &Url, key: &str) -> u64 {
    static SEED: OnceLock<RandomState> = OnceLock::new();
    let mut hasher = SEED.get_or_init(RandomState::new).build_hasher();
    service(base_url).hash(&mut hasher);
    key.hash(&mut hasher);
    hasher.finish()
}

/// The state for `base_url` and `key`, made with `new` if no live client has one.
pub(super) fn shared(base_url: &Url, key: &str, new: fn() -> Shared) -> Arc<Shared> {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    let mut registry = lock(REGISTRY.get_or_init(Registry::default));
    registry.retain(|_, state| state.strong_count() > 0);
    let id = id(base_url, key);
    if let Some(state) = registry.get(&id).and_then(Weak::upgrade) {
        return state;
    }
    let state = Arc::new(new());
    registry.insert(id, Arc::downgrade(&state));
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_of_one_key_share_a_state_that_goes_with_the_last_of_them() {
        let url = Url::parse("http://127.0.0.1:9/v1/").unwrap();
        let other = Url::parse("http://127.0.0.1:10/v1/").unwrap();
        let a = shared(&url, "registry-test-key", Shared::new);
        let b = shared(&url, "registry-test-key", Shared::new);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &shared(&url, "another-key", Shared::new)));
        assert!(!Arc::ptr_eq(
            &a,
            &shared(&other, "registry-test-key", Shared::new)
        ));
        // Another spelling of the same service: the loopback's other name, no trailing slash.
        let spelt = Url::parse("http://localhost:9/v1").unwrap();
        assert!(Arc::ptr_eq(
            &a,
            &shared(&spelt, "registry-test-key", Shared::new)
        ));
        let weak = Arc::downgrade(&a);
        drop((a, b));
        assert!(weak.upgrade().is_none(), "the registry keeps nothing alive");
    }
}
