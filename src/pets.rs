//! The three operations of the specification, one owned request builder each.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::client::PetStoreClient;
use crate::error::{Error, Result};
use http::Method;

use crate::execute::{Call, Operation, Target};
use crate::models::{NewPet, Pet, PetId, PetStatus};
use crate::response::Response;
use crate::retry::RetryPolicy;

const LIMIT_RANGE: std::ops::RangeInclusive<u32> = 1..=100;

impl PetStoreClient {
    /// Lists pets (`listPets`, `GET /pets`): up to [`limit`](ListPets::limit) of them,
    /// optionally only those with a [`status`](ListPets::status).
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// use petstore_client::PetStatus;
    ///
    /// let first_twenty = client.list_pets().send().await?;
    /// let sold = client.list_pets().status(PetStatus::Sold).limit(100).send().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn list_pets(&self) -> ListPets {
        ListPets {
            client: self.clone(),
            limit: None,
            status: None,
            retry: None,
        }
    }

    /// Adds a pet (`createPet`, `POST /pets`) and returns it with the id the service assigned.
    ///
    /// It is retried after a 429, which the service did not process, but never after an
    /// ambiguous failure (a 5xx, a timeout, a dropped connection), so it never creates the pet
    /// twice.
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// use petstore_client::{NewPet, PetStatus};
    ///
    /// let pet = client
    ///     .create_pet(NewPet::new("Rex", 3).status(PetStatus::Available))
    ///     .send()
    ///     .await?;
    /// println!("Rex is pet {}", pet.id);
    /// # Ok(())
    /// # }
    /// ```
    pub fn create_pet(&self, pet: NewPet) -> CreatePet {
        CreatePet {
            client: self.clone(),
            pet,
            retry: None,
        }
    }

    /// Fetches one pet by id (`getPet`, `GET /pets/{petId}`).
    ///
    /// The specification deprecates this operation and removes it on 2030-12-05, naming
    /// [`list_pets`](Self::list_pets) with a [`status`](ListPets::status) filter as its
    /// replacement. That replacement is partial: a listing returns at most 100 pets, with no
    /// paging and no id filter, so looking an id up costs a listing per status (three requests)
    /// and finds only pets among the first 100 of their status. This method keeps working until
    /// the removal date.
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// #[allow(deprecated)]
    /// match client.get_pet(42).send().await {
    ///     Ok(pet) => println!("{}", pet.name),
    ///     Err(e) if e.is_not_found() => println!("no pet 42"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[deprecated(
        since = "0.1.0",
        note = "getPet is deprecated by the Pet Store API and removed on 2030-12-05; `list_pets().status(..)` replaces it only partly (at most 100 pets per status, no id filter): see the README's section on migrating off getPet"
    )]
    pub fn get_pet(&self, id: impl Into<PetId>) -> GetPet {
        GetPet {
            client: self.clone(),
            id: id.into(),
            retry: None,
        }
    }
}

/// The shared tail of every request builder: the per-call retry policy and the two ways to
/// send.
macro_rules! sends {
    ($builder:ident, $value:ty) => {
        impl $builder {
            /// Overrides the client's [`RetryPolicy`] for this call.
            pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
                self.retry = Some(policy);
                self
            }

            #[doc = concat!("Sends the request and returns the `", stringify!($value), "`.")]
            ///
            /// # Errors
            ///
            /// [`Error::InvalidArgument`] before anything is sent when a parameter is out of
            /// the specification's range; otherwise any [`Error`] of the call, after the
            /// retries its [`RetryPolicy`] allows.
            pub async fn send(self) -> Result<$value> {
                // Not through `send_with_meta`: a future less to move the response through.
                let (client, call) = self.into_call()?;
                client.execute(call).await.map(Response::into_value)
            }

            /// Sends the request and returns the value with the response's metadata: status,
            /// headers, [`Quota`](crate::Quota) and [`Deprecation`](crate::Deprecation).
            ///
            /// # Errors
            ///
            /// As for `send`.
            pub async fn send_with_meta(self) -> Result<Response<$value>> {
                let (client, call) = self.into_call()?;
                client.execute(call).await
            }
        }
    };
}

