//! What a response head says beyond its body: the rate-limit quota, `Retry-After` and the
//! quiet it asks for, and the deprecation notice. Parsers only: what the client does about
//! them is decided above, in `rate` and `retry`.

mod deprecation;
mod head;
mod quota;
mod retry_after;

use http::{HeaderMap, HeaderName};

pub use deprecation::Deprecation;
pub(crate) use head::Head;
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
    parse_digit_bytes(value.as_bytes())
}

/// [`parse_digits`] of bytes, eight digits at a time: every response has a reset of ten
/// digits, and a limit and remaining of any length.
pub(crate) fn parse_digit_bytes(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    // Nineteen digits never overflow a `u64`; more may.
    if value.len() > 19 {
        let mut parsed: u64 = 0;
        for &byte in value {
            parsed = parsed.checked_mul(10)?.checked_add(digit(byte)?)?;
        }
        return Some(parsed);
    }
    let mut chunks = value.chunks_exact(8);
    let mut parsed: u64 = 0;
    for chunk in &mut chunks {
        let chunk: [u8; 8] = chunk.try_into().ok()?;
        parsed = parsed * 100_000_000 + eight_digits(chunk)?;
    }
    for &byte in chunks.remainder() {
        parsed = parsed * 10 + digit(byte)?;
    }
    Some(parsed)
}

/// The value of one decimal digit.
fn digit(byte: u8) -> Option<u64> {
    let digit = u64::from(byte.wrapping_sub(b'0'));
    (digit <= 9).then_some(digit)
}

/// Eight decimal digits read as one number, all at once (the first byte the most significant).
fn eight_digits(chunk: [u8; 8]) -> Option<u64> {
    const NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    let bytes = u64::from_le_bytes(chunk);
    // A digit is 0x30..=0x39: its high nibble is 3, and still 3 with 6 added. A byte that
    // carries when 6 is added is 0xFA or more, whose own high nibble already fails.
    let high = bytes & NIBBLES;
    let high_plus_six = (bytes.wrapping_add(0x0606_0606_0606_0606) & NIBBLES) >> 4;
    if high | high_plus_six != 0x3333_3333_3333_3333 {
        return None;
    }
    // Pairs of digits, then fours, then the eight (Lemire's multiply-and-shift).
    let digits = bytes & 0x0F0F_0F0F_0F0F_0F0F;
    let pairs = digits.wrapping_mul(10 * 256 + 1) >> 8;
    let fours = (pairs & 0x00FF_00FF_00FF_00FF).wrapping_mul(100 * 65_536 + 1) >> 16;
    Some((fours & 0x0000_FFFF_0000_FFFF).wrapping_mul(10_000 * (1 << 32) + 1) >> 32)
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn digits_up_to_the_largest_u64_whatever_the_leading_zeros() {
        let cases = [
            ("18446744073709551615", Some(u64::MAX)),
            ("000000000000000000000018446744073709551615", Some(u64::MAX)),
            ("18446744073709551616", None),
            ("9999999999999999999", Some(9_999_999_999_999_999_999)),
            ("0000000000000000000000", Some(0)),
            ("", None),
            ("+1", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_digits(value), expected, "{value:?}");
        }
    }

    proptest! {
        /// Digits read as `u64::from_str` reads them, without its leading `+`.
        #[test]
        fn digits_parse_as_from_str_without_a_sign(value in "[0-9]{0,25}|\\+?[0-9]{1,3}|\\PC{0,8}") {
            let expected = if is_digits(&value) { value.parse().ok() } else { None };
            prop_assert_eq!(parse_digits(&value), expected);
        }

        /// Bytes, eight at a time or not, read as their text reads.
        #[test]
        fn digit_bytes_parse_as_their_text(
            value in prop::collection::vec(prop_oneof![4 => b'0'..=b'9', 1 => any::<u8>()], 0..25)
        ) {
            let text = std::str::from_utf8(&value).ok().filter(|text| is_digits(text));
            let expected = text.and_then(|text| text.parse().ok());
            prop_assert_eq!(parse_digit_bytes(&value), expected);
        }
    }
}
