//! An embedded Pet Store server, faithful to the specification, for tests and demos.
//!
//! The specification's deployments are placeholders, so this crate is the server that the
//! quickstart and tests of [`petstore-client`](https://docs.rs/petstore-client) talk to, and
//! that your tests can use too: stateful, in-process, on loopback, with the specification's
//! authentication, rate limits (and ban), and injectable faults. Its clock is tokio's, so under a paused clock (`#[tokio::test(start_paused = true)]`)
//! rate windows, `Retry-After` and injected latency are exact and instant. Every response
//! carries a `Date` read from that clock, so a client that reads the server's time from `Date`
//! sees the sandbox's time, even when it is pinned with [`SandboxBuilder::clock_start`] or
//! skewed with [`SandboxBuilder::clock_offset`].
//!
//! ```
//! use petstore_sandbox::{Plan, Sandbox};
//! use petstore_client::{NewPet, PetStoreClient};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let sandbox = Sandbox::start().await?;
//! let client = PetStoreClient::builder()
//!     .base_url(sandbox.base_url())
//!     .api_key(sandbox.key(Plan::Free))
//!     .build()?;
//!
//! let rex = client.create_pet(NewPet::new("Rex", 1)).send().await?;
//! assert_eq!(client.list_pets().send().await?, vec![rex]);
//! assert_eq!(sandbox.stats().total(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! # A sandbox that outlives one process
//!
//! An embedded sandbox stops with the process that started it. For a demo over several runs
//! of a program, or for curl and other languages, the crate's command (the default `cli`
//! feature) serves one until Ctrl-C or SIGTERM, with the builder's settings as flags
//! (`petstore-sandbox --help` lists them):
//!
//! ```sh
//! cargo install petstore-sandbox
//! petstore-sandbox --port 8080
//! ```
//!
//! It prints its base URL and every key with its plan, one per line, ready for a client's
//! environment:
//!
//! ```text
//! PETSTORE_BASE_URL=http://127.0.0.1:8080/v1
//! PETSTORE_API_KEY=sandbox-free-key         # free: 60 requests per 60 s, 1000 per 86400 s
//! PETSTORE_API_KEY=sandbox-pro-key          # pro: 300 requests per 60 s, 10000 per 86400 s
//! ...
//! ```
//!
//! On stopping, its last line counts what it answered:
//! `stats total=<n> ok=<n> limited=<n> during_cooldown=<n> bans=<n>`. A crate that only embeds
//! the sandbox in its tests can leave the command and its `clap` out with
//! `default-features = false`.
//!
//! # Behaviour where the specification is silent
//!
//! | question | the sandbox's answer |
//! | --- | --- |
//! | catalogue at start | empty, unless seeded with [`SandboxBuilder::pets`] |
//! | ids | assigned from 1, increasing |
//! | `status` omitted on creation | `available` |
//! | `name` limits | non-empty (not only spaces), at most 100 characters |
//! | `id` in a creation body | ignored: the service assigns ids |
//! | `limit` not an integer 1 to 100, unknown `status` filter | 400 `invalid_request` |
//! | unknown query parameters | ignored |
//! | list order | by id, ascending |
//! | creation body not `application/json` | 415 `unsupported_media_type` |
//! | creation body over [`max_body_bytes`](SandboxBuilder::max_body_bytes) (64 KiB) | 413 `payload_too_large` |
//! | unknown route, wrong method | 404 `not_found`, 405 `method_not_allowed` |
//! | `getPet` deprecation | `Sunset: Thu, 05 Dec 2030 00:00:00 GMT` on its responses; no `Deprecation` header, as the specification gives no deprecation date |
//! | rate windows | fixed windows aligned to multiples of their length in unix time, so `X-RateLimit-Reset` is the exact second a window ends; or sliding ones ([`WindowKind::Sliding`]), where a request counts for the window's length from its arrival and `X-RateLimit-Reset` is the second the oldest counted request ages out |
//! | headers of a 401 | the Free plan's minute window, untouched: unauthenticated requests are not counted |
//! | which window the headers show | the one with fewer requests remaining (the minute one on a tie) |
//! | a request over the limit | not counted; 429 `rate_limited` with `Retry-After` = seconds until the window can take a request again (rounded up, at least 1) |
//! | calling during that `Retry-After` | 429 `rate_limited`; the [`ban_threshold`](SandboxBuilder::ban_threshold)-th such request (10) bans the key for [`ban_duration`](SandboxBuilder::ban_duration) (600 s): 429 `key_banned` with the remaining ban as `Retry-After` |
//! | injected faults | applied after authentication and rate limiting, so a faulted request counts against the quota |
//! | an injected 429 with a `Retry-After` of whole or decimal seconds | like a real 429: the key must wait that long (rounded up), and calls during the wait strike toward the ban; an injected 5xx never does |
//! | `Date` | on every response, from the sandbox's clock (or the answering backend's, see [`backend_clock_offsets`](SandboxBuilder::backend_clock_offsets)), truncated to the second |
//! | backends behind the limiter | one by default; with [`backend_clock_offsets`](SandboxBuilder::backend_clock_offsets), several answer in turn, each writing `Date` on its own clock, while windows, `X-RateLimit-Reset` and cooldowns stay on the limiter's clock. The sandbox never writes an HTTP-date `Retry-After` itself (an injected one is sent as given) |
//! | a step of the clock ([`clock_step`](SandboxBuilder::clock_step)) | windows, `X-RateLimit-Reset` and `Date` move by the step at once; a window's count is kept by window, so a clock stepped back into a window counts on from what it had (the last 8 windows of each length are kept). `Retry-After` and bans are durations, unaffected |
//! | a plan change ([`Sandbox::set_plan`], [`plan_change`](SandboxBuilder::plan_change)) | takes effect at the key's next request; the windows keep their counts, so after a downgrade a window already past the new limit answers 429 until it ends |
//!
//! # Error codes
//!
//! Every error is the specification's error object `{code, message, status}`:
//!
//! | status | `code` |
//! | --- | --- |
//! | 400 | `invalid_request` |
//! | 401 | `unauthorized` |
//! | 404 | `not_found` |
//! | 405 | `method_not_allowed` |
//! | 413 | `payload_too_large` |
//! | 415 | `unsupported_media_type` |
//! | 429 | `rate_limited`, `key_banned` |
//! | 500, 502, 503, 504 (injected) | `internal_error`, `bad_gateway`, `service_unavailable`, `gateway_timeout` |

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod faults;
mod limits;
mod routes;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::TimeDelta;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use url::Url;

