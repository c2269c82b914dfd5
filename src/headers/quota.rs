//! The rate-limit quota the service reports: the `X-RateLimit-*` headers, or the IETF
//! `RateLimit` and `RateLimit-Policy` fields.

use chrono::{DateTime, Utc};
use http::{HeaderMap, HeaderName, HeaderValue};

use super::head::{Field, Head};
use super::{parse_digit_bytes, parse_digits, single};
use crate::clock::ServerTime;

/// The rate-limit quota the service reported on a response.
///
/// Parsed from `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`, which the
/// service sends on every response, successful or not (or, when a gateway sends them instead,
/// the IETF `RateLimit` and `RateLimit-Policy` fields). A field given more than once (a
/// gateway's line and the service's) reads as its most careful value: the least limit and
/// remaining, the latest reset. When any of the three is missing or malformed the response has
/// no quota; that is never an error, and the client then treats what is left as unknown,
/// never as unlimited.
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
const IETF: HeaderName = HeaderName::from_static("ratelimit");
const IETF_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const IETF_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
const IETF_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
const IETF_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

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

    /// Reads the rate-limit headers of a response whose clock `server` read: the
    /// `X-RateLimit-*` fields of the specification, or when none of them is there the IETF
    /// `RateLimit`/`RateLimit-Policy` fields (or their older `RateLimit-Limit`,
    /// `-Remaining`, `-Reset` form).
    ///
    /// A reset far below the service's current Unix time cannot be the end of a window in
    /// force: it is read as seconds until the reset. A `remaining` above the limit is read as
    /// the limit.
    pub(crate) fn read(head: &Head<'_>, server: &ServerTime) -> QuotaReading {
        let fields = [head.limit, head.remaining, head.reset];
        if fields.iter().any(|field| field.is_present()) {
            return readable(Self::from_x_fields(head, server));
        }
        if !head.ietf {
            return QuotaReading::Absent;
        }
        let headers = head.map();
        if headers.contains_key(&IETF) {
            return readable(Self::from_ietf(headers, server));
        }
        if headers.contains_key(&IETF_LIMIT) || headers.contains_key(&IETF_REMAINING) {
            let fields = [&IETF_LIMIT, &IETF_REMAINING, &IETF_RESET];
            return readable(Self::from_fields(headers, fields, server));
        }
        QuotaReading::Absent
    }

    /// The `X-RateLimit-*` fields, as [`from_fields`](Self::from_fields) reads them.
    fn from_x_fields(head: &Head<'_>, server: &ServerTime) -> Option<(Self, ResetGiven)> {
        let limit = most_careful_in(head, head.limit, &LIMIT, u64::min)?;
        let remaining = most_careful_in(head, head.remaining, &REMAINING, u64::min)?;
        let reset = most_careful_in(head, head.reset, &RESET, u64::max)?;
        Self::resolved(limit, remaining, reset, server)
    }

    /// Three fields of decimal integers (a policy after `;` in the IETF limit field is
    /// ignored). A field given more than once (a gateway's line and the service's, or one
    /// line of comma-separated values) reads as its most careful value: the least limit and
    /// remaining, the latest reset.
    fn from_fields(
        headers: &HeaderMap,
        [limit, remaining, reset]: [&HeaderName; 3],
        server: &ServerTime,
    ) -> Option<(Self, ResetGiven)> {
        let limit = most_careful(headers.get_all(limit), u64::min)?;
        let remaining = most_careful(headers.get_all(remaining), u64::min)?;
        let reset = most_careful(headers.get_all(reset), u64::max)?;
        Self::resolved(limit, remaining, reset, server)
    }

    /// `RateLimit: "policy";r=REMAINING;t=SECONDS` (one item per policy: the one with the
    /// least left binds), its limit from the `q` of the same policy in `RateLimit-Policy`;
    /// or the older dictionary `RateLimit: limit=L, remaining=R, reset=SECONDS`.
    fn from_ietf(headers: &HeaderMap, server: &ServerTime) -> Option<(Self, ResetGiven)> {
        let field = single(headers, &IETF)?;
        let mut binding: Option<(&str, u64, u64)> = None;
        let mut dictionary = (None, None, None);
        for member in field.split(',') {
            let mut parts = member.split(';').map(str::trim);
            let first = parts.next()?;
            if let Some((key, value)) = first.split_once('=') {
                let value = Some(parse_digits(value.trim())?);
                match key.trim() {
                    "limit" => dictionary.0 = value,
                    "remaining" => dictionary.1 = value,
                    "reset" => dictionary.2 = value,
                    _ => {}
                }
                continue;
            }
            let (mut left, mut wait) = (None, None);
            for (key, value) in parts.filter_map(|p| p.split_once('=')) {
                match key.trim() {
                    "r" => left = Some(parse_digits(value.trim())?),
                    "t" => wait = Some(parse_digits(value.trim())?),
                    _ => {}
                }
            }
            let item = (first, left?, wait?);
            if binding.is_none_or(|(_, r, _)| item.1 < r) {
                binding = Some(item);
            }
        }
        if let (Some(limit), Some(remaining), Some(reset)) = dictionary {
            return Self::resolved(limit, remaining, reset, server);
        }
        let (policy, remaining, wait) = binding?;
        let limit = headers
            .get(&IETF_POLICY)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| policy_quota(value, policy))
            .unwrap_or(remaining);
        Self::resolved(limit, remaining, wait, server)
    }

    /// A quota from the three numbers as sent, the reset resolved on the service's clock.
    fn resolved(
        limit: u64,
        remaining: u64,
        reset: u64,
        server: &ServerTime,
    ) -> Option<(Self, ResetGiven)> {
        let now = server.unix();
        let (secs, reset) = (reset, i64::try_from(reset).ok()?);
        let (reset, given) = if (reset as f64) < now - SECONDS_UNTIL_RESET_BELOW {
            // Seconds until the reset: counted from the service's clock, rounded up.
            (
                (now.ceil() as i64).checked_add(reset)?,
                ResetGiven::In(secs),
            )
        } else {
            (reset, ResetGiven::At)
        };
        let quota = Self {
            limit,
            remaining: remaining.min(limit),
            reset: DateTime::from_timestamp(reset, 0)?,
        };
        Some((quota, given))
    }
}

