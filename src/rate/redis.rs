//! The shared rate-limit state in Redis: one hash per API key and base URL, changed only by
//! one Lua script (`redis.lua`), so that each admission is one atomic round trip.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;
use tokio::time::Instant;
use url::Url;

use super::fleet::{
    Admission, BoxFuture, Fleet, FleetStore, Outcome, PROBE_FOR, Verdict, WindowReport,
};
use super::pacer::Hold;
use crate::error::Error;

/// The prefix of every Redis key this crate writes.
const PREFIX: &str = "petstore-client:v1:";

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
/// **What is stored:** one hash per API key and base URL, named `petstore-client:v1:` and 32
/// hexadecimal digits of a SHA-256 of the base URL and the key (never the key itself), with
/// the windows' limits, budgets left and ends, the cooldown's end, and whether an instance is
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
    fleet: Arc<Fleet>,
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
        let store = RedisStore {
            client,
            connection: OnceCell::new(),
            script: redis::Script::new(include_str!("redis.lua")),
        };
        Self {
            fleet: Arc::new(Fleet::new(Arc::new(store))),
            address,
        }
    }

    /// How long any Redis operation may take before it is given up on and the call goes on
    /// without it; 250 ms by default. Keep it well under the service's response time.
    #[must_use]
    pub fn timeout(self, timeout: Duration) -> Self {
        Self {
            fleet: Arc::new(self.fleet.with_timeout(timeout)),
            address: self.address,
        }
    }

    pub(crate) fn fleet(&self) -> Arc<Fleet> {
        Arc::clone(&self.fleet)
    }
}

impl fmt::Debug for RedisState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisState")
            .field("address", &self.address)
            .field("timeout", &self.fleet.timeout())
            .finish()
    }
}

struct RedisStore {
    client: redis::Client,
    connection: OnceCell<ConnectionManager>,
    script: redis::Script,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field(
                "address",
                &self.client.get_connection_info().addr().to_string(),
            )
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    async fn connection(&self) -> Result<ConnectionManager, String> {
        let manager = self
            .connection
            .get_or_try_init(|| async {
                // The caller's timeout bounds every operation; the manager only reconnects,
                // once per failure, rather than retrying with its own backoff.
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(0)
                    .set_connection_timeout(Some(Duration::from_secs(1)))
                    .set_response_timeout(Some(Duration::from_secs(1)));
                ConnectionManager::new_lazy_with_config(self.client.clone(), config)
            })
            .await
            .map_err(|error| error.to_string())?;
        Ok(manager.clone())
    }

    async fn run(
        &self,
        name: &str,
        mode: &str,
        metered: bool,
        reports: &[WindowReport],
        outcome: Outcome,
    ) -> Result<Vec<i64>, String> {
        let mut connection = self.connection().await?;
        let now = Instant::now();
        let mut invocation = self.script.key(name);
        invocation
            .arg(mode)
            .arg(if metered { "1" } else { "0" })
            .arg(millis(PROBE_FOR));
        match outcome {
            Outcome::Nothing => invocation.arg(""),
            Outcome::Normal => invocation.arg("ok"),
            // At least 1 ms: 0 would read as no quiet at all.
            Outcome::Quiet(wait) => invocation.arg(millis(wait).max(1)),
        };
        for report in reports {
            // Rounded down: the store places the end no later than this process does.
            let ends_in = report.ends_at.saturating_duration_since(now);
            invocation
                .arg(report.limit)
                .arg(report.remaining)
                .arg(report.period)
                .arg(ends_in.as_millis() as u64)
                .arg(report.admitted);
        }
        match invocation.invoke_async(&mut connection).await {
            // A connection lost while Redis was away fails once, and the manager starts a new
            // one: the second try waits for it, so that a Redis that is back is found at once.
            Err(error) if error.is_io_error() || error.is_connection_dropped() => invocation
                .invoke_async(&mut self.connection().await?)
                .await
                .map_err(|error| error.to_string()),
            result => result.map_err(|error| error.to_string()),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl FleetStore for RedisStore {
    fn name(&self, base_url: &Url, api_key: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(b"petstore-client rate-limit state\0");
        hash.update(base_url.as_str().as_bytes());
        hash.update(b"\0");
        hash.update(api_key.as_bytes());
        let digest = hash.finalize();
        let mut name = String::with_capacity(PREFIX.len() + 32);
        name.push_str(PREFIX);
        for byte in &digest[..16] {
            name.push_str(&format!("{byte:02x}"));
        }
        name
    }

    fn admit<'a>(
        &'a self,
        name: &'a str,
        admission: Admission<'a>,
    ) -> BoxFuture<'a, Result<Verdict, String>> {
        Box::pin(async move {
            let reply = self
                .run(
                    name,
                    "admit",
                    admission.metered,
                    admission.reports,
                    Outcome::Nothing,
                )
                .await?;
            let unexpected = || format!("unexpected reply from the script: {reply:?}");
            let (verdict, n, admitted) = match *reply.as_slice() {
                [verdict, n] => (verdict, n, 0),
                [verdict, n, admitted] => (verdict, n, admitted),
                _ => return Err(unexpected()),
            };
            let wait = Duration::from_millis(u64::try_from(n).unwrap_or(0));
            Ok(match verdict {
                0 => Verdict::Go {
                    probe: n == 1,
                    admitted: u64::try_from(admitted).unwrap_or(0),
                },
                1 => Verdict::Hold(wait, Hold::Cooldown),
                2 => Verdict::Hold(wait, Hold::Probe),
                3 => Verdict::Hold(wait, Hold::Spent),
                _ => return Err(unexpected()),
            })
        })
    }

    fn report<'a>(
        &'a self,
        name: &'a str,
        reports: &'a [WindowReport],
        outcome: Outcome,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.run(name, "report", true, reports, outcome).await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_a_prefixed_hash_of_url_and_key_and_debug_shows_no_password() {
        let state = RedisState::new("redis://user:s3cret-pass@127.0.0.1:6379/").unwrap();
        let debug = format!("{state:?}");
        assert!(!debug.contains("s3cret-pass"), "{debug}");
        assert!(debug.contains("127.0.0.1:6379"), "{debug}");
        let store = RedisStore {
            client: redis::Client::open("redis://127.0.0.1/").unwrap(),
            connection: OnceCell::new(),
            script: redis::Script::new(""),
        };
        let url = Url::parse("https://petstore.example.com/v1/").unwrap();
        let name = store.name(&url, "secret-key-123");
        assert_eq!(name.len(), PREFIX.len() + 32);
        assert!(name.starts_with(PREFIX));
        assert!(!name.contains("secret-key-123") && !name.contains("example"));
        assert_eq!(name, store.name(&url, "secret-key-123"), "stable");
        assert_ne!(name, store.name(&url, "another-key"));
        let other = Url::parse("https://petstore.example.com/v2/").unwrap();
        assert_ne!(name, store.name(&other, "secret-key-123"));
        let error = RedisState::new("http://user:s3cret-pass@host/").unwrap_err();
        assert!(!error.to_string().contains("s3cret-pass"), "{error}");
    }
}
