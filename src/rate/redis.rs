//! The shared rate-limit state in Redis: one hash per API key and service, changed only by one Lua
//! script (`redis.lua`), so that each admission, or lease of admissions, is one atomic round trip.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::RedisResult;
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use url::Url;

use super::identity::service;
use super::lease::{Grant, LEASE_FOR, Return};
use super::lock::lock;
use super::outbox::{News, Outcome, PROBE_FOR};
use super::pacer::Hold;
use super::store::{Admission, BoxFuture, Heard, Seen, SharedStore, Spent, Store, Verdict};
use super::topology::{ASK, Connection, Topology, check_settings, explained, lost};

/// Starts every key this crate writes; the hash after it is braced as a Cluster hash tag, so that
/// keys a later version adds can share the state's slot, as the script's keys must.
const PREFIX: &str = "petstore-client:v1:";

/// Requests sent without an admission: `<ms since answered>:<requests>` each, for the script.
fn answered_ago(answered: &[(Instant, u64)], now: Instant) -> String {
    let ages: Vec<String> = answered
        .iter()
        .map(|(at, requests)| format!("{}:{requests}", millis(now.saturating_duration_since(*at))))
        .collect();
    ages.join(" ")
}

pub(crate) fn store(topology: Topology) -> SharedStore {
    SharedStore::new(Arc::new(RedisStore {
        topology: Arc::new(topology),
        connection: Mutex::new(None),
        connecting: tokio::sync::Mutex::new(None),
        script: redis::Script::new(include_str!("redis.lua")),
    }))
}

struct RedisStore {
    topology: Arc<Topology>,
    /// Once made; cloned for each operation.
    connection: Mutex<Option<Connection>>,
    /// Being made, in a task of its own so that a caller that times out leaves it to the next: a
    /// connection slower than the timeout (a cluster's asks for the slots) still gets made.
    connecting: tokio::sync::Mutex<Option<JoinHandle<RedisResult<Connection>>>>,
    script: redis::Script,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("address", &self.topology.address())
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    async fn connection(&self) -> Result<Connection, String> {
        if let Some(connection) = lock(&self.connection).clone() {
            return Ok(connection);
        }
        let mut connecting = self.connecting.lock().await;
        if let Some(connection) = lock(&self.connection).clone() {
            return Ok(connection);
        }
        let topology = Arc::clone(&self.topology);
        let task = connecting.get_or_insert_with(|| tokio::spawn(topology.connect()));
        let result = task.await;
        *connecting = None;
        let connection = result
            .map_err(|error| error.to_string())?
            .map_err(|error| explained(&error))?;
        *lock(&self.connection) = Some(connection.clone());
        // Beside the first call, which need not wait for it.
        tokio::spawn(check_settings(connection.clone()));
        Ok(connection)
    }

