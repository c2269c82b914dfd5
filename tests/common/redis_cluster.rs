//! A real Redis Cluster of three masters (no replicas), each a `redis-server` on free loopback
//! ports, made one cluster by `redis-cli --cluster create` (Debian package `redis-tools`, which
//! `.ci/run` installs), and stopped by PID when dropped.

use std::process::Command;
use std::time::{Duration, Instant};

use super::redis_server::{RedisServer, free_port};

/// How long the cluster may take to cover every slot once made: generous, for a loaded machine.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three masters, makes them one cluster and waits until every node reports
    /// `cluster_state:ok`.
    pub fn start() -> Self {
        let nodes: Vec<_> = (0..3)
            .map(|_| {
                // The cluster bus needs a port of its own; by default it is the port plus
                // 10000, which may be taken or out of range.
                let bus = free_port().to_string();
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus,
                    "--cluster-config-file",
                    "nodes.conf",
                ])
            })
            .collect();
        let addresses: Vec<_> = nodes
            .iter()
            .map(|node| format!("127.0.0.1:{}", node.port()))
            .collect();
        let created = redis_cli(
            ["--cluster", "create"]
                .into_iter()
                .chain(addresses.iter().map(String::as_str))
                .chain(["--cluster-yes"]),
        );
        assert!(
            created.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&created.stdout),
            String::from_utf8_lossy(&created.stderr)
        );
        let cluster = Self { nodes };
        let started = Instant::now();
        for node in &cluster.nodes {
            let port = node.port().to_string();
            loop {
                let info = redis_cli(["-p", &port, "cluster", "info"]);
                if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                    break;
                }
                assert!(
                    started.elapsed() < READY_TIMEOUT,
                    "the cluster node on port {port} was not ready within {READY_TIMEOUT:?}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        cluster
    }

    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Moves `key`'s slot, with its keys, from node `from` to node `to`, as resharding does
    /// (IMPORTING, MIGRATING, MIGRATE, then every node told the new owner): a client that
    /// knew the old owner is answered MOVED there.
    pub fn move_slot_of(&self, key: &str, from: usize, to: usize) {
        let port = |i: usize| self.nodes[i].port().to_string();
        let (from_port, to_port) = (port(from), port(to));
        let slot = answer(["-p", &from_port, "CLUSTER", "KEYSLOT", key]);
        let from_id = answer(["-p", &from_port, "CLUSTER", "MYID"]);
        let to_id = answer(["-p", &to_port, "CLUSTER", "MYID"]);
        for (port, args) in [
            (&to_port, ["SETSLOT", &slot, "IMPORTING", &from_id]),
            (&from_port, ["SETSLOT", &slot, "MIGRATING", &to_id]),
        ] {
            assert_eq!(
                answer(["-p", port, "CLUSTER"].into_iter().chain(args)),
                "OK"
            );
        }
        let migrated = answer([
            "-p",
            &from_port,
            "MIGRATE",
            "127.0.0.1",
            &to_port,
            "",
            "0",
            "5000",
            "KEYS",
            key,
        ]);
        assert_eq!(migrated, "OK", "MIGRATE of {key}");
        for node in 0..self.nodes.len() {
            let node_port = port(node);
            let set = answer([
                "-p", &node_port, "CLUSTER", "SETSLOT", &slot, "NODE", &to_id,
            ]);
            assert_eq!(set, "OK", "CLUSTER SETSLOT NODE on port {node_port}");
        }
    }
}

/// What `redis-cli` with `args` printed, trimmed.
fn answer<'a>(args: impl IntoIterator<Item = &'a str>) -> String {
    let output = redis_cli(args);
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

fn redis_cli<'a>(args: impl IntoIterator<Item = &'a str>) -> std::process::Output {
    Command::new("redis-cli")
        .args(args)
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "cannot run redis-cli ({error}): install the Debian package redis-tools \
                 (`apt-get install -y redis-tools`); .ci/run does"
            )
        })
}
