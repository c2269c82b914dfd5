//! Serves the embedded sandbox for curl and other languages:
//! `cargo run --example sandbox -- --port 8080`, then for instance
//! `curl -H 'Authorization: Bearer sandbox-free-key' http://127.0.0.1:8080/v1/pets`.

use std::net::SocketAddr;

use petstore_client::sandbox::Sandbox;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = match parse_port(std::env::args().skip(1)) {
        Ok(port) => port,
        Err(message) => {
            eprintln!("{message}\nusage: cargo run --example sandbox -- [--port PORT]");
            std::process::exit(2);
        }
    };
    let sandbox = Sandbox::builder()
        .bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .start()
        .await?;
    println!("Pet Store sandbox at {}", sandbox.base_url());
    for (key, plan) in sandbox.keys() {
        println!(
            "  {key:<24} {:>5}/min {:>9}/day",
            plan.per_minute(),
            plan.per_day()
        );
    }
    println!("Ctrl-C to stop.");
    tokio::signal::ctrl_c().await?;
    let served = sandbox.stats().total();
    sandbox.shutdown().await;
    println!("stopped after {served} requests");
    Ok(())
}

/// `--port N` (0, the default, picks a free port).
fn parse_port(mut args: impl Iterator<Item = String>) -> Result<u16, String> {
    let mut port = 0;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => {
                let value = args.next().ok_or("--port needs a value")?;
                port = value.parse().map_err(|_| format!("not a port: {value}"))?;
            }
            other => return Err(format!("unknown argument: {other}")),
        }
    }
    Ok(port)
}