    async fn run(
        &self,
        name: &str,
        mode: &str,
        admission: Admission<'_>,
    ) -> Result<Vec<i64>, String> {
        let mut connection = self.connection().await?;
        let now = Instant::now();
        let mut invocation = self.script.key(name);
        invocation
            .arg(mode)
            .arg(if admission.metered { "1" } else { "0" })
            .arg(millis(PROBE_FOR));
        match admission.news.outcome {
            Outcome::Nothing => invocation.arg(""),
            Outcome::Normal => invocation.arg("ok"),
            // At least 1 ms: 0 would read as no quiet at all.
            Outcome::Quiet(wait) => invocation.arg(millis(wait).max(1)),
        };
        // The highest number given, and how many ms ago a request was last admitted.
        let seen = admission.seen;
        let seen = match seen.admitted_at {
            Some(at) => format!(
                "{}:{}",
                seen.number,
                millis(now.saturating_duration_since(at))
            ),
            None => seen.number.to_string(),
        };
        invocation
            .arg(seen)
            .arg(admission.want)
            .arg(millis(LEASE_FOR))
            .arg(returned(admission.news.returns))
            .arg(answered_ago(admission.news.admitted_here, now));
        for report in admission.news.reports {
            // Rounded down: the store places the end no later than this process does.
            let ends_in = report.ends_at.saturating_duration_since(now);
            invocation
                .arg(report.limit)
                .arg(report.remaining)
                .arg(report.period)
                .arg(ends_in.as_millis() as u64)
                .arg(report.admitted)
                .arg(millis(now.saturating_duration_since(report.sent_at)));
        }
        match connection.invoke(&invocation).await {
            Err(error) if lost(&error) || self.topology.must_ask_again(&error) => {
                if self.topology.must_ask_again(&error) {
                    lock(&self.connection).take();
                }
                // A connection lost while Redis was away fails once and is remade (by the manager,
                // or Sentinel again); the retry waits for it, to find a Redis that is back at once.
                self.connection()
                    .await?
                    .invoke(&invocation)
                    .await
                    .map_err(|error| explained(&error))
            }
            result => result.map_err(|error| explained(&error)),
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Leases given back, for the script: `<requests>@<first admission>:<period>...`, space-separated.
fn returned(returns: &[Return]) -> String {
    let mut text = String::new();
    for back in returns {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&format!("{}@{}", back.units, back.first));
        for period in &back.periods {
            text.push_str(&format!(":{period}"));
        }
    }
    text
}

/// A reply's number that cannot be negative.
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Store for RedisStore {
    fn name(&self, base_url: &Url, api_key: &str) -> String {
        let mut hash = Sha256::new();
        hash.update(b"petstore-client rate-limit state\0");
        hash.update(service(base_url).as_bytes());
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
            let reply = self.run(name, "admit", admission).await?;
            let unexpected = || format!("unexpected reply from the script: {reply:?}");
            let mut spent = None;
            let (verdict, n, admitted, lease) = match *reply.as_slice() {
                [verdict, n] => (verdict, n, 0, None),
                [verdict, n, admitted] => (verdict, n, admitted, None),
                [verdict @ 3, n, limit, ends_in, period] => {
                    spent = Some(Spent {
                        limit: count(limit),
                        ends_in: Duration::from_millis(count(ends_in)),
                        period,
                    });
                    (verdict, n, 0, None)
                }
                [verdict, n, admitted, units, lasts, last, ref periods @ ..] => {
                    let grant = Grant {
                        units: count(units),
                        lasts: Duration::from_millis(count(lasts)),
                        windows_last: Duration::from_millis(count(last)),
                        periods: periods.to_vec(),
                    };
                    (verdict, n, admitted, Some(grant))
                }
                _ => return Err(unexpected()),
            };
            let wait = Duration::from_millis(count(n));
            Ok(match verdict {
                0 => Verdict::Go {
                    probe: matches!(n, 1 | 2 | 4),
                    lost: n == 2,
                    lost_since: n >= 3,
                    admitted: count(admitted),
                    lease,
                },
                1 => Verdict::Hold(wait, Hold::Cooldown, None),
                2 => Verdict::Hold(wait, Hold::Probe, None),
                3 => Verdict::Hold(wait, Hold::Spent, spent),
                _ => return Err(unexpected()),
            })
        })
    }

    fn report<'a>(&'a self, name: &'a str, news: News<'a>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            // A report answers a request some instance was admitted for: a state missing then
            // was lost, and one that counts fewer admissions than a report's rolled back.
            let admission = Admission {
                news,
                metered: true,
                seen: Seen {
                    number: 1,
                    admitted_at: None,
                },
                want: 1,
            };
            self.run(name, "report", admission).await?;
            Ok(())
        })
    }

    fn listen(&self, name: &str, heard: Heard) {
        let channel = format!("{name}:quiet");
        tokio::spawn(Arc::clone(&self.topology).listen(channel, heard));
    }

    fn publish<'a>(
        &'a self,
        name: &'a str,
        quiet: Option<Duration>,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let message = quiet.map_or_else(|| ASK.to_owned(), |wait| millis(wait).to_string());
            let mut connection = self.connection().await?;
            (connection.publish(&format!("{name}:quiet"), &message).await)
                .map_err(|error| explained(&error))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_a_prefixed_hash_of_url_and_key_in_a_hash_tag() {
        let store = store(Topology::Server(
            redis::Client::open("redis://127.0.0.1/").unwrap(),
        ));
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
        let spelt = Url::parse("HTTPS://PetStore.example.com:443/v1").unwrap();
        assert_eq!(name, store.name(&spelt, "secret-key-123"), "one service");
    }
}
