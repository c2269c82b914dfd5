//! [`PetStoreClient`] and its builder.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, HeaderValue};
use url::Url;

use crate::error::{Error, Result};
use crate::headers::Quota;
use crate::rate::{Pacing, RateLimitScope, RateLimiter, SharedStore, is_loopback};
use crate::retry::RetryPolicy;
use crate::retry_budget::RetryWindow;

/// The environment variable [`PetStoreClient::from_env`] reads the base URL from.
pub const BASE_URL_ENV: &str = "PETSTORE_BASE_URL";
/// The environment variable [`PetStoreClient::from_env`] reads the API key from.
pub const API_KEY_ENV: &str = "PETSTORE_API_KEY";

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_MAX_RESPONSE_BODY: usize = 8 * 1024 * 1024;

/// A client of the Pet Store API.
///
/// Cheap to clone: clones share one connection pool, so clone it freely into tasks rather than
/// wrapping it in an `Arc`. Every client of the same base URL and API key in the process shares
/// one rate-limit state (budgets, the cooldown gate, the queue of held requests; see
/// [`RateLimitScope`]). Its `Debug` output never shows the API key.
///
/// ```no_run
/// use petstore_client::{NewPet, PetStatus, PetStoreClient};
///
/// # async fn run() -> petstore_client::Result<()> {
/// let client = PetStoreClient::builder()
///     .base_url("https://petstore.example.com/v1")
///     .api_key("my-api-key")
///     .build()?;
///
/// let rex = client.create_pet(NewPet::new("Rex", 1)).send().await?;
/// let available = client.list_pets().status(PetStatus::Available).limit(50).send().await?;
/// println!("created {}; {} available; quota {:?}", rex.id, available.len(), client.quota());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PetStoreClient {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) http: reqwest::Client,
    pub(crate) base_url: Url,
    pub(crate) pets_url: Url,
    /// `Authorization`, `User-Agent` and the JSON media types, built once.
    pub(crate) headers: RequestHeaders,
    pub(crate) connect_timeout: Option<Duration>,
    pub(crate) attempt_timeout: Option<Duration>,
    pub(crate) call_timeout: Option<Duration>,
    pub(crate) retry: RetryPolicy,
    /// The retry budget's counts, spent by every clone.
    pub(crate) retry_window: RetryWindow,
    /// Calls that retried, by every clone: each draws its retries' jitter by its number.
    pub(crate) retried: AtomicU64,
    pub(crate) max_response_body: usize,
    pub(crate) rate: RateLimiter,
    #[cfg(feature = "metrics")]
    pub(crate) meter: crate::meter::Meter,
}

/// The headers every request of a client carries, built once: a copy of a map costs less than
/// adding each header to every request, which hashes its name each time.
pub(crate) struct RequestHeaders {
    /// `Authorization`, `User-Agent` and `Accept`.
    plain: HeaderMap,
    /// Those and `Content-Type`, for a request with a JSON body.
    json: HeaderMap,
}

impl RequestHeaders {
    pub(crate) fn new(authorization: HeaderValue, user_agent: HeaderValue) -> Self {
        let json_type = HeaderValue::from_static("application/json");
        let mut plain = HeaderMap::with_capacity(4);
        plain.insert(AUTHORIZATION, authorization);
        plain.insert(USER_AGENT, user_agent);
        plain.insert(ACCEPT, json_type.clone());
        let mut json = plain.clone();
        json.insert(CONTENT_TYPE, json_type);
        Self { plain, json }
    }

    /// The API key, to mask in what an answer puts in an error (a page echoing the request).
    pub(crate) fn key(&self) -> &str {
        let value = self.plain.get(AUTHORIZATION).map(HeaderValue::as_bytes);
        let key = value.and_then(|bearer| bearer.strip_prefix(b"Bearer "));
        key.and_then(|key| std::str::from_utf8(key).ok())
            .unwrap_or_default()
    }

    /// The headers of a request, with a JSON body or without one.
    pub(crate) fn of(&self, with_body: bool) -> HeaderMap {
        if with_body {
            self.json.clone()
        } else {
            self.plain.clone()
        }
    }
}

