//! When and how long to retry: [`RetryPolicy`], the classification of an attempt's outcome,
//! and the delay schedule.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use http::{Method, StatusCode};

use crate::error::{Error, is_transient_status};
use crate::headers::{Quiet, Quota};
use crate::retry_budget::RetryBudget;

/// How a call retries: how many times, with which delays, and how long it honours a wait the
/// service asks for.
///
/// | setting | default | meaning |
/// | --- | --- | --- |
/// | [`max_retries`](Self::max_retries) | 3 | retries after the first attempt (so at most 4 requests) |
/// | [`initial_delay`](Self::initial_delay) | 500 ms | delay before the first retry |
/// | [`factor`](Self::factor) | 2 | each further delay is the previous one times this |
/// | [`max_delay`](Self::max_delay) | 8 s | no delay is longer |
/// | [`jitter`](Self::jitter) | on | each delay grows by a random amount of up to itself (still capped by `max_delay`), so that clients do not retry in lockstep |
/// | [`jitter_seed`](Self::jitter_seed) | none | the jitter is drawn from this seed, not at random, so that a test replays the same delays |
/// | [`max_server_wait`](Self::max_server_wait) | 120 s | the longest wait the client sits through when the service asks for quiet; a longer one fails the call at once with the rate-limited error |
/// | [`retry_budget`](Self::retry_budget) | 20% and 10 | the retries of all the client's calls together: at most a fifth of its recent answers, plus 10 (see [`RetryBudget`]) |
///
/// `Retry-After` is a floor: the delay before a retry is the longer of the wait the service asked
/// for and the exponential delay above (jitter only ever adds to it), so `Retry-After: 0` is
/// still backed off from, more at each attempt. A 429 without a readable `Retry-After` waits at
/// least 1 s. A retry also needs the client's retry budget, which every clone spends: when the
/// service fails most calls, their retries add at most a fifth of its recent answers and 10
/// more, and a call the budget refuses ends at once with the error it got. What is retried (`GET`
/// stands for every idempotent method, `POST` for the others, as in
/// [`PetStoreClient::request`](crate::PetStoreClient::request)):
///
/// | outcome | `GET` (list, get) | `POST` (create) |
/// | --- | --- | --- |
/// | 429 Too Many Requests | retried | retried: the request was not processed |
/// | 500, 502, 503, 504 | retried | not retried: it may have been processed |
/// | no connection (refused, unreachable, connect timeout) | retried | retried: nothing was sent |
/// | the host name does not resolve | not retried | not retried: it will not resolve a moment later |
/// | per-attempt timeout, dropped connection | retried | not retried: it may have been processed |
/// | any other status | not retried | not retried |
///
/// Build one with [`RetryPolicy::builder`], whose setters carry the names of the getters here.
/// Set it for a client with
/// [`PetStoreClientBuilder::retry_policy`](crate::PetStoreClientBuilder::retry_policy), or for
/// one call with the `retry_policy` method of every request builder.
///
/// ```
/// use std::time::Duration;
/// use petstore_client::RetryPolicy;
///
/// let patient = RetryPolicy::builder()
///     .max_retries(6)
///     .max_delay(Duration::from_secs(30))
///     .build();
/// assert_eq!(patient.max_retries(), 6);
/// assert_eq!(RetryPolicy::none().max_retries(), 0);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    max_retries: u32,
    initial_delay: Duration,
    factor: f32,
    max_delay: Duration,
    jitter: bool,
    jitter_seed: Option<u64>,
    max_server_wait: Duration,
    retry_budget: RetryBudget,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_delay: Duration::from_millis(500),
            factor: 2.0,
            max_delay: Duration::from_secs(8),
            jitter: true,
            jitter_seed: None,
            max_server_wait: Duration::from_secs(120),
            retry_budget: RetryBudget::default(),
        }
    }
}

