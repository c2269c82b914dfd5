//! The whole API at work: `cargo run --example quickstart`.
//!
//! With `PETSTORE_BASE_URL` and `PETSTORE_API_KEY` set, it talks to that deployment; with
//! neither, it starts the embedded sandbox server (the workspace's `petstore-sandbox` crate) on
//! loopback and says so. Either one set means both are required: a forgotten key is an error,
//! never a silent switch to the sandbox.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use petstore_client::{NewPet, Pacing, Pet, PetStatus, PetStoreClient, Quota, RetryPolicy};
use petstore_sandbox::{Plan, Sandbox};

type Result<T = (), E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The error's sentence, then each cause, as `Display` shows them.
            let mut text = error.to_string();
            let mut cause = error.source();
            while let Some(inner) = cause {
                text = format!("{text}: {inner}");
                cause = inner.source();
            }
            eprintln!("error: {text}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result {
    // Shows the client's warnings, such as the deprecation notice of getPet.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let configured = std::env::var_os("PETSTORE_BASE_URL").is_some()
        || std::env::var_os("PETSTORE_API_KEY").is_some();
    let (client, sandbox) = if configured {
        let client = PetStoreClient::from_env()?;
        println!("Using the deployment at {}", client.base_url());
        (client, None)
    } else {
        let sandbox = Sandbox::start().await?;
        println!(
            "PETSTORE_BASE_URL and PETSTORE_API_KEY are not set: started the embedded sandbox at {} (Pro plan key).",
            sandbox.base_url()
        );
        let client = PetStoreClient::builder()
            .base_url(sandbox.base_url())
            .api_key(sandbox.key(Plan::Pro))
            .build()?;
        (client, Some(sandbox))
    };

    println!("\n1. createPet (POST /pets)");
    let mut created = Vec::new();
    for new_pet in [
        NewPet::new("Rex", 3).status(PetStatus::Available),
        NewPet::new("Misty", 4).status(PetStatus::Pending),
        NewPet::new("Tom", 3).status(PetStatus::Sold),
    ] {
        let pet = client.create_pet(new_pet).send().await?;
        println!("   created {:<36} {}", describe(&pet), quota(&client));
        created.push(pet);
    }

    println!("\n2. listPets (GET /pets)");
    let all = client.list_pets().send().await?;
    println!(
        "   no filter, default limit 20: {:<15} {}",
        count(&all),
        quota(&client)
    );
    let available = client
        .list_pets()
        .status(PetStatus::Available)
        .limit(2)
        .send()
        .await?;
    println!(
        "   status=available, limit=2:   {:<15} {}",
        count(&available),
        quota(&client)
    );
    for pet in &available {
        println!("     {}", describe(pet));
    }

    println!("\n3. getPet (GET /pets/{{petId}}), deprecated");
    #[allow(deprecated)] // shown on purpose; see the migration below
    let response = client.get_pet(created[0].id).send_with_meta().await?;
    println!(
        "   fetched {:<36} {}",
        describe(response.value()),
        quota(&client)
    );
    match response.deprecation().and_then(|notice| notice.sunset) {
        Some(sunset) => println!(
            "   the service announces its removal on {}",
            sunset.date_naive()
        ),
        None => println!(
            "   the service sent no Sunset header; the specification removes it on 2030-12-05"
        ),
    }
    println!(
        "   replacement, partial: list each status (3 requests) and look for the id; it finds \
         only pets among the first 100 of their status"
    );

    match sandbox {
        Some(sandbox) => rate_limits(&sandbox).await?,
        None => {
            println!("\n4. Rate limits: skipped against a real deployment, to spare your quota.")
        }
    }
    Ok(())
}

/// A small plan with two-second windows, so the limits show within seconds.
async fn rate_limits(sandbox: &Sandbox) -> Result {
    const LIMIT: u32 = 5;
    println!("\n4. Rate limits, on sandbox keys limited to {LIMIT} requests per 2-second window");
    let plan = Plan::Enterprise {
        per_minute: LIMIT,
        per_day: 10_000,
    };
    let small = Sandbox::builder()
        .key("shared-demo", plan)
        .key("sole-demo", plan)
        .key("off-demo", plan)
        .minute_window(Duration::from_secs(2))
        .start()
        .await?;
    let client_for = |key: &str, pacing: Pacing| {
        PetStoreClient::builder()
            .base_url(small.base_url())
            .api_key(key)
            .pacing(pacing)
            .retry_policy(RetryPolicy::builder().jitter(false).build())
            .build()
    };
    let limited = |key: &str| {
        small
            .request_log()
            .iter()
            .filter(|r| r.key.as_deref() == Some(key) && r.status == Some(429))
            .count()
    };

    // The default: a sole user spends the budget; others seen, each spreads its share.
    let shared = client_for("shared-demo", Pacing::Shared)?;
    let start = Instant::now();
    for _ in 0..=LIMIT {
        shared.list_pets().limit(1).send().await?;
    }
    println!(
        "   Pacing::Shared (default): {} calls took {:.1} s, the budget spent, then held until the window reset; {} × 429",
        LIMIT + 1,
        start.elapsed().as_secs_f64(),
        limited("shared-demo")
    );

    // A process that is the key's only user may spend the budget at once.
    let sole = client_for("sole-demo", Pacing::Sole)?;
    let start = Instant::now();
    for _ in 0..LIMIT {
        sole.list_pets().limit(1).send().await?;
    }
    let burst = start.elapsed();
    let after_burst = quota(&sole);
    sole.list_pets().limit(1).send().await?;
    println!(
        "   Pacing::Sole: {LIMIT} calls in {:.1} s ({}), then call {} held until the window reset, {:.1} s in all; {} × 429",
        burst.as_secs_f64(),
        after_burst,
        LIMIT + 1,
        start.elapsed().as_secs_f64(),
        limited("sole-demo")
    );
    println!(
        "   Alone on a key the two spend alike; Shared, once it sees others spend the key, spreads its share of the budget"
    );

    // Without pacing only the service's 429s hold the client back.
    let off = client_for("off-demo", Pacing::Off)?;
    let start = Instant::now();
    let mut attempts = 0;
    for _ in 0..=LIMIT {
        attempts = off.list_pets().limit(1).send_with_meta().await?.attempts();
    }
    println!(
        "   Pacing::Off: {} calls in {:.1} s; the service answered 429 {} time(s), the client waited out Retry-After (last call: {attempts} attempts)",
        LIMIT + 1,
        start.elapsed().as_secs_f64(),
        limited("off-demo")
    );
    println!(
        "   bans: {} (the service bans keys that keep calling after a 429)",
        small.stats().bans()
    );
    println!(
        "\nRequests the main sandbox served: {}",
        sandbox.stats().total()
    );
    Ok(())
}

fn describe(pet: &Pet) -> String {
    let status = pet.status.as_ref().map_or("no status", PetStatus::as_str);
    format!(
        "#{} {} (category {}, {status})",
        pet.id, pet.name, pet.category_id
    )
}

fn count(pets: &[Pet]) -> String {
    format!(
        "{} pet{}",
        pets.len(),
        if pets.len() == 1 { "" } else { "s" }
    )
}

fn quota(client: &PetStoreClient) -> String {
    client.quota().map_or_else(
        || "quota: not reported".to_owned(),
        |Quota {
             limit,
             remaining,
             reset,
             ..
         }| {
            format!(
                "quota {remaining}/{limit} left until {}",
                reset.format("%H:%M:%S UTC")
            )
        },
    )
}
