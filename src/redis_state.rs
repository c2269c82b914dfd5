//! [`RedisState`]: the rate-limit state a fleet of instances shares through Redis.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::rate::{self, SharedStore};

/// A rate-limit state shared through Redis by every client configured with it, in any process
/// on any host: the budget of each rate-limit window the service reports, spent atomically
/// before each request, and the cooldown after a 429 (or a 503 with `Retry-After`).
///
/// Requires the `redis` feature. Give it to
/// [`PetStoreClientBuilder::shared_state`](crate::PetStoreClientBuilder::shared_state); clients
/// share a state when they use the same Redis, the same base URL and the same API key.
///
/// ```no_run
/// use petstore_client::{PetStoreClient, RedisState};
///
/// let client = PetStoreClient::builder()
///     .base_url("https://petstore.example.com/v1")
///     .api_key("my-api-key")
///     .shared_state(RedisState::new("redis://127.0.0.1:6379/")?)
///     .build()?;
/// # Ok::<(), petstore_client::Error>(())
/// ```
///
/// **What is stored:** one hash per API key and base URL, named `petstore-client:v1:{` and 32
/// hexadecimal digits of a SHA-256 of the base URL and the key (never the key itself) and `}`
/// (a Cluster hash tag), with
/// the windows' limits, budgets left and ends (four windows at most, each known by its period
/// and removed once the period has ended), the cooldown's end, and whether an instance is
/// finding out a new window period. Nothing else: no pet, response or key. It expires a minute
/// after the last thing it knows has passed.
///
/// **Cost:** one round trip per request (a Lua script); one more for the few responses the
/// other instances wait for (a 429, and the first answer in a window period).
///
/// **When Redis is down, slow or restarted,** calls go on under the process's own rate
/// discipline (the one that runs without Redis): every Redis operation gives up after
/// [`timeout`](Self::timeout), one `WARN` is logged per outage, and sharing resumes when Redis
/// answers again. No call fails or waits longer because of Redis.
///
/// The connection is made on first use, on the Tokio runtime of that call, and kept, with
/// reconnects, for the clients and clones using this value; a value used on a runtime that has
/// since shut down treats Redis as unreachable. Its `Debug` output shows the address, never a
/// password in the URL.
#[derive(Clone)]
pub struct RedisState {
    store: Arc<SharedStore>,
    address: String,
}

impl RedisState {
    /// A state kept in the Redis at `url` (`redis://[user:password@]host[:port][/db]`).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the URL is not a Redis URL. Nothing is connected yet.
    pub fn new(url: &str) -> Result<Self, Error> {
        let client = redis::Client::open(url).map_err(|error| {
            // The URL may hold a password: it is not repeated.
            Error::config(format!("invalid Redis URL: {:?}", error.kind()))
        })?;
        Ok(Self::from_client(client))
    }

    /// A state kept in the Redis that `client` connects to.
    pub fn from_client(client: redis::Client) -> Self {
        let address = client.get_connection_info().addr().to_string();
        Self {
            store: Arc::new(rate::redis_store(client)),
            address,
        }
    }

    /// How long any Redis operation may take before it is given up on and the call goes on
    /// without it; 250 ms by default. Keep it well under the service's response time.
    #[must_use]
    pub fn timeout(self, timeout: Duration) -> Self {
        Self {
            store: Arc::new(self.store.with_timeout(timeout)),
            address: self.address,
        }
    }

    pub(crate) fn store(&self) -> Arc<SharedStore> {
        Arc::clone(&self.store)
    }
}

impl fmt::Debug for RedisState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisState")
            .field("address", &self.address)
            .field("timeout", &self.store.timeout())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neither_debug_nor_an_error_shows_the_password_in_the_url() {
        let state = RedisState::new("redis://user:s3cret-pass@127.0.0.1:6379/").unwrap();
        let debug = format!("{state:?}");
        assert!(!debug.contains("s3cret-pass"), "{debug}");
        assert!(debug.contains("127.0.0.1:6379"), "{debug}");
        let error = RedisState::new("http://user:s3cret-pass@host/").unwrap_err();
        assert!(!error.to_string().contains("s3cret-pass"), "{error}");
    }
}