impl RetryPolicy {
    /// A builder, with every setting at its default.
    ///
    /// ```
    /// use petstore_client::RetryPolicy;
    ///
    /// assert_eq!(RetryPolicy::builder().build(), RetryPolicy::default());
    /// ```
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::default()
    }

    /// A policy that never retries. The client still holds requests while the service asked
    /// for quiet, up to [`max_server_wait`](Self::max_server_wait).
    ///
    /// ```
    /// use petstore_client::RetryPolicy;
    ///
    /// assert_eq!(RetryPolicy::none().max_retries(), 0);
    /// ```
    #[must_use]
    pub fn none() -> Self {
        Self::builder().max_retries(0).build()
    }

    /// How many times a call is retried after its first attempt.
    #[must_use]
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The delay before the first retry.
    #[must_use]
    pub fn initial_delay(&self) -> Duration {
        self.initial_delay
    }

    /// The growth factor of the delays.
    #[must_use]
    pub fn factor(&self) -> f32 {
        self.factor
    }

    /// The longest delay between two attempts.
    #[must_use]
    pub fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// Whether delays are jittered.
    #[must_use]
    pub fn jitter(&self) -> bool {
        self.jitter
    }

    /// The seed the jitter is drawn from, if set; `None`: a random one for each call.
    #[must_use]
    pub fn jitter_seed(&self) -> Option<u64> {
        self.jitter_seed
    }

    /// The longest wait the client sits through when the service asks for quiet.
    #[must_use]
    pub fn max_server_wait(&self) -> Duration {
        self.max_server_wait
    }

    /// The retry budget the call's retries spend.
    #[must_use]
    pub fn retry_budget(&self) -> RetryBudget {
        self.retry_budget
    }

    /// The un-jittered delay after `n` failures in a row (`n` from 0): the cooldown's backoff
    /// when the service asks for quiet again and again. It stops growing after
    /// [`STEPS_COUNTED`] failures, long after the default reaches `max_delay`.
    pub(crate) fn step(&self, n: u32) -> Duration {
        let n = usize::try_from(n.min(STEPS_COUNTED)).unwrap_or(0);
        self.backoff()
            .without_max_times()
            .build()
            .nth(n)
            .map_or(self.max_delay, |delay| delay.min(self.max_delay))
    }

    /// The backoff crate's builder of this policy's delays, before a count or jitter is set.
    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::new()
            .with_min_delay(self.initial_delay)
            .with_factor(self.factor)
            .with_max_delay(self.max_delay)
    }

    /// The delays of the retries of the `call`-th call of a client to retry, in order; it ends
    /// after `max_retries` delays.
    pub(crate) fn schedule(&self, call: u64) -> Schedule {
        let mut builder = self
            .backoff()
            .with_max_times(usize::try_from(self.max_retries).unwrap_or(usize::MAX));
        if self.jitter {
            builder = builder.with_jitter();
            if let Some(seed) = self.jitter_seed {
                builder = builder.with_jitter_seed(mix(seed, call));
            }
        }
        Schedule {
            delays: builder.build(),
            max_delay: self.max_delay,
        }
    }
}