/// What a response's rate-limit headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QuotaReading {
    /// No rate-limit field at all.
    Absent,
    /// Rate-limit fields that cannot be read as one quota: repeated, negative, not numbers,
    /// or incomplete. It means "unknown", never "unlimited".
    Unreadable,
    Read(Quota, ResetGiven),
}

/// How a response gave its window's reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResetGiven {
    /// As an instant on the service's clock, which names the window's period.
    At,
    /// As this many seconds from now: the instant [`Quota::reset`] shows is counted from the
    /// service's clock as `Date` reads it, and backends whose clocks disagree name one period
    /// apart.
    In(u64),
}

impl QuotaReading {
    /// The quota, if one was read.
    pub(crate) fn quota(self) -> Option<Quota> {
        match self {
            Self::Read(quota, _) => Some(quota),
            Self::Absent | Self::Unreadable => None,
        }
    }
}

fn readable(quota: Option<(Quota, ResetGiven)>) -> QuotaReading {
    quota.map_or(QuotaReading::Unreadable, |(quota, given)| {
        QuotaReading::Read(quota, given)
    })
}

/// A field's values over all its lines and comma-separated items, each read up to a `;` as
/// strict digits, folded by `careful`; `None` when there is none or any one is not digits,
/// since a value the client cannot read might be the one that binds.
fn most_careful<'h>(
    lines: impl IntoIterator<Item = &'h HeaderValue>,
    careful: fn(u64, u64) -> u64,
) -> Option<u64> {
    let mut folded = None;
    for line in lines {
        folded = Some(fold_line(line.as_bytes(), careful, folded)?);
    }
    folded
}

/// [`most_careful`] of one of `head`'s fields, named `name`: a field given once is read
/// without looking it up again.
fn most_careful_in(
    head: &Head<'_>,
    field: Field<'_>,
    name: &HeaderName,
    careful: fn(u64, u64) -> u64,
) -> Option<u64> {
    match field.single() {
        Some(line) => fold_line(line.as_bytes(), careful, None),
        None => most_careful(head.map().get_all(name), careful),
    }
}

