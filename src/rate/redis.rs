//! The shared rate-limit state in Redis: one hash per API key and service, changed only by one Lua
//! script (`redis.lua`), so that each admission, or lease of admissions, is one atomic round trip.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::SentinelClient;
use redis::{ErrorKind, RedisError, RedisResult, ScriptInvocation, ServerErrorKind};
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use url::Url;

use super::identity::service;
use super::lease::{Grant, LEASE_FOR, Return};
use super::lock::lock;
use super::outbox::{News, Outcome, PROBE_FOR};
use super::pacer::Hold;
use super::store::{
    Admission, BoxFuture, Heard, RETRY_EVERY, Seen, SharedStore, Spent, Store, Told, Verdict,
};

/// Starts every key this crate writes; the hash after it is braced as a Cluster hash tag, so that
/// keys a later version adds can share the state's slot, as the script's keys must.
const PREFIX: &str = "petstore-client:v1:";

/// Per connect and reply; the caller's timeout bounds operations, this only ends abandoned ones.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(1);

/// Delay before the second count of a key's listeners; it doubles up to [`RETRY_EVERY`].
const FIRST_RECOUNT: Duration = Duration::from_millis(100);

/// Asks the others, on a key's quiet channel, for their quiet; a quiet itself is sent in ms.
const ASK: &str = "?";

/// Where the shared state's Redis is.
pub(crate) enum Topology {
    /// One server, over TCP, TLS or a Unix socket.
    Server(redis::Client),
    /// Sends the script to the slot's node, following MOVED and ASK. `address`: the nodes'.
    Cluster {
        client: ClusterClient,
        address: String,
    },
    /// Sentinel's master, found again after a failover. `address`: the service and sentinels.
    Sentinel {
        client: tokio::sync::Mutex<SentinelClient>,
        address: String,
    },
}

impl Topology {
    /// Where the state is, for `Debug`: addresses, never a password.
    pub(crate) fn address(&self) -> String {
        match self {
            Self::Server(client) => client.get_connection_info().addr().to_string(),
            Self::Cluster { address, .. } | Self::Sentinel { address, .. } => address.clone(),
        }
    }

    async fn connect(self: Arc<Self>) -> RedisResult<Connection> {
        match &*self {
            Self::Server(client) => Connection::manager(client.clone()),
            Self::Cluster { client, .. } => {
                client.get_async_connection().await.map(Connection::Cluster)
            }
            Self::Sentinel { client, .. } => {
                let master = client.lock().await.async_get_client().await?;
                Connection::manager(master)
            }
        }
    }

    /// The server whose channels carry the state's messages: the one server, or Sentinel's master
    /// now; `None` for a Cluster, whose nodes this crate does not subscribe to.
    async fn publisher(&self) -> RedisResult<Option<redis::Client>> {
        match self {
            Self::Server(client) => Ok(Some(client.clone())),
            Self::Cluster { .. } => Ok(None),
            Self::Sentinel { client, .. } => client.lock().await.async_get_client().await.map(Some),
        }
    }

