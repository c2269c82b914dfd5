//! Every number the service sends goes through checked arithmetic: sequences of response heads
//! whose quota fields (`X-RateLimit-*`, the IETF `RateLimit`/`RateLimit-Policy` and their older
//! `RateLimit-Limit`/`-Remaining`/`-Reset` form), `Retry-After` and `Date` are drawn from
//! edge-heavy strategies are fed to a real client-side rate state (the real `RateLimiter` and
//! `Permit`, through `__private::rate_state_takes`, with each pacing mode) on tokio's paused
//! clock. A panic (an overflow in a debug build, a `Duration` or `Instant` out of range) fails
//! the test; so does a quota reported back with more remaining than its limit.
//!
//! A failing case that proptest finds becomes a named regression test below.

use std::time::{Duration, UNIX_EPOCH};

use chrono::DateTime;
use petstore_client::__private::{RateStateRun, rate_state_takes};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

type Head = (u16, Vec<(String, String)>);

/// 2027-01-15T08:00:00Z, around which the service's clock usually reads.
const NOW: i64 = 1_800_000_000;
/// The last second `Date` can show (9999-12-31T23:59:59Z).
const LAST_DATE: i64 = 253_402_300_799;

/// Integers as a server might send them, weighted to the edges: zero and one, the limits of
/// the integer types and one past them, negatives, decimals, exponents, signs, spaces, garbage.
fn number() -> impl Strategy<Value = String> {
    const EDGES: &[&str] = &[
        "0",
        "1",
        "2",
        "60",
        "18446744073709551615", // u64::MAX
        "18446744073709551616", // u64::MAX + 1
        "9223372036854775807",  // i64::MAX
        "9223372036854775808",  // 2^63
        "-1",
        "-0",
        "-9223372036854775808", // i64::MIN
        "-99999999999999999999999",
        "99999999999999999999999",
        "1.5",
        "0.0",
        "0.001",
        "60.000",
        "1e3",
        "1E400",
        "+5",
        " 7 ",
        "",
        "0x10",
        "NaN",
        "inf",
        "abc",
        "1,2",
        "00000000000000000000001",
        "\u{663}", // ARABIC-INDIC DIGIT THREE
    ];
    prop_oneof![
        3 => proptest::sample::select(EDGES).prop_map(str::to_owned),
        2 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        2 => (0u64..400).prop_map(|n| n.to_string()),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(whole, fraction)| format!("{whole}.{fraction}")),
        1 => "\\PC{0,12}",
    ]
}

/// Integers the quota fields accept (decimal digits), weighted to the edges, so that the
/// numbers reach the budgets and the pacer.
fn digits() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => proptest::sample::select(&[0, 1, 2, 60, u64::MAX, u64::MAX - 1, i64::MAX as u64, 1 << 63][..]),
        1 => any::<u64>(),
        2 => 0u64..400,
    ]
    .prop_map(|n| n.to_string())
}

/// An `X-RateLimit-Reset`: a Unix time near the service's, far in the past or the future,
/// past what a date can show, or seconds until the reset (around the one-year line where the
/// two forms part), or any number.
fn reset() -> impl Strategy<Value = String> {
    const YEAR: i64 = 365 * 86_400;
    prop_oneof![
        2 => (NOW - 120..NOW + 120).prop_map(|t| t.to_string()),
        1 => (0..NOW).prop_map(|t| t.to_string()),
        1 => (NOW..LAST_DATE + 10).prop_map(|t| t.to_string()),
        1 => (LAST_DATE..i64::MAX).prop_map(|t| t.to_string()),
        2 => (0i64..120).prop_map(|t| t.to_string()),
        1 => (YEAR - 5..YEAR + 5).prop_map(|t| t.to_string()),
        1 => (NOW - YEAR - 5..NOW - YEAR + 5).prop_map(|t| t.to_string()),
        2 => number(),
    ]
}

/// A Unix time for a date: any a date can show, weighted to the service's present.
fn unix_time() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => NOW - 120..NOW + 120,
        1 => 0..=LAST_DATE,
        1 => Just(0),
        1 => Just(LAST_DATE),
    ]
}