/// One line of a field folded into `folded`: its comma-separated items, each read up to a `;`
/// and trimmed, as strict digits; `None` when the line is not text (`HeaderValue::to_str`) or
/// an item is not digits. Read as bytes: every response has three such lines, and splitting
/// and trimming them as text cost several times as much.
fn fold_line(line: &[u8], careful: fn(u64, u64) -> u64, folded: Option<u64>) -> Option<u64> {
    let fold = |folded: Option<u64>, value| Some(folded.map_or(value, |so| careful(so, value)));
    // The line every response has: one number.
    if let Some(value) = parse_digit_bytes(line) {
        return fold(folded, value);
    }
    // `to_str`'s text: visible ASCII and tabs, of which `trim` removes only blanks.
    if !line
        .iter()
        .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
    {
        return None;
    }
    let mut folded = folded;
    for item in line.split(|&b| b == b',') {
        let value = item.split(|&b| b == b';').next()?;
        folded = fold(folded, parse_digit_bytes(value.trim_ascii())?);
    }
    folded
}

/// A reset more than a year before the service's current time cannot end a window in force.
const SECONDS_UNTIL_RESET_BELOW: f64 = 365.0 * 86_400.0;

/// The `q` of `policy` in a `RateLimit-Policy` field.
fn policy_quota(field: &str, policy: &str) -> Option<u64> {
    field.split(',').find_map(|member| {
        let mut parts = member.split(';').map(str::trim);
        if parts.next()? != policy {
            return None;
        }
        parts
            .filter_map(|p| p.split_once('='))
            .find(|(key, _)| key.trim() == "q")
            .and_then(|(_, value)| parse_digits(value.trim()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::testing::{headers, now, server};
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn read(headers: &HeaderMap) -> Option<Quota> {
        reading(headers).quota()
    }

    fn reading(headers: &HeaderMap) -> QuotaReading {
        Quota::read(&Head::of(headers), &server())
    }

    fn at(unix: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(unix, 0).unwrap()
    }

    #[test]
    fn unreadable_quota_fields_are_told_from_absent_ones() {
        assert_eq!(reading(&HeaderMap::new()), QuotaReading::Absent);
        let negative = headers(&[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "-1"),
            ("X-RateLimit-Reset", "1795348860"),
        ]);
        let alone = headers(&[("X-RateLimit-Remaining", "5")]);
        let not_digits_in_a_list = headers(&[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "59, soon"),
            ("X-RateLimit-Reset", "1795348860"),
        ]);
        for (what, map) in [
            (
                "a list with an item that is not digits",
                not_digits_in_a_list,
            ),
            ("-1", negative),
            ("one field alone", alone),
        ] {
            assert_eq!(
                reading(&map),
                QuotaReading::Unreadable,
                "expected {what} to read as unreadable, not as no quota"
            );
        }
    }

    #[test]
    fn a_field_given_twice_reads_as_its_most_careful_value() {
        let reset = now().timestamp() + 30;
        let later = reset + 3_600;
        let two_gateways = headers(&[
            ("X-RateLimit-Limit", "100"),
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "59"),
            ("X-RateLimit-Remaining", "12"),
            ("X-RateLimit-Reset", &reset.to_string()),
            ("X-RateLimit-Reset", &later.to_string()),
        ]);
        let one_line = headers(&[
            ("X-RateLimit-Limit", "60, 100"),
            ("X-RateLimit-Remaining", "12,59"),
            ("X-RateLimit-Reset", &format!("{later}, {reset}")),
        ]);
        for (what, map) in [("two lines", two_gateways), ("one list", one_line)] {
            assert_eq!(
                read(&map),
                Some(Quota::new(60, 12, at(later))),
                "expected {what} to read as the least limit and remaining and the latest reset"
            );
        }
    }

    #[test]
    fn a_reset_far_below_the_service_time_is_seconds_until_the_reset() {
        let quota = read(&headers(&[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "10"),
            ("X-RateLimit-Reset", "30"),
        ]));
        assert_eq!(quota, Some(Quota::new(60, 10, at(now().timestamp() + 30))));
        let over = read(&headers(&[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "99"),
            ("X-RateLimit-Reset", "30"),
        ]));
        assert_eq!(
            over.map(|q| q.remaining),
            Some(60),
            "remaining above the limit"
        );
    }

    #[test]
    fn the_ietf_fields_are_read_when_the_x_ratelimit_ones_are_absent() {
        let noon = now().timestamp();
        let cases = [
            (
                vec![
                    ("RateLimit", r#""minute";r=5;t=20, "day";r=900;t=3000"#),
                    (
                        "RateLimit-Policy",
                        r#""minute";q=60;w=60, "day";q=1000;w=86400"#,
                    ),
                ],
                Quota::new(60, 5, at(noon + 20)),
            ),
            (
                vec![("RateLimit", "limit=100, remaining=50, reset=30")],
                Quota::new(100, 50, at(noon + 30)),
            ),
            (
                vec![
                    ("RateLimit-Limit", "100, 100;w=60"),
                    ("RateLimit-Remaining", "7"),
                    ("RateLimit-Reset", "12"),
                ],
                Quota::new(100, 7, at(noon + 12)),
            ),
        ];
        for (fields, expected) in cases {
            assert_eq!(read(&headers(&fields)), Some(expected), "{fields:?}");
        }
        let broken = headers(&[("RateLimit", r#""minute";r=-1;t=20"#)]);
        assert_eq!(reading(&broken), QuotaReading::Unreadable);
    }

    #[test]
    fn quota_from_the_three_headers() {
        let quota = read(&headers(&[
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
                assert_eq!(read(&headers(&pairs)), None, "{pairs:?}");
            }
        }
        for field in 0..3 {
            let mut pairs = valid.to_vec();
            pairs.remove(field);
            assert_eq!(read(&headers(&pairs)), None, "{pairs:?}");
            let mut duplicated = valid.to_vec();
            duplicated.push((valid[field].0, "soon"));
            assert_eq!(read(&headers(&duplicated)), None, "{duplicated:?}");
        }
    }

    /// The reference reading of a line: its text split and trimmed.
    fn fold_line_by_text(
        line: &HeaderValue,
        careful: fn(u64, u64) -> u64,
        mut folded: Option<u64>,
    ) -> Option<u64> {
        for item in line.to_str().ok()?.split(',') {
            let value = parse_digits(item.split(';').next()?.trim())?;
            folded = Some(folded.map_or(value, |so_far| careful(so_far, value)));
        }
        folded
    }

    /// Bytes a field's line is made of, the ones the parser tells apart more often.
    fn line_bytes() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            4 => prop::sample::select(b"0123456789".to_vec()),
            2 => prop::sample::select(b" \t,;=".to_vec()),
            1 => any::<u8>(),
        ];
        prop::collection::vec(byte, 0..24)
    }

    proptest! {
        #[test]
        fn a_line_folds_as_splitting_its_text_does(
            line in line_bytes(),
            folded in prop::option::of(any::<u64>()),
            least in any::<bool>(),
        ) {
            let careful = if least { u64::min } else { u64::max };
            if let Ok(value) = HeaderValue::from_bytes(&line) {
                prop_assert_eq!(
                    fold_line(value.as_bytes(), careful, folded),
                    fold_line_by_text(&value, careful, folded)
                );
            }
        }

        #[test]
        fn quota_headers_never_panic(limit in "\\PC*", remaining in "\\PC*", reset in "\\PC*") {
            let mut map = HeaderMap::new();
            for (name, value) in [(LIMIT, &limit), (REMAINING, &remaining), (RESET, &reset)] {
                if let Ok(value) = HeaderValue::from_str(value) {
                    map.insert(name, value);
                }
            }
            let _ = read(&map);
        }

        #[test]
        fn ietf_fields_never_panic(field in "\\PC*", policy in "\\PC*") {
            let mut map = HeaderMap::new();
            for (name, value) in [(IETF, &field), (IETF_POLICY, &policy)] {
                if let Ok(value) = HeaderValue::from_str(value) {
                    map.insert(name, value);
                }
            }
            let _ = read(&map);
        }

        #[test]
        fn quota_round_trips(limit in any::<u64>(), remaining in any::<u64>(), reset in 1_763_812_800i64..253_402_300_799) {
            let map = headers(&[
                (LIMIT.as_str(), &limit.to_string()),
                (REMAINING.as_str(), &remaining.to_string()),
                (RESET.as_str(), &reset.to_string()),
            ]);
            prop_assert_eq!(
                read(&map),
                Some(Quota::new(limit, remaining.min(limit), DateTime::from_timestamp(reset, 0).unwrap()))
            );
        }
    }
}
