//! Typed async client for the Pet Store API: list, add and fetch the animals in a store's
//! catalogue, with the rate limits handled for you.
//!
//! - [`PetStoreClient`]: one cheap-to-clone client (`Clone + Send + Sync`, an `Arc` inside)
//!   with a builder for the base URL, API key, timeouts and retry policy.
//! - Typed models: [`Pet`], [`NewPet`], [`PetStatus`] (forward compatible), [`PetId`],
//!   [`CategoryId`].
//! - One owned request builder per operation, ending in `.send()` (the value) or
//!   `.send_with_meta()` (the value with status, headers, [`Quota`] and [`Deprecation`]).
//! - Errors as one [`Error`] enum with predicates, keeping the service's `code`, `message`,
//!   quota and `Retry-After`.
//! - Rate-limit discipline: `Retry-After` as a floor under exponential backoff with jitter
//!   ([`RetryPolicy`]), retries held to a share of the client's recent answers
//!   ([`RetryBudget`]), a cooldown after a 429 shared by every client of the key in the
//!   process, and pacing ([`Pacing`]) that costs a key's only user nothing while its answers
//!   show it alone, and spreads the budget the service reports over each window, read on the
//!   service's clock, once others are seen spending it. A key that keeps calling after a 429
//!   can be banned by the service: the contract this crate keeps against that is stated under
//!   [Rate limits and retries](#rate-limits-and-retries), its model in the repository's
//!   `docs/DESIGN.md`.
//!
//! # Getting started
//!
//! ```no_run
//! use petstore_client::{NewPet, PetStatus, PetStoreClient};
//!
//! #[tokio::main]
//! async fn main() -> petstore_client::Result<()> {
//!     // Or PetStoreClientBuilder::from_env(), reading PETSTORE_BASE_URL and PETSTORE_API_KEY,
//!     // with settings on top. No pacing setting is needed, for CLIs and batch jobs either.
//!     let client = PetStoreClient::builder()
//!         .base_url("https://petstore.example.com/v1")
//!         .api_key("my-api-key")
//!         .build()?;
//!
//!     let rex = client
//!         .create_pet(NewPet::new("Rex", 1).status(PetStatus::Available))
//!         .send()
//!         .await?;
//!     println!("created pet {}", rex.id);
//!
//!     for pet in client.list_pets().status(PetStatus::Available).limit(50).send().await? {
//!         println!("{} {}", pet.id, pet.name);
//!     }
//!
//!     if let Some(quota) = client.quota() {
//!         println!("{} of {} requests left until {}", quota.remaining, quota.limit, quota.reset);
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # Errors
//!
//! Every call returns [`Result<T>`](Result). An [`Error::Api`] keeps what the service said
//! (status as an [`http::StatusCode`], `code`, `message`, quota and `Retry-After`); transport
//! failures (with the address, and the operating system's error as the `source()`), timeouts
//! (and which one fired), decode errors (with the JSON path) and invalid arguments (caught
//! before anything is sent) are variants of their own. Predicates answer the usual questions
//! without a `match`: [`Error::is_retryable`], [`Error::is_rate_limited`],
//! [`Error::is_server_error`], [`Error::is_not_found`], [`Error::is_invalid_argument`], ...
//! The enum is `#[non_exhaustive]` and each variant holds its details behind accessors
//! ([`DecodeError::path`], [`TimeoutError::kind`], ...), so that both can grow without a
//! breaking release.
//!
//! ```no_run
//! # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
//! use petstore_client::Error;
//!
//! match client.list_pets().limit(500).send().await {
//!     Err(Error::InvalidArgument(invalid)) => assert_eq!(invalid.name(), "limit"),
//!     Err(e) if e.is_retryable() => println!("try again later: {e}"),
//!     other => println!("{other:?}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Rate limits and retries
//!
//! The service limits requests per plan and answers `429 Too Many Requests` with a
//! `Retry-After` beyond the limit; calling on regardless may get the key banned. The client:
//!
//! 1. retries a 429 after at least the `Retry-After` wait and the backoff (any operation: the
//!    request was not processed), a failed connect (any operation: nothing was sent; not a
//!    host name that does not resolve), and 5xx, per-attempt timeouts and dropped connections
//!    with exponential backoff (idempotent methods only, `GET` among them: a `POST` is never
//!    sent twice after an ambiguous failure);
//! 2. holds every request of every client of the key in the process while the service asked
//!    for quiet, then lets one request probe before the others;
//! 3. reads the service's clock from `Date`, so that `X-RateLimit-Reset` and HTTP-date
//!    `Retry-After` mean the same on a machine whose clock is off by minutes;
//! 4. paces requests by the budget of every window the service reports (`X-RateLimit-*` or
//!    the IETF fields, fixed or sliding, a second to a day), never assuming a window's budget
//!    before a response of that window reported it; by default ([`Pacing::Shared`]) a key's
//!    only user is never held while the reported budget lasts, and once other processes or
//!    hosts are seen spending the key, each spreads its share over the window's time left. Up
//!    to 9 independent instances send at most one request each inside any `Retry-After`; for
//!    more, share the state through Redis (the design: `docs/DESIGN.md` in the repository);
//! 5. counts a request that may have reached the service (cancelled, timed out) as spent;
//! 6. fails at once with a rate-limited error ([`Error::Throttled`]) when a call would wait for
//!    the rate limit longer than [`RetryPolicy::max_server_wait`] (120 s by default) in all,
//!    or past its call timeout, such as on a spent daily quota.
//!
//! Instances that share a key coordinate only through the service's headers: a few 429s at
//! the edge of a window remain possible (each instance sends at most one request inside any
//! `Retry-After`, then keeps silent until it ends). With the `redis` feature,
//! `PetStoreClientBuilder::shared_state(RedisState::new(url)?)` shares one budget per window
//! and one cooldown across hosts instead, and the process's own discipline takes over while
//! Redis is unreachable. See [`RetryPolicy`] for the defaults and the full table of what is
//! retried.
//!
//! # The deprecated `getPet`
//!
//! The specification deprecates `GET /pets/{petId}` with removal on 2030-12-05, replaced by
//! `GET /pets` with a `status` filter. [`PetStoreClient::get_pet`] is `#[deprecated]`
//! accordingly; when a response carries `Deprecation` or `Sunset` headers, the client logs a
//! `tracing` warning once per operation and exposes them in [`Response::deprecation`].
//!
//! # Logging
//!
//! The client emits [`tracing`](https://docs.rs/tracing) spans and events: a `DEBUG`
//! `petstore_client` span per call (`petstore.operation`, and OpenTelemetry's HTTP client
//! names `http.request.method`, `url.path`, `server.address`, `server.port`) with a `DEBUG`
//! `attempt` span per request (`http.response.status_code`, and `http.request.resend_count` on
//! a resend), an `INFO` event per retry (reason, delay and its source), an event when the rate
//! discipline holds a request (`INFO` for a hold of a second or more, with its reason and
//! length, one in ten seconds at most; `DEBUG` for the others), and one `WARN` per deprecated
//! operation. The API key never appears.
//!
//! Every [`Response`] and [`Error`] also tells how its call went ([`CallInfo`]): attempts, how
//! long the rate discipline held it and why ([`HoldCause`]), backoff and total time. With the
//! `metrics` feature, calls record through the [`metrics`](https://docs.rs/metrics) facade,
//! for whichever exporter the application installs: `http.client.request.duration` (seconds,
//! per request, labelled as OpenTelemetry's HTTP client conventions say:
//! `http.request.method`, `http.response.status_code` or `error.type`, `server.address`,
//! `server.port`, plus `petstore.operation`), `petstore.client.hold.duration` and
//! `petstore.client.holds` (by `cause`), `petstore.client.responses.throttled` (429 and 503,
//! by status), `petstore.client.retries`, and the gauges `petstore.client.quota.remaining`,
//! `petstore.client.quota.limit`, `petstore.client.instances` and
//! `petstore.client.store.live`, and the counter `petstore.client.store.lost`. A facade rather than `opentelemetry`'s own API, so that the
//! library brings no SDK and any exporter works. No label carries the API key.
//!
//! # Features
//!
//! | feature | default | what it does |
//! | --- | --- | --- |
//! | `rustls` | yes | TLS through rustls with the aws-lc-rs crypto provider, certificates checked against the platform's roots; no system TLS library needed (a C compiler builds aws-lc) |
//! | `native-tls` | no | TLS through the platform's library (OpenSSL on Linux; its headers and pkg-config to build) |
//! | `http2` | yes | HTTP/2 where the service offers it (ALPN); without it every request goes over HTTP/1.1, with 7 crates fewer to build |
//! | `system-proxy` | yes | uses the proxy set in the Windows or macOS system settings (`HTTPS_PROXY` and the like are read regardless) |
//! | `redis` | no | `RedisState`: one budget and one cooldown per key shared through Redis by every instance, on any host |
//! | `redis-tls` | no | `redis` over TLS (`rediss://`), the server's certificate verified; enables `rustls` |
//! | `metrics` | no | counters, histograms and gauges of every call through the `metrics` facade, for any exporter |
//!
//! The default TLS is rustls's own default provider, aws-lc-rs, as reqwest's is: ring builds
//! lighter, but a crate that turns on rustls's `ring` beside the `aws-lc-rs` most applications
//! already have makes rustls unable to choose a provider by itself, and other libraries' TLS
//! then panics unless the application installs one. To build with ring instead: this crate
//! without default features (keep `http2` and `system-proxy`), reqwest with
//! `rustls-no-provider` and rustls with `ring` in your own `Cargo.toml`, ring's provider
//! installed in `main`, and your reqwest client passed to
//! [`PetStoreClientBuilder::http_client`].
//!
//! # Testing your code
//!
//! The crate [`petstore-sandbox`](https://docs.rs/petstore-sandbox) is an embedded,
//! spec-faithful Pet Store server on loopback (authentication, rate limits and the ban,
//! injectable faults, a clock of its own): add it under `[dev-dependencies]` and point a
//! client at `Sandbox::base_url()`. It is a crate of its own so that no server code ships in
//! a production build.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod call_info;
mod client;
mod clock;
mod error;
mod execute;
mod headers;
#[cfg(feature = "metrics")]
mod meter;
mod models;
mod pets;
mod rate;
#[cfg(feature = "redis")]
mod redis_state;
mod request;
mod response;
mod retry;
mod retry_budget;

