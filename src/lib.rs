//! Typed async client for the Pet Store API.
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod models;

pub use models::{CategoryId, NewPet, ParsePetStatusError, Pet, PetId, PetStatus, UnknownStatus};
