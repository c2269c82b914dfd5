//! [`CallInfo`]: how one call went, on the value it returns, so that a user can log it or put
//! it in a span without a metrics stack.

use std::fmt;
use std::time::Duration;

/// How a call went: the requests it sent, how long the rate discipline held it and why, how
/// long it slept between retries, how long it took in all, and the service clock's offset.
///
/// [`Response::call_info`](crate::Response::call_info) and
/// [`Error::call_info`](crate::Error::call_info) return it.
///
/// ```no_run
/// # async fn run(client: petstore_client::PetStoreClient) -> petstore_client::Result<()> {
/// let response = client.list_pets().send_with_meta().await?;
/// let call = response.call_info();
/// if let Some(cause) = call.hold_cause() {
///     println!("held {:?} in all, longest by {cause}", call.held());
/// }
/// println!("{} attempts in {:?}", call.attempts(), call.elapsed());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct CallInfo {
    attempts: u32,
    held: Duration,
    hold_cause: Option<HoldCause>,
    backoff: Duration,
    elapsed: Duration,
    /// Whole milliseconds, so that the struct stays `Eq`.
    clock_offset_ms: Option<i64>,
}

impl CallInfo {
    /// A call that made `attempts` requests and took no measured time.
    pub(crate) fn of_attempts(attempts: u32) -> Self {
        Self {
            attempts,
            ..Self::default()
        }
    }

    pub(crate) fn new(
        attempts: u32,
        held: Duration,
        hold_cause: Option<HoldCause>,
        backoff: Duration,
        elapsed: Duration,
        clock_offset: Option<f64>,
    ) -> Self {
        Self {
            attempts,
            held,
            hold_cause,
            backoff,
            elapsed,
            clock_offset_ms: clock_offset.map(|secs| (secs * 1000.0).round() as i64),
        }
    }

    /// How many requests the call sent (zero when it failed before sending).
    ///
    /// ```
    /// # fn show(call: &petstore_client::CallInfo) {
    /// if call.attempts() > 1 {
    ///     println!("retried {} times", call.attempts() - 1);
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How long the rate discipline held the call's requests before sending them, in all.
    ///
    /// ```
    /// # fn show(call: &petstore_client::CallInfo) {
    /// println!("held {:?} by the rate limits", call.held());
    /// # }
    /// ```
    #[must_use]
    pub fn held(&self) -> Duration {
        self.held
    }

    /// What held the call longest without a break; `None` when it was never held.
    ///
    /// ```
    /// use petstore_client::HoldCause;
    ///
    /// # fn show(call: &petstore_client::CallInfo) {
    /// if call.hold_cause() == Some(HoldCause::Cooldown) {
    ///     println!("the service asked for quiet");
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn hold_cause(&self) -> Option<HoldCause> {
        self.hold_cause
    }

    /// How long the call slept between its attempts (the retry policy's backoff, or the wait
    /// a `Retry-After` asked for), in all.
    ///
    /// ```
    /// # fn show(call: &petstore_client::CallInfo) {
    /// println!("slept {:?} between retries", call.backoff());
    /// # }
    /// ```
    #[must_use]
    pub fn backoff(&self) -> Duration {
        self.backoff
    }

    /// How long the call took from its start to its last response (or to its failure), holds
    /// and retries included.
    ///
    /// ```
    /// # fn show(call: &petstore_client::CallInfo) {
    /// println!("the call took {:?}", call.elapsed());
    /// # }
    /// ```
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// How far the service's clock was ahead of this machine's (negative: behind), to the
    /// millisecond, as the client read it from the `Date` header of the call's last response;
    /// the client places the service's reset times and HTTP-date `Retry-After`s by it. `None`
    /// when no response with a `Date` it could read arrived.
    ///
    /// ```
    /// # fn show(call: &petstore_client::CallInfo) {
    /// if let Some(offset) = call.server_clock_offset() {
    ///     if offset.abs() > chrono::TimeDelta::seconds(5) {
    ///         println!("the service's clock is {} ms off ours", offset.num_milliseconds());
    ///     }
    /// }
    /// # }
    /// ```
    #[must_use]
    pub fn server_clock_offset(&self) -> Option<chrono::TimeDelta> {
        self.clock_offset_ms.map(chrono::TimeDelta::milliseconds)
    }
}

/// Why the rate discipline held a call, in [`CallInfo::hold_cause`].
///
/// ```
/// use petstore_client::HoldCause;
///
/// assert_eq!(HoldCause::Cooldown.as_str(), "cooldown");
/// assert_eq!(HoldCause::SpentWindow.to_string(), "spent_window");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldCause {
    /// The service asked for quiet (a 429, or a 503 with `Retry-After`), and every request on
    /// the key waits it out.
    Cooldown,
    /// Another request was finding out the budget (at the start, after a window ended, or
    /// after a cooldown); this one waited for its answer.
    Probe,
    /// The budget was being spread over the window.
    Pacing,
    /// A window's budget was spent; the call waited for the window to end.
    SpentWindow,
    /// The state the fleet shares (with the `redis` feature) held it.
    SharedStore,
    /// It waited its turn behind earlier calls on the key that were held.
    Queue,
}

impl HoldCause {
    /// A short lowercase name, as a log field or metric label: `cooldown`, `probe`, `pacing`,
    /// `spent_window`, `shared_store`, `queue`.
    ///
    /// ```
    /// assert_eq!(petstore_client::HoldCause::Pacing.as_str(), "pacing");
    /// ```
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cooldown => "cooldown",
            Self::Probe => "probe",
            Self::Pacing => "pacing",
            Self::SpentWindow => "spent_window",
            Self::SharedStore => "shared_store",
            Self::Queue => "queue",
        }
    }
}

impl fmt::Display for HoldCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
