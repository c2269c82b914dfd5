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

use super::pacer::Hold;
use super::store::{
    Admission, BoxFuture, Outcome, PROBE_FOR, SharedStore, Store, Verdict, WindowReport,
};

/// The prefix of every Redis key this crate writes. The hash that follows is in braces, a
/// Cluster hash tag: a key's slot is the tag's, so that keys a later version adds beside the
/// state (the script's keys must share one slot) can be given the same tag.
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

impl Store for RedisStore {
    fn name(&self, base_url: &Url, api_key: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(b"petstore-client rate-limit state\0");
        hash.update(base_url.as_str().as_bytes());
        hash.update(b"\0");
        hash.update(api_key.as_bytes());
        let digest = hash.finalize();
        let mut name = String::with_capacity(PREFIX.len() + 34);
        name.push_str(PREFIX);
        name.push('{');
        for byte in &digest[..16] {
            name.push_str(&format!("{byte:02x}"));
        }
        name.push('}');
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
    fn the_name_is_a_prefixed_hash_of_url_and_key_in_a_hash_tag() {
        let store = store(redis::Client::open("redis://127.0.0.1/").unwrap());
        let url = Url::parse("https://petstore.example.com/v1/").unwrap();
        let name = store.name(&url, "secret-key-123");
        let tag = name.strip_prefix(PREFIX).expect("the prefix");
        let hash = tag.strip_prefix('{').and_then(|tag| tag.strip_suffix('}'));
        assert!(
            hash.is_some_and(|hash| hash.len() == 32
                && hash.bytes().all(|b| b.is_ascii_hexdigit())),
            "expected 32 hexadecimal digits in braces after the prefix: {name}"
        );
        assert!(!name.contains("secret-key-123") && !name.contains("example"));
        assert_eq!(name, store.name(&url, "secret-key-123"), "stable");
        assert_ne!(name, store.name(&url, "another-key"));
        let other = Url::parse("https://petstore.example.com/v2/").unwrap();
        assert_ne!(name, store.name(&other, "secret-key-123"));
    }
}
