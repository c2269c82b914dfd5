//! Rate-limit state reported by the service: the `X-RateLimit-*` headers and `Retry-After`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderName};

use crate::rate::ServerTime;

/// The rate-limit quota the service reported on a response.
///
/// Parsed from `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`, which the
/// service sends on every response, successful or not. When any of the three is missing,
/// repeated or malformed the response simply has no quota; that is never an error.
///
/// [`PetStoreClient::quota`](crate::PetStoreClient::quota) returns the latest one the client
/// saw; [`Response::quota`](crate::Response::quota) and [`Error::quota`](crate::Error::quota)
/// the one of a given call.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use petstore_client::Quota;
///
/// let reset = Utc.timestamp_opt(1_767_225_600, 0).unwrap();
/// let quota = Quota::new(60, 0, reset);
/// assert!(quota.is_exhausted());
/// assert_eq!(quota.used(), 60);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Quota {
    /// The request limit that applies to the caller in the current window.
    pub limit: u64,
    /// Requests remaining in the current window.
    pub remaining: u64,
    /// When the current window ends and the limit resets.
    pub reset: DateTime<Utc>,
}

// Parsed names, so that reading the headers of every response parses no name.
const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

impl Quota {
    /// A quota, for tests of code that consumes quotas.
    #[must_use]
    pub fn new(limit: u64, remaining: u64, reset: DateTime<Utc>) -> Self {
        Self {
            limit,
            remaining,
            reset,
        }
    }

    /// Whether no request is left in the current window.
    #[must_use]
    pub fn is_exhausted(&self) -> bool {
        self.remaining == 0
    }

    /// Requests used in the current window (`limit - remaining`, never negative).
    #[must_use]
    pub fn used(&self) -> u64 {
        self.limit.saturating_sub(self.remaining)
    }

    /// Reads the three headers; any of them missing, repeated or malformed gives `None`.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let limit = single_integer(headers, &LIMIT)?;
        let remaining = single_integer(headers, &REMAINING)?;
        let reset = i64::try_from(single_integer(headers, &RESET)?).ok()?;
        Some(Self {
            limit,
            remaining,
            reset: DateTime::from_timestamp(reset, 0)?,
        })
    }
}

/// The value of a header that must appear exactly once, as a non-negative decimal integer.
fn single_integer(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    parse_digits(value.to_str().ok()?.trim())
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

fn is_digits(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())
}

/// How long `Retry-After` asks to wait: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), the
/// date read on the service's clock. A date in the past means no wait. A repeated or
/// unreadable header gives `None`.
///
/// Read so as never to shorten the wait: seconds too large for a `u64` saturate, and a decimal
/// (`1.5`, which the RFC does not allow but servers send) rounds up.
pub(crate) fn retry_after(headers: &HeaderMap, server: &ServerTime) -> Option<Duration> {
    let mut values = headers.get_all(RETRY_AFTER).iter();
    let value = values.next()?.to_str().ok()?.trim();
    if values.next().is_some() {
        return None;
    }
    parse_retry_after(value, server)
}