pub use faults::{Fault, Route};
pub use limits::WindowKind;

use limits::{ClockStep, Limiter, Limits, PlanChange, UnixClock};
use petstore_client::NewPet;
use routes::{Catalogue, Shared, lock};

/// A rate-limit plan, as the specification lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Plan {
    /// 60 requests per minute, 1,000 per day.
    Free,
    /// 300 requests per minute, 10,000 per day.
    Pro,
    /// 1,000 requests per minute, 100,000 per day.
    Business,
    /// Agreed individually.
    Enterprise {
        /// Requests per minute window.
        per_minute: u32,
        /// Requests per day window.
        per_day: u32,
    },
}

impl Plan {
    /// The demo Enterprise plan of [`Sandbox::key`]: 5,000 per minute, 1,000,000 per day.
    pub const DEMO_ENTERPRISE: Plan = Plan::Enterprise {
        per_minute: 5_000,
        per_day: 1_000_000,
    };

    /// Requests allowed per minute window.
    #[must_use]
    pub fn per_minute(self) -> u32 {
        match self {
            Self::Free => 60,
            Self::Pro => 300,
            Self::Business => 1_000,
            Self::Enterprise { per_minute, .. } => per_minute,
        }
    }

    /// Requests allowed per day window.
    #[must_use]
    pub fn per_day(self) -> u32 {
        match self {
            Self::Free => 1_000,
            Self::Pro => 10_000,
            Self::Business => 100_000,
            Self::Enterprise { per_day, .. } => per_day,
        }
    }

    /// The plan's demo key in every sandbox, such as `sandbox-free-key`.
    fn demo_key(self) -> &'static str {
        match self {
            Self::Free => "sandbox-free-key",
            Self::Pro => "sandbox-pro-key",
            Self::Business => "sandbox-business-key",
            Self::Enterprise { .. } => "sandbox-enterprise-key",
        }
    }
}

