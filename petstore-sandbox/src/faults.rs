//! Fault injection: latency, error statuses, dropped connections and broken bodies.

use std::time::Duration;

/// A route of the API, for faults and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Route {
    /// `GET /v1/pets` (listPets).
    ListPets,
    /// `POST /v1/pets` (createPet).
    CreatePet,
    /// `GET /v1/pets/{petId}` (getPet).
    GetPet,
}

/// A fault the sandbox injects into matching requests, after authentication and rate limiting
/// (so a faulted request counts against the key's quota, as on a server that failed after
/// accepting it).
///
/// Build one with a constructor, narrow it with [`route`](Self::route), delay it with
/// [`skip`](Self::skip), and bound it with [`times`](Self::times) or
/// [`fraction`](Self::fraction) (by default it applies to every matching request until
/// [`Sandbox::clear_faults`](super::Sandbox::clear_faults)):
///
/// ```
/// use std::time::Duration;
/// use petstore_sandbox::{Fault, Route};
///
/// let outage = Fault::status(503).retry_after(2).route(Route::ListPets).times(3);
/// let slow = Fault::latency(Duration::from_millis(250)).fraction(0.1);
/// let flaky = Fault::drop_connection().route(Route::CreatePet).times(1);
/// let odd_429 = Fault::status(429).retry_after_value("1.5").times(1);
/// let proxy_page = Fault::non_json_body(502).without_rate_limit_headers();
/// let cut_503 = Fault::status(503).retry_after(1).cut_body();
/// // The 5th request is slow, the 6th is told to wait: the 5th answers during the wait.
/// let late = Fault::latency(Duration::from_secs(5)).skip(4).times(1);
/// let limited = Fault::status(429).retry_after(10).skip(5).times(1);
/// ```
///
/// An injected 429 acts like a real one: its `Retry-After` starts the key's cooldown, and
/// requests during it strike toward the ban (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Fault {
    pub(super) kind: FaultKind,
    pub(super) route: Option<Route>,
    pub(super) remaining: Option<u64>,
    pub(super) skip: u64,
    pub(super) fraction: Option<f64>,
    pub(super) rate_limit_headers: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum FaultKind {
    Latency(Duration),
    Status {
        status: u16,
        /// The `Retry-After` text, exactly as sent.
        retry_after: Option<String>,
        cut_body: bool,
    },
    DropConnection,
    TruncatedBody,
    NonJsonBody {
        status: u16,
    },
}

impl Fault {
    fn new(kind: FaultKind) -> Self {
        Self {
            kind,
            route: None,
            remaining: None,
            skip: 0,
            fraction: None,
            rate_limit_headers: true,
        }
    }

    /// Delays the response by `delay` (on tokio's clock), then answers normally.
    pub fn latency(delay: Duration) -> Self {
        Self::new(FaultKind::Latency(delay))
    }

    /// Answers `status` (such as 500, 502, 503 or 504) with the error object, without doing
    /// the work.
    pub fn status(status: u16) -> Self {
        Self::new(FaultKind::Status {
            status,
            retry_after: None,
            cut_body: false,
        })
    }

    /// Closes the connection without answering, as a crashed server or a proxy would.
    pub fn drop_connection() -> Self {
        Self::new(FaultKind::DropConnection)
    }

    /// Does the work, then sends the headers and half of the body, and closes the connection
    /// although `Content-Length` promised more.
    pub fn truncated_body() -> Self {
        Self::new(FaultKind::TruncatedBody)
    }

    /// Answers an HTML page instead of JSON, with `status` (200 for a success that is not
    /// JSON, 502 for a proxy's error page).
    pub fn non_json_body(status: u16) -> Self {
        Self::new(FaultKind::NonJsonBody { status })
    }

    /// With a [`status`](Self::status) fault: adds `Retry-After: <seconds>`. With status 429,
    /// the key must then wait that long, as after a real 429.
    pub fn retry_after(self, seconds: u64) -> Self {
        self.retry_after_value(&seconds.to_string())
    }

    /// With a [`status`](Self::status) fault: adds `Retry-After` with exactly this text, such
    /// as `"1.5"`, `"soon"` or an HTTP-date, to test how a client reads what a server should
    /// not send. With status 429, a decimal number of seconds starts the key's cooldown,
    /// rounded up to whole seconds (`"1.5"`: 2 s); any other text starts none. A value that
    /// cannot be an HTTP header value (a control character) is left out.
    pub fn retry_after_value(mut self, value: &str) -> Self {
        if let FaultKind::Status { retry_after, .. } = &mut self.kind {
            *retry_after = Some(value.to_owned());
        }
        self
    }