/// An HTTP-date in each of its three forms (IMF-fixdate, RFC 850, asctime) or a broken one.
fn http_date() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => unix_time().prop_map(|t| httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(t as u64))),
        1 => unix_time().prop_map(|t| {
            let at = DateTime::from_timestamp(t, 0).unwrap();
            at.format("%A, %d-%b-%y %H:%M:%S GMT").to_string()
        }),
        1 => unix_time().prop_map(|t| {
            let at = DateTime::from_timestamp(t, 0).unwrap();
            at.format("%a %b %e %H:%M:%S %Y").to_string()
        }),
        1 => proptest::sample::select(&[
            "Sun, 22 Nov 2026 25:00:00 GMT",
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Sat, 01 Jan 10000 00:00:00 GMT",
            "Wed, 31 Dec 1969 23:59:59 GMT",
            "Mon, 30 Feb 2026 12:00:00 GMT",
            "yesterday",
            "",
        ][..])
        .prop_map(str::to_owned),
    ]
}

/// `Retry-After` in every form: delay-seconds, decimal seconds, an HTTP-date, anything.
fn retry_after() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => number(),
        2 => http_date(),
        1 => (0u64..120, 0u32..1000).prop_map(|(whole, fraction)| format!("{whole}.{fraction}")),
    ]
}

/// The IETF `RateLimit` field: policy items, the older dictionary, or garbage.
fn ietf_field() -> impl Strategy<Value = String> {
    prop_oneof![
        (number(), number()).prop_map(|(r, t)| format!("\"minute\";r={r};t={t}")),
        (number(), number(), number(), number()).prop_map(|(r, t, r2, t2)| {
            format!("\"minute\";r={r};t={t}, \"day\";r={r2};t={t2}")
        }),
        (number(), number(), number())
            .prop_map(|(l, r, t)| format!("limit={l}, remaining={r}, reset={t}")),
        "\\PC{0,24}",
    ]
}

fn ietf_policy() -> impl Strategy<Value = String> {
    prop_oneof![
        number().prop_map(|q| format!("\"minute\";q={q};w=60")),
        (number(), number())
            .prop_map(|(q, q2)| format!("\"minute\";q={q};w=60, \"day\";q={q2};w=86400")),
        "\\PC{0,24}",
    ]
}

/// One header line of the ones the rate discipline reads.
fn field() -> impl Strategy<Value = (String, String)> {
    let named = |name: &'static str, value: BoxedStrategy<String>| {
        value.prop_map(move |value| (name.to_owned(), value))
    };
    prop_oneof![
        named("X-RateLimit-Limit", number().boxed()),
        named("X-RateLimit-Remaining", number().boxed()),
        named("X-RateLimit-Reset", reset().boxed()),
        named("RateLimit", ietf_field().boxed()),
        named("RateLimit-Policy", ietf_policy().boxed()),
        named("RateLimit-Limit", number().boxed()),
        named("RateLimit-Remaining", number().boxed()),
        named("RateLimit-Reset", reset().boxed()),
        named("Retry-After", retry_after().boxed()),
        named("Date", http_date().boxed()),
    ]
}

/// The status of a head: the ones the discipline acts on, 0 (the request never left), one
/// that is no HTTP status (no head came), or any.
fn status() -> impl Strategy<Value = u16> {
    prop_oneof![
        3 => Just(200u16),
        1 => Just(201u16),
        3 => Just(429u16),
        2 => Just(503u16),
        1 => Just(500u16),
        1 => Just(401u16),
        1 => Just(0u16),
        1 => Just(1_000u16),
        1 => any::<u16>(),
    ]
}

