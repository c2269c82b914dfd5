//! [`RedisState`]: the rate-limit state a fleet of instances shares through Redis.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{ConnectionInfo, IntoConnectionInfo};

use crate::error::Error;
use crate::rate::{self, SharedStore};

/// A rate-limit state shared through Redis by every client configured with it, in any process
/// on any host: the budget of each rate-limit window the service reports, spent atomically
/// before each request, and the cooldown after a 429 (or a 503 with `Retry-After`).
///
/// Requires the `redis` feature. Give it to
/// [`PetStoreClientBuilder::shared_state`](crate::PetStoreClientBuilder::shared_state); clients
/// share a state when they use the same Redis, the same API key and a base URL naming the same
/// service. Base URLs are compared by scheme, port (the scheme's default when none is written)
/// and path, never by host: a trailing dot, a public and an internal name, or a name and its
/// address are one service.
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
/// **Where:** one server ([`new`](Self::new): TCP, TLS, or a Unix socket), a Redis Cluster
/// ([`cluster`](Self::cluster)), or the master that Redis Sentinel names
/// ([`sentinel`](Self::sentinel)).
///
/// **What is stored:** one hash per API key and service, named `petstore-client:v1:{` and 32
/// hexadecimal digits of a SHA-256 of the service and the key (never the key itself) and `}`
/// (a Cluster hash tag), with
/// the windows' limits, budgets left, ends and last lease's end (four windows at most, each known
/// by its period and removed once the period has ended), which admission's answer opened each,
/// the cooldown's end, whether an instance is finding out a new window period, the last period
/// that ended, and a count of admissions. No pet, response or key. It expires a minute
/// after the last thing it knows has passed.
///
/// **Cost:** one round trip (a Lua script) per request for an instance that calls less often
/// than once per 100 ms. One that calls more often leases, in that round trip, the requests it
/// will spend in the next 100 ms (at most a 16th of what the window has left, fewer near its
/// end) and spends them with no round trip; what it does not spend goes back when the lease
/// ends. So a busy instance makes about one round trip per 100 ms, and hears of a 429 another
/// instance met within 100 ms. One more round trip for the few responses the other instances
/// wait for (a 429, and the first answer in a window period); four `CONFIG GET`s on the first
/// connection. Each cooldown is also published on a channel of the state's name, to which each
/// instance subscribes on one more connection (not with a Cluster): it reaches the fleet even
/// from a Redis that loses the state as fast as it is written.
///
/// **An ACL user** needs only the script and the commands it runs, on the crate's keys and
/// channels:
///
/// ```text
/// ACL SETUSER petstore on >password resetkeys ~petstore-client:* resetchannels
///     &petstore-client:* -@all +evalsha +script|load +time +hgetall +hset +del +pexpire
///     +publish +subscribe +pubsub|numsub +config|get
/// ```
///
/// (`+config|get` lets the first connection check the settings below; without it a `WARN`
/// says so.)
///
/// With a Cluster add `+ping +cluster|slots` (asked when a node is connected); with Sentinel,
/// `+role` on the master (asked to check that it is the master).
///
/// **When Redis is down, slow or restarted,** calls go on under the process's own rate
/// discipline (the one that runs without Redis): one `WARN` is logged per outage, and sharing
/// resumes when Redis answers again. No call fails because of Redis. Each Redis operation a call
/// waits for (its admission, and the report of an answer other instances wait on) gives up after
/// [`timeout`](Self::timeout), or up to eight times it for a Redis seen answering slower; an
/// instance's first call also waits up to `timeout` to hear how many instances share the key.
///
/// **Redis settings:** set `maxmemory-policy` to `noeviction` (the default), or leave
/// `maxmemory` at 0: under any other policy a full Redis may evict the state, as every key of
/// it expires (`volatile-*` policies evict it too). Persistence (`appendonly yes`, or `save`)
/// keeps the state across a restart. A state lost all the same (evicted, `FLUSHALL`, a restart
/// without persistence, a failover to a replica that lagged) reads as unknown to every
/// instance that saw it, never as a fresh budget: one request finds out the budget and the
/// cooldown again, alone, and the others wait for its answer. On its first connection a
/// `RedisState` reads these settings (`CONFIG GET`) and logs a `WARN` if the policy may evict
/// the state, or if `CONFIG` is not allowed (an ACL user without it, a renamed command); an
/// `INFO` says when Redis keeps nothing on disk.
///
/// **Nothing the fleet must know is lost:** the report of a 429 (or a 503 with `Retry-After`),
/// and of the first answer in a window period, waits in this value's outbox (64 states at most)
/// until Redis takes it. A task of its own sends it, and tries again once a second while
/// Redis fails and the report still matters; the next admission on the key takes it along
/// meanwhile. The call that met the response may be cancelled, and the report may time out:
/// the other instances still hear of it.
///
/// **A cancelled call** spends nothing while it waits in line or is held. Once Redis is
/// asked, its script runs whether or not the call still waits for the answer: a call cancelled
/// then, or after it was admitted and before its request was sent, counts as one request of
/// the fleet's budget until the window's period ends, as Redis cannot tell it was not sent,
/// and if it was the fleet's probe the other instances wait for it until it expires (2 s).
/// The process counts it only once it was admitted.
///
/// The connection is made on first use, on the Tokio runtime of that call, and kept, with
/// reconnects, for the clients and clones using this value; a value used on a runtime that has
/// since shut down treats Redis as unreachable. Its `Debug` output shows the address (the
/// nodes', or the service's name and the sentinels'), never a password in a URL.
#[derive(Clone)]
pub struct RedisState {
    store: Arc<SharedStore>,
    address: String,
}

