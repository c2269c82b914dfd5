//! Several processes, each with one client and many tasks, share one API key against the
//! standalone sandbox on the real clock: does the fleet use its allowance without 429s, calls
//! during a cooldown, or bans?
//!
//! `cargo run --release -p petstore-fleet -- [--processes 4] [--tasks 16] [--seconds 60]
//! [--window 10] [--per-window 60]`
//!
//! The same fleet sharing its rate-limit state in Redis (`RedisState`, feature `redis`), in a
//! `redis-server` the tool starts on a free loopback port and kills at the end (Debian
//! package `redis-server`), or in one already running:
//!
//! `cargo run --release -p petstore-fleet --features redis -- --processes 4 --tasks 16
//! --seconds 60 --window 10 --per-window 60 --start-redis`
//!
//! `cargo run --release -p petstore-fleet --features redis -- --redis redis://127.0.0.1:6379/`
//!
//! With `--start-redis`, `--restart-redis-at 17 --down-ms 1000` kills that server 17 s into the
//! run and starts it again, empty, a second later: what an outage costs the window it ends in
//! is that window's row.
//!
//! The parent starts the `petstore-sandbox` command (building it if it is not beside this
//! executable's folder), then `--processes` copies of itself in worker mode. Each worker
//! builds one client with the library's defaults (and `.shared_state(RedisState::new(url)?)`
//! with `--redis` or `--start-redis`) and runs `--tasks` tasks calling `listPets` back to back
//! until the deadline. The parent adds up the successes per rate window (by the
//! `X-RateLimit-Reset` each response reported), counts only the windows that lie wholly within
//! the run, and prints goodput (successes over allowance) with the sandbox's own counts of
//! 429s, calls during a cooldown and bans, and whether Redis was used. It exits with status 1
//! if any key was banned or goodput is under 90%; with Redis, if there was any 429 or goodput is
//! under 98%.

#[path = "../../../tests/common/redis_server.rs"]
#[allow(dead_code)] // the tests' helper: this tool only starts and stops the server
mod redis_server;

use std::collections::BTreeMap;
use std::fmt::Display;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use petstore_client::{Error, PetStoreClient, PetStoreClientBuilder};

const USAGE: &str = "usage: cargo run --release -p petstore-fleet [--features redis] -- \
[--processes 4] [--tasks 16] [--seconds 60] [--window 10] [--per-window 60] \
[--redis URL | --start-redis [--restart-redis-at SECONDS] [--down-ms 1000]]";

/// Why `--redis` and `--start-redis` fail in a build without the feature.
const NEEDS_REDIS_FEATURE: &str = "--redis and --start-redis need the `redis` feature: add \
`--features redis` (cargo run --release -p petstore-fleet --features redis -- ...)";

/// The key the fleet registers with the sandbox, on a plan of `--per-window` per window.
const FLEET_KEY: &str = "fleet-key";

/// Goodput under this share of the allowance fails the run.
const GOODPUT_FLOOR: f64 = 0.9;
/// With one budget shared in Redis, the fleet must do better: no 429 at all.
const GOODPUT_FLOOR_SHARED: f64 = 0.98;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = if args.first().is_some_and(|arg| arg == "--worker") {
        worker::main(&args[1..])
    } else {
        parent(&args)
    };
    result.unwrap_or_else(|message| {
        eprintln!("fleet: {message}");
        ExitCode::from(2)
    })
}

/// The parent's command line.
#[derive(Debug)]
struct Options {
    processes: u32,
    tasks: u32,
    seconds: u64,
    window: u64,
    per_window: u64,
    redis: Option<Redis>,
    /// With `--start-redis`: when to kill the server, and how long it stays down.
    restart_at: Option<Duration>,
    down: Duration,
}

/// Where the workers share their rate-limit state.
#[derive(Debug)]
enum Redis {
    /// `--redis URL`: a server already running.
    Given(String),
    /// `--start-redis`: a server this run starts and kills.
    Start,
}