/// The HTTP status type of [`ApiError`], [`Error::status`] and [`Response::status`]
/// (`http::StatusCode`, which reqwest uses too).
pub use ::http::StatusCode;
pub use call_info::{CallInfo, HoldCause};
pub use client::{API_KEY_ENV, BASE_URL_ENV, PetStoreClient, PetStoreClientBuilder};
pub use error::{
    ApiError, ApiErrorBuilder, BodyTooLargeError, ConfigError, ConnectError, ConnectionError,
    DecodeError, Error, InvalidArgumentError, Result, ThrottleCause, ThrottledError, TimeoutError,
    TimeoutKind,
};
pub use headers::{Deprecation, Quota};
pub use models::{CategoryId, NewPet, ParsePetStatusError, Pet, PetId, PetStatus, UnknownStatus};
pub use pets::{CreatePet, GetPet, ListPets};
pub use rate::{Pacing, RateLimitScope};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis_state::RedisState;
pub use request::RawRequest;
/// The `reqwest` this crate sends requests with (0.13), re-exported so that a
/// [`PetStoreClientBuilder::http_client`] is built with the same version. It is a public
/// dependency only through that setter; besides it, this crate's own API uses only the `http`
/// types reqwest re-exports: [`StatusCode`], `Method` ([`PetStoreClient::request`]) and
/// `HeaderMap` ([`Response::headers`]).
pub use reqwest;
pub use response::Response;
pub use retry::{RetryPolicy, RetryPolicyBuilder};
pub use retry_budget::RetryBudget;

