//! The wire types of the Pet Store API, exactly as the specification defines them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! id_newtype {
    ($(#[$meta:meta])* $name:ident, $example:literal) => {
        $(#[$meta])*
        ///
        /// The value is an opaque `int64` chosen by the service; the newtype keeps it from being
        /// mixed up with other identifiers.
        ///
        /// ```
        #[doc = concat!("use petstore_client::", stringify!($name), ";")]
        ///
        #[doc = concat!("let id: ", stringify!($name), " = \"", $example, "\".parse()?;")]
        #[doc = concat!("assert_eq!(id, ", stringify!($name), "::from(", $example, "));")]
        #[doc = concat!("assert_eq!(id.get(), ", $example, ");")]
        #[doc = concat!("assert_eq!(id.to_string(), \"", $example, "\");")]
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(i64);

        impl $name {
            /// Wraps a raw identifier.
            #[must_use]
            pub const fn new(id: i64) -> Self {
                Self(id)
            }

            /// The raw identifier.
            #[must_use]
            pub const fn get(self) -> i64 {
                self.0
            }
        }

        impl From<i64> for $name {
            fn from(id: i64) -> Self {
                Self(id)
            }
        }

        impl From<$name> for i64 {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl FromStr for $name {
            type Err = std::num::ParseIntError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map(Self)
            }
        }
    };
}

id_newtype!(
    /// Identifier of a [`Pet`], assigned by the service on creation.
    PetId,
    "42"
);

id_newtype!(
    /// Identifier of the category a [`Pet`] belongs to.
    CategoryId,
    "7"
);

/// Availability status of a pet (`PetStatus` in the specification).
///
/// The specification allows `available`, `pending` and `sold`. A value the service adds later
/// decodes as [`PetStatus::Unknown`] instead of failing the whole response, and is sent back
/// unchanged by [`create_pet`](crate::PetStoreClient::create_pet); `list_pets` filters only
/// by the three the specification allows, and refuses another.
///
/// ```
/// use petstore_client::PetStatus;
///
/// let status: PetStatus = "pending".parse()?;
/// assert_eq!(status, PetStatus::Pending);
/// assert_eq!(status.as_str(), "pending");
///
/// // Unknown values survive decoding but are rejected when parsed from user input.
/// let from_server: PetStatus = serde_json::from_str("\"reserved\"")?;
/// assert_eq!(from_server.as_str(), "reserved");
/// assert!(!from_server.is_known());
/// assert!("reserved".parse::<PetStatus>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PetStatus {
    /// The pet is available.
    Available,
    /// The pet is pending.
    Pending,
    /// The pet is sold.
    Sold,
    /// A value this version of the crate does not know, kept as the service sent it.
    Unknown(UnknownStatus),
}

/// A [`PetStatus`] value this version of the crate does not know.
///
/// It can only come from the service, so it never aliases a known status.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UnknownStatus(String);

impl fmt::Display for UnknownStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl UnknownStatus {
    /// The value as the service sent it.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PetStatus {
    /// The wire value: `available`, `pending`, `sold`, or the unknown value as received.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Available => "available",
            Self::Pending => "pending",
            Self::Sold => "sold",
            Self::Unknown(other) => other.as_str(),
        }
    }

    /// Whether this is one of the values the specification lists.
    #[must_use]
    pub fn is_known(&self) -> bool {
        !matches!(self, Self::Unknown(_))
    }

    fn known(value: &str) -> Option<Self> {
        match value {
            "available" => Some(Self::Available),
            "pending" => Some(Self::Pending),
            "sold" => Some(Self::Sold),
            _ => None,
        }
    }
}

impl fmt::Display for PetStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error returned when a string is not one of the statuses the specification lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a pet status; expected one of: available, pending, sold")]
pub struct ParsePetStatusError {
    value: String,
}

impl FromStr for PetStatus {
    type Err = ParsePetStatusError;

    /// Parses one of the statuses the specification lists; anything else is an error, so that
    /// a typo in user input is not silently sent as an unknown status.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::known(s).ok_or_else(|| ParsePetStatusError {
            value: s.to_owned(),
        })
    }
}

impl Serialize for PetStatus {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PetStatus {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StatusVisitor;

        impl serde::de::Visitor<'_> for StatusVisitor {
            type Value = PetStatus;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a pet status string")
            }

            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<PetStatus, E> {
                Ok(PetStatus::known(value)
                    .unwrap_or_else(|| PetStatus::Unknown(UnknownStatus(value.to_owned()))))
            }
        }

        deserializer.deserialize_str(StatusVisitor)
    }
}