const DEMO_PLANS: [Plan; 4] = [Plan::Free, Plan::Pro, Plan::Business, Plan::DEMO_ENTERPRISE];

/// Configures and starts a [`Sandbox`]. Setters never fail.
#[derive(Debug, Clone)]
#[must_use]
pub struct SandboxBuilder {
    bind: SocketAddr,
    keys: Vec<(String, Plan)>,
    limits: Limits,
    max_body_bytes: usize,
    pets: Vec<NewPet>,
    quota_fields: QuotaFields,
    backends: Vec<TimeDelta>,
    plan_changes: Vec<PlanChange>,
}

/// How the sandbox writes the rate-limit quota on its responses: as the specification says,
/// or in a shape a gateway or another service might use, to test a client against it.
///
/// ```
/// use petstore_sandbox::{QuotaFields, Sandbox};
///
/// let behind_a_gateway = Sandbox::builder().quota_fields(QuotaFields::RepeatedRemaining);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum QuotaFields {
    /// `X-RateLimit-Limit`, `-Remaining` and `-Reset` (a Unix time), as specified.
    #[default]
    XRateLimit,
    /// As specified, but with two `X-RateLimit-Remaining` lines: a gateway's, which always
    /// shows the whole limit, then the service's.
    RepeatedRemaining,
    /// As specified, but `X-RateLimit-Remaining: -1`.
    NegativeRemaining,
    /// As specified, but `X-RateLimit-Reset` gives the seconds until the reset.
    ResetInSeconds,
    /// The IETF fields instead: `RateLimit: "window";r=REMAINING;t=SECONDS` and
    /// `RateLimit-Policy: "window";q=LIMIT`.
    Ietf,
    /// As specified, but `X-RateLimit-Limit` and `-Remaining` are `18446744073709551615`
    /// (`u64::MAX`), the "unlimited" some gateways send. The plan is still enforced.
    Unlimited,
    /// As specified, but only on 429 answers: a success tells nothing of the quota, as on
    /// services that report it only once it is spent.
    OnlyOn429,
    /// No rate-limit headers on any answer; a 429 still carries `Retry-After`.
    Absent,
}