impl PetStoreClient {
    /// A builder; [`base_url`](PetStoreClientBuilder::base_url) and
    /// [`api_key`](PetStoreClientBuilder::api_key) are required.
    pub fn builder() -> PetStoreClientBuilder {
        PetStoreClientBuilder::new()
    }

    /// A client for the deployment named by `PETSTORE_BASE_URL`, authenticated with
    /// `PETSTORE_API_KEY`, with every other setting at its default.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when a variable is unset or its value is invalid, as for
    /// [`PetStoreClientBuilder::build`].
    ///
    /// ```no_run
    /// let client = petstore_client::PetStoreClient::from_env()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn from_env() -> Result<Self> {
        PetStoreClientBuilder::from_env().build()
    }

    /// The newest rate-limit quota reported to this client, its clones, or (with the default
    /// [`RateLimitScope::Process`]) any client of the same key in this process, on success or
    /// error responses: the newest window period any response reported, with the lowest
    /// `remaining` reported for it (responses of concurrent calls arrive in any order). `None`
    /// before the first response that carried one.
    #[must_use]
    pub fn quota(&self) -> Option<Quota> {
        self.inner.rate.latest()
    }

    /// The base URL requests go to, ending in `/v1/`.
    #[must_use]
    pub fn base_url(&self) -> &Url {
        &self.inner.base_url
    }
}

impl fmt::Debug for PetStoreClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &self.inner;
        f.debug_struct("PetStoreClient")
            .field("base_url", &inner.base_url.as_str())
            .field("api_key", &Redacted)
            .field("connect_timeout", &inner.connect_timeout)
            .field("attempt_timeout", &inner.attempt_timeout)
            .field("call_timeout", &inner.call_timeout)
            .field("retry", &inner.retry)
            .finish_non_exhaustive()
    }
}

struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Builds a [`PetStoreClient`].
///
/// Setters never fail; [`build`](Self::build) checks everything and reports the first
/// problem. Defaults:
///
/// | setting | default |
/// | --- | --- |
/// | [`base_url`](Self::base_url), [`api_key`](Self::api_key) | none: required |
/// | [`connect_timeout`](Self::connect_timeout) | 10 s |
/// | [`attempt_timeout`](Self::attempt_timeout) | 30 s: sending one request and reading its whole response |
/// | [`call_timeout`](Self::call_timeout) | none: the whole call, retries and waits included |
/// | [`retry_policy`](Self::retry_policy) | [`RetryPolicy::default()`] |
/// | [`pacing`](Self::pacing) | [`Pacing::Shared`]: unpaced while alone on the key, the budget spread over each window once others spend it |
/// | [`rate_limit_scope`](Self::rate_limit_scope) | [`RateLimitScope::Process`]: one state per key in the process |
/// | `shared_state` (feature `redis`) | none: instances on other hosts coordinate only through the service's headers |
/// | [`user_agent`](Self::user_agent) | `petstore-client/<crate version>` |
/// | [`max_response_body`](Self::max_response_body) | 8 MiB |
/// | [`allow_insecure_http`](Self::allow_insecure_http) | off: plain `http://` only to loopback |
///
/// ```
/// use std::time::Duration;
/// use petstore_client::{PetStoreClient, RetryPolicy};
///
/// let client = PetStoreClient::builder()
///     .base_url("https://petstore.example.com/v1")
///     .api_key("my-api-key")
///     .attempt_timeout(Duration::from_secs(5))
///     .retry_policy(RetryPolicy::builder().max_retries(5).build())
///     .build()?;
/// assert!(!format!("{client:?}").contains("my-api-key"));
/// # Ok::<(), petstore_client::Error>(())
/// ```
#[must_use]
#[derive(Clone)]
pub struct PetStoreClientBuilder {
    base_url: Option<String>,
    api_key: Option<String>,
    /// Whether `base_url` and `api_key` came from their variables, so that errors name them.
    base_url_from_env: bool,
    api_key_from_env: bool,
    /// `None`: not set, the default applies.
    connect_timeout: Option<Option<Duration>>,
    attempt_timeout: Option<Duration>,
    call_timeout: Option<Duration>,
    user_agent: Option<String>,
    http_client: Option<reqwest::Client>,
    retry: RetryPolicy,
    pacing: Pacing,
    rate_limit_scope: RateLimitScope,
    store: Option<Arc<SharedStore>>,
    max_response_body: usize,
    allow_insecure_http: bool,
}

