//! `X-RateLimit-*`, `Retry-After`, `Deprecation`/`Sunset` and the error mapping, on arbitrary
//! header lines and bodies: none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| petstore_client::__private::parse_headers(data));