impl SandboxBuilder {
    /// The address to listen on; `127.0.0.1:0` (a free port on loopback) by default.
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }

    /// Registers another API key with its plan (the demo keys of [`Sandbox::key`] always
    /// exist).
    pub fn key(mut self, key: impl Into<String>, plan: Plan) -> Self {
        self.keys.push((key.into(), plan));
        self
    }

    /// The length of the "minute" window; 60 s by default. Rounded to whole seconds, at least 1.
    pub fn minute_window(mut self, length: Duration) -> Self {
        self.limits.minute_window = whole_seconds(length);
        self
    }

    /// The length of the "day" window; 86,400 s by default. Rounded to whole seconds, at least 1.
    pub fn day_window(mut self, length: Duration) -> Self {
        self.limits.day_window = whole_seconds(length);
        self
    }

    /// How both windows count requests; [`WindowKind::Fixed`] by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_sandbox::{Sandbox, WindowKind};
    ///
    /// // A request counts for ten seconds from its arrival.
    /// let rolling = Sandbox::builder()
    ///     .minute_window(Duration::from_secs(10))
    ///     .window_kind(WindowKind::Sliding);
    /// ```
    pub fn window_kind(mut self, kind: WindowKind) -> Self {
        self.limits.window_kind = kind;
        self
    }

    /// How many requests a key may send during a `Retry-After` wait before it is banned; 10 by
    /// default (at least 1).
    pub fn ban_threshold(mut self, requests: u32) -> Self {
        self.limits.ban_threshold = requests.max(1);
        self
    }

    /// How long a ban lasts; 600 s by default.
    pub fn ban_duration(mut self, duration: Duration) -> Self {
        self.limits.ban_duration = duration;
        self
    }

    /// What the sandbox's wall clock reads at start (the system time by default); from then on
    /// it advances with tokio's clock. Pinning it makes window boundaries predictable in
    /// tests. Rate windows, `X-RateLimit-Reset` and `Date` all follow it; a client reads the
    /// sandbox's time from its `Date` header. Combines with
    /// [`clock_offset`](Self::clock_offset): the clock then starts at `start + offset`.
    pub fn clock_start(mut self, start: std::time::SystemTime) -> Self {
        self.limits.clock_start = Some(start);
        self
    }

    /// Skews the sandbox's wall clock: it reads the system time (or
    /// [`clock_start`](Self::clock_start)) plus `offset`; a negative offset puts it behind.
    /// Rate windows, `X-RateLimit-Reset` and `Date` shift together, as on a server whose
    /// clock is off, to test a client under clock skew. Zero by default.
    ///
    /// ```
    /// use chrono::TimeDelta;
    /// use petstore_sandbox::Sandbox;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// // A server whose clock is 90 seconds behind.
    /// let sandbox = Sandbox::builder()
    ///     .clock_offset(TimeDelta::seconds(-90))
    ///     .start()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn clock_offset(mut self, offset: TimeDelta) -> Self {
        self.limits.clock_offset = offset;
        self
    }

    /// Puts several backends behind the one rate limiter, each with its clock off the limiter's
    /// by its offset (positive: ahead), to test a client against a load balancer whose backends
    /// disagree on the time. Requests are answered by the backends in turn (round-robin, in
    /// the order of arrival); each response's `Date` is on the clock of the backend that
    /// answered it, while rate windows, `X-RateLimit-Reset` and cooldowns stay on the
    /// limiter's clock (the sandbox's, with [`clock_offset`](Self::clock_offset) and
    /// [`clock_step`](Self::clock_step) applied). [`LoggedRequest::backend`] tells which
    /// backend answered. One backend on the limiter's clock by default; an empty list keeps
    /// that.
    ///
    /// ```
    /// use chrono::TimeDelta;
    /// use petstore_sandbox::Sandbox;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// // Two backends: one on the limiter's clock, one 2 s ahead of it.
    /// let sandbox = Sandbox::builder()
    ///     .backend_clock_offsets([TimeDelta::zero(), TimeDelta::seconds(2)])
    ///     .start()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn backend_clock_offsets(mut self, offsets: impl IntoIterator<Item = TimeDelta>) -> Self {
        self.backends = offsets.into_iter().collect();
        self
    }

    /// Steps the whole service's clock (limiter and backends) by `by`, `after` the sandbox
    /// starts (on tokio's clock), as an NTP correction would: a positive step jumps ahead, a
    /// negative one goes back. From then on, rate windows, `X-RateLimit-Reset` and `Date` are
    /// read on the stepped clock. `Retry-After` waits and bans are durations and do not move.
    /// No step by default; a second call replaces the first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use chrono::TimeDelta;
    /// use petstore_sandbox::Sandbox;
    ///
    /// // Ten seconds after start, the service's clock is corrected 10 s back.
    /// let builder = Sandbox::builder().clock_step(Duration::from_secs(10), TimeDelta::seconds(-10));
    /// ```
    pub fn clock_step(mut self, after: Duration, by: TimeDelta) -> Self {
        self.limits.clock_step = Some(ClockStep { after, by });
        self
    }

    /// Changes the plan of `key` (a demo key or one registered with [`key`](Self::key))
    /// `after` the sandbox starts, on tokio's clock, as an upgrade or a downgrade would; see
    /// [`Sandbox::set_plan`] for what changes. Scheduled changes take effect in the order of
    /// their instants.
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_sandbox::{Plan, Sandbox};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// // The key upgrades from Free to Pro 90 s after start.
    /// let sandbox = Sandbox::builder()
    ///     .key("shop", Plan::Free)
    ///     .plan_change(Duration::from_secs(90), "shop", Plan::Pro)
    ///     .start()
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn plan_change(mut self, after: Duration, key: impl Into<String>, plan: Plan) -> Self {
        self.plan_changes.push(PlanChange {
            after,
            key: key.into(),
            plan,
        });
        self
    }

    /// The largest creation body accepted; 64 KiB by default.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// How responses show the rate-limit quota; [`QuotaFields::XRateLimit`] by default.
    pub fn quota_fields(mut self, fields: QuotaFields) -> Self {
        self.quota_fields = fields;
        self
    }

    /// Pets in the catalogue at start, created in order (ids from 1).
    pub fn pets(mut self, pets: impl IntoIterator<Item = NewPet>) -> Self {
        self.pets.extend(pets);
        self
    }

    /// Binds and starts serving on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// The address cannot be bound, or a [`plan_change`](Self::plan_change) names a key the
    /// sandbox does not have (`InvalidInput`).
    pub async fn start(self) -> std::io::Result<Sandbox> {
        let keys: Vec<(String, Plan)> = DEMO_PLANS
            .iter()
            .map(|plan| (plan.demo_key().to_owned(), *plan))
            .chain(self.keys)
            .collect();
        if let Some(change) = self
            .plan_changes
            .iter()
            .find(|change| !keys.iter().any(|(key, _)| *key == change.key))
        {
            let message = format!(
                "a plan change names the key {:?}, which the sandbox does not have: register it with SandboxBuilder::key",
                change.key
            );
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                message,
            ));
        }
        let listener = TcpListener::bind(self.bind).await?;
        let addr = listener.local_addr()?;
        let base_url = Url::parse(&format!("http://{addr}/v1"))
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        let mut catalogue = Catalogue::default();
        for pet in self.pets {
            let status = pet.status.unwrap_or(petstore_client::PetStatus::Available);
            catalogue.add(pet.name, pet.category_id, status);
        }
        let clock = UnixClock::new(
            self.limits.clock_start,
            self.limits.clock_offset,
            self.limits.clock_step,
        );
        let limiter = Limiter::new(self.limits, clock, keys.clone(), self.plan_changes);
        let backends = if self.backends.is_empty() {
            vec![TimeDelta::zero()]
        } else {
            self.backends
        };
        let shared = Arc::new(Shared {
            clock,
            backends,
            next_backend: AtomicUsize::new(0),
            limiter: Mutex::new(limiter),
            faults: Mutex::default(),
            catalogue: Mutex::new(catalogue),
            log: Mutex::default(),
            max_body_bytes: self.max_body_bytes,
            quota_fields: self.quota_fields,
        });
        let (stop, stopped) = watch::channel(());
        let server = tokio::spawn(serve(listener, routes::router(shared.clone()), stopped));
        Ok(Sandbox {
            base_url,
            keys,
            shared,
            stop: Some(stop),
            server: Some(server),
        })
    }
}