impl Default for PetStoreClientBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl PetStoreClientBuilder {
    /// A builder with every setting at its default.
    pub fn new() -> Self {
        Self {
            base_url: None,
            api_key: None,
            base_url_from_env: false,
            api_key_from_env: false,
            connect_timeout: None,
            attempt_timeout: Some(DEFAULT_ATTEMPT_TIMEOUT),
            call_timeout: None,
            user_agent: None,
            http_client: None,
            retry: RetryPolicy::default(),
            pacing: Pacing::default(),
            rate_limit_scope: RateLimitScope::default(),
            store: None,
            max_response_body: DEFAULT_MAX_RESPONSE_BODY,
            allow_insecure_http: false,
        }
    }

    /// A builder with the base URL and API key from `PETSTORE_BASE_URL` and
    /// `PETSTORE_API_KEY`, when set; other settings can still be changed.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use petstore_client::PetStoreClientBuilder;
    ///
    /// // PETSTORE_BASE_URL=https://petstore.example.com/v1 PETSTORE_API_KEY=...
    /// let client = PetStoreClientBuilder::from_env()
    ///     .call_timeout(Duration::from_secs(60))
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn from_env() -> Self {
        let mut builder = Self::new();
        // Not UTF-8, a value is still set: its replacement characters fail `build()`, naming it.
        let var = |name| std::env::var_os(name).map(|value| value.to_string_lossy().into_owned());
        builder.base_url = var(BASE_URL_ENV);
        builder.base_url_from_env = builder.base_url.is_some();
        builder.api_key = var(API_KEY_ENV);
        builder.api_key_from_env = builder.api_key.is_some();
        builder
    }

    /// The deployment's base URL, ending in the version segment `v1`, such as
    /// `https://petstore.example.com/v1` (a trailing slash is optional). Accepts a `&str`,
    /// a `String` or a [`url::Url`]. It must not contain a user name or password: the API key
    /// is the only credential.
    pub fn base_url(mut self, url: impl AsRef<str>) -> Self {
        self.base_url = Some(url.as_ref().to_owned());
        self.base_url_from_env = false;
        self
    }