/// A head as the specification shapes it (the three quota fields once each, a `Date`, maybe
/// a `Retry-After`), its numbers edge-heavy or readable ones at the edges; or any bag of the
/// fields, repeats included.
fn head() -> impl Strategy<Value = Head> {
    let shaped = |numbers: BoxedStrategy<String>, resets: BoxedStrategy<String>| {
        (
            status(),
            numbers.clone(),
            numbers,
            resets,
            http_date(),
            proptest::option::of(retry_after()),
        )
            .prop_map(|(status, limit, remaining, reset, date, retry_after)| {
                let mut fields = vec![
                    ("X-RateLimit-Limit".to_owned(), limit),
                    ("X-RateLimit-Remaining".to_owned(), remaining),
                    ("X-RateLimit-Reset".to_owned(), reset),
                    ("Date".to_owned(), date),
                ];
                fields.extend(retry_after.map(|value| ("Retry-After".to_owned(), value)));
                (status, fields)
            })
    };
    let bag = (status(), proptest::collection::vec(field(), 0..8));
    prop_oneof![
        shaped(number().boxed(), reset().boxed()),
        shaped(digits().boxed(), prop_oneof![digits(), reset()].boxed()),
        bag,
    ]
}

/// Runs the heads through the rate state on a paused clock, and checks what can be checked.
fn check(heads: &[Head]) -> Result<Vec<RateStateRun>, TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let runs = runtime.block_on(rate_state_takes(heads));
    prop_assert_eq!(runs.len(), 3, "expected a run per pacing mode");
    for run in &runs {
        prop_assert!(run.heads.len() <= heads.len());
        for (i, taken) in run.heads.iter().enumerate() {
            for (what, quota) in [("reported", taken.quota), ("latest", taken.latest)] {
                if let Some(quota) = quota {
                    prop_assert!(
                        quota.remaining <= quota.limit,
                        "{:?}, head {}: the {} quota {:?} has more remaining than its limit",
                        run.pacing,
                        i,
                        what,
                        quota
                    );
                }
            }
        }
        if let Some(quota) = run.held.as_ref().and_then(|error| error.quota()) {
            prop_assert!(quota.remaining <= quota.limit, "{:?}", run.held);
        }
    }
    Ok(runs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_server_numbers_are_read_without_panic_or_wrap(
        heads in proptest::collection::vec(head(), 1..12)
    ) {
        check(&heads)?;
    }
}

fn head_of(status: u16, fields: &[(&str, &str)]) -> Head {
    let fields = fields
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    (status, fields)
}

fn run(heads: &[Head]) -> Vec<RateStateRun> {
    check(heads).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn the_extremes_of_every_field_together() {
    let extremes = [
        "18446744073709551615",
        "9223372036854775807",
        "9223372036854775808",
        "0",
    ];
    for value in extremes {
        for date in [
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
        ] {
            let fields = [
                ("X-RateLimit-Limit", value),
                ("X-RateLimit-Remaining", value),
                ("X-RateLimit-Reset", value),
                ("Retry-After", value),
                ("Date", date),
            ];
            run(&[
                head_of(200, &fields),
                head_of(429, &fields),
                head_of(200, &fields),
            ]);
        }
    }
}

#[test]
fn a_remaining_above_the_limit_is_reported_as_the_limit() {
    let runs = run(&[head_of(
        200,
        &[
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "18446744073709551615"),
            ("X-RateLimit-Reset", "30"),
            ("Date", "Fri, 15 Jan 2027 08:00:00 GMT"),
        ],
    )]);
    for run in runs {
        let quota = run.heads[0].quota.expect("a readable quota");
        assert_eq!((quota.limit, quota.remaining), (60, 60), "{:?}", run.pacing);
        assert_eq!(quota.reset.timestamp(), NOW + 30, "seconds until the reset");
    }
}

#[test]
fn a_retry_after_past_what_a_duration_holds_ends_the_run_with_a_hold() {
    let runs = run(&[
        head_of(429, &[("Retry-After", "99999999999999999999999")]),
        head_of(200, &[]),
    ]);
    for run in runs {
        assert_eq!(
            run.heads[0].retry_after,
            Some(Duration::from_secs(u64::MAX)),
            "saturated"
        );
        assert_eq!(
            run.heads.len(),
            1,
            "{:?}: expected the next request held",
            run.pacing
        );
        assert!(
            run.held.as_ref().is_some_and(|e| e.is_rate_limited()),
            "{:?}",
            run.held
        );
    }
}