/// Not public API, and no stability promise: the decode path, header parsers and rate state,
/// for this crate's tests, benches and fuzz targets, which build with `--cfg petstore_internals`
/// (`.cargo/config.toml`) or under `cargo fuzz` (`cfg(fuzzing)`).
#[cfg(any(fuzzing, petstore_internals))]
#[doc(hidden)]
#[path = "internals.rs"]
pub mod __private;

/// The README's examples, compiled as doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Compile-time proof that the client, its builders, their futures and the error can cross
/// threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>(_: &T) {}
    assert_send_sync::<PetStoreClient>();
    assert_send_sync::<PetStoreClientBuilder>();
    assert_send_sync::<ListPets>();
    assert_send_sync::<CreatePet>();
    assert_send_sync::<GetPet>();
    assert_send_sync::<RawRequest>();
    assert_send_sync::<Error>();
    assert_send_sync::<Response<Vec<Pet>>>();
    #[cfg(feature = "redis")]
    assert_send_sync::<RedisState>();
    #[allow(deprecated, dead_code)]
    fn futures_are_send(client: &PetStoreClient) {
        assert_send(&client.list_pets().send());
        assert_send(&client.list_pets().send_with_meta());
        assert_send(&client.create_pet(NewPet::new("Rex", 1)).send());
        assert_send(&client.get_pet(1).send());
        assert_send(
            &client
                .request(::http::Method::GET, "store/orders")
                .send::<()>(),
        );
        assert_send(
            &client
                .request(::http::Method::GET, "store/orders")
                .send_for_bytes(),
        );
    }
};
