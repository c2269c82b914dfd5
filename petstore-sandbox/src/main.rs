//! The `petstore-sandbox` command: the sandbox as a server that runs until it is stopped, for
//! demos across several processes, curl and other languages.

#![forbid(unsafe_code)]

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, TimeDelta};
use clap::{Parser, ValueEnum};
use petstore_client::{NewPet, PetStatus};
use petstore_sandbox::{Plan, Sandbox, SandboxBuilder, Stats, WindowKind};

/// Serves the Pet Store API sandbox until Ctrl-C or SIGTERM.
///
/// On start it prints its base URL and every key it accepts, one per line, as
/// `PETSTORE_BASE_URL=<url>` and `PETSTORE_API_KEY=<key>  # <plan and limits>`, ready to copy
/// into the environment of a client. On stopping, its last line is
/// `stats total=<n> ok=<n> limited=<n> during_cooldown=<n> bans=<n>` (ok: 2xx answers,
/// limited: 429 answers, during_cooldown: requests sent during a Retry-After or a ban).
#[derive(Debug, Parser)]
#[command(version, about, long_about)]
struct Args {
    /// The address to listen on.
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    bind: IpAddr,

    /// The port to listen on; 0 picks a free one, printed in the base URL.
    #[arg(long, short, value_name = "PORT", default_value_t = 8080)]
    port: u16,

    /// Registers another API key with its plan (repeatable). PLAN is free, pro, business,
    /// enterprise (5000 per minute window, 1000000 per day window), or
    /// enterprise:PER_MINUTE/PER_DAY. The demo keys sandbox-free-key, sandbox-pro-key,
    /// sandbox-business-key and sandbox-enterprise-key always exist.
    #[arg(long = "key", value_name = "KEY=PLAN", value_parser = parse_key)]
    keys: Vec<KeyPlan>,

    /// The length of the "minute" window, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    minute_window: u64,

    /// The length of the "day" window, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..))]
    day_window: u64,

    /// How both windows count requests: fixed (aligned to multiples of their length in Unix
    /// time) or sliding (a request counts for the window's length from its arrival).
    #[arg(long, value_name = "KIND", value_enum, default_value_t = Windows::Fixed)]
    window_kind: Windows,

    /// How many requests a key may send during a Retry-After wait before it is banned.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    ban_threshold: u32,

    /// How long a ban lasts, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    ban_duration: u64,

    /// What the sandbox's clock reads at start, as an RFC 3339 time such as
    /// 2030-01-01T00:00:00Z; the system time by default. It then advances in real time.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    clock_start: Option<SystemTime>,

    /// Skews the sandbox's clock by this many seconds (negative: behind), to try a client
    /// against a server whose clock is off.
    #[arg(long, value_name = "SECS", default_value = "0", allow_negative_numbers = true, value_parser = parse_offset)]
    clock_offset: TimeDelta,

    /// A pet in the catalogue at start (repeatable, ids from 1 in order): its name, its
    /// category id and optionally its status (available, pending or sold), such as
    /// Rex:1:available.
    #[arg(long = "pet", value_name = "NAME:CATEGORY_ID[:STATUS]", value_parser = parse_pet)]
    pets: Vec<NewPet>,

    /// Stops by itself after this many seconds.
    #[arg(long, value_name = "SECS")]
    run_for: Option<u64>,
}

/// A key and its plan, from `--key KEY=PLAN`.
#[derive(Debug, Clone)]
struct KeyPlan {
    key: String,
    plan: Plan,
}

/// The choices of `--window-kind`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Windows {
    Fixed,
    Sliding,
}