    /// The API key, sent as the bearer token of every request. It is never shown by `Debug`,
    /// in errors or in logs.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self.api_key_from_env = false;
        self
    }

    /// How long establishing a connection (TCP and TLS) may take; `None` for no limit. With a
    /// supplied [`http_client`](Self::http_client), set it on that client instead: setting
    /// both is a configuration error. 10 s by default.
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_client::PetStoreClient;
    ///
    /// let client = PetStoreClient::builder()
    ///     .base_url("https://petstore.example.com/v1")
    ///     .api_key("my-api-key")
    ///     .connect_timeout(Duration::from_secs(3))
    ///     .attempt_timeout(Duration::from_secs(10))
    ///     .call_timeout(Duration::from_secs(60))
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn connect_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.connect_timeout = Some(timeout.into());
        self
    }

    /// How long one attempt (sending the request and reading the whole response) may take;
    /// `None` for no limit; 30 s by default. A test on tokio's paused clock turns it off, as
    /// the clock jumps past it while the runtime waits for I/O.
    ///
    /// ```
    /// use petstore_client::PetStoreClient;
    ///
    /// let client = PetStoreClient::builder()
    ///     .base_url("https://petstore.example.com/v1")
    ///     .api_key("my-api-key")
    ///     .attempt_timeout(None)
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn attempt_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.attempt_timeout = timeout.into();
        self
    }

    /// How long a whole call may take, retries and waits included; `None` (the default) for
    /// no limit beyond what the retry policy implies. A retry whose wait would outlast it is not
    /// made: the call ends at once with the error of its last attempt.
    pub fn call_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.call_timeout = timeout.into();
        self
    }

    /// The `User-Agent` header; `petstore-client/<crate version>` by default.
    ///
    /// ```
    /// use petstore_client::PetStoreClient;
    ///
    /// let client = PetStoreClient::builder()
    ///     .base_url("https://petstore.example.com/v1")
    ///     .api_key("my-api-key")
    ///     .user_agent("inventory-sync/2.1")
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = Some(user_agent.into());
        self
    }

    /// Sends requests through this `reqwest::Client` (its pool, proxy, TLS and timeouts)
    /// instead of one built by this crate; [`petstore_client::reqwest`](crate::reqwest) is the
    /// reqwest this crate uses (0.13), whose `Client` this takes.
    ///
    /// What then comes from your client and not from this builder: the connect timeout
    /// ([`connect_timeout`](Self::connect_timeout) with `http_client` fails
    /// [`build`](Self::build)), the redirect policy (this crate's own client follows none;
    /// keep yours at `none` or the default, as reqwest drops the `Authorization` header on
    /// redirects to another host), proxies, TLS and the connection pool. Everything else here
    /// (the key, user agent, per-attempt and call timeouts, retries, pacing, body limit)
    /// still applies.
    ///
    /// ```
    /// use std::time::Duration;
    /// use petstore_client::{PetStoreClient, reqwest};
    ///
    /// let http = reqwest::Client::builder()
    ///     .connect_timeout(Duration::from_secs(3))
    ///     .redirect(reqwest::redirect::Policy::none())
    ///     .build()?;
    /// let client = PetStoreClient::builder()
    ///     .base_url("https://petstore.example.com/v1")
    ///     .api_key("my-api-key")
    ///     .http_client(http)
    ///     .build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// The retry policy of every call, unless a request overrides it.
    ///
    /// ```
    /// use petstore_client::{PetStoreClient, RetryPolicy};
    ///
    /// let client = PetStoreClient::builder()
    ///     .base_url("https://petstore.example.com/v1")
    ///     .api_key("my-api-key")
    ///     .retry_policy(RetryPolicy::builder().max_retries(5).build())
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// How to spend the rate-limit budget the service reports; [`Pacing::Shared`] by default:
    /// never held while the reported budget lasts as long as this process is seen to be the
    /// key's only user, and this process's share spread over each window once other processes
    /// or hosts are seen spending the key.
    ///
    /// [`Pacing::Sole`] sends a burst all at once, and is safe only when nothing else uses the
    /// key and the service never refuses a request its headers did not foretell.
    /// [`Pacing::Off`] leaves only 429s to hold the client back: many concurrent tasks then
    /// overshoot the limit in bursts before the first 429 comes back, and a service that
    /// counts the overshoot as calling on after a 429 may ban the key
    /// (`examples/rate_limits.rs` shows it).
    pub fn pacing(mut self, pacing: Pacing) -> Self {
        self.pacing = pacing;
        self
    }

    /// Which clients share a rate-limit state; [`RateLimitScope::Process`] by default: every
    /// client in this process for the same base URL and key.
    ///
    /// ```
    /// use petstore_client::{PetStoreClient, RateLimitScope};
    ///
    /// // A test that plays two independent processes on one key.
    /// let instance = || {
    ///     PetStoreClient::builder()
    ///         .base_url("http://127.0.0.1:8080/v1")
    ///         .api_key("sandbox-pro-key")
    ///         .rate_limit_scope(RateLimitScope::Client)
    ///         .build()
    /// };
    /// let (first, second) = (instance()?, instance()?);
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn rate_limit_scope(mut self, scope: RateLimitScope) -> Self {
        self.rate_limit_scope = scope;
        self
    }

    /// Shares the rate-limit budget and cooldown of the key with every instance, on any host,
    /// configured with the same Redis (feature `redis`): the budget each window has left is
    /// spent atomically in Redis before each request, and a 429 seen by one instance holds them
    /// all. The process's own discipline still runs, and takes over alone while Redis is
    /// unreachable; see [`RedisState`](crate::RedisState).
    ///
    /// ```no_run
    /// use petstore_client::{PetStoreClient, RedisState};
    ///
    /// let client = PetStoreClient::builder()
    ///     .base_url("https://petstore.example.com/v1")
    ///     .api_key("my-api-key")
    ///     .shared_state(RedisState::new("redis://127.0.0.1:6379/")?)
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn shared_state(mut self, state: crate::RedisState) -> Self {
        self.store = Some(state.store());
        self
    }

    /// The largest response body the client reads; a larger one fails the call with
    /// [`Error::BodyTooLarge`] and is not read past the limit. 8 MiB by default.
    ///
    /// ```
    /// use petstore_client::PetStoreClient;
    ///
    /// let client = PetStoreClient::builder()
    ///     .base_url("https://petstore.example.com/v1")
    ///     .api_key("my-api-key")
    ///     .max_response_body(1024 * 1024)
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn max_response_body(mut self, bytes: usize) -> Self {
        self.max_response_body = bytes;
        self
    }

    /// Allows a plain `http://` base URL on a host other than loopback. Off by default, since
    /// the API key would travel in clear text.
    ///
    /// ```
    /// use petstore_client::PetStoreClient;
    ///
    /// // A service inside a private network, reached without TLS.
    /// let client = PetStoreClient::builder()
    ///     .base_url("http://petstore.internal:8080/v1")
    ///     .api_key("my-api-key")
    ///     .allow_insecure_http(true)
    ///     .build()?;
    /// # Ok::<(), petstore_client::Error>(())
    /// ```
    pub fn allow_insecure_http(mut self, allow: bool) -> Self {
        self.allow_insecure_http = allow;
        self
    }

    /// Builds the client.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] when a timeout or [`max_response_body`](Self::max_response_body) is
    /// zero, the base URL or API key is missing, the key cannot be sent in
    /// an HTTP header, the base URL has no `://` or does not parse, contains a user name or
    /// password, is not `http` or `https`, has a query or fragment, or does not end in `/v1`,
    /// the base URL is plain `http://` to a host other than loopback (unless
    /// [`allow_insecure_http`](Self::allow_insecure_http)), the base URL is `https://` in a
    /// build with neither the `rustls` nor the `native-tls` feature (unless a
    /// [`http_client`](Self::http_client) is supplied), or the HTTP client cannot be created.
    pub fn build(self) -> Result<PetStoreClient> {
        self.refuse_zero_limits()?;
        let base_url = self.parse_base_url()?;
        let key = self.api_key.as_deref();
        let authorization = authorization(key, self.api_key_from_env)?;
        let user_agent = match &self.user_agent {
            Some(agent) => HeaderValue::from_str(agent)
                .map_err(|_| Error::config("the user agent is not a valid HTTP header value"))?,
            None => {
                HeaderValue::from_static(concat!("petstore-client/", env!("CARGO_PKG_VERSION")))
            }
        };
        let (http, connect_timeout) = match (self.http_client, self.connect_timeout) {
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "connect_timeout has no effect on a supplied http_client: set it on that client",
                ));
            }
            (Some(client), None) => (client, None),
            (None, timeout) => {
                let timeout = timeout.unwrap_or(Some(DEFAULT_CONNECT_TIMEOUT));
                let mut builder =
                    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
                if let Some(timeout) = timeout {
                    builder = builder.connect_timeout(timeout);
                }
                let client = builder
                    .build()
                    .map_err(|e| Error::config_caused("cannot create the HTTP client", e))?;
                (client, timeout)
            }
        };
        let rate = RateLimiter::new(
            self.rate_limit_scope,
            self.pacing,
            &base_url,
            key.unwrap_or_default(),
            self.store.clone(),
        );
        let pets_url = base_url
            .join("pets")
            .map_err(|e| Error::config_caused("cannot form the pets URL", e))?;
        #[cfg(feature = "metrics")]
        let meter = crate::meter::Meter::new(
            base_url.host_str().unwrap_or_default(),
            base_url.port_or_known_default(),
        );
        Ok(PetStoreClient {
            inner: Arc::new(Inner {
                http,
                base_url,
                pets_url,
                headers: RequestHeaders::new(authorization, user_agent),
                connect_timeout,
                attempt_timeout: self.attempt_timeout,
                call_timeout: self.call_timeout,
                retry: self.retry,
                retry_window: RetryWindow::new(),
                retried: AtomicU64::new(0),
                max_response_body: self.max_response_body,
                rate,
                #[cfg(feature = "metrics")]
                meter,
            }),
        })
    }

    /// A zero timeout or body limit, which would fail every call.
    fn refuse_zero_limits(&self) -> Result<()> {
        let zero = Some(Duration::ZERO);
        let timeouts = [
            ("connect_timeout", self.connect_timeout.flatten()),
            ("attempt_timeout", self.attempt_timeout),
            ("call_timeout", self.call_timeout),
        ];
        if let Some((name, _)) = timeouts.iter().find(|(_, timeout)| *timeout == zero) {
            return Err(Error::config(format!(
                "{name} is zero, which fails every call: give a longer one, or None for no limit"
            )));
        }
        if self.max_response_body == 0 {
            return Err(Error::config(
                "max_response_body is zero, which refuses every body: give a size in bytes",
            ));
        }
        Ok(())
    }

    fn parse_base_url(&self) -> Result<Url> {
        let given = self.base_url.as_deref().ok_or_else(|| {
            Error::config(format!(
                "no base URL: call base_url() or set {BASE_URL_ENV}"
            ))
        })?;
        let variable = if self.base_url_from_env {
            format!(" from {BASE_URL_ENV}")
        } else {
            String::new()
        };
        let Some(shown) = shown(given) else {
            return Err(Error::config(format!(
                "the base URL{variable} has no `://` (it is not shown, as it may be a secret): \
                 write it as https://host/v1"
            )));
        };
        let the_url = format!("the base URL `{shown}`{variable}");
        let mut url = Url::parse(given.trim())
            .map_err(|e| Error::config_caused(format!("{the_url} is not a valid URL"), e))?;
        // reqwest would send them as a second `Authorization` header (Basic) beside the key.
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Error::config(format!(
                "{the_url} must not contain a user name or password: \
                 the client authenticates with the API key alone"
            )));
        }
        if url.cannot_be_a_base() || !matches!(url.scheme(), "http" | "https") {
            return Err(Error::config(format!(
                "{the_url} must be an http or https URL that can take paths"
            )));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(Error::config(format!(
                "{the_url} must not have a query or fragment"
            )));
        }
        let last_segment = url.path().trim_end_matches('/').rsplit('/').next();
        if last_segment != Some("v1") {
            return Err(Error::config(format!(
                "{the_url} must end in the API version segment `/v1`"
            )));
        }
        if url.scheme() == "http" && !self.allow_insecure_http && !is_loopback(&url) {
            return Err(Error::config(format!(
                "refusing to send the API key in clear text to `{shown}`: use https, or allow_insecure_http(true)"
            )));
        }
        // Without TLS, reqwest would only fail each attempt with "could not connect". A supplied
        // client is trusted: the application may have enabled TLS in its own reqwest.
        #[cfg(not(any(feature = "rustls", feature = "native-tls")))]
        if url.scheme() == "https" && self.http_client.is_none() {
            return Err(Error::config(
                "this build of petstore-client has no TLS: enable the `rustls` or `native-tls` feature, or use http:// to loopback",
            ));
        }
        // Exactly one trailing slash, so that `pets` joins as `/v1/pets`.
        let path = format!("{}/", url.path().trim_end_matches('/'));
        url.set_path(&path);
        Ok(url)
    }
}

