//! The `petstore-sandbox` command as a user runs it: the built binary on a free loopback port,
//! its printed base URL and key given to a client, and stopped by its PID with a signal.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use petstore_client::{Pet, PetStatus, PetStoreClient};

const BINARY: &str = env!("CARGO_BIN_EXE_petstore-sandbox");

/// How long a test waits for a line, so that a wrong expectation fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(30);

/// The command running, killed by its PID if a test fails before stopping it.
struct Running {
    child: Child,
    /// Its stdout, line by line, read on a thread of its own; closed when the process ends.
    lines: Receiver<String>,
}

impl Running {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(BINARY)
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the petstore-sandbox binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Self { child, lines }
    }

    /// The `PETSTORE_BASE_URL` line, then the `keys` lines of the keys, as printed at start.
    fn banner(&mut self, keys: usize) -> (String, Vec<String>) {
        let first = self.line().expect("the base URL line");
        let base_url = first
            .strip_prefix("PETSTORE_BASE_URL=")
            .unwrap_or_else(|| panic!("the first line gives the base URL: {first:?}"))
            .to_owned();
        let keys = (0..keys)
            .map(|_| self.line().expect("a key line"))
            .collect();
        (base_url, keys)
    }

    /// The next line of stdout, or `None` once it is closed.
    fn line(&mut self) -> Option<String> {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no line from the sandbox in {PATIENCE:?}"),
        }
    }

    /// Sends `signal` to the process by its PID and waits: its exit status and its last line.
    fn stop_with(mut self, signal: &str) -> (bool, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} {pid}");
        let mut last = String::new();
        while let Some(line) = self.line() {
            last = line;
        }
        let status = self.child.wait().expect("the sandbox exits");
        (status.success(), last)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(BINARY)
        .args(args)
        .output()
        .expect("the petstore-sandbox binary runs")
}

#[tokio::test]
async fn serves_a_client_at_the_printed_url_and_key_until_sigterm() {
    let mut sandbox = Running::start(&[
        "--key",
        "test-key=enterprise:100/1000",
        "--pet",
        "Rex:3:sold",
        "--clock-start",
        "2030-01-01T00:00:00Z",
    ]);
    let (base_url, keys) = sandbox.banner(5);
    assert!(base_url.starts_with("http://127.0.0.1:"), "{base_url}");
    assert!(keys[0].starts_with("PETSTORE_API_KEY=sandbox-free-key "));
    let line = &keys[4];
    assert!(
        line.starts_with("PETSTORE_API_KEY=test-key ")
            && line.ends_with("# enterprise:100/1000: 100 requests per 60 s, 1000 per 86400 s"),
        "{line}"
    );
    let key = line["PETSTORE_API_KEY=".len()..].split_whitespace().next();

    let client = PetStoreClient::builder()
        .base_url(base_url.as_str())
        .api_key(key.expect("a key"))
        .build()
        .expect("a client");
    let response = client
        .list_pets()
        .send_with_meta()
        .await
        .expect("the sandbox answers");
    let seeded = Pet::new(1, "Rex", 3).status(PetStatus::Sold);
    assert_eq!(response.value(), &vec![seeded]);
    assert_eq!(response.quota().map(|quota| quota.limit), Some(100));

    let (exited_cleanly, last) = sandbox.stop_with("TERM");
    assert!(exited_cleanly);
    assert_eq!(
        last,
        "stats total=1 ok=1 limited=0 during_cooldown=0 bans=0"
    );
}

#[test]
fn stops_cleanly_on_ctrl_c() {
    let mut sandbox = Running::start(&[]);
    sandbox.banner(4);
    let (exited_cleanly, last) = sandbox.stop_with("INT");
    assert!(exited_cleanly);
    assert_eq!(
        last,
        "stats total=0 ok=0 limited=0 during_cooldown=0 bans=0"
    );
}

#[test]
fn bad_flags_are_refused_with_what_was_expected() {
    for (args, expected) in [
        (&["--key", "no-plan"][..], "`no-plan` is not KEY=PLAN"),
        (&["--key", "k=gold"], "free, pro, business, enterprise"),
        (&["--port", "http"], "--port <PORT>"),
        (
            &["--window-kind", "weekly"],
            "[possible values: fixed, sliding]",
        ),
        (&["--minute-window", "0"], "0 is not in 1.."),
        (&["--clock-start", "noon"], "not an RFC 3339 time"),
        (&["--pet", "Rex"], "`Rex` is not NAME:CATEGORY_ID[:STATUS]"),
        (&["--prot", "8080"], "a similar argument exists: '--port'"),
    ] {
        let output = run(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn a_port_in_use_is_an_error_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = taken.local_addr().expect("its address").port().to_string();
    // Should the port be taken after all, the sandbox stops by itself and the test fails.
    let output = run(&["--port", &port, "--run-for", "10"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot serve on 127.0.0.1:{port}")),
        "{stderr}"
    );
}

#[test]
fn help_documents_every_flag() {
    let output = run(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--bind",
        "--port",
        "--key",
        "--minute-window",
        "--day-window",
        "--window-kind",
        "--ban-threshold",
        "--ban-duration",
        "--clock-start",
        "--clock-offset",
        "--pet",
        "--run-for",
    ] {
        assert!(help.contains(flag), "{flag} is not in --help:\n{help}");
    }
}