/// The setters of 0.1, kept so that code written for it compiles, with a warning.
impl RetryPolicy {
    /// Sets how many times a call is retried after its first attempt.
    #[deprecated(
        since = "0.3.0",
        note = "use `RetryPolicy::builder().max_retries(n).build()`"
    )]
    #[must_use]
    pub fn with_max_retries(self, max_retries: u32) -> Self {
        RetryPolicyBuilder { policy: self }
            .max_retries(max_retries)
            .build()
    }

    /// Sets the delay before the first retry.
    #[deprecated(
        since = "0.3.0",
        note = "use `RetryPolicy::builder().initial_delay(d).build()`"
    )]
    #[must_use]
    pub fn with_initial_delay(self, delay: Duration) -> Self {
        RetryPolicyBuilder { policy: self }
            .initial_delay(delay)
            .build()
    }

    /// Sets the factor each delay is multiplied by, at least 1.
    #[deprecated(
        since = "0.3.0",
        note = "use `RetryPolicy::builder().factor(f).build()`"
    )]
    #[must_use]
    pub fn with_factor(self, factor: f32) -> Self {
        RetryPolicyBuilder { policy: self }.factor(factor).build()
    }

    /// Sets the longest delay between two attempts.
    #[deprecated(
        since = "0.3.0",
        note = "use `RetryPolicy::builder().max_delay(d).build()`"
    )]
    #[must_use]
    pub fn with_max_delay(self, delay: Duration) -> Self {
        RetryPolicyBuilder { policy: self }.max_delay(delay).build()
    }

    /// Sets whether delays are jittered.
    #[deprecated(
        since = "0.3.0",
        note = "use `RetryPolicy::builder().jitter(on).build()`"
    )]
    #[must_use]
    pub fn with_jitter(self, jitter: bool) -> Self {
        RetryPolicyBuilder { policy: self }.jitter(jitter).build()
    }

    /// Sets the longest a call waits for the rate limit in all.
    #[deprecated(
        since = "0.3.0",
        note = "use `RetryPolicy::builder().max_server_wait(d).build()`"
    )]
    #[must_use]
    pub fn with_max_server_wait(self, wait: Duration) -> Self {
        RetryPolicyBuilder { policy: self }
            .max_server_wait(wait)
            .build()
    }
}

/// Builds a [`RetryPolicy`]; every setting not set keeps its default (see the table there).
///
/// ```
/// use std::time::Duration;
/// use petstore_client::RetryPolicy;
///
/// let patient = RetryPolicy::builder()
///     .max_retries(6)
///     .max_delay(Duration::from_secs(30))
///     .build();
/// assert_eq!(patient.max_retries(), 6);
/// assert_eq!(patient.max_delay(), Duration::from_secs(30));
/// ```
#[must_use]
#[derive(Debug, Clone, Default)]
pub struct RetryPolicyBuilder {
    policy: RetryPolicy,
}

impl RetryPolicyBuilder {
    /// Sets how many times a call is retried after its first attempt.
    ///
    /// ```
    /// let policy = petstore_client::RetryPolicy::builder().max_retries(5).build();
    /// assert_eq!(policy.max_retries(), 5);
    /// ```
    pub fn max_retries(mut self, max_retries: u32) -> Self {
        self.policy.max_retries = max_retries;
        self
    }