/// An animal in the store's catalogue (`Pet` in the specification).
///
/// ```
/// use petstore_client::{CategoryId, Pet, PetId, PetStatus};
///
/// let pet: Pet = serde_json::from_str(
///     r#"{"id": 1, "name": "Rex", "categoryId": 3, "status": "available"}"#,
/// )?;
/// assert_eq!(pet.id, PetId::new(1));
/// assert_eq!(pet.category_id, CategoryId::new(3));
/// assert_eq!(pet.status, Some(PetStatus::Available));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Pet {
    /// Identifier assigned by the service on creation.
    pub id: PetId,
    /// The pet's name.
    pub name: String,
    /// The category the pet belongs to.
    pub category_id: CategoryId,
    /// Availability status; the specification makes it optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PetStatus>,
}

impl Pet {
    /// A pet with no status, for tests and fixtures of code that consumes pets.
    ///
    /// ```
    /// use petstore_client::{Pet, PetStatus};
    ///
    /// let pet = Pet::new(1, "Rex", 3).status(PetStatus::Sold);
    /// assert_eq!(pet.status, Some(PetStatus::Sold));
    /// ```
    #[must_use]
    pub fn new(
        id: impl Into<PetId>,
        name: impl Into<String>,
        category_id: impl Into<CategoryId>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            category_id: category_id.into(),
            status: None,
        }
    }

    /// Sets the status.
    #[must_use]
    pub fn status(mut self, status: PetStatus) -> Self {
        self.status = Some(status);
        self
    }
}

/// The creation payload of a pet (`NewPet` in the specification); the service assigns the id.
///
/// ```
/// use petstore_client::{NewPet, PetStatus};
///
/// let new_pet = NewPet::new("Rex", 3).status(PetStatus::Available);
/// assert_eq!(
///     serde_json::to_string(&new_pet)?,
///     r#"{"name":"Rex","categoryId":3,"status":"available"}"#,
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct NewPet {
    /// The pet's name.
    pub name: String,
    /// The category the pet belongs to.
    pub category_id: CategoryId,
    /// Availability status; left out of the request when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PetStatus>,
}

impl NewPet {
    /// A creation payload with the two required fields: the animal's `name`, and
    /// `category_id`, the identifier of the category it belongs to (`categoryId` in the
    /// specification; not a tag, not a count).
    ///
    /// ```
    /// use petstore_client::{NewPet, PetStatus};
    ///
    /// let rex = NewPet::new("Rex", 1).status(PetStatus::Available);
    /// assert_eq!(rex.category_id, petstore_client::CategoryId::new(1));
    /// ```
    #[must_use]
    pub fn new(name: impl Into<String>, category_id: impl Into<CategoryId>) -> Self {
        Self {
            name: name.into(),
            category_id: category_id.into(),
            status: None,
        }
    }

    /// Sets the optional status.
    #[must_use]
    pub fn status(mut self, status: PetStatus) -> Self {
        self.status = Some(status);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn status() -> impl Strategy<Value = PetStatus> {
        prop_oneof![
            Just(PetStatus::Available),
            Just(PetStatus::Pending),
            Just(PetStatus::Sold),
            "[a-z_]{1,12}"
                .prop_map(|s| serde_json::from_value(serde_json::Value::String(s)).unwrap()),
        ]
    }

    fn pet() -> impl Strategy<Value = Pet> {
        (
            any::<i64>(),
            "\\PC{0,40}",
            any::<i64>(),
            proptest::option::of(status()),
        )
            .prop_map(|(id, name, category_id, status)| Pet {
                id: PetId::new(id),
                name,
                category_id: CategoryId::new(category_id),
                status,
            })
    }

    #[test]
    fn pets_match_the_wire_format() {
        let json = r#"[{"id":1,"name":"Rex","categoryId":3,"status":"available"},{"id":2,"name":"Tom","categoryId":4}]"#;
        let pets: Vec<Pet> = serde_json::from_str(json).unwrap();
        assert_eq!(
            pets,
            vec![
                Pet::new(1, "Rex", 3).status(PetStatus::Available),
                Pet::new(2, "Tom", 4)
            ]
        );
        assert_eq!(serde_json::to_string(&pets).unwrap(), json);
        let new_pet = NewPet::new("Rex", 3);
        assert_eq!(
            serde_json::to_string(&new_pet).unwrap(),
            r#"{"name":"Rex","categoryId":3}"#
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = serde_json::from_slice::<Vec<Pet>>(&body);
            let _ = serde_json::from_slice::<NewPet>(&body);
        }

        #[test]
        fn pets_round_trip(pets in proptest::collection::vec(pet(), 0..8)) {
            let json = serde_json::to_vec(&pets).unwrap();
            prop_assert_eq!(serde_json::from_slice::<Vec<Pet>>(&json).unwrap(), pets);
        }

        #[test]
        fn statuses_round_trip_through_text(status in status()) {
            if status.is_known() {
                prop_assert_eq!(status.as_str().parse::<PetStatus>().unwrap(), status.clone());
            }
            let json = serde_json::to_string(&status).unwrap();
            prop_assert_eq!(serde_json::from_str::<PetStatus>(&json).unwrap(), status);
        }
    }
}
