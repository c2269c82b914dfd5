//! Decoding arbitrary bodies as the wire models: an error, never a panic; and what decodes
//! re-encodes and decodes to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use petstore_client::{NewPet, Pet};

fuzz_target!(|data: &[u8]| {
    if let Ok(pets) = petstore_client::__private::decode_pets(data) {
        let again: Vec<Pet> = serde_json::from_slice(&serde_json::to_vec(&pets).unwrap()).unwrap();
        assert_eq!(again, pets);
    }
    if let Ok(new_pet) = serde_json::from_slice::<NewPet>(data) {
        let again: NewPet = serde_json::from_slice(&serde_json::to_vec(&new_pet).unwrap()).unwrap();
        assert_eq!(again, new_pet);
    }
});
