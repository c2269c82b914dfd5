//! The `Deprecation` (RFC 9745) and `Sunset` (RFC 8594) response headers.

use chrono::{DateTime, Utc};

use super::head::Head;
use super::parse_digits;

/// The service's notice that an operation is deprecated, from the `Deprecation` (RFC 9745)
/// and `Sunset` (RFC 8594) response headers.
///
/// Present on a [`Response`](crate::Response) when either header is. The client also logs one
/// `tracing` warning per operation, the first time the process sees such a notice for it.
///
/// [`Deprecation::new`] builds one, to test your own handling of it:
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use petstore_client::Deprecation;
///
/// let sunset = Utc.with_ymd_and_hms(2030, 12, 5, 0, 0, 0).unwrap();
/// let notice = Deprecation::new(true, None, Some(sunset));
/// assert_eq!(notice.sunset, Some(sunset));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Deprecation {
    /// Whether the operation is deprecated: a `Deprecation` header, or a `Sunset` header
    /// announcing its removal.
    pub deprecated: bool,
    /// When the operation was (or will be) deprecated, if the header gives a date
    /// (`@<unix-seconds>`, or an HTTP-date from earlier drafts).
    pub deprecated_at: Option<DateTime<Utc>>,
    /// When the operation stops working, from the `Sunset` header's HTTP-date.
    pub sunset: Option<DateTime<Utc>>,
}

impl Deprecation {
    /// A notice: whether the operation is deprecated, since when, and when it stops working.
    #[must_use]
    pub fn new(
        deprecated: bool,
        deprecated_at: Option<DateTime<Utc>>,
        sunset: Option<DateTime<Utc>>,
    ) -> Self {
        Self {
            deprecated,
            deprecated_at,
            sunset,
        }
    }

    pub(crate) fn from_head(head: &Head<'_>) -> Option<Self> {
        let deprecation = head.deprecation.first();
        let sunset = head.sunset.first();
        if deprecation.is_none() && sunset.is_none() {
            return None;
        }
        Some(Self {
            // A removal announced is a deprecation, whether or not `Deprecation` says so.
            deprecated: true,
            deprecated_at: deprecation
                .and_then(|v| v.to_str().ok())
                .and_then(parse_deprecation_date),
            sunset: sunset
                .and_then(|v| v.to_str().ok())
                .and_then(parse_http_date),
        })
    }
}

fn parse_deprecation_date(value: &str) -> Option<DateTime<Utc>> {
    let value = value.trim();
    match value.strip_prefix('@') {
        Some(seconds) => DateTime::from_timestamp(parse_digits(seconds)?.try_into().ok()?, 0),
        None => parse_http_date(value),
    }
}

fn parse_http_date(value: &str) -> Option<DateTime<Utc>> {
    httpdate::parse_http_date(value.trim())
        .ok()
        .map(DateTime::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use http::{HeaderMap, HeaderValue};
    use proptest::prelude::*;

    fn notice(deprecation: Option<&str>, sunset: Option<&str>) -> Option<Deprecation> {
        let mut headers = HeaderMap::new();
        if let Some(value) = deprecation {
            headers.insert("deprecation", HeaderValue::from_str(value).unwrap());
        }
        if let Some(value) = sunset {
            headers.insert("sunset", HeaderValue::from_str(value).unwrap());
        }
        Deprecation::from_head(&Head::of(&headers))
    }

    #[test]
    fn reads_both_headers() {
        let removal = Utc.with_ymd_and_hms(2030, 12, 5, 0, 0, 0).unwrap();
        assert_eq!(
            notice(Some("@1688169599"), Some("Thu, 05 Dec 2030 00:00:00 GMT")),
            Some(Deprecation {
                deprecated: true,
                deprecated_at: Utc.timestamp_opt(1_688_169_599, 0).single(),
                sunset: Some(removal),
            })
        );
        assert_eq!(
            notice(None, Some("Thu, 05 Dec 2030 00:00:00 GMT")).map(|d| (d.deprecated, d.sunset)),
            Some((true, Some(removal))),
            "a Sunset header alone announces the operation's removal: deprecated"
        );
        assert_eq!(notice(None, None), None);
    }

    #[test]
    fn malformed_values_keep_the_notice_without_dates() {
        for value in ["true", "@", "@-5", "@1.5", "yesterday", ""] {
            assert_eq!(
                notice(Some(value), Some("soon")),
                Some(Deprecation {
                    deprecated: true,
                    deprecated_at: None,
                    sunset: None,
                }),
                "{value:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn never_panics(deprecation in "\\PC*", sunset in "\\PC*") {
            let _ = parse_deprecation_date(&deprecation);
            let _ = parse_http_date(&sunset);
        }

        #[test]
        fn unix_dates_round_trip(seconds in 0i64..253_402_300_799) {
            prop_assert_eq!(
                parse_deprecation_date(&format!("@{seconds}")),
                DateTime::from_timestamp(seconds, 0)
            );
        }
    }
}