    /// Sets the delay before the first retry.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let policy = petstore_client::RetryPolicy::builder()
    ///     .initial_delay(Duration::from_millis(100))
    ///     .build();
    /// assert_eq!(policy.initial_delay(), Duration::from_millis(100));
    /// ```
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.policy.initial_delay = delay;
        self
    }

    /// Sets the growth factor of the delays; values below 1 (or NaN) are taken as 1, a
    /// constant delay.
    ///
    /// ```
    /// let policy = petstore_client::RetryPolicy::builder().factor(0.5).build();
    /// assert_eq!(policy.factor(), 1.0);
    /// ```
    pub fn factor(mut self, factor: f32) -> Self {
        self.policy.factor = if factor >= 1.0 { factor } else { 1.0 };
        self
    }

    /// Sets the longest delay between two attempts.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let policy = petstore_client::RetryPolicy::builder()
    ///     .max_delay(Duration::from_secs(2))
    ///     .build();
    /// assert_eq!(policy.max_delay(), Duration::from_secs(2));
    /// ```
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.policy.max_delay = delay;
        self
    }

    /// Turns the random jitter on or off.
    ///
    /// ```
    /// let policy = petstore_client::RetryPolicy::builder().jitter(false).build();
    /// assert!(!policy.jitter());
    /// ```
    pub fn jitter(mut self, jitter: bool) -> Self {
        self.policy.jitter = jitter;
        self
    }

    /// Draws the jitter from `seed` rather than at random, so that a test on a paused clock
    /// replays the same delays: each call of a client draws a sequence of its own, by the
    /// order in which the client's calls (its clones' included) first retry.
    ///
    /// ```
    /// let policy = petstore_client::RetryPolicy::builder().jitter_seed(7).build();
    /// assert_eq!(policy.jitter_seed(), Some(7));
    /// ```
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.policy.jitter_seed = Some(seed);
        self
    }

    /// Sets the longest wait the client sits through when the service asks for quiet
    /// (`Retry-After`, or a spent quota).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let policy = petstore_client::RetryPolicy::builder()
    ///     .max_server_wait(Duration::from_secs(10))
    ///     .build();
    /// assert_eq!(policy.max_server_wait(), Duration::from_secs(10));
    /// ```
    pub fn max_server_wait(mut self, wait: Duration) -> Self {
        self.policy.max_server_wait = wait;
        self
    }

    /// Sets the retry budget the call's retries spend, shared by every clone of the client.
    ///
    /// ```
    /// use petstore_client::{RetryBudget, RetryPolicy};
    ///
    /// let policy = RetryPolicy::builder()
    ///     .retry_budget(RetryBudget::unlimited())
    ///     .build();
    /// assert_eq!(policy.retry_budget(), RetryBudget::unlimited());
    /// ```
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.policy.retry_budget = budget;
        self
    }

    /// The policy.
    ///
    /// ```
    /// let policy = petstore_client::RetryPolicy::builder().build();
    /// assert_eq!(policy.max_retries(), 3);
    /// ```
    #[must_use]
    pub fn build(self) -> RetryPolicy {
        self.policy
    }
}

/// The jitter seed of a client's `call`-th call under `seed` (splitmix64's finaliser), so that
/// neighbouring calls draw unrelated sequences.
fn mix(seed: u64, call: u64) -> u64 {
    let mut z = seed ^ call.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The failures in a row after which [`RetryPolicy::step`] stops growing.
const STEPS_COUNTED: u32 = 64;

/// The retry delays of one call.
pub(crate) struct Schedule {
    delays: ExponentialBackoff,
    max_delay: Duration,
}

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        // backon caps before adding jitter; the policy promises no delay above `max_delay`.
        self.delays.next().map(|delay| delay.min(self.max_delay))
    }
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// The outcome is final: a success, or an error not worth retrying.
    Finish,
    /// Retry, after at least `floor` (the quiet the service asked for, if it did).
    Retry { floor: Duration },
}

/// Classifies a response status: 429 is safe to retry (the request was not processed), unless
/// the window it reports allows no request at all (`X-RateLimit-Limit: 0`), when retrying
/// only queues the call behind one refused request per window; 5xx only for methods that may
/// be repeated.
pub(crate) fn classify_status(
    method: &Method,
    status: StatusCode,
    quiet: Option<Quiet>,
    quota: Option<Quota>,
) -> Action {
    let floor = quiet.map_or(Duration::ZERO, Quiet::wait);
    match status {
        StatusCode::TOO_MANY_REQUESTS if quota.is_some_and(|q| q.limit == 0) => Action::Finish,
        StatusCode::TOO_MANY_REQUESTS => Action::Retry { floor },
        _ if is_transient_status(status) && is_repeatable(method) => Action::Retry { floor },
        _ => Action::Finish,
    }
}

/// An attempt that ended without a response.
pub(crate) struct Failure {
    pub(crate) error: Error,
    /// The host name did not resolve (a connect error).
    pub(crate) unresolved: bool,
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Self {
            error,
            unresolved: false,
        }
    }
}

