//! How do I add a pet, and tell a rejected one from other failures?
//!
//! ```sh
//! PETSTORE_BASE_URL=https://petstore.example.com/v1 PETSTORE_API_KEY=... \
//!     cargo run --example create_pet -- Rex 3
//! ```

use petstore_client::{NewPet, PetStatus, PetStoreClient};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "Rex".to_owned());
    let category: i64 = args.next().as_deref().unwrap_or("1").parse()?;

    let client = PetStoreClient::from_env()?;
    let new_pet = NewPet::new(name, category).status(PetStatus::Available);
    match client.create_pet(new_pet).send().await {
        Ok(pet) => println!("created pet {} ({})", pet.id, pet.name),
        Err(e) if e.is_bad_request() => eprintln!("the service rejected the pet: {e}"),
        Err(e) if e.is_rate_limited() => {
            eprintln!("rate limited; retry after {:?}", e.retry_after())
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}
