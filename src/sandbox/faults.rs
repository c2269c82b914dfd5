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
/// Build one with a constructor, narrow it with [`route`](Self::route), and bound it with
/// [`times`](Self::times) or [`fraction`](Self::fraction) (by default it applies to every
/// matching request until [`Sandbox::clear_faults`](super::Sandbox::clear_faults)):
///
/// ```
/// use std::time::Duration;
/// use petstore_client::sandbox::{Fault, Route};
///
/// let outage = Fault::status(503).retry_after(2).route(Route::ListPets).times(3);
/// let slow = Fault::latency(Duration::from_millis(250)).fraction(0.1);
/// let flaky = Fault::drop_connection().route(Route::CreatePet).times(1);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Fault {
    pub(super) kind: FaultKind,
    pub(super) route: Option<Route>,
    pub(super) remaining: Option<u64>,
    pub(super) fraction: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum FaultKind {
    Latency(Duration),
    Status {
        status: u16,
        retry_after: Option<u64>,
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
            fraction: None,
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

    /// With a [`status`](Self::status) fault: adds `Retry-After: <seconds>`.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        if let FaultKind::Status { retry_after, .. } = &mut self.kind {
            *retry_after = Some(seconds);
        }
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
    pub(super) fn draw(&mut self, route: Option<Route>) -> (Option<Duration>, Option<FaultKind>) {
        let mut latency = None;
        let mut failure = None;
        for fault in &mut self.active {
            let is_latency = matches!(fault.kind, FaultKind::Latency(_));
            let taken = if is_latency {
                latency.is_some()
            } else {
                failure.is_some()
            };
            if taken
                || fault.remaining == Some(0)
                || fault.route.is_some_and(|r| Some(r) != route)
                || fault.fraction.is_some_and(|f| self.rng.f64() >= f)
            {
                continue;
            }
            if let Some(remaining) = &mut fault.remaining {
                *remaining -= 1;
            }
            match &fault.kind {
                FaultKind::Latency(delay) => latency = Some(*delay),
                other => failure = Some(other.clone()),
            }
        }
        self.active.retain(|f| f.remaining != Some(0));
        (latency, failure)
    }
}
