//! Where the shared state's Redis is, and a connection to it of any topology: one server, a
//! Cluster or Sentinel's master, each multiplexed; what Redis's errors mean for the user.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::SentinelClient;
use redis::{ErrorKind, RedisError, RedisResult, ScriptInvocation, ServerErrorKind};
use tokio::time::Instant;

use super::store::{Heard, RETRY_EVERY, Told};

/// Per connect and reply; the caller's timeout bounds operations, this only ends abandoned ones.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(1);

/// Delay before the second count of a key's listeners; it doubles up to [`RETRY_EVERY`].
const FIRST_RECOUNT: Duration = Duration::from_millis(100);

/// Asks the others, on a key's quiet channel, for their quiet; a quiet itself is sent in ms.
pub(super) const ASK: &str = "?";

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

    pub(super) async fn connect(self: Arc<Self>) -> RedisResult<Connection> {
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
    pub(super) async fn listen(self: Arc<Self>, channel: String, heard: Heard) {
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
    pub(super) fn must_ask_again(&self, error: &RedisError) -> bool {
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
pub(super) fn explained(error: &RedisError) -> String {
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

/// Whether the connection was lost, so that a second try on a new one may succeed.
pub(super) fn lost(error: &RedisError) -> bool {
    error.is_io_error() || error.is_connection_dropped()
}

/// A connection of any topology; each is cheap to clone and multiplexed.
#[derive(Clone)]
pub(super) enum Connection {
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

    pub(super) async fn invoke(
        &mut self,
        invocation: &ScriptInvocation<'_>,
    ) -> RedisResult<Vec<i64>> {
        match self {
            Self::Manager(connection) => invocation.invoke_async(connection).await,
            Self::Cluster(connection) => invocation.invoke_async(connection).await,
        }
    }

    pub(super) async fn publish(&mut self, channel: &str, message: &str) -> RedisResult<()> {
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

/// Logs once, at start-up, which settings can lose the state: eviction when memory is full (the
/// state's keys all expire, so `volatile-*` evicts them too), or no persistence. One request finds
/// a lost state again, at the cost of it and the others' wait, so only what loses it often, or
/// unreadable settings, is a `WARN`; a Redis that does not answer is the outage's to log.
pub(super) async fn check_settings(mut connection: Connection) {
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
