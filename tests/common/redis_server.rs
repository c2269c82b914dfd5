//! A real `redis-server` (Debian package `redis-server`) on a free loopback port or a Unix
//! socket, without persistence, in a directory of its own, started for a test and stopped by
//! its PID when dropped; also as a Sentinel. A test that needs one fails loudly when it cannot
//! start: `.ci/run` installs the package. `tools/fleet` includes this file too, for
//! `--start-redis`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to answer `PING` after it is started: generous, for a loaded
/// machine.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a `PING` at start may take to be answered.
const REPLY_TIMEOUT: Duration = Duration::from_secs(1);

pub struct RedisServer {
    port: u16,
    /// Arguments before the common ones: a configuration file must come first.
    leading: Vec<String>,
    /// Arguments after the common ones, which they override.
    trailing: Vec<String>,
    /// Where it keeps its files (a cluster's node table, a Sentinel's configuration).
    dir: PathBuf,
    /// The Unix socket it listens on instead of a port.
    socket: Option<PathBuf>,
    child: Option<Child>,
}

/// A free loopback port.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server on a free loopback port with `args` besides the usual ones.
    pub fn start_with(args: &[&str]) -> Self {
        Self::launch(
            |_| (Vec::new(), args.iter().map(|a| a.to_string()).collect()),
            false,
        )
    }

    /// Starts a server that listens only on a Unix socket, at [`socket`](Self::socket).
    pub fn start_on_socket() -> Self {
        Self::launch(|_| (Vec::new(), Vec::new()), true)
    }

    /// Starts a Sentinel that watches the master on `master_port` as `service` and decides
    /// a failover alone (a quorum of one). It takes the master for down only after 30 s
    /// without an answer, so that a loaded machine does not start a failover no test asked
    /// for; `SENTINEL FAILOVER` starts one at once.
    pub fn start_sentinel(service: &str, master_port: u16) -> Self {
        let service = service.to_owned();
        Self::launch(
            move |dir| {
                let config = dir.join("sentinel.conf");
                std::fs::write(
                    &config,
                    format!(
                        "sentinel monitor {service} 127.0.0.1 {master_port} 1\n\
                         sentinel down-after-milliseconds {service} 30000\n\
                         sentinel failover-timeout {service} 10000\n"
                    ),
                )
                .expect("the Sentinel's configuration is written");
                (
                    vec![config.display().to_string()],
                    vec!["--sentinel".to_owned()],
                )
            },
            false,
        )
    }

    fn launch(args: impl FnOnce(&Path) -> (Vec<String>, Vec<String>), on_socket: bool) -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "petstore-client-redis-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("the server's directory is made");
        let (leading, trailing) = args(&dir);
        let socket = on_socket.then(|| dir.join("redis.sock"));
        let mut server = Self {
            port,
            leading,
            trailing,
            dir,
            socket,
            child: None,
        };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The Unix socket of a server started with [`start_on_socket`](Self::start_on_socket).
    pub fn socket(&self) -> &Path {
        self.socket.as_deref().expect("a server on a Unix socket")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server at once (SIGKILL), as a crash would; its data is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing answers.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a frozen server go on (SIGCONT).
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.pid().expect("the server runs");
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(
            status.success(),
            "expected kill {signal} {pid} to succeed, it ended with {status}"
        );
    }

    /// Starts the server again on the same port, empty, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        let port = match self.socket {
            Some(_) => "0".to_owned(),
            None => self.port.to_string(),
        };
        let socket = self
            .socket
            .iter()
            .flat_map(|socket| ["--unixsocket".into(), socket.display().to_string()]);
        let child = Command::new("redis-server")
            .args(&self.leading)
            .args([
                "--port",
                &port,
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .args(socket)
            .args(&self.trailing)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start redis-server ({error}): install the Debian package \
                     redis-server (`apt-get install -y redis-server`); .ci/run does"
                )
            });
        self.child = Some(child);
        let started = Instant::now();
        while !self.answers() {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "redis-server on port {} exited at start: {status}",
                    self.port
                );
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "redis-server on port {} did not answer PING within {START_TIMEOUT:?}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn answers(&self) -> bool {
        match &self.socket {
            Some(socket) => UnixStream::connect(socket).is_ok_and(|stream| {
                stream.set_read_timeout(Some(REPLY_TIMEOUT)).is_ok() && pongs(stream)
            }),
            None => TcpStream::connect(("127.0.0.1", self.port)).is_ok_and(|stream| {
                stream.set_read_timeout(Some(REPLY_TIMEOUT)).is_ok() && pongs(stream)
            }),
        }
    }
}

/// Whether the server answers PING: a pong, or, from one that asks for a password, NOAUTH.
fn pongs(mut stream: impl Read + Write) -> bool {
    let mut reply = [0; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && (&reply == b"+PONG\r\n" || &reply == b"-NOAUTH")
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // SIGKILL ends a frozen (stopped) server too.
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
