//! What a response head says beyond its body: the rate-limit quota, `Retry-After` and the
//! quiet it asks for, and the deprecation notice. Parsers only: what the client does about
//! them is decided above, in `rate` and `retry`.

mod deprecation;
mod quota;
mod retry_after;

use http::{HeaderMap, HeaderName};

pub use deprecation::Deprecation;
pub use quota::Quota;
pub(crate) use quota::QuotaReading;
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
