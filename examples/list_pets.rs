//! How do I list pets, filtered by status, and see my quota?
//!
//! ```sh
//! PETSTORE_BASE_URL=https://petstore.example.com/v1 PETSTORE_API_KEY=... \
//!     cargo run --example list_pets -- available
//! ```

use petstore_client::{PetStatus, PetStoreClient};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = PetStoreClient::from_env()?;
    let status: Option<PetStatus> = std::env::args().nth(1).map(|s| s.parse()).transpose()?;

    let mut request = client.list_pets().limit(100);
    if let Some(status) = status {
        request = request.status(status);
    }
    let response = request.send_with_meta().await?;

    for pet in response.value() {
        let status = pet.status.as_ref().map_or("-", |s| s.as_str());
        println!(
            "{:>6}  {:<20} category {:<4} {status}",
            pet.id, pet.name, pet.category_id
        );
    }
    if let Some(quota) = response.quota() {
        println!(
            "quota: {} of {} requests left until {}",
            quota.remaining, quota.limit, quota.reset
        );
    }
    Ok(())
}
