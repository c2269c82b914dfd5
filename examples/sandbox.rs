//! Serves the embedded sandbox for curl, other languages and multi-process runs:
//! `cargo run --example sandbox -- --port 8080`, then for instance
//! `curl -H 'Authorization: Bearer sandbox-free-key' http://127.0.0.1:8080/v1/pets`.
//!
//! The first line is `Pet Store sandbox at <base URL>`, flushed at once, so a parent process
//! can read it; on stopping (Ctrl-C, or `--run-for`), the last line is machine-readable:
//! `stats total=<n> ok=<n> limited=<n> during_cooldown=<n> bans=<n>` (`ok`: 2xx answers,
//! `limited`: 429 answers). `cargo run --example fleet` drives it this way.

use std::fmt::Display;
use std::io::Write;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use chrono::TimeDelta;
use petstore_sandbox::{Plan, Sandbox, Stats};

const USAGE: &str = "usage: cargo run --example sandbox -- [--port N] [--minute-window SECS] \
[--day-window SECS] [--per-minute N] [--per-day N] [--ban-threshold N] [--clock-offset SECS] \
[--run-for SECS]

  --port N              port on 127.0.0.1 (0, the default, picks a free one)
  --minute-window SECS  length of the \"minute\" window (60)
  --day-window SECS     length of the \"day\" window (86400)
  --per-minute N        registers the key `fleet-key` with N requests per minute window (60)
  --per-day N           ... and N per day window (1000)
  --ban-threshold N     calls during a Retry-After that ban the key (10)
  --clock-offset SECS   skews the sandbox's clock by SECS, negative: behind (0)
  --run-for SECS        stops by itself after SECS (otherwise Ctrl-C)";

/// The key registered by `--per-minute` or `--per-day`.
const FLEET_KEY: &str = "fleet-key";

/// The command line.
#[derive(Debug, Default)]
struct Options {
    port: u16,
    minute_window: Option<u64>,
    day_window: Option<u64>,
    per_minute: Option<u32>,
    per_day: Option<u32>,
    ban_threshold: Option<u32>,
    clock_offset: i64,
    run_for: Option<u64>,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let mut builder = Sandbox::builder()
        .bind(SocketAddr::from(([127, 0, 0, 1], options.port)))
        .clock_offset(TimeDelta::seconds(options.clock_offset));
    if let Some(seconds) = options.minute_window {
        builder = builder.minute_window(Duration::from_secs(seconds));
    }
    if let Some(seconds) = options.day_window {
        builder = builder.day_window(Duration::from_secs(seconds));
    }
    if let Some(requests) = options.ban_threshold {
        builder = builder.ban_threshold(requests);
    }
    if options.per_minute.is_some() || options.per_day.is_some() {
        let plan = Plan::Enterprise {
            per_minute: options.per_minute.unwrap_or(60),
            per_day: options.per_day.unwrap_or(1_000),
        };
        builder = builder.key(FLEET_KEY, plan);
    }
    let sandbox = builder.start().await?;

    println!("Pet Store sandbox at {}", sandbox.base_url());
    for (key, plan) in sandbox.keys() {
        println!(
            "  {key:<24} {:>5} per minute window, {:>9} per day window",
            plan.per_minute(),
            plan.per_day()
        );
    }
    match options.run_for {
        Some(seconds) => println!("Stops after {seconds} s, or on Ctrl-C."),
        None => println!("Ctrl-C to stop."),
    }
    std::io::stdout().flush()?;

    match options.run_for {
        Some(seconds) => tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(seconds)) => {}
            stopped = tokio::signal::ctrl_c() => stopped?,
        },
        None => tokio::signal::ctrl_c().await?,
    }
    let stats = sandbox.stats();
    sandbox.shutdown().await;
    println!("{}", stats_line(&stats));
    Ok(())
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

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options::default();
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--port" => options.port = number(&arg, value?)?,
            "--minute-window" => options.minute_window = Some(number(&arg, value?)?),
            "--day-window" => options.day_window = Some(number(&arg, value?)?),
            "--per-minute" => options.per_minute = Some(number(&arg, value?)?),
            "--per-day" => options.per_day = Some(number(&arg, value?)?),
            "--ban-threshold" => options.ban_threshold = Some(number(&arg, value?)?),
            "--clock-offset" => options.clock_offset = number(&arg, value?)?,
            "--run-for" => options.run_for = Some(number(&arg, value?)?),
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    Ok(options)
}

fn number<T: FromStr>(name: &str, value: String) -> Result<T, String>
where
    T::Err: Display,
{
    value
        .parse()
        .map_err(|e| format!("{name}: not a valid number `{value}`: {e}"))
}