/// The base URL as errors and `Debug` show it: a user name or password in it masked as `***`,
/// a query or fragment as `?…` or `#…`; `None` for text without `://`, which may be the API key
/// given in its place. In text that is not a URL with a host, everything before the last `@` is
/// masked, as it may be credentials.
fn shown(raw: &str) -> Option<Cow<'_, str>> {
    if !raw.contains("://") {
        return None;
    }
    Some(match Url::parse(raw.trim()) {
        Ok(url)
            if url.has_host()
                && url.username().is_empty()
                && url.password().is_none()
                && url.query().is_none()
                && url.fragment().is_none() =>
        {
            raw.into()
        }
        Ok(mut url) if url.has_host() => {
            if !url.username().is_empty() || url.password().is_some() {
                // Neither fails on a URL with a host.
                let _ = url.set_password(None);
                let _ = url.set_username("***");
            }
            // A query or fragment may hold a token too: only that there is one is shown.
            let cut = [
                ("?…", url.query().is_some()),
                ("#…", url.fragment().is_some()),
            ];
            url.set_query(None);
            url.set_fragment(None);
            let mut shown = url.to_string();
            shown.extend(cut.iter().filter(|(_, had)| *had).map(|(mark, _)| *mark));
            shown.into()
        }
        _ => match raw.rfind('@') {
            Some(at) => {
                let start = raw
                    .find("://")
                    .map(|scheme| scheme + 3)
                    .filter(|&start| start <= at)
                    .unwrap_or(0);
                format!("{}***{}", &raw[..start], &raw[at..]).into()
            }
            None => raw.into(),
        },
    })
}

