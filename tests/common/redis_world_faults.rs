//! The Redis of a generated world (`redis_worlds`): a `redis-server` of its own on a loopback
//! port, with a replica that lags when the world fails over, reached through a link of the
//! test's when a fault moves or slows it, and each fault played on it.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tokio::time::Instant;

use super::redis_fleet::{config_set, info, lagging_replica, redis_connection, states};
use super::redis_server::RedisServer;
use super::redis_worlds::{RedisFault, World};
use super::slow_link::SlowLink;

/// The world's Redis: its servers (a master, and a replica when the world fails over), which
/// one the instances use, and the address they reach it through when a fault needs one.
pub struct Redis {
    servers: Vec<RedisServer>,
    current: usize,
    /// The instances' address: a link that moves to the replica at a failover and slows
    /// replies down.
    address: Option<Arc<SlowLink>>,
    /// The replica's link to the master, which lags.
    _replication: Option<SlowLink>,
}

impl Redis {
    pub async fn start(world: &World) -> Self {
        let master = RedisServer::start();
        let mut servers = vec![master];
        let mut replication = None;
        if let Some(lag) = world.lag() {
            let (replica, link) = lagging_replica(servers[0].port(), lag).await;
            servers.push(replica);
            replication = Some(link);
        }
        let address = if world.needs_a_link() {
            Some(Arc::new(
                SlowLink::start(servers[0].port(), Duration::ZERO).await,
            ))
        } else {
            None
        };
        Self {
            servers,
            current: 0,
            address,
            _replication: replication,
        }
    }

    pub fn url(&self) -> String {
        match &self.address {
            Some(link) => format!("redis://127.0.0.1:{}/", link.port()),
            None => self.servers[0].url(),
        }
    }

    fn server(&mut self) -> &mut RedisServer {
        &mut self.servers[self.current]
    }

    async fn connection(&mut self) -> MultiplexedConnection {
        redis_connection(self.server()).await
    }

    /// Plays `fault`, returning what it found, if anything worth saying.
    pub async fn play(&mut self, fault: &RedisFault) -> Option<String> {
        match fault {
            RedisFault::Restart { down } => {
                tokio::task::block_in_place(|| self.server().kill());
                tokio::time::sleep(*down).await;
                tokio::task::block_in_place(|| self.server().restart());
                None
            }
            RedisFault::Freeze { lasting } => {
                self.server().freeze();
                tokio::time::sleep(*lasting).await;
                self.server().thaw();
                None
            }
            RedisFault::Flush => {
                let mut direct = self.connection().await;
                let _: () = redis::cmd("FLUSHALL")
                    .query_async(&mut direct)
                    .await
                    .expect("FLUSHALL succeeds");
                None
            }
            RedisFault::FlushAgainAndAgain { lasting } => {
                tokio::spawn(flush_again_and_again(self.server().url(), *lasting));
                None
            }
            RedisFault::Evict => {
                let mut direct = self.connection().await;
                Some(evict_the_state(&mut direct).await)
            }
            RedisFault::Failover { .. } => {
                let mut to_replica = redis_connection(&self.servers[1]).await;
                let _: () = redis::cmd("REPLICAOF")
                    .arg("NO")
                    .arg("ONE")
                    .query_async(&mut to_replica)
                    .await
                    .expect("the replica is promoted");
                let link = self.address.as_ref().expect("the instances' address");
                link.retarget(self.servers[1].port());
                tokio::task::block_in_place(|| self.servers[0].kill());
                self.current = 1;
                None
            }
            RedisFault::SlowReplies { delays, lasting } => {
                let link = Arc::clone(self.address.as_ref().expect("the instances' address"));
                link.set_delays(delays.clone());
                let lasting = *lasting;
                tokio::spawn(async move {
                    tokio::time::sleep(lasting).await;
                    link.set_delays(Duration::ZERO..=Duration::ZERO);
                });
                None
            }
        }
    }
}

/// `FLUSHALL` on the Redis at `url` every 20 ms for `lasting`, connecting again after an error
/// (the server restarted, or failed over).
async fn flush_again_and_again(url: String, lasting: Duration) {
    let end = Instant::now() + lasting;
    let client = redis::Client::open(url).expect("a Redis URL");
    let mut connection = None;
    while Instant::now() < end {
        if connection.is_none() {
            connection = client.get_multiplexed_async_connection().await.ok();
        }
        if let Some(direct) = connection.as_mut() {
            let flushed: Result<(), _> = redis::cmd("FLUSHALL").query_async(direct).await;
            if flushed.is_err() {
                connection = None;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sets `maxmemory` just above what Redis uses and `allkeys-lru`, waits for the state, and
/// writes other data until the state is evicted, for 5 s at most in all: the state is the key
/// the fleet uses most, so LRU evicts it last (`EXISTS` does not count as a use).
async fn evict_the_state(direct: &mut MultiplexedConnection) -> String {
    /// Each of the other data's values; a few dozen fill what Redis has left.
    const JUNK: usize = 64 * 1024;
    /// Room for the state and a few dozen values besides what Redis uses.
    const ROOM: u64 = 2 * 1024 * 1024;
    let used: u64 = info(direct, "memory", "used_memory").await.parse().unwrap();
    config_set(direct, "maxmemory", &(used + ROOM).to_string()).await;
    config_set(direct, "maxmemory-policy", "allkeys-lru").await;
    let give_up = Instant::now() + Duration::from_secs(5);
    // Just after the state was lost (a flush, a restart, an eviction before), the fleet writes
    // it again with its next admission.
    let mut name = None;
    while name.is_none() && Instant::now() < give_up {
        name = states(direct).await.into_iter().next();
        if name.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let Some(name) = name else {
        return "eviction: no state to evict in 5 s".to_owned();
    };
    let (mut written, mut refused) = (0_u64, 0_u64);
    while Instant::now() < give_up {
        written += 1;
        // Past `maxmemory` with nothing left to evict (the fleet's connections use memory too),
        // Redis refuses the write (OOM): the state is looked for all the same.
        let set: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("junk:{written}"))
            .arg(vec![b'x'; JUNK])
            .query_async(direct)
            .await;
        if set.is_err() {
            refused += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let exists: bool = redis::cmd("EXISTS")
            .arg(&name)
            .query_async(direct)
            .await
            .unwrap();
        if !exists {
            return format!(
                "eviction: the state evicted after {written} values ({refused} refused)"
            );
        }
    }
    format!("eviction: the state not evicted after {written} values ({refused} refused)")
}