fn whole_seconds(length: Duration) -> Duration {
    Duration::from_secs(length.as_secs_f64().round().max(1.0) as u64)
}

async fn serve(listener: TcpListener, router: axum::Router, mut stopped: watch::Receiver<()>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            _ = stopped.changed() => break,
        };
        let kill = Arc::new(Notify::new());
        let service = TowerToHyperService::new(routes::for_connection(&router, kill.clone()));
        let mut stopped = stopped.clone();
        connections.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                // A `drop_connection` fault: close without answering.
                () = kill.notified() => {}
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}

/// A running sandbox. Dropping it shuts the server down gracefully in the background;
/// [`shutdown`](Self::shutdown) does so and waits.
pub struct Sandbox {
    base_url: Url,
    keys: Vec<(String, Plan)>,
    shared: Arc<Shared>,
    stop: Option<watch::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sandbox")
            .field("base_url", &self.base_url.as_str())
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// A builder with the defaults.
    pub fn builder() -> SandboxBuilder {
        SandboxBuilder {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            keys: Vec::new(),
            limits: Limits {
                minute_window: Duration::from_secs(60),
                day_window: Duration::from_secs(86_400),
                window_kind: WindowKind::Fixed,
                ban_threshold: 10,
                ban_duration: Duration::from_secs(600),
                clock_start: None,
                clock_offset: TimeDelta::zero(),
                clock_step: None,
            },
            max_body_bytes: 64 * 1024,
            pets: Vec::new(),
            quota_fields: QuotaFields::default(),
            backends: Vec::new(),
            plan_changes: Vec::new(),
        }
    }