    /// Passes `heard` each quiet on `channel` and its listener count, every [`FIRST_RECOUNT`]
    /// doubling to [`RETRY_EVERY`] however many quiets come, until `heard` wants no more; a failed
    /// subscription is [`Told::Uncounted`], retried after [`RETRY_EVERY`].
    async fn listen(self: Arc<Self>, channel: String, heard: Heard) {
        while heard(Told::Nothing) {
            if let Ok(Ok(Some(client))) =
                tokio::time::timeout(CONNECTION_TIMEOUT, self.publisher()).await
            {
                let subscribed = async {
                    let mut pubsub = client.get_async_pubsub().await?;
                    pubsub.subscribe(&channel).await?;
                    let counter = client.get_multiplexed_async_connection().await?;
                    Ok::<_, RedisError>((pubsub.into_on_message(), counter))
                };
                if let Ok(Ok((mut messages, mut counter))) =
                    tokio::time::timeout(CONNECTION_TIMEOUT, subscribed).await
                {
                    // Due at once, yet a waiting quiet goes first. Recounted soon, then ever less
                    // often: a fleet starting together subscribes over its first second.
                    let mut count_at = Instant::now();
                    let mut count_every = FIRST_RECOUNT;
                    loop {
                        let told = match tokio::time::timeout_at(count_at, messages.next()).await {
                            Ok(Some(message)) => match message.get_payload::<String>() {
                                Ok(ask) if ask == ASK => Told::Asked,
                                Ok(wait) => wait.parse().map_or(Told::Nothing, |wait| {
                                    Told::Quiet(Duration::from_millis(wait))
                                }),
                                Err(_) => Told::Nothing,
                            },
                            Ok(None) => break,
                            Err(_) => {
                                count_at = Instant::now() + count_every;
                                count_every = (count_every * 2).min(RETRY_EVERY);
                                listeners(&mut counter, &channel).await
                            }
                        };
                        if !heard(told) {
                            return;
                        }
                    }
                }
            }
            if !heard(Told::Uncounted) {
                return;
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    /// Whether `error` may mean Sentinel's master changed (gone, or a replica after a failover:
    /// READONLY), so Sentinel must be asked again; server and cluster connections recover alone.
    fn must_ask_again(&self, error: &RedisError) -> bool {
        matches!(self, Self::Sentinel { .. })
            && (lost(error) || error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly))
    }
}

/// Subscribers to `channel` (`PUBSUB NUMSUB`), or nothing if the server does not say in time.
async fn listeners(connection: &mut MultiplexedConnection, channel: &str) -> Told {
    let mut command = redis::cmd("PUBSUB");
    command.arg("NUMSUB").arg(channel);
    let asked = command.query_async::<(String, u64)>(connection);
    match tokio::time::timeout(CONNECTION_TIMEOUT, asked).await {
        Ok(Ok((_, listeners))) => Told::Listeners(listeners),
        _ => Told::Nothing,
    }
}

/// `error`, and the fix where its cause is how the state was configured.
fn explained(error: &RedisError) -> String {
    let text = error.to_string();
    let fix = if matches!(error.code(), Some("MOVED" | "ASK")) {
        "the server is a node of a Redis Cluster: keep the state with RedisState::cluster"
    } else if text.contains("unknown command") && text.contains("EVALSHA") {
        "the server runs no scripts, as a Redis Sentinel does: for a master that Sentinel \
         names, keep the state with RedisState::sentinel"
    } else if matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
        || text.contains("unauthenticated")
    {
        "Redis asks for a password, or another: give the user and password in the URL, \
         redis://user:password@host:port/"
    } else if text.contains("UnknownIssuer") {
        "the server's certificate is signed by an authority this system does not trust: give \
         RedisState::from_client a redis::Client::build_with_tls that trusts it"
    } else {
        return text;
    };
    format!("{text}; {fix}")
}

/// Requests sent without an admission: `<ms since answered>:<requests>` each, for the script.
fn answered_ago(answered: &[(Instant, u64)], now: Instant) -> String {
    let ages: Vec<String> = answered
        .iter()
        .map(|(at, requests)| format!("{}:{requests}", millis(now.saturating_duration_since(*at))))
        .collect();
    ages.join(" ")
}

/// Whether the connection was lost, so that a second try on a new one may succeed.
fn lost(error: &RedisError) -> bool {
    error.is_io_error() || error.is_connection_dropped()
}

/// A connection of any topology; each is cheap to clone and multiplexed.
#[derive(Clone)]
enum Connection {
    /// To one server, or to the master Sentinel named.
    Manager(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    fn manager(client: redis::Client) -> RedisResult<Self> {
        // Only reconnects, once per failure, with no retries or backoff of its own.
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(0)
            .set_connection_timeout(Some(CONNECTION_TIMEOUT))
            .set_response_timeout(Some(CONNECTION_TIMEOUT));
        ConnectionManager::new_lazy_with_config(client, config).map(Self::Manager)
    }

    async fn invoke(&mut self, invocation: &ScriptInvocation<'_>) -> RedisResult<Vec<i64>> {
        match self {
            Self::Manager(connection) => invocation.invoke_async(connection).await,
            Self::Cluster(connection) => invocation.invoke_async(connection).await,
        }
    }

    async fn publish(&mut self, channel: &str, message: &str) -> RedisResult<()> {
        let mut command = redis::cmd("PUBLISH");
        command.arg(channel).arg(message);
        match self {
            Self::Manager(connection) => command.query_async(connection).await,
            Self::Cluster(connection) => command.query_async(connection).await,
        }
    }

    /// The value of one of the server's settings (`CONFIG GET`; in a Cluster, a node's).
    async fn setting(&mut self, name: &str) -> RedisResult<String> {
        let mut command = redis::cmd("CONFIG");
        command.arg("GET").arg(name);
        let pair: Vec<String> = match self {
            Self::Manager(connection) => command.query_async(connection).await?,
            Self::Cluster(connection) => command.query_async(connection).await?,
        };
        Ok(pair.into_iter().nth(1).unwrap_or_default())
    }
}

/// Keeps the default retries, which redirections (MOVED, ASK) use up, within the caller's timeout.
pub(crate) fn cluster_client(nodes: Vec<redis::ConnectionInfo>) -> RedisResult<ClusterClient> {
    ClusterClient::builder(nodes)
        .connection_timeout(CONNECTION_TIMEOUT)
        .response_timeout(CONNECTION_TIMEOUT)
        .build()
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

/// Logs once, at start-up, which settings can lose the state: eviction when memory is full (the
/// state's keys all expire, so `volatile-*` evicts them too), or no persistence. One request finds
/// a lost state again, at the cost of it and the others' wait, so only what loses it often, or
/// unreadable settings, is a `WARN`; a Redis that does not answer is the outage's to log.
async fn check_settings(mut connection: Connection) {
    let settings = async {
        Ok::<_, redis::RedisError>((
            connection.setting("maxmemory").await?,
            connection.setting("maxmemory-policy").await?,
            connection.setting("save").await?,
            connection.setting("appendonly").await?,
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
        // A Sentinel knows no CONFIG: the script's failure says what to change.
        Err(error) if error.to_string().contains("unknown command") => {}
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
