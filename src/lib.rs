//! Typed async client for the Pet Store API.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod clock;
mod deprecation;
mod error;
mod http;
mod models;
mod pets;
mod quota;
mod response;
mod retry;
mod throttle;

pub use client::{API_KEY_ENV, BASE_URL_ENV, PetStoreClient, PetStoreClientBuilder};
pub use deprecation::Deprecation;
pub use error::{ApiError, Error, Result, TimeoutKind};
pub use models::{CategoryId, NewPet, ParsePetStatusError, Pet, PetId, PetStatus, UnknownStatus};
pub use pets::{CreatePet, GetPet, ListPets};
pub use quota::Quota;
pub use response::Response;
pub use retry::RetryPolicy;
