//! The rate-limit state shared through Redis (feature `redis`) in each production topology: a
//! Redis Cluster, a master found through Sentinel (and a failover), and a Unix socket. Each test
//! starts real servers on loopback (`common::redis_server`, `common::redis_cluster`) and stops
//! them by PID, and runs two independent instances against the sandbox on the real clock.
//!
//! What each asserts is that the state is shared, with one check for every topology: a 429
//! met by one instance holds another that has heard nothing from the service, so the service
//! sees no request during its `Retry-After`, and no instance warns that Redis is unreachable.
//! Each test runs on one thread, so that the log capture sees the tasks the calls spawn.

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::redis_cluster::RedisCluster;
use common::redis_server::RedisServer;
use petstore_client::{PetStoreClient, RateLimitScope, RedisState};
use petstore_sandbox::{Fault, Plan, Sandbox};
use redis::sentinel::{SentinelClient, SentinelServerType};
use tokio::time::Instant;

const KEY: &str = "FAKE-topology-key-not-a-secret";
/// What the service asks after its 429.
const RETRY_AFTER: u64 = 3;
/// How long a Redis operation may take: generous, because these tests look at the state being
/// shared, and on a loaded machine a round trip can pass the default 250 ms, after which an
/// instance goes on without the state.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a server or a failover may take to get where a test waits for it.
const PATIENCE: Duration = Duration::from_secs(60);
const SERVICE: &str = "petstore";
const UNREACHABLE: &str = "the shared rate-limit state is unreachable";

async fn sandbox() -> Sandbox {
    Sandbox::builder()
        .key(
            KEY,
            Plan::Enterprise {
                per_minute: 1_000,
                per_day: 1_000_000,
            },
        )
        .start()
        .await
        .expect("the sandbox starts")
}

/// An instance of its own, as a separate process would be: Redis is all instances share.
fn instance(sandbox: &Sandbox, name: &str, state: RedisState) -> PetStoreClient {
    PetStoreClient::builder()
        .base_url(sandbox.base_url())
        .api_key(KEY)
        .user_agent(name)
        .rate_limit_scope(RateLimitScope::Client)
        .shared_state(state.timeout(REDIS_TIMEOUT))
        .build()
        .expect("a valid client")
}

/// The crate's one key on the server at `url`, if it holds it, with its fields. The key is the
/// documented prefix and 32 hexadecimal digits in braces (a Cluster hash tag).
async fn state_at(url: &str) -> Option<(String, BTreeMap<String, String>)> {
    let mut redis = connection(url).await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("petstore-client:*")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(keys.len() <= 1, "expected one key at most, got {keys:?}");
    let name = keys.into_iter().next()?;
    let tag = name
        .strip_prefix("petstore-client:v1:{")
        .and_then(|rest| rest.strip_suffix('}'));
    assert!(
        tag.is_some_and(|hash| hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit())),
        "expected the prefix and 32 hexadecimal digits in braces, got {name}"
    );
    let fields = redis::cmd("HGETALL")
        .arg(&name)
        .query_async(&mut redis)
        .await
        .unwrap();
    Some((name, fields))
}

async fn connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("a connection to the test's redis-server")
}