impl Args {
    /// The sandbox these flags describe.
    fn builder(&self) -> SandboxBuilder {
        let kind = match self.window_kind {
            Windows::Fixed => WindowKind::Fixed,
            Windows::Sliding => WindowKind::Sliding,
        };
        let mut builder = Sandbox::builder()
            .bind(SocketAddr::new(self.bind, self.port))
            .minute_window(Duration::from_secs(self.minute_window))
            .day_window(Duration::from_secs(self.day_window))
            .window_kind(kind)
            .ban_threshold(self.ban_threshold)
            .ban_duration(Duration::from_secs(self.ban_duration))
            .clock_offset(self.clock_offset)
            .pets(self.pets.iter().cloned());
        if let Some(start) = self.clock_start {
            builder = builder.clock_start(start);
        }
        for KeyPlan { key, plan } in &self.keys {
            builder = builder.key(key, *plan);
        }
        builder
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("petstore-sandbox: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> std::io::Result<()> {
    // Listening for the signals before the address is printed: a parent that reads it and
    // stops the sandbox at once must find the handlers in place.
    let stop = Stop::listen()?;
    let bind = SocketAddr::new(args.bind, args.port);
    let sandbox = args.builder().start().await.map_err(|error| {
        std::io::Error::new(error.kind(), format!("cannot serve on {bind}: {error}"))
    })?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "PETSTORE_BASE_URL={}", sandbox.base_url())?;
    for (key, plan) in sandbox.keys() {
        writeln!(
            out,
            "PETSTORE_API_KEY={key:<24} # {}: {} requests per {} s, {} per {} s",
            plan_name(plan),
            plan.per_minute(),
            args.minute_window,
            plan.per_day(),
            args.day_window,
        )?;
    }
    out.flush()?;
    drop(out);
    eprintln!("petstore-sandbox: serving until Ctrl-C or SIGTERM");

    stop.wait(args.run_for.map(Duration::from_secs)).await;
    let stats = sandbox.stats();
    sandbox.shutdown().await;
    println!("{}", stats_line(&stats));
    Ok(())
}

/// What stops the sandbox: Ctrl-C, SIGTERM, or the end of `--run-for`.
struct Stop {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Stop {
    fn listen() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    async fn wait(mut self, run_for: Option<Duration>) {
        let deadline = async {
            match run_for {
                Some(length) => tokio::time::sleep(length).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = deadline => {}
            () = self.signalled() => {}
        }
    }

    #[cfg(unix)]
    async fn signalled(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }

    #[cfg(not(unix))]
    async fn signalled(&mut self) {
        // Without a handler there, Ctrl-C would end the process before the stats line.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The machine-readable summary printed on stopping.
fn stats_line(stats: &Stats) -> String {
    let ok: u64 = (200..300).map(|status| stats.answered(status)).sum();
    format!(
        "stats total={} ok={ok} limited={} during_cooldown={} bans={}",
        stats.total(),
        stats.answered(429),
        stats.during_cooldown(),
        stats.bans()
    )
}

/// A plan as `--key` spells it.
fn plan_name(plan: Plan) -> String {
    match plan {
        Plan::Free => "free".to_owned(),
        Plan::Pro => "pro".to_owned(),
        Plan::Business => "business".to_owned(),
        Plan::Enterprise { .. } if plan == Plan::DEMO_ENTERPRISE => "enterprise".to_owned(),
        _ => format!("enterprise:{}/{}", plan.per_minute(), plan.per_day()),
    }
}

fn parse_key(value: &str) -> Result<KeyPlan, String> {
    let (key, plan) = value
        .split_once('=')
        .ok_or_else(|| format!("`{value}` is not KEY=PLAN"))?;
    if key.is_empty() || key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("the key `{key}` must be non-empty, without spaces"));
    }
    let plan = match plan {
        "free" => Plan::Free,
        "pro" => Plan::Pro,
        "business" => Plan::Business,
        "enterprise" => Plan::DEMO_ENTERPRISE,
        custom => custom_plan(custom).ok_or_else(|| {
            format!(
                "unknown plan `{custom}`: free, pro, business, enterprise or enterprise:PER_MINUTE/PER_DAY"
            )
        })?,
    };
    Ok(KeyPlan {
        key: key.to_owned(),
        plan,
    })
}

/// `enterprise:PER_MINUTE/PER_DAY`.
fn custom_plan(value: &str) -> Option<Plan> {
    let (per_minute, per_day) = value.strip_prefix("enterprise:")?.split_once('/')?;
    Some(Plan::Enterprise {
        per_minute: per_minute.parse().ok()?,
        per_day: per_day.parse().ok()?,
    })
}

fn parse_time(value: &str) -> Result<SystemTime, String> {
    DateTime::parse_from_rfc3339(value)
        .map(SystemTime::from)
        .map_err(|error| format!("not an RFC 3339 time such as 2030-01-01T00:00:00Z: {error}"))
}

fn parse_offset(value: &str) -> Result<TimeDelta, String> {
    let seconds: i64 = value
        .parse()
        .map_err(|error| format!("not a whole number of seconds: {error}"))?;
    TimeDelta::try_seconds(seconds).ok_or_else(|| format!("{seconds} s is out of range"))
}

/// `NAME:CATEGORY_ID[:STATUS]`, read from the right so that a name may hold colons.
fn parse_pet(value: &str) -> Result<NewPet, String> {
    let usage = || format!("`{value}` is not NAME:CATEGORY_ID[:STATUS]");
    let (rest, last) = value.rsplit_once(':').ok_or_else(usage)?;
    let (rest, status) = match last {
        "available" => (rest, Some(PetStatus::Available)),
        "pending" => (rest, Some(PetStatus::Pending)),
        "sold" => (rest, Some(PetStatus::Sold)),
        _ => (value, None),
    };
    let (name, category) = rest.rsplit_once(':').ok_or_else(usage)?;
    let category: i64 = category.parse().map_err(|_| {
        format!(
            "{}: the category id `{category}` is not an integer",
            usage()
        )
    })?;
    if name.trim().is_empty() {
        return Err(format!("{}: the name is empty", usage()));
    }
    let pet = NewPet::new(name, category);
    Ok(match status {
        Some(status) => pet.status(status),
        None => pet,
    })
}