/// The `Authorization` header value, built once; marked sensitive so that `http` and
/// `reqwest` never print it. A key `from_env` is named by its variable in errors: the user may
/// not know that it is set, or set it empty.
fn authorization(key: Option<&str>, from_env: bool) -> Result<HeaderValue> {
    let key = key
        .ok_or_else(|| Error::config(format!("no API key: call api_key() or set {API_KEY_ENV}")))?;
    let the_key = if from_env {
        format!("the API key from {API_KEY_ENV}")
    } else {
        "the API key".to_owned()
    };
    if key.trim().is_empty() {
        return Err(Error::config(format!("{the_key} is empty")));
    }
    let unsendable = || {
        Error::config(format!(
            "{the_key} contains characters that cannot be sent in an HTTP header"
        ))
    };
    // `HeaderValue` accepts a tab, which would cut the bearer token short on the server, and
    // bytes past ASCII, which servers read in encodings of their own.
    if !key.chars().all(|c| c.is_ascii() && !c.is_ascii_control()) {
        return Err(unsendable());
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| unsendable())?;
    value.set_sensitive(true);
    Ok(value)
}

impl fmt::Debug for PetStoreClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PetStoreClientBuilder")
            .field(
                "base_url",
                &(self.base_url.as_deref()).map(|url| shown(url).unwrap_or("<not shown>".into())),
            )
            .field("api_key", &self.api_key.as_ref().map(|_| Redacted))
            .field("connect_timeout", &self.connect_timeout)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("user_agent", &self.user_agent)
            .field("http_client", &self.http_client.is_some())
            .field("retry", &self.retry)
            .field("pacing", &self.pacing)
            .field("rate_limit_scope", &self.rate_limit_scope)
            .field("shared_state", &self.store)
            .field("max_response_body", &self.max_response_body)
            .field("allow_insecure_http", &self.allow_insecure_http)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shown_base_url_never_contains_credentials() {
        for raw in [
            "https://user:hunter2@petstore.example.com/v1",
            "https://hunter2@petstore.example.com/v1",
            "https://user:hunter2@petstore.example.com:99999/v1",
            "https://user:hunter2/x@petstore.example.com/v1",
            "https://user:hunter2#x@petstore.example.com/v1",
            "https:user:hunter2@petstore.example.com/v1",
            "user:hunter2@petstore.example.com/v1",
            "user:hunter2@petstore.example.com://v1",
        ] {
            let Some(shown) = shown(raw) else {
                assert!(!raw.contains("://"), "{raw} was not shown");
                continue;
            };
            assert!(!shown.contains("hunter2"), "{raw} was shown as {shown}");
            assert!(shown.contains("***@"), "{raw} was shown as {shown}");
        }
        let plain = "https://petstore.example.com/v1";
        assert_eq!(shown(plain).as_deref(), Some(plain));
        assert_eq!(shown("sk_live_0123456789"), None);
    }
}
