//! What a response head says beyond its body: the rate-limit quota, `Retry-After` and the
//! quiet it asks for, and the deprecation notice. Parsers only: what the client does about
//! them is decided above, in `rate` and `retry`.

mod deprecation;
mod quota;
mod retry_after;

use http::{HeaderMap, HeaderName};

pub use deprecation::Deprecation;
pub use quota::Quota;
pub(crate) use quota::{QuotaReading, ResetGiven};
pub(crate) use retry_after::{Quiet, quiet, retry_after};

/// The value of a header that appears exactly once, trimmed.
pub(crate) fn single<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    Some(value.to_str().ok()?.trim())
}

/// Strict decimal digits, the one integer syntax HTTP headers use: `u64::from_str` would also
/// take a leading `+`. `None` when the value is not digits or does not fit.
pub(crate) fn parse_digits(value: &str) -> Option<u64> {
    if is_digits(value) {
        value.parse().ok()
    } else {
        None
    }
}

pub(crate) fn is_digits(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())
}

/// Response heads and a service clock for the parsers' tests.
#[cfg(test)]
mod testing {
    use chrono::{DateTime, TimeZone, Utc};
    use http::{HeaderMap, HeaderValue};

    use crate::clock::ServerTime;

    pub(super) fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    pub(super) fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
    }

    /// The service's clock reads `now()`.
    pub(super) fn server() -> ServerTime {
        ServerTime::at_unix(now().timestamp(), tokio::time::Instant::now())
    }
}