fn parent(args: &[String]) -> Result<ExitCode, String> {
    let mut options = Options {
        processes: 4,
        tasks: 16,
        seconds: 60,
        window: 10,
        per_window: 60,
        redis: None,
        restart_at: None,
        down: Duration::from_secs(1),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value\n{USAGE}"))
        };
        match arg.as_str() {
            "--processes" => options.processes = number(arg, value()?)?,
            "--tasks" => options.tasks = number(arg, value()?)?,
            "--seconds" => options.seconds = number(arg, value()?)?,
            "--window" => options.window = number(arg, value()?)?,
            "--per-window" => options.per_window = number(arg, value()?)?,
            "--redis" => options.redis = Some(Redis::Given(value()?.clone())),
            "--start-redis" => options.redis = Some(Redis::Start),
            "--restart-redis-at" => {
                options.restart_at = Some(Duration::from_secs(number(arg, value()?)?));
            }
            "--down-ms" => options.down = Duration::from_millis(number(arg, value()?)?),
            other => return Err(format!("unknown argument: {other}\n{USAGE}")),
        }
    }
    if options.window == 0 || options.processes == 0 || options.tasks == 0 {
        return Err(format!(
            "--window, --processes and --tasks must be at least 1\n{USAGE}"
        ));
    }
    if options.redis.is_some() && !cfg!(feature = "redis") {
        return Err(NEEDS_REDIS_FEATURE.to_owned());
    }
    if options.restart_at.is_some() && !matches!(options.redis, Some(Redis::Start)) {
        return Err(format!("--restart-redis-at needs --start-redis\n{USAGE}"));
    }

    // Dropped at the end of the run, or on any error: killed by its PID.
    let mut server = match options.redis {
        Some(Redis::Start) => Some(start_redis()?),
        _ => None,
    };
    let redis_url = match &options.redis {
        Some(Redis::Given(url)) => Some(url.clone()),
        Some(Redis::Start) => server.as_ref().map(redis_server::RedisServer::url),
        None => None,
    };
    let mut sandbox = start_sandbox(&options)?;
    let outcome = std::thread::scope(|scope| {
        if let (Some(at), Some(server)) = (options.restart_at, server.as_mut()) {
            scope.spawn(move || {
                std::thread::sleep(at);
                server.kill();
                eprintln!(
                    "fleet: redis-server killed at {}",
                    unix_ms(SystemTime::now())
                );
                std::thread::sleep(options.down);
                server.restart();
                eprintln!(
                    "fleet: redis-server back, empty, at {}",
                    unix_ms(SystemTime::now())
                );
            });
        }
        run_workers(&options, &mut sandbox, redis_url.as_deref())
    });
    if outcome.is_err() {
        let _ = sandbox.child.kill();
    }
    let workers = outcome?;
    drop(server);
    let stats = sandbox.stats()?;
    Ok(report(&options, &workers, &stats))
}

/// A `redis-server` on a free loopback port, answering `PING`; killed by its PID when dropped.
fn start_redis() -> Result<redis_server::RedisServer, String> {
    // Said here rather than in the helper's panic, with what to do about it.
    if let Err(error) = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
    {
        return Err(format!(
            "--start-redis: cannot run redis-server ({error}): install the Debian package \
             redis-server (`apt-get install -y redis-server`), or give --redis URL"
        ));
    }
    let server = redis_server::RedisServer::start();
    eprintln!(
        "fleet: redis-server at {} (pid {})",
        server.url(),
        server.pid().unwrap_or(0)
    );
    Ok(server)
}

