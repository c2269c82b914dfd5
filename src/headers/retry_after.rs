//! `Retry-After`, and the quiet a response asks of every request on the key.

use std::time::Duration;

use http::StatusCode;

use super::head::Head;
use super::{is_digits, parse_digits};
use crate::clock::ServerTime;

/// How long `Retry-After` asks to wait: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), the
/// date read on the service's clock. A date in the past means no wait. A repeated or
/// unreadable header gives `None`.
///
/// Read so as never to shorten the wait: seconds too large for a `u64` saturate, and a decimal
/// (`1.5`, which the RFC does not allow but servers send) rounds up.
pub(crate) fn retry_after(head: &Head<'_>, server: &ServerTime) -> Option<Duration> {
    let value = head.retry_after.single()?.to_str().ok()?.trim();
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

/// The quiet a response asks of every request on the key, not just of its own call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quiet {
    /// A 429: over the rate limit.
    RateLimited(Duration),
    /// A 503 with `Retry-After`: the service is overloaded or down for a while.
    Unavailable(Duration),
}

impl Quiet {
    pub(crate) fn wait(self) -> Duration {
        match self {
            Self::RateLimited(wait) | Self::Unavailable(wait) => wait,
        }
    }
}

/// The least a 429 without a readable `Retry-After` waits.
const RATE_LIMITED_FLOOR: Duration = Duration::from_secs(1);

/// Whether a response closes the cooldown gate, and for at least how long: a 429 always (a
/// service that bans keys for calling on after one must not see another request before the
/// wait is over), a 503 when it says how long.
pub(crate) fn quiet(status: StatusCode, retry_after: Option<Duration>) -> Option<Quiet> {
    match status {
        StatusCode::TOO_MANY_REQUESTS => Some(Quiet::RateLimited(
            retry_after.unwrap_or(RATE_LIMITED_FLOOR),
        )),
        StatusCode::SERVICE_UNAVAILABLE => retry_after.map(Quiet::Unavailable),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::testing::{headers, now, server};
    use proptest::prelude::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
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
        let read = |map: &http::HeaderMap| retry_after(&Head::of(map), &server());
        for (value, expected) in cases {
            assert_eq!(
                read(&headers(&[("Retry-After", value)])),
                expected,
                "{value:?}"
            );
        }
        assert_eq!(read(&http::HeaderMap::new()), None);
        assert_eq!(
            read(&headers(&[("Retry-After", "1"), ("Retry-After", "2")])),
            None
        );
    }

    #[test]
    fn a_429_always_asks_for_quiet_and_a_503_when_it_says_how_long() {
        let three = Duration::from_secs(3);
        let limited = StatusCode::TOO_MANY_REQUESTS;
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(quiet(limited, Some(three)), Some(Quiet::RateLimited(three)));
        assert_eq!(
            quiet(limited, Some(Duration::ZERO)),
            Some(Quiet::RateLimited(Duration::ZERO))
        );
        assert_eq!(quiet(limited, None), Some(Quiet::RateLimited(secs(1.0))));
        assert_eq!(
            quiet(unavailable, Some(three)),
            Some(Quiet::Unavailable(three))
        );
        assert_eq!(quiet(unavailable, None), None);
        assert_eq!(quiet(StatusCode::INTERNAL_SERVER_ERROR, Some(three)), None);
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

    }
}