/// Waits until `ready` holds, checking every 100 ms: whether it did within [`PATIENCE`].
async fn waited(mut ready: impl AsyncFnMut() -> bool) -> bool {
    let started = Instant::now();
    while !ready().await {
        if started.elapsed() > PATIENCE {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    true
}

/// Waits until `ready` holds, and fails the test if it does not within [`PATIENCE`].
async fn wait_for(what: &str, ready: impl AsyncFnMut() -> bool) {
    assert!(waited(ready).await, "expected {what} within {PATIENCE:?}");
}

/// The check of every topology. `first` meets a 429 with a `Retry-After`; once its report is
/// in Redis (a `cool` field in the state at one of `servers`), `second`, which has heard
/// nothing from the service, calls: it must wait for the cooldown too. Both calls succeed, the
/// service sees one 429 and no request during the cooldown, and nothing is logged at WARN.
async fn a_429_met_by_one_instance_holds_the_other(
    sandbox: &Sandbox,
    first: PetStoreClient,
    second: PetStoreClient,
    servers: &[String],
) {
    let (captured, _guard) = common::capture(tracing::Level::WARN);
    sandbox.inject(Fault::status(429).retry_after(RETRY_AFTER).times(1));
    let first_call = tokio::spawn(async move { first.list_pets().limit(1).send().await });
    let reported = waited(async || {
        for server in servers {
            if let Some((_, fields)) = state_at(server).await {
                return fields.contains_key("cool");
            }
        }
        false
    })
    .await;
    assert!(
        reported,
        "expected the 429's report in Redis within {PATIENCE:?}; the log reads:\n{}",
        captured.text()
    );
    second
        .list_pets()
        .limit(1)
        .send()
        .await
        .expect("the second instance's call succeeds after the cooldown");
    first_call
        .await
        .unwrap()
        .expect("the first instance's call succeeds after the cooldown");

    let stats = sandbox.stats();
    println!(
        "{} requests, {} × 429, {} during the cooldown",
        sandbox.request_log().len(),
        stats.answered(429),
        stats.during_cooldown()
    );
    assert_eq!(stats.answered(429), 1, "one 429, the injected one");
    assert_eq!(
        stats.during_cooldown(),
        0,
        "the second instance sent a request during the first one's Retry-After: {:#?}",
        sandbox.request_log()
    );
    assert_eq!(stats.bans(), 0);
    let text = captured.text();
    assert!(
        !text.contains("WARN") && !text.contains(UNREACHABLE),
        "expected no warning, the log reads:\n{text}"
    );
}

#[tokio::test]
async fn a_cluster_shares_the_state_through_a_node_that_does_not_own_its_slot() {
    common::install_log_capture();
    let cluster = RedisCluster::start();
    let urls: Vec<String> = cluster.nodes().iter().map(RedisServer::url).collect();
    // The instances use a user limited as documented, on every node.
    let mut limited = Vec::new();
    for node in cluster.nodes() {
        limited.push(limited_user(&node.url(), node.port(), &["+ping", "+cluster|slots"]).await);
    }
    let sandbox = sandbox().await;

    // A first call finds out the budget, and places the state on the node owning its slot.
    let scout = instance(
        &sandbox,
        "scout",
        RedisState::cluster([&limited[0]]).expect("cluster URLs"),
    );
    scout.list_pets().limit(1).send().await.unwrap();
    let mut owners = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        if state_at(url).await.is_some() {
            owners.push(i);
        }
    }
    assert_eq!(
        owners.len(),
        1,
        "expected the state on one node, got {owners:?}"
    );
    // Each instance is given one node only, and one that does not own the slot (which answers
    // a plain client's every script call with MOVED): the cluster client learns from it where
    // the slot is, and sends the script there.
    let others: Vec<&String> = (0..urls.len())
        .filter(|i| *i != owners[0])
        .map(|i| &limited[i])
        .collect();
    let first = instance(&sandbox, "first", RedisState::cluster([others[0]]).unwrap());
    let second = instance(
        &sandbox,
        "second",
        RedisState::cluster([others[1]]).unwrap(),
    );
    a_429_met_by_one_instance_holds_the_other(&sandbox, first.clone(), second.clone(), &urls).await;

    // The slot moves to another node: the instances, which knew the old owner, are answered
    // MOVED there and follow it (the script is loaded on the new owner on the way), with no
    // warning; the state is counted on in the new owner.
    let (captured, _guard) = common::capture(tracing::Level::WARN);
    let (name, _) = state_at(&urls[owners[0]]).await.expect("the state");
    let before = admissions_at(&urls[owners[0]]).await;
    let to = (owners[0] + 1) % urls.len();
    cluster.move_slot_of(&name, owners[0], to);
    one_call_each(&[&first, &second], "a call after the move").await;
    let after = admissions_at(&urls[to]).await;
    assert!(
        after > before,
        "expected admissions counted on in the new owner: {before} before, {after} after"
    );
    assert!(
        state_at(&urls[owners[0]]).await.is_none(),
        "the state stayed on the old owner"
    );
    let text = captured.text();
    assert!(
        !text.contains("WARN"),
        "expected no warning, the log reads:\n{text}"
    );
    for url in &urls {
        assert_nothing_denied(url).await;
    }
}

#[tokio::test]
async fn a_unix_socket_shares_the_state() {
    common::install_log_capture();
    let server = RedisServer::start_on_socket();
    let url = format!("redis+unix://{}", server.socket().display());
    let sandbox = sandbox().await;
    let first = instance(&sandbox, "first", RedisState::new(&url).unwrap());
    let second = instance(&sandbox, "second", RedisState::new(&url).unwrap());
    a_429_met_by_one_instance_holds_the_other(&sandbox, first, second, &[url]).await;
}

/// `redis-cli` against the Sentinel on `port`: its answer's text.
fn sentinel_cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs (Debian package redis-tools)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The port of the master the Sentinel on `port` names.
fn master_port(sentinel: u16) -> String {
    sentinel_cli(sentinel, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE])
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_owned()
}

