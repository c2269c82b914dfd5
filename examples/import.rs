//! How do I show progress during a long import, when the rate limit holds calls for seconds?
//!
//! Creates pets one after another and prints a line for each; while a call is held, a line every
//! second says it is still waiting, and after it, how long the rate limit held it and why
//! (`CallInfo`). With no configuration it imports into an embedded sandbox on the Free plan (60
//! requests a window) whose windows last 10 s, so that the holds come quickly; with
//! `PETSTORE_BASE_URL` and `PETSTORE_API_KEY`, into that deployment.
//!
//! ```sh
//! cargo run --example import -- 80     # how many pets to import
//! ```

use std::time::Duration;

use petstore_client::{NewPet, PetStoreClient};
use petstore_sandbox::{Plan, Sandbox};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: usize = std::env::args().nth(1).as_deref().unwrap_or("80").parse()?;
    let configured = std::env::var_os("PETSTORE_BASE_URL").is_some()
        || std::env::var_os("PETSTORE_API_KEY").is_some();
    let (client, _sandbox) = if configured {
        (PetStoreClient::from_env()?, None)
    } else {
        let sandbox = Sandbox::builder()
            .key("import-demo-key", Plan::Free)
            .minute_window(Duration::from_secs(10))
            .start()
            .await?;
        let client = PetStoreClient::builder()
            .base_url(sandbox.base_url())
            .api_key("import-demo-key")
            .build()?;
        (client, Some(sandbox))
    };

    for i in 1..=count {
        let call = client
            .create_pet(NewPet::new(format!("pet {i}"), 1))
            .send_with_meta();
        tokio::pin!(call);
        // A timer beside the call: the call itself says nothing until it returns.
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        ticks.tick().await;
        let mut waited = 0;
        let response = loop {
            tokio::select! {
                response = &mut call => break response?,
                _ = ticks.tick() => {
                    waited += 1;
                    println!("  pet {i}: still waiting after {waited} s");
                }
            }
        };
        let info = response.call_info();
        if info.held() >= Duration::from_secs(1) {
            let why = info.hold_cause().map_or("", |cause| cause.as_str());
            println!(
                "  pet {i}: held {:.1} s by the rate limit ({why})",
                info.held().as_secs_f64()
            );
        }
        let quota = response
            .quota()
            .map(|q| format!(", {} left in the window", q.remaining));
        println!(
            "{i}/{count}: created pet {}{}",
            response.value().id,
            quota.unwrap_or_default()
        );
    }
    Ok(())
}