    /// With a [`status`](Self::status) fault: sends the headers (`Retry-After` and the
    /// rate-limit headers included) and half of the error body, then closes the connection
    /// although `Content-Length` promised more.
    pub fn cut_body(mut self) -> Self {
        if let FaultKind::Status { cut_body, .. } = &mut self.kind {
            *cut_body = true;
        }
        self
    }

    /// With a [`status`](Self::status) or [`non_json_body`](Self::non_json_body) fault: the
    /// response carries no `X-RateLimit-*` headers, as a proxy's error page would not.
    pub fn without_rate_limit_headers(mut self) -> Self {
        self.rate_limit_headers = false;
        self
    }

    /// Only requests to this route.
    pub fn route(mut self, route: Route) -> Self {
        self.route = Some(route);
        self
    }

    /// Only the next `n` matching requests.
    pub fn times(mut self, n: u64) -> Self {
        self.remaining = Some(n);
        self
    }

    /// Lets the first `n` matching requests through untouched before it applies, so that
    /// faults can fall on chosen requests: a latency on one, a 429 on the next. Requests that
    /// the rate limiter refuses never reach the faults and are not counted.
    pub fn skip(mut self, n: u64) -> Self {
        self.skip = n;
        self
    }

    /// Only this fraction (0.0 to 1.0) of matching requests, drawn from a seeded generator so
    /// that runs repeat.
    pub fn fraction(mut self, fraction: f64) -> Self {
        self.fraction = Some(fraction.clamp(0.0, 1.0));
        self
    }
}

/// The faults in force, in the order they were injected.
#[derive(Debug)]
pub(super) struct Faults {
    active: Vec<Fault>,
    rng: fastrand::Rng,
}

/// The seed of the fraction draws: fixed, so a test's faults fall on the same requests.
const SEED: u64 = 0x5EED_FA17;

impl Default for Faults {
    fn default() -> Self {
        Self {
            active: Vec::new(),
            rng: fastrand::Rng::with_seed(SEED),
        }
    }
}

impl Faults {
    pub(super) fn inject(&mut self, fault: Fault) {
        self.active.push(fault);
    }

    pub(super) fn clear(&mut self) {
        self.active.clear();
    }

    /// The faults that apply to this request: at most one latency, then at most one other.
    pub(super) fn draw(&mut self, route: Option<Route>) -> (Option<Duration>, Option<Fault>) {
        let mut latency = None;
        let mut failure = None;
        for fault in &mut self.active {
            let is_latency = matches!(fault.kind, FaultKind::Latency(_));
            let taken = if is_latency {
                latency.is_some()
            } else {
                failure.is_some()
            };
            if taken || fault.remaining == Some(0) || fault.route.is_some_and(|r| Some(r) != route)
            {
                continue;
            }
            if fault.skip > 0 {
                fault.skip -= 1;
                continue;
            }
            if fault.fraction.is_some_and(|f| self.rng.f64() >= f) {
                continue;
            }
            if let Some(remaining) = &mut fault.remaining {
                *remaining -= 1;
            }
            match &fault.kind {
                FaultKind::Latency(delay) => latency = Some(*delay),
                _ => failure = Some(fault.clone()),
            }
        }
        self.active.retain(|f| f.remaining != Some(0));
        (latency, failure)
    }
}

impl FaultKind {
    /// How long an injected 429 tells its key to wait: its `Retry-After` as a decimal number
    /// of seconds, rounded up; `None` for another status or `Retry-After` text.
    pub(super) fn cooldown(&self) -> Option<Duration> {
        match self {
            Self::Status {
                status: 429,
                retry_after: Some(value),
                ..
            } => seconds_rounded_up(value).map(Duration::from_secs),
            _ => None,
        }
    }
}

/// `"2"` is 2, `"1.5"` is 2, `"0.0"` is 0; anything but digits with an optional fraction is
/// `None`.
fn seconds_rounded_up(value: &str) -> Option<u64> {
    let value = value.trim();
    let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.len() + fraction.len() == 0 || !digits(whole) || !digits(fraction) {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    whole.checked_add(u64::from(fraction.bytes().any(|b| b != b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_text_rounds_up_to_whole_seconds() {
        for (value, seconds) in [
            ("2", Some(2)),
            ("1.5", Some(2)),
            ("1.0", Some(1)),
            (" 3 ", Some(3)),
            (".2", Some(1)),
            ("0", Some(0)),
            ("soon", None),
            ("-1", None),
            ("1e3", None),
            ("", None),
            (".", None),
            ("Thu, 05 Dec 2030 00:00:00 GMT", None),
        ] {
            assert_eq!(seconds_rounded_up(value), seconds, "{value:?}");
        }
        let fault = |status: u16| Fault::status(status).retry_after_value("1.5").kind;
        assert_eq!(fault(429).cooldown(), Some(Duration::from_secs(2)));
        assert_eq!(fault(503).cooldown(), None, "only a 429 bans");
    }
}