/// One call by each of `clients`, one after another; each must succeed.
async fn one_call_each(clients: &[&PetStoreClient], expect: &str) {
    for client in clients {
        client.list_pets().limit(1).send().await.expect(expect);
    }
}

/// How many admissions the state at `url` has counted (its `seq` field).
async fn admissions_at(url: &str) -> u64 {
    state_at(url)
        .await
        .and_then(|(_, fields)| fields.get("seq")?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn sentinel_shares_the_state_through_the_master_and_after_a_failover() {
    // One instance is built from Sentinel URLs, the other from a `SentinelClient`.
    common::install_log_capture();
    let master = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()]);
    let sentinel = RedisServer::start_sentinel(SERVICE, master.port());
    let sandbox = sandbox().await;
    let first = instance(
        &sandbox,
        "first",
        RedisState::sentinel([sentinel.url()], SERVICE).expect("Sentinel URLs"),
    );
    // The other way in, for a master with other settings: the redis crate's Sentinel client.
    let client = SentinelClient::build(
        vec![sentinel.url()],
        String::from(SERVICE),
        None,
        SentinelServerType::Master,
    )
    .expect("a Sentinel client");
    let second = instance(&sandbox, "second", RedisState::from_sentinel_client(client));
    a_429_met_by_one_instance_holds_the_other(
        &sandbox,
        first.clone(),
        second.clone(),
        &[master.url()],
    )
    .await;

    // The failover needs the Sentinel to know the replica, which it learns from the master.
    let replica_port = replica.port().to_string();
    wait_for("the Sentinel knows the replica", async || {
        sentinel_cli(sentinel.port(), &["SENTINEL", "REPLICAS", SERVICE]).contains(&replica_port)
    })
    .await;
    let (captured, _guard) = common::capture(tracing::Level::WARN);
    // Refused (NOGOODSLAVE) until the Sentinel has seen the replica's link to the master up.
    wait_for("the Sentinel to accept SENTINEL FAILOVER", async || {
        sentinel_cli(sentinel.port(), &["SENTINEL", "FAILOVER", SERVICE]).contains("OK")
    })
    .await;
    wait_for("the Sentinel names the replica as master", async || {
        master_port(sentinel.port()) == replica_port
    })
    .await;
    // Calls go on, and the state is written on the new master: once the old master has
    // closed its connections or answered as a replica, the instances ask the Sentinel again.
    let before = admissions_at(&replica.url()).await;
    wait_for("the instances admit through the new master", async || {
        one_call_each(
            &[&first, &second],
            "every call during and after the failover succeeds",
        )
        .await;
        admissions_at(&replica.url()).await > before
    })
    .await;
    let stats = sandbox.stats();
    assert_eq!(stats.answered(429), 1, "one 429, the injected one");
    assert_eq!(stats.bans(), 0);
    println!(
        "after the failover: {} admissions on the new master; the log reads:\n{}",
        admissions_at(&replica.url()).await - before,
        captured.text()
    );
}

/// The least a user of one server needs, documented in `RedisState` and the README: the
/// script (loaded once per server, then called by its hash) and the commands it runs, on the
/// crate's keys and channels only, and `CONFIG GET` for the check of the settings on the first
/// connection.
const ACL_RULES: &[&str] = &[
    "on",
    ">FAKE-acl-pass-not-a-secret",
    "resetkeys",
    "~petstore-client:*",
    "resetchannels",
    "&petstore-client:*",
    "-@all",
    "+evalsha",
    "+script|load",
    "+time",
    "+hgetall",
    "+hset",
    "+del",
    "+pexpire",
    "+publish",
    "+subscribe",
    "+pubsub|numsub",
    "+config|get",
];

/// Makes the user `petstore` on the server at `url` with [`ACL_RULES`] and `extra`; the URL
/// of `port` as that user.
async fn limited_user(url: &str, port: u16, extra: &[&str]) -> String {
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("petstore")
        .arg(ACL_RULES)
        .arg(extra)
        .query_async(&mut connection(url).await)
        .await
        .unwrap();
    format!("redis://petstore:FAKE-acl-pass-not-a-secret@127.0.0.1:{port}/")
}

/// Fails the test if the server at `url` denied a command or a key (`ACL LOG`).
async fn assert_nothing_denied(url: &str) {
    let denied: Vec<redis::Value> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut connection(url).await)
        .await
        .unwrap();
    assert!(denied.is_empty(), "the ACL denied: {denied:?}");
}