impl RedisState {
    /// A state kept in the one Redis server at `url`:
    ///
    /// | URL | connects |
    /// | --- | --- |
    /// | `redis://[[user]:password@]host[:port][/db]` | over TCP (port 6379 by default) |
    /// | `rediss://[[user]:password@]host[:port][/db]` | over TLS, the certificate verified against the system's authorities (feature `redis-tls`; for a private authority give [`from_client`](Self::from_client) a `redis::Client::build_with_tls`) |
    /// | `redis+unix:///path/to/redis.sock[?db=N&user=U&pass=P]` or `unix:///path/...` | through a Unix socket |
    ///
    /// For a Redis Cluster see [`cluster`](Self::cluster), for Sentinel
    /// [`sentinel`](Self::sentinel).
    ///
    /// ```
    /// use petstore_client::RedisState;
    ///
    /// let over_tcp = RedisState::new("redis://petstore:s3cret@redis.internal:6379/0")?;
    /// let over_a_socket = RedisState::new("redis+unix:///run/redis/redis.sock")?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the URL is not a Redis URL, or is a `rediss://` URL without the
    /// `redis-tls` feature. Nothing is connected yet.
    pub fn new(url: &str) -> Result<Self, Error> {
        let client = redis::Client::open(url).map_err(|error| {
            if url.starts_with("redis+sentinel:") || url.starts_with("rediss+sentinel:") {
                Error::config(
                    "a redis+sentinel:// URL is not one server's: for a master that Sentinel \
                     names, use RedisState::sentinel with the sentinels' redis:// URLs and the \
                     service's name",
                )
            } else if !cfg!(feature = "redis-tls") && url.starts_with("rediss:") {
                Error::config("a rediss:// URL (Redis over TLS) needs the feature redis-tls")
            } else {
                invalid_url(error)
            }
        })?;
        Ok(Self::from_client(client))
    }

    /// A state kept in the Redis that `client` connects to: a client built with
    /// `redis::Client::build_with_tls` for a certificate from a private authority, or with
    /// settings of your own.
    ///
    /// ```
    /// use petstore_client::RedisState;
    ///
    /// let client = redis::Client::open("redis://petstore:password@redis.internal:6379/2")?;
    /// let state = RedisState::from_client(client);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_client(client: redis::Client) -> Self {
        Self::kept_in(rate::RedisTopology::Server(client))
    }

    /// A state kept in the Redis Cluster of which `nodes` are some nodes, each a `redis://`
    /// URL as for [`new`](Self::new), all with the same user and password. One reachable
    /// node is enough: the others are found from it, and the state is read and written on the
    /// node that owns its slot, wherever the slot moves (`MOVED` and `ASK` are followed).
    ///
    /// ```
    /// use petstore_client::RedisState;
    ///
    /// let state = RedisState::cluster([
    ///     "redis://redis-0.internal:6379/",
    ///     "redis://redis-1.internal:6379/",
    ///     "redis://redis-2.internal:6379/",
    /// ])?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if there is no node, a URL is not a Redis URL, or the nodes' users
    /// or passwords differ. Nothing is connected yet.
    pub fn cluster<I>(nodes: I) -> Result<Self, Error>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let nodes = connection_infos(nodes)?;
        let address = format!("cluster of {}", addresses(&nodes));
        let client = rate::redis_cluster_client(nodes).map_err(invalid_url)?;
        Ok(Self::kept_in(rate::RedisTopology::Cluster {
            client,
            address,
        }))
    }

    /// A state kept in the master that the Redis Sentinels at `sentinels` (URLs as for
    /// [`new`](Self::new), of the sentinels, not of Redis) name for `service_name`. One
    /// reachable sentinel is enough. After a failover the state is kept in the new master:
    /// the sentinels are asked again whenever the master's connection is lost or it answers
    /// as a replica.
    ///
    /// The master is reached without a user or password, on database 0: for other settings
    /// build a `redis::sentinel::SentinelClient` and give it to
    /// [`from_sentinel_client`](Self::from_sentinel_client).
    ///
    /// ```
    /// use petstore_client::RedisState;
    ///
    /// let state = RedisState::sentinel(
    ///     ["redis://sentinel-0.internal:26379/", "redis://sentinel-1.internal:26379/"],
    ///     "petstore",
    /// )?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if there is no sentinel or a URL is not a Redis URL. Nothing is
    /// connected yet.
    pub fn sentinel<I>(sentinels: I, service_name: &str) -> Result<Self, Error>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let sentinels = connection_infos(sentinels)?;
        let address = format!(
            "master {service_name} of the sentinels {}",
            addresses(&sentinels)
        );
        let client = SentinelClient::build(
            sentinels,
            // Owned: the redis crate takes a `String` without its TLS features.
            String::from(service_name),
            None,
            SentinelServerType::Master,
        )
        .map_err(invalid_url)?;
        Ok(Self::kept_in(rate::RedisTopology::Sentinel {
            client: tokio::sync::Mutex::new(client),
            address,
        }))
    }

    /// A state kept in the master that `client` names, which must be built for
    /// `SentinelServerType::Master`: the way to a master that needs a user, a password, TLS
    /// or another database. Its sentinels are asked again after a failover, as with
    /// [`sentinel`](Self::sentinel).
    pub fn from_sentinel_client(client: SentinelClient) -> Self {
        Self::kept_in(rate::RedisTopology::Sentinel {
            client: tokio::sync::Mutex::new(client),
            address: "the master of a sentinel client".to_owned(),
        })
    }

    fn kept_in(topology: rate::RedisTopology) -> Self {
        let address = topology.address();
        Self {
            store: Arc::new(rate::redis_store(topology)),
            address,
        }
    }

    /// How long a Redis operation may take before it is given up on and the call goes on
    /// without it; 250 ms by default. Keep it well under the service's response time. A Redis
    /// seen to answer slower is waited for longer, as TCP waits for an acknowledgement: its
    /// smoothed round trip and four times the variation, doubled after each late answer, at
    /// most eight times this.
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_client::RedisState;
    ///
    /// let state = RedisState::new("redis://redis.internal:6379/")?.timeout(Duration::from_millis(100));
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
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