/// The standalone sandbox process and its base URL.
struct SandboxProcess {
    child: Child,
    base_url: String,
    /// Its remaining stdout, read to the end for the `stats` line.
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl SandboxProcess {
    /// Waits for the sandbox to stop by itself and reads its `stats` line.
    fn stats(mut self) -> Result<Counts, String> {
        let line = self
            .lines
            .by_ref()
            .map_while(Result::ok)
            .find(|line| line.starts_with("stats "));
        let _ = self.child.wait();
        let line = line.ok_or("the sandbox stopped without a stats line")?;
        Ok(Counts::parse(&line))
    }
}

fn start_sandbox(options: &Options) -> Result<SandboxProcess, String> {
    let binary = sandbox_binary()?;
    let mut child = Command::new(&binary)
        .args(["--port", "0"])
        .args(["--minute-window", &options.window.to_string()])
        .args([
            "--key",
            &format!("{FLEET_KEY}=enterprise:{}/1000000", options.per_window),
        ])
        .args(["--run-for", &(options.seconds + 5).to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout from the sandbox")?;
    let mut lines = BufReader::new(stdout).lines();
    let base_url = lines.by_ref().map_while(Result::ok).find_map(|line| {
        line.strip_prefix("PETSTORE_BASE_URL=")
            .map(|url| url.trim().to_owned())
    });
    let Some(base_url) = base_url else {
        let _ = child.kill();
        return Err("the sandbox did not print its base URL".to_owned());
    };
    Ok(SandboxProcess {
        child,
        base_url,
        lines,
    })
}

/// The `petstore-sandbox` command of this build, beside this one in the profile's folder, built
/// with the same profile if absent.
fn sandbox_binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let dir = exe
        .parent()
        .ok_or("this executable is not in a profile's folder")?;
    let binary = dir.join(format!("petstore-sandbox{}", std::env::consts::EXE_SUFFIX));
    if binary.exists() {
        return Ok(binary);
    }
    let release = exe.components().any(|part| part.as_os_str() == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .args([
            "build",
            "-p",
            "petstore-sandbox",
            "--bin",
            "petstore-sandbox",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if release {
        build.arg("--release");
    }
    eprintln!("fleet: building the sandbox: {build:?}");
    let status = build
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() || !binary.exists() {
        return Err(format!(
            "could not build the petstore-sandbox command at {}",
            binary.display()
        ));
    }
    Ok(binary)
}

/// What the workers reported, added up.
#[derive(Debug, Default)]
struct Workers {
    /// Successes per window, by the window's `X-RateLimit-Reset`.
    ok_per_window: BTreeMap<u64, u64>,
    errors: BTreeMap<String, u64>,
    abandoned: u64,
    /// The span every worker ran, in unix milliseconds: the latest start, the earliest end.
    from_ms: u64,
    to_ms: u64,
}

fn run_workers(
    options: &Options,
    sandbox: &mut SandboxProcess,
    redis_url: Option<&str>,
) -> Result<Workers, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let children = (0..options.processes)
        .map(|index| spawn_worker(&exe, index, options, &sandbox.base_url, redis_url))
        .collect::<Result<Vec<_>, _>>()?;
    let mut workers = Workers {
        to_ms: u64::MAX,
        ..Workers::default()
    };
    let mut failed = Vec::new();
    for (index, child) in children.into_iter().enumerate() {
        let output = child
            .wait_with_output()
            .map_err(|e| format!("worker {index}: {e}"))?;
        if !output.status.success() {
            failed.push(format!("worker {index} exited with {}", output.status));
        }
        workers.add(&String::from_utf8_lossy(&output.stdout));
    }
    if failed.is_empty() {
        Ok(workers)
    } else {
        Err(failed.join("; "))
    }
}

fn spawn_worker(
    exe: &Path,
    index: u32,
    options: &Options,
    base_url: &str,
    redis_url: Option<&str>,
) -> Result<Child, String> {
    let mut command = Command::new(exe);
    command
        .arg("--worker")
        .args(["--index", &index.to_string()])
        .args(["--base-url", base_url])
        .args(["--key", FLEET_KEY])
        .args(["--tasks", &options.tasks.to_string()])
        .args(["--seconds", &options.seconds.to_string()]);
    if let Some(url) = redis_url {
        command.args(["--redis", url]);
    }
    command
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start worker {index}: {e}"))
}

impl Workers {
    /// Adds one worker's report: `window reset=<unix> ok=<n>`, `errors kind=<k> n=<n>`,
    /// `abandoned n=<n>` and `ran from=<unix ms> to=<unix ms>` lines.
    fn add(&mut self, report: &str) {
        for line in report.lines() {
            let fields = Fields::new(line);
            match line.split(' ').next() {
                Some("window") => {
                    if let (Some(reset), Some(ok)) = (fields.get("reset"), fields.get("ok")) {
                        *self.ok_per_window.entry(reset).or_default() += ok;
                    }
                }
                Some("errors") => {
                    if let (Some(kind), Some(n)) = (fields.text("kind"), fields.get("n")) {
                        *self.errors.entry(kind.to_owned()).or_default() += n;
                    }
                }
                Some("abandoned") => self.abandoned += fields.get("n").unwrap_or(0),
                Some("ran") => {
                    self.from_ms = self.from_ms.max(fields.get("from").unwrap_or(0));
                    self.to_ms = self.to_ms.min(fields.get("to").unwrap_or(0));
                }
                _ => {}
            }
        }
    }
}

/// The sandbox's own counts, from its `stats` line.
#[derive(Debug, Default)]
struct Counts {
    total: u64,
    ok: u64,
    limited: u64,
    during_cooldown: u64,
    bans: u64,
}

impl Counts {
    fn parse(line: &str) -> Self {
        let fields = Fields::new(line);
        let get = |name| fields.get(name).unwrap_or(0);
        Self {
            total: get("total"),
            ok: get("ok"),
            limited: get("limited"),
            during_cooldown: get("during_cooldown"),
            bans: get("bans"),
        }
    }
}

/// The `name=value` fields of one report line.
struct Fields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Fields<'a> {
    fn new(line: &'a str) -> Self {
        Self(line.split(' ').filter_map(|f| f.split_once('=')).collect())
    }

    fn text(&self, name: &str) -> Option<&'a str> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    fn get(&self, name: &str) -> Option<u64> {
        self.text(name)?.parse().ok()
    }
}

fn report(options: &Options, workers: &Workers, sandbox: &Counts) -> ExitCode {
    // The windows wholly within the span every worker ran; a success is always reported
    // within a second of its window's end, since the wait before a call happens client-side.
    let window = options.window;
    let first_end = workers.from_ms.div_ceil(window * 1000) * window + window;
    let last_end = workers.to_ms.saturating_sub(1000) / 1000 / window * window;
    let full: Vec<u64> = (0..)
        .map(|n| first_end + n * window)
        .take_while(|end| *end <= last_end)
        .collect();
    let successes: u64 = full
        .iter()
        .map(|reset| workers.ok_per_window.get(reset).copied().unwrap_or(0))
        .sum();
    let allowance = options.per_window * full.len() as u64;
    let goodput = (allowance > 0).then(|| successes as f64 / allowance as f64);

    println!();
    println!(
        "fleet: {} s on the real clock, window {window} s, {} requests per window, one key",
        options.seconds, options.per_window
    );
    println!("  per window (reset: successes, * = counted):");
    let mut resets: Vec<u64> = workers.ok_per_window.keys().copied().collect();
    resets.extend(&full);
    resets.sort_unstable();
    resets.dedup();
    for reset in resets {
        let ok = workers.ok_per_window.get(&reset).copied().unwrap_or(0);
        let mark = if full.contains(&reset) { '*' } else { ' ' };
        println!("    {reset}: {ok:>5} {mark}");
    }
    for (kind, n) in &workers.errors {
        println!("  errors seen by the workers: {kind} x {n}");
    }
    if workers.abandoned > 0 {
        println!("  calls abandoned at the deadline: {}", workers.abandoned);
    }
    let goodput_text = goodput.map_or("n/a".to_owned(), |g| format!("{:.1}%", g * 100.0));
    let redis = match &options.redis {
        None => "no",
        Some(Redis::Given(_)) => "yes (--redis)",
        Some(Redis::Start) => "yes (started)",
    };
    let rows: [(&str, String); 11] = [
        ("processes", options.processes.to_string()),
        ("tasks per process", options.tasks.to_string()),
        ("shared in Redis", redis.to_owned()),
        ("windows counted", full.len().to_string()),
        ("allowance", allowance.to_string()),
        ("successes in them", successes.to_string()),
        ("goodput", goodput_text),
        ("429s", sandbox.limited.to_string()),
        ("during cooldown", sandbox.during_cooldown.to_string()),
        ("bans", sandbox.bans.to_string()),
        (
            "requests (2xx)",
            format!("{} ({})", sandbox.total, sandbox.ok),
        ),
    ];
    println!();
    for (name, value) in rows {
        println!("  {name:<20} {value:>12}");
    }

    let mut verdict = Vec::new();
    if sandbox.bans > 0 {
        verdict.push(format!("{} ban(s)", sandbox.bans));
    }
    let floor = if options.redis.is_some() {
        if sandbox.limited > 0 {
            verdict.push(format!(
                "{} × 429 with the budget shared in Redis",
                sandbox.limited
            ));
        }
        GOODPUT_FLOOR_SHARED
    } else {
        GOODPUT_FLOOR
    };
    match goodput {
        None => verdict.push("no whole window to count: run longer than two windows".to_owned()),
        Some(g) if g < floor => verdict.push(format!("goodput under {:.0}%", floor * 100.0)),
        Some(_) => {}
    }
    if verdict.is_empty() {
        println!("\nPASS");
        ExitCode::SUCCESS
    } else {
        println!("\nFAIL: {}", verdict.join(", "));
        ExitCode::FAILURE
    }
}

fn number<T: FromStr>(name: &str, value: &str) -> Result<T, String>
where
    T::Err: Display,
{
    value
        .parse()
        .map_err(|e| format!("{name}: not a valid number `{value}`: {e}"))
}

fn unix_ms(at: SystemTime) -> u64 {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// One worker process: one client, many tasks, one report on stdout.
mod worker {
    use super::*;

    /// What one task saw.
    #[derive(Debug, Default)]
    struct Tally {
        ok_per_window: BTreeMap<Option<i64>, u64>,
        errors: BTreeMap<String, u64>,
        abandoned: u64,
    }

    impl Tally {
        fn merge(&mut self, other: Tally) {
            for (reset, n) in other.ok_per_window {
                *self.ok_per_window.entry(reset).or_default() += n;
            }
            for (kind, n) in other.errors {
                *self.errors.entry(kind).or_default() += n;
            }
            self.abandoned += other.abandoned;
        }
    }

    /// `--index I --base-url URL --key KEY --tasks N --seconds S [--redis URL]`.
    pub(super) fn main(args: &[String]) -> Result<ExitCode, String> {
        let mut index = 0u32;
        let mut base_url = None;
        let mut key = None;
        let mut tasks = 16u32;
        let mut seconds = 60u64;
        let mut redis = None;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
            match arg.as_str() {
                "--index" => index = number(arg, value)?,
                "--base-url" => base_url = Some(value.clone()),
                "--key" => key = Some(value.clone()),
                "--tasks" => tasks = number(arg, value)?,
                "--seconds" => seconds = number(arg, value)?,
                "--redis" => redis = Some(value.clone()),
                other => return Err(format!("worker: unknown argument: {other}")),
            }
        }
        let base_url = base_url.ok_or("worker: --base-url is required")?;
        let key = key.ok_or("worker: --key is required")?;
        let mut builder = PetStoreClient::builder()
            .base_url(base_url)
            .api_key(key)
            .user_agent(format!("fleet-worker-{index}"));
        if let Some(url) = redis {
            builder = shared_state(builder, &url)?;
        }
        let client = builder
            .build()
            .map_err(|e| format!("worker {index}: {e}"))?;
        let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
        runtime.block_on(run(client, tasks, seconds));
        Ok(ExitCode::SUCCESS)
    }

    /// The builder with the rate-limit state shared in the Redis at `url`.
    #[cfg(feature = "redis")]
    fn shared_state(
        builder: PetStoreClientBuilder,
        url: &str,
    ) -> Result<PetStoreClientBuilder, String> {
        let state = petstore_client::RedisState::new(url).map_err(|e| e.to_string())?;
        Ok(builder.shared_state(state))
    }

    #[cfg(not(feature = "redis"))]
    fn shared_state(
        _builder: PetStoreClientBuilder,
        _url: &str,
    ) -> Result<PetStoreClientBuilder, String> {
        Err(NEEDS_REDIS_FEATURE.to_owned())
    }

    async fn run(client: PetStoreClient, tasks: u32, seconds: u64) {
        let started = SystemTime::now();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            set.spawn(call_until(client.clone(), deadline));
        }
        let mut tally = Tally::default();
        while let Some(task) = set.join_next().await {
            if let Ok(task) = task {
                tally.merge(task);
            }
        }
        for (reset, ok) in &tally.ok_per_window {
            match reset {
                Some(reset) => println!("window reset={reset} ok={ok}"),
                None => println!("window reset=unknown ok={ok}"),
            }
        }
        for (kind, n) in &tally.errors {
            println!("errors kind={kind} n={n}");
        }
        println!("abandoned n={}", tally.abandoned);
        let from = unix_ms(started);
        println!("ran from={from} to={}", from + seconds * 1000);
    }

    /// Calls back to back until the deadline; a call still running then is abandoned.
    async fn call_until(client: PetStoreClient, deadline: tokio::time::Instant) -> Tally {
        let mut tally = Tally::default();
        while tokio::time::Instant::now() < deadline {
            let call = client.list_pets().limit(1).send_with_meta();
            match tokio::time::timeout_at(deadline, call).await {
                Err(_) => tally.abandoned += 1,
                Ok(Ok(response)) => {
                    let reset = response.quota().map(|q| q.reset.timestamp());
                    *tally.ok_per_window.entry(reset).or_default() += 1;
                }
                Ok(Err(error)) => {
                    *tally.errors.entry(kind(&error)).or_default() += 1;
                    if let Error::Throttled(held) = error {
                        // Not sent: the client asked to wait longer than it would itself.
                        let wake = tokio::time::Instant::now() + held.retry_after();
                        tokio::time::sleep_until(wake.min(deadline)).await;
                    }
                }
            }
        }
        tally
    }

    /// A name for an error without spaces: `http429:rate_limited`, `throttled`, `timeout`, ...
    fn kind(error: &Error) -> String {
        if let Some(api) = error.api_error() {
            return format!(
                "http{}:{}",
                api.status().as_u16(),
                api.code().unwrap_or("-")
            );
        }
        let kind = match error {
            Error::Throttled { .. } => "throttled",
            Error::Connection { .. } => "connection",
            _ if error.is_timeout() => "timeout",
            _ if error.is_connect() => "connect",
            _ if error.is_decode() => "decode",
            _ => "other",
        };
        kind.to_owned()
    }
}