#[tokio::test]
async fn a_user_limited_to_the_crates_keys_and_commands_shares_the_state() {
    common::install_log_capture();
    let server = RedisServer::start();
    let url = limited_user(&server.url(), server.port(), &[]).await;
    let sandbox = sandbox().await;
    let first = instance(&sandbox, "first", RedisState::new(&url).unwrap());
    let second = instance(&sandbox, "second", RedisState::new(&url).unwrap());
    a_429_met_by_one_instance_holds_the_other(&sandbox, first, second, &[server.url()]).await;
    assert_nothing_denied(&server.url()).await;
}

/// TLS (feature `redis-tls`): `rediss://` with the server's certificate verified.
#[cfg(feature = "redis-tls")]
mod tls {
    use super::*;
    use common::redis_tls::RedisTls;

    #[tokio::test]
    async fn tls_with_a_verified_certificate_shares_the_state() {
        common::install_log_capture();
        let server = RedisTls::start();
        // The way to a server whose certificate a private authority signed: a redis client
        // that trusts it.
        let trusting = || {
            let client = redis::Client::build_with_tls(
                server.tls_url(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(server.ca_certificate()),
                },
            )
            .expect("a TLS client");
            RedisState::from_client(client)
        };
        let sandbox = sandbox().await;
        let first = instance(&sandbox, "first", trusting());
        let second = instance(&sandbox, "second", trusting());
        a_429_met_by_one_instance_holds_the_other(&sandbox, first, second, &[server.url()]).await;

        // An instance that trusts only the system's authorities does not reach the state: the
        // certificate is verified. Its call goes on without Redis.
        let (captured, _guard) = common::capture(tracing::Level::WARN);
        let before = admissions_at(&server.url()).await;
        let doubting = RedisState::new(&server.tls_url()).expect("a rediss:// URL");
        instance(&sandbox, "doubting", doubting)
            .list_pets()
            .limit(1)
            .send()
            .await
            .expect("the call goes on without Redis");
        let text = captured.text();
        assert!(
            text.contains(UNREACHABLE)
                && text.contains("certificate")
                && text.contains("build_with_tls"),
            "expected a warning that Redis is unreachable for its certificate, the log \
             reads:\n{text}"
        );
        assert_eq!(admissions_at(&server.url()).await, before);
    }
}

/// One call through `state`, which must go on without Redis: what it logged at WARN.
async fn warnings_of_one_call(sandbox: &Sandbox, state: RedisState) -> String {
    let (captured, _guard) = common::capture(tracing::Level::WARN);
    instance(sandbox, "misconfigured", state)
        .list_pets()
        .limit(1)
        .send()
        .await
        .expect("the call goes on without Redis");
    captured.text()
}

#[tokio::test]
async fn a_cluster_node_given_as_one_server_is_told_to_use_the_cluster() {
    common::install_log_capture();
    let cluster = RedisCluster::start();
    // The state's slot is owned by one node of three: the others answer MOVED.
    let sandbox = sandbox().await;
    let mut texts = Vec::new();
    for node in cluster.nodes() {
        let state = RedisState::new(&node.url()).unwrap();
        texts.push(warnings_of_one_call(&sandbox, state).await);
    }
    let told = texts
        .iter()
        .filter(|text| text.contains("RedisState::cluster"))
        .count();
    assert_eq!(
        told,
        2,
        "expected the two nodes that do not own the state's slot to name RedisState::cluster, \
         the logs read:\n{}",
        texts.join("\n---\n")
    );
}

#[tokio::test]
async fn a_sentinel_given_as_one_server_is_told_to_use_sentinel() {
    common::install_log_capture();
    let master = RedisServer::start();
    let sentinel = RedisServer::start_sentinel(SERVICE, master.port());
    let text =
        warnings_of_one_call(&sandbox().await, RedisState::new(&sentinel.url()).unwrap()).await;
    assert!(
        text.contains("RedisState::sentinel") && !text.contains("CONFIG GET is not allowed"),
        "expected a warning naming RedisState::sentinel, and none about CONFIG GET, the log \
         reads:\n{text}"
    );
}

#[tokio::test]
async fn a_redis_that_asks_for_a_password_is_told_to_get_one() {
    common::install_log_capture();
    let server = RedisServer::start_with(&["--requirepass", "FAKE-password-not-a-secret"]);
    let text =
        warnings_of_one_call(&sandbox().await, RedisState::new(&server.url()).unwrap()).await;
    assert!(
        text.contains("password") && text.contains("redis://user:password@"),
        "expected a warning that Redis asks for a password and where to give it, the log \
         reads:\n{text}"
    );
}

#[test]
fn a_sentinel_url_is_told_to_use_sentinel() {
    let error = RedisState::new("redis+sentinel://127.0.0.1:26379/petstore").unwrap_err();
    assert!(
        error.to_string().contains("RedisState::sentinel"),
        "expected the error to name RedisState::sentinel: {error}"
    );
}