    /// Starts a sandbox with the defaults on a free loopback port.
    ///
    /// # Errors
    ///
    /// No loopback port can be bound.
    pub async fn start() -> std::io::Result<Self> {
        Self::builder().start().await
    }

    /// The base URL to give a client, such as `http://127.0.0.1:41234/v1`.
    #[must_use]
    pub fn base_url(&self) -> &Url {
        &self.base_url
    }

    /// The key of a plan: the demo key of `Free`, `Pro`, `Business` and
    /// [`Plan::DEMO_ENTERPRISE`], or the first key registered with
    /// [`SandboxBuilder::key`] for exactly this plan (an `Enterprise` plan with your numbers).
    ///
    /// # Panics
    ///
    /// When no key has this plan: register one with [`SandboxBuilder::key`].
    #[must_use]
    pub fn key(&self, plan: Plan) -> &str {
        self.keys
            .iter()
            .find(|(_, registered)| *registered == plan)
            .map(|(key, _)| key.as_str())
            .unwrap_or_else(|| {
                panic!("the sandbox has no key with the plan {plan:?}: register one with SandboxBuilder::key")
            })
    }

    /// Every key the sandbox accepts, with the plan it started with.
    pub fn keys(&self) -> impl Iterator<Item = (&str, Plan)> {
        self.keys.iter().map(|(key, plan)| (key.as_str(), *plan))
    }

    /// Puts `key` on `plan` from its next request on, as an upgrade or a downgrade in the middle
    /// of a window would: the current windows keep their counts and are judged by the new
    /// limits, so after a downgrade a window already past the new limit answers 429 until it
    /// ends, and after an upgrade the rest of the window has the new allowance. Cooldowns and
    /// bans in force stay. [`keys`](Self::keys) and [`key`](Self::key) still give the plans
    /// the keys started with.
    ///
    /// ```
    /// use petstore_sandbox::{Plan, Sandbox};
    /// use petstore_client::PetStoreClient;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let sandbox = Sandbox::start().await?;
    /// let key = sandbox.key(Plan::Free).to_owned();
    /// let client = PetStoreClient::builder()
    ///     .base_url(sandbox.base_url())
    ///     .api_key(&key)
    ///     .build()?;
    /// sandbox.set_plan(&key, Plan::Pro);
    /// let response = client.list_pets().send_with_meta().await?;
    /// assert_eq!(response.quota().map(|quota| quota.limit), Some(300));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// When the sandbox has no such key: register it with [`SandboxBuilder::key`].
    pub fn set_plan(&self, key: &str, plan: Plan) {
        assert!(
            lock(&self.shared.limiter).set_plan(key, plan),
            "the sandbox has no key {key:?}: register it with SandboxBuilder::key"
        );
    }

    /// Injects a fault into the requests it matches.
    pub fn inject(&self, fault: Fault) {
        lock(&self.shared.faults).inject(fault);
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// Counters of the requests received so far.
    #[must_use]
    pub fn stats(&self) -> Stats {
        let log = lock(&self.shared.log);
        let limiter = lock(&self.shared.limiter);
        Stats {
            total: log.total,
            per_route: log.per_route.clone(),
            per_key: log.per_key.clone(),
            per_status: log.per_status.clone(),
            bans: limiter.bans(),
            during_cooldown: limiter.early(),
        }
    }

    /// The most recent requests received (up to 100,000), oldest first.
    #[must_use]
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log).recent.iter().cloned().collect()
    }

    /// Stops accepting connections, lets requests in progress finish, and waits until the
    /// server has stopped.
    pub async fn shutdown(mut self) {
        self.stop.take();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Dropping the sender is the stop signal; the server task winds down by itself.
        self.stop.take();
    }
}

