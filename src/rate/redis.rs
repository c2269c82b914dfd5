//! The shared rate-limit state in Redis: one hash per API key and service, changed only by
//! one Lua script (`redis.lua`), so that each admission is one atomic round trip.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;
use tokio::time::Instant;
use url::Url;

use super::identity::service;
use super::pacer::Hold;
use super::store::{
    Admission, BoxFuture, Outcome, PROBE_FOR, SharedStore, Store, Verdict, WindowReport,
};

/// The prefix of every Redis key this crate writes.
const PREFIX: &str = "petstore-client:v1:";

/// The shared state in the Redis that `client` connects to.
pub(crate) fn store(client: redis::Client) -> SharedStore {
    SharedStore::new(Arc::new(RedisStore {
        client,
        connection: OnceCell::new(),
        script: redis::Script::new(include_str!("redis.lua")),
    }))
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
                let manager = ConnectionManager::new_lazy_with_config(self.client.clone(), config)?;
                // Beside the first call, which need not wait for it.
                tokio::spawn(check_settings(manager.clone()));
                Ok::<_, redis::RedisError>(manager)
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
        seen: bool,
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
        invocation.arg(if seen { "1" } else { "0" });
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

/// Says once, at start-up, what in this Redis's settings can lose the state: a policy that
/// evicts keys when memory is full (every key of the state expires, so `volatile-*` evicts it
/// too), or no persistence. A lost state is found out again by one request, at the cost of that
/// request and of the others' wait, so a `WARN` is for what loses it often, and for a Redis
/// that does not let the settings be read. A Redis that does not answer is the outage's to log.
async fn check_settings(mut connection: ConnectionManager) {
    let mut read = async |name: &str| -> Result<String, redis::RedisError> {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(&mut connection)
            .await?;
        Ok(pair.into_iter().nth(1).unwrap_or_default())
    };
    let settings = async {
        Ok::<_, redis::RedisError>((
            read("maxmemory").await?,
            read("maxmemory-policy").await?,
            read("save").await?,
            read("appendonly").await?,
        ))
    };
    match settings.await {
        Ok((maxmemory, policy, save, appendonly)) => {
            if maxmemory != "0" && policy != "noeviction" {
                tracing::warn!(
                    maxmemory_policy = %policy,
                    "Redis evicts keys when its memory is full, and may evict the shared \
                     rate-limit state: set maxmemory-policy to noeviction (or maxmemory to 0), \
                     or give the state a Redis of its own"
                );
            }
            if save.is_empty() && appendonly == "no" {
                tracing::info!(
                    "Redis keeps nothing on disk (no save, appendonly no): a restart loses the \
                     shared rate-limit state, and one request finds it out again"
                );
            }
        }
        Err(error) if error.code().is_some() => tracing::warn!(
            %error,
            "cannot read Redis's settings (CONFIG GET is not allowed): make sure that \
             maxmemory-policy is noeviction, so that Redis never evicts the shared rate-limit \
             state"
        ),
        Err(_) => {}
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

impl Store for RedisStore {
    fn name(&self, base_url: &Url, api_key: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(b"petstore-client rate-limit state\0");
        hash.update(service(base_url).as_bytes());
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
                    admission.seen,
                    admission.reports,
                    admission.outcome,
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
            // A report answers a request some instance was admitted for: a state missing then
            // was lost.
            self.run(name, "report", true, true, reports, outcome)
                .await?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_a_prefixed_hash_of_url_and_key() {
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
        let spelt = Url::parse("HTTPS://PetStore.example.com:443/v1").unwrap();
        assert_eq!(name, store.name(&spelt, "secret-key-123"), "one service");
    }
}