fn parse_retry_after(value: &str, server: &ServerTime) -> Option<Duration> {
    if is_digits(value) {
        return Some(Duration::from_secs(parse_digits(value).unwrap_or(u64::MAX)));
    }
    if let Some((whole, fraction)) = value.split_once('.') {
        if is_digits(whole) && is_digits(fraction) {
            let seconds = parse_digits(whole).unwrap_or(u64::MAX);
            let round_up = fraction.bytes().any(|b| b != b'0');
            return Some(Duration::from_secs(
                seconds.saturating_add(u64::from(round_up)),
            ));
        }
        return None;
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(server.until(date))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, 12, 0, 0).unwrap()
    }

    /// The service's clock reads `now()`.
    fn server() -> ServerTime {
        ServerTime::at_unix(now().timestamp(), tokio::time::Instant::now())
    }

    #[test]
    fn quota_from_the_three_headers() {
        let quota = Quota::from_headers(&headers(&[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "59"),
            ("X-RateLimit-Reset", "1767225600"),
        ]));
        assert_eq!(
            quota,
            Some(Quota::new(
                60,
                59,
                Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
            ))
        );
    }

    #[test]
    fn malformed_quota_headers_give_no_quota() {
        let valid = [
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "59"),
            ("X-RateLimit-Reset", "1767225600"),
        ];
        for bad in ["", "-1", "+5", "1.5", "abc", "99999999999999999999999", " "] {
            for field in 0..3 {
                let mut pairs = valid;
                pairs[field].1 = bad;
                assert_eq!(Quota::from_headers(&headers(&pairs)), None, "{pairs:?}");
            }
        }
        for field in 0..3 {
            let mut pairs = valid.to_vec();
            pairs.remove(field);
            assert_eq!(Quota::from_headers(&headers(&pairs)), None, "{pairs:?}");
            let mut duplicated = valid.to_vec();
            duplicated.push(valid[field]);
            assert_eq!(Quota::from_headers(&headers(&duplicated)), None);
        }
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let cases = [
            ("120", Some(Duration::from_secs(120))),
            ("0", Some(Duration::ZERO)),
            (" 7 ", Some(Duration::from_secs(7))),
            (
                "Sun, 22 Nov 2026 12:00:30 GMT",
                Some(Duration::from_secs(30)),
            ),
            (
                "Sunday, 22-Nov-26 12:01:00 GMT",
                Some(Duration::from_secs(60)),
            ),
            ("Sun Nov 22 12:00:05 2026", Some(Duration::from_secs(5))),
            ("Sat, 21 Nov 2026 12:00:00 GMT", Some(Duration::ZERO)),
            (
                "99999999999999999999999",
                Some(Duration::from_secs(u64::MAX)),
            ),
            ("1.5", Some(Duration::from_secs(2))),
            ("2.0", Some(Duration::from_secs(2))),
            ("0.001", Some(Duration::from_secs(1))),
            ("-5", None),
            ("1.", None),
            (".5", None),
            ("1.5.2", None),
            ("soon", None),
            ("", None),
        ];
        for (value, expected) in cases {
            assert_eq!(
                retry_after(&headers(&[("Retry-After", value)]), &server()),
                expected,
                "{value:?}"
            );
        }
        assert_eq!(retry_after(&HeaderMap::new(), &server()), None);
        assert_eq!(
            retry_after(
                &headers(&[("Retry-After", "1"), ("Retry-After", "2")]),
                &server()
            ),
            None
        );
    }

    proptest! {
        #[test]
        fn retry_after_never_panics(value in "\\PC*") {
            let _ = parse_retry_after(&value, &server());
        }

        #[test]
        fn retry_after_seconds_round_trip(secs in any::<u64>()) {
            prop_assert_eq!(
                parse_retry_after(&secs.to_string(), &server()),
                Some(Duration::from_secs(secs))
            );
        }

        #[test]
        fn retry_after_dates_round_trip(offset in 0u64..10_000_000) {
            let at = std::time::SystemTime::from(now()) + Duration::from_secs(offset);
            prop_assert_eq!(
                parse_retry_after(&httpdate::fmt_http_date(at), &server()),
                Some(Duration::from_secs(offset))
            );
        }

        #[test]
        fn quota_headers_never_panic(limit in "\\PC*", remaining in "\\PC*", reset in "\\PC*") {
            let mut map = HeaderMap::new();
            for (name, value) in [(LIMIT, &limit), (REMAINING, &remaining), (RESET, &reset)] {
                if let Ok(value) = HeaderValue::from_str(value) {
                    map.insert(name, value);
                }
            }
            let _ = Quota::from_headers(&map);
        }

        #[test]
        fn quota_round_trips(limit in any::<u64>(), remaining in any::<u64>(), reset in 0i64..253_402_300_799) {
            let map = headers(&[
                (LIMIT.as_str(), &limit.to_string()),
                (REMAINING.as_str(), &remaining.to_string()),
                (RESET.as_str(), &reset.to_string()),
            ]);
            prop_assert_eq!(
                Quota::from_headers(&map),
                Some(Quota::new(limit, remaining, DateTime::from_timestamp(reset, 0).unwrap()))
            );
        }
    }
}