/// One request the sandbox received.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoggedRequest {
    /// When it arrived, on tokio's clock.
    pub at: Instant,
    /// When it arrived, on the sandbox's wall clock (which a clock offset skews): the rate
    /// window it fell in.
    pub server_time: std::time::SystemTime,
    /// The API route, or `None` for an unknown route or method.
    pub route: Option<Route>,
    /// The bearer key it carried, if any.
    pub key: Option<String>,
    /// The status answered, or `None` when the connection closed without an answer: a fault
    /// dropped it, or the client gave up on the request (its limiter verdict still counts).
    pub status: Option<u16>,
    /// The `User-Agent` it carried, if any (lossily decoded), to tell client instances apart.
    pub user_agent: Option<String>,
    /// Which backend answered it, from 0, in the order given to
    /// [`SandboxBuilder::backend_clock_offsets`] (always 0 with one backend).
    pub backend: usize,
    /// Whether it arrived while its key had been told to wait: during the `Retry-After` of a
    /// 429 (real or injected), or during a ban. [`Stats::during_cooldown`] counts these.
    pub during_cooldown: bool,
    /// For a 429 (real or injected), until when, on tokio's clock, its `Retry-After` told the
    /// client to wait: the wait no request of the key may be sent into.
    pub told_to_wait_until: Option<Instant>,
    /// Whether an injected fault answered it: the limiter had admitted and counted it first.
    pub injected: bool,
    /// When its answer left (after any injected latency), on tokio's clock; `None` when the
    /// connection was dropped without one.
    pub answered_at: Option<Instant>,
    /// The quota its answer reported, whatever the [`QuotaFields`]; `None` when the answer
    /// carried no rate-limit headers.
    pub quota: Option<ShownQuota>,
    /// What its key had left once the limiter decided on it (this request counted if it was
    /// admitted), in the tighter of the two windows, whatever the answer showed; `None` for a
    /// key the sandbox does not know.
    pub left: Option<u64>,
    /// With nothing [`left`](Self::left): when, on tokio's clock, the spent window (the later
    /// of the two if both are) takes a request again, were the plan and the clock to stay.
    pub refills_at: Option<Instant>,
}

/// The quota an answer reported, as numbers (see [`LoggedRequest::quota`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShownQuota {
    /// The limit of the window shown (the one with fewer requests remaining).
    pub limit: u64,
    /// The requests it had left, this one counted.
    pub remaining: u64,
    /// When it resets, in Unix seconds on the limiter's clock.
    pub reset: u64,
}

const LOG_CAPACITY: usize = 100_000;

#[derive(Debug, Default)]
struct RequestLog {
    recent: VecDeque<LoggedRequest>,
    total: u64,
    per_route: HashMap<Route, u64>,
    per_key: HashMap<String, u64>,
    per_status: HashMap<u16, u64>,
}

impl RequestLog {
    fn push(&mut self, entry: LoggedRequest) {
        self.total += 1;
        if let Some(route) = entry.route {
            *self.per_route.entry(route).or_default() += 1;
        }
        if let Some(key) = &entry.key {
            *self.per_key.entry(key.clone()).or_default() += 1;
        }
        if let Some(status) = entry.status {
            *self.per_status.entry(status).or_default() += 1;
        }
        if self.recent.len() == LOG_CAPACITY {
            self.recent.pop_front();
        }
        self.recent.push_back(entry);
    }
}

/// Counters of the requests a sandbox received, whatever their outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    total: u64,
    per_route: HashMap<Route, u64>,
    per_key: HashMap<String, u64>,
    per_status: HashMap<u16, u64>,
    bans: u64,
    during_cooldown: u64,
}

impl Stats {
    /// Every request received, on any route.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Requests received on one route.
    #[must_use]
    pub fn requests(&self, route: Route) -> u64 {
        self.per_route.get(&route).copied().unwrap_or(0)
    }

    /// Requests that carried this key.
    #[must_use]
    pub fn requests_for_key(&self, key: &str) -> u64 {
        self.per_key.get(key).copied().unwrap_or(0)
    }

    /// Requests answered with this HTTP status (a dropped connection answers none).
    #[must_use]
    pub fn answered(&self, status: u16) -> u64 {
        self.per_status.get(&status).copied().unwrap_or(0)
    }

    /// Bans issued so far.
    #[must_use]
    pub fn bans(&self) -> u64 {
        self.bans
    }

    /// Requests that arrived while their key had been told to wait: during the `Retry-After`
    /// of a 429, or during a ban. A well-behaved client sends none.
    #[must_use]
    pub fn during_cooldown(&self) -> u64 {
        self.during_cooldown
    }
}