/// Classifies a failure with no response. A failed connect sent nothing, so it is retried for
/// every method, unless the host name did not resolve: a name that does not resolve now will
/// not a few seconds later, and the caller should hear of it at once. After a timeout or a
/// dropped connection the service may have processed the request (created the pet), so only
/// a method that may be repeated is sent again.
pub(crate) fn classify_failure(method: &Method, failure: &Failure) -> Action {
    let error = &failure.error;
    let retry = if error.is_connect() {
        !failure.unresolved
    } else {
        error.is_transient_failure() && is_repeatable(method)
    };
    if retry {
        Action::Retry {
            floor: Duration::ZERO,
        }
    } else {
        Action::Finish
    }
}

fn is_repeatable(method: &Method) -> bool {
    method.is_idempotent()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    use crate::error::TimeoutKind;

    #[test]
    #[allow(deprecated)]
    fn the_setters_of_0_1_set_what_the_builder_sets() {
        let old = RetryPolicy::none()
            .with_max_retries(5)
            .with_initial_delay(Duration::from_millis(10))
            .with_factor(0.5)
            .with_max_delay(Duration::from_secs(1))
            .with_jitter(false)
            .with_max_server_wait(Duration::from_secs(7));
        let new = RetryPolicy::builder()
            .max_retries(5)
            .initial_delay(Duration::from_millis(10))
            .factor(0.5)
            .max_delay(Duration::from_secs(1))
            .jitter(false)
            .max_server_wait(Duration::from_secs(7))
            .retry_budget(RetryPolicy::none().retry_budget())
            .build();
        assert_eq!(
            old, new,
            "each 0.1 setter sets what its builder setter does"
        );
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn delays_grow_exponentially_up_to_the_cap() {
        let policy = RetryPolicy::builder().jitter(false).max_retries(7).build();
        let delays: Vec<_> = policy.schedule(0).collect();
        assert_eq!(
            delays,
            [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0].map(secs).to_vec()
        );
    }

    #[test]
    fn jittered_delays_stay_between_the_step_and_the_cap() {
        let policy = RetryPolicy::builder().max_retries(6).build();
        for _ in 0..200 {
            let steps = [0.5, 1.0, 2.0, 4.0, 8.0, 8.0].map(secs);
            for (delay, step) in policy.schedule(0).zip(steps) {
                assert!(delay >= step, "{delay:?} < {step:?}");
                assert!(delay <= (step * 2).min(secs(8.0)), "{delay:?} > cap");
            }
        }
    }

    #[test]
    fn a_jitter_seed_replays_each_calls_delays_and_calls_draw_apart() {
        let seeded = |seed| {
            RetryPolicy::builder()
                .max_retries(8)
                .jitter_seed(seed)
                .build()
        };
        let delays = |policy: &RetryPolicy, call| policy.schedule(call).collect::<Vec<_>>();
        let policy = seeded(7);
        assert_eq!(delays(&policy, 3), delays(&seeded(7), 3));
        assert_ne!(delays(&policy, 3), delays(&policy, 4));
        assert_ne!(delays(&policy, 3), delays(&seeded(8), 3));
        // Unseeded, two draws of one call differ: the jitter is random.
        let random = RetryPolicy::builder().max_retries(8).build();
        assert_ne!(delays(&random, 3), delays(&random, 3));
    }

    #[test]
    fn schedule_is_overflow_safe_at_any_attempt_count() {
        let policy = RetryPolicy::builder()
            .max_retries(u32::MAX)
            .factor(f32::MAX)
            .initial_delay(Duration::MAX)
            .max_delay(Duration::MAX)
            .build();
        let delays: Vec<_> = policy.schedule(0).take(1000).collect();
        assert_eq!(delays.len(), 1000);
        assert!(delays.iter().all(|d| *d == Duration::MAX));
    }

    #[test]
    fn none_never_retries() {
        assert_eq!(RetryPolicy::none().schedule(0).next(), None);
    }

    #[test]
    fn factor_below_one_is_constant() {
        let policy = RetryPolicy::builder().jitter(false).factor(0.1).build();
        assert_eq!(policy.factor(), 1.0);
        assert!(policy.schedule(0).all(|d| d == secs(0.5)));
        assert_eq!(
            RetryPolicy::builder().factor(f32::NAN).build().factor(),
            1.0
        );
    }

    #[test]
    fn steps_grow_without_jitter_up_to_the_cap() {
        let policy = RetryPolicy::default();
        let steps: Vec<_> = (0..7).map(|n| policy.step(n)).collect();
        assert_eq!(
            steps,
            [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0].map(secs).to_vec()
        );
        assert_eq!(policy.step(u32::MAX), secs(8.0));
    }

    #[test]
    fn statuses_are_classified_by_method() {
        let three = Duration::from_secs(3);
        let wait = Some(Quiet::Unavailable(three));
        for status in [500, 502, 503, 504] {
            let status = StatusCode::from_u16(status).unwrap();
            assert_eq!(
                classify_status(&Method::GET, status, wait, None),
                Action::Retry { floor: three }
            );
            assert_eq!(
                classify_status(&Method::POST, status, wait, None),
                Action::Finish
            );
        }
        for method in [Method::GET, Method::POST] {
            assert_eq!(
                classify_status(&method, StatusCode::TOO_MANY_REQUESTS, wait, None),
                Action::Retry { floor: three }
            );
            for status in [200, 201, 400, 401, 404, 409, 501] {
                let status = StatusCode::from_u16(status).unwrap();
                assert_eq!(classify_status(&method, status, None, None), Action::Finish);
            }
        }
    }

    #[test]
    fn a_429_from_a_window_that_allows_nothing_is_not_retried() {
        let reset = chrono::DateTime::from_timestamp(1_000, 0).unwrap();
        let quiet = Some(Quiet::RateLimited(Duration::from_secs(30)));
        let limited = StatusCode::TOO_MANY_REQUESTS;
        let none = Some(Quota::new(0, 0, reset));
        assert_eq!(
            classify_status(&Method::GET, limited, quiet, none),
            Action::Finish
        );
        let spent = Some(Quota::new(60, 0, reset));
        assert_eq!(
            classify_status(&Method::GET, limited, quiet, spent),
            Action::Retry {
                floor: Duration::from_secs(30)
            }
        );
    }

    #[test]
    fn a_failed_connect_is_retried_for_every_method_and_others_for_get_only() {
        let retry = Action::Retry {
            floor: Duration::ZERO,
        };
        let connect_failures = [
            Error::connect(
                "127.0.0.1:9".to_owned(),
                io::Error::from(io::ErrorKind::ConnectionRefused),
            ),
            Error::timeout(TimeoutKind::Connect, Some(Duration::from_secs(1))),
        ];
        for failure in connect_failures.map(Failure::from) {
            assert_eq!(classify_failure(&Method::GET, &failure), retry);
            assert_eq!(classify_failure(&Method::POST, &failure), retry);
        }
        let after_sending = [
            Error::connection(
                "127.0.0.1:9".to_owned(),
                io::Error::from(io::ErrorKind::ConnectionReset),
            ),
            Error::timeout(TimeoutKind::Attempt, Some(Duration::from_secs(1))),
        ];
        for failure in after_sending.map(Failure::from) {
            assert_eq!(classify_failure(&Method::GET, &failure), retry);
            assert_eq!(classify_failure(&Method::POST, &failure), Action::Finish);
        }
        let call_timeout = Failure::from(Error::timeout(
            TimeoutKind::Call,
            Some(Duration::from_secs(1)),
        ));
        assert_eq!(
            classify_failure(&Method::GET, &call_timeout),
            Action::Finish
        );
    }

    #[test]
    fn a_host_name_that_does_not_resolve_is_not_retried() {
        let unresolved = Failure {
            error: Error::connect(
                "petstore.invalid:443".to_owned(),
                io::Error::other("failed to lookup address information: Name or service not known"),
            ),
            unresolved: true,
        };
        for method in [Method::GET, Method::POST] {
            assert_eq!(classify_failure(&method, &unresolved), Action::Finish);
        }
    }
}