/// The error of a Redis URL, which may hold a password: it is not repeated.
fn invalid_url(error: redis::RedisError) -> Error {
    Error::config(format!("invalid Redis URL: {:?}", error.kind()))
}

fn connection_infos<I>(urls: I) -> Result<Vec<ConnectionInfo>, Error>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let infos = urls
        .into_iter()
        .map(|url| url.as_ref().into_connection_info().map_err(invalid_url))
        .collect::<Result<Vec<_>, _>>()?;
    if infos.is_empty() {
        return Err(Error::config("no Redis URL given"));
    }
    Ok(infos)
}

fn addresses(infos: &[ConnectionInfo]) -> String {
    infos
        .iter()
        .map(|info| info.addr().to_string())
        .collect::<Vec<_>>()
        .join(", ")
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

    #[cfg(not(feature = "redis-tls"))]
    #[test]
    fn a_tls_url_without_the_feature_says_which_feature_it_needs() {
        let error = RedisState::new("rediss://:s3cret-pass@127.0.0.1:6380/").unwrap_err();
        assert!(error.to_string().contains("redis-tls"), "{error}");
        assert!(
            !format!("{error} {error:?}").contains("s3cret-pass"),
            "{error:?}"
        );
    }

    #[test]
    fn no_topology_shows_a_password_in_debug_or_an_error() {
        let states = [
            RedisState::new("redis+unix:///run/redis.sock?pass=s3cret-pass").unwrap(),
            RedisState::cluster([
                "redis://user:s3cret-pass@127.0.0.1:7000/",
                "redis://user:s3cret-pass@127.0.0.1:7001/",
            ])
            .unwrap(),
            RedisState::sentinel(["redis://:s3cret-pass@127.0.0.1:26379/"], "petstore").unwrap(),
        ];
        for state in states {
            let debug = format!("{state:?}");
            assert!(!debug.contains("s3cret-pass"), "{debug}");
        }
        let cluster = format!(
            "{:?}",
            RedisState::cluster(["redis://:s3cret-pass@127.0.0.1:7000/"]).unwrap()
        );
        assert!(cluster.contains("cluster of 127.0.0.1:7000"), "{cluster}");
        let sentinel = format!(
            "{:?}",
            RedisState::sentinel(["redis://127.0.0.1:26379/"], "petstore").unwrap()
        );
        assert!(
            sentinel.contains("master petstore of the sentinels 127.0.0.1:26379"),
            "{sentinel}"
        );
        let errors = [
            RedisState::cluster([
                "redis://:s3cret-pass@127.0.0.1:7000/",
                "http://:s3cret-pass@h/",
            ])
            .unwrap_err(),
            RedisState::sentinel(["http://:s3cret-pass@h/"], "petstore").unwrap_err(),
            RedisState::cluster(Vec::<String>::new()).unwrap_err(),
            RedisState::sentinel(Vec::<String>::new(), "petstore").unwrap_err(),
        ];
        for error in errors {
            assert!(matches!(error, Error::Config(_)), "{error:?}");
            assert!(
                !format!("{error} {error:?}").contains("s3cret-pass"),
                "{error:?}"
            );
        }
    }
}