/// The request builder of [`PetStoreClient::list_pets`].
#[derive(Debug, Clone)]
#[must_use = "a request does nothing until it is sent with `.send().await`"]
pub struct ListPets {
    client: PetStoreClient,
    limit: Option<u32>,
    status: Option<PetStatus>,
    retry: Option<RetryPolicy>,
}

impl ListPets {
    /// The maximum number of pets returned, 1 to 100; the service's default is 20. Outside
    /// that range, `send` fails with [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// and sends nothing.
    ///
    /// ```no_run
    /// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
    /// use petstore_client::PetStatus;
    ///
    /// let sold = client.list_pets().status(PetStatus::Sold).limit(100).send().await?;
    /// println!("{} sold", sold.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Only pets with this status: one of the three the specification allows (an
    /// [`Unknown`](PetStatus::Unknown) one fails `send` with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)). See [`limit`](Self::limit)
    /// for an example.
    pub fn status(mut self, status: impl Into<PetStatus>) -> Self {
        self.status = Some(status.into());
        self
    }

    fn into_call(self) -> Result<(PetStoreClient, Call)> {
        let mut url = self.client.inner.pets_url.clone();
        if let Some(limit) = self.limit
            && !LIMIT_RANGE.contains(&limit)
        {
            return Err(Error::invalid_argument(
                "limit",
                limit.to_string(),
                "the API accepts 1 to 100",
            ));
        }
        if let Some(status) = self.status.as_ref().filter(|status| !status.is_known()) {
            // A value decoded earlier from the service; the specification allows only three.
            return Err(Error::invalid_argument(
                "status",
                status.as_str(),
                "the API accepts available, pending or sold",
            ));
        }
        if self.limit.is_some() || self.status.is_some() {
            // Digits and the specification's statuses read the same form-encoded: the query is
            // written as it is sent, without a form serializer.
            let mut query = String::with_capacity(32);
            if let Some(limit) = self.limit {
                let _ = write!(query, "limit={limit}");
            }
            if let Some(status) = &self.status {
                let separator = if query.is_empty() { "" } else { "&" };
                let _ = write!(query, "{separator}status={}", status.as_str());
            }
            url.set_query(Some(&query));
        }
        let call = Call {
            operation: Operation::ListPets,
            method: Method::GET,
            target: Target::Url(url),
            body: None,
            retry: self.retry,
        };
        Ok((self.client, call))
    }
}

sends!(ListPets, Vec<Pet>);

/// The request builder of [`PetStoreClient::create_pet`].
#[derive(Debug, Clone)]
#[must_use = "a request does nothing until it is sent with `.send().await`"]
pub struct CreatePet {
    client: PetStoreClient,
    pet: NewPet,
    retry: Option<RetryPolicy>,
}

impl CreatePet {
    fn into_call(self) -> Result<(PetStoreClient, Call)> {
        let body = serde_json::to_vec(&self.pet).map_err(|e| {
            Error::unserializable("pet", "a pet that serializes to JSON", Arc::new(e))
        })?;
        let call = Call {
            operation: Operation::CreatePet,
            method: Method::POST,
            target: Target::Pets,
            body: Some(body.into()),
            retry: self.retry,
        };
        Ok((self.client, call))
    }
}

sends!(CreatePet, Pet);

/// The request builder of the deprecated [`PetStoreClient::get_pet`].
#[derive(Debug, Clone)]
#[must_use = "a request does nothing until it is sent with `.send().await`"]
pub struct GetPet {
    client: PetStoreClient,
    id: PetId,
    retry: Option<RetryPolicy>,
}

impl GetPet {
    fn into_call(self) -> Result<(PetStoreClient, Call)> {
        let mut url = self.client.inner.pets_url.clone();
        url.path_segments_mut()
            .map_err(|()| Error::config("the base URL cannot take paths"))?
            .push(&self.id.to_string());
        let call = Call {
            operation: Operation::GetPet,
            method: Method::GET,
            target: Target::Url(url),
            body: None,
            retry: self.retry,
        };
        Ok((self.client, call))
    }
}

sends!(GetPet, Pet);
