//! Response heads with arbitrary rate-limit fields, `Retry-After` and `Date`, fed to a real
//! client-side rate state (every pacing mode) on tokio's paused clock: no server number may
//! panic, and a quota reported back never has more remaining than its limit.
//!
//! The input is heads separated by an empty line; each head is a status line (digits; 200
//! otherwise) and then `name: value` lines.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let heads: Vec<(u16, Vec<(String, String)>)> = text
        .split("\n\n")
        .take(32)
        .map(|head| {
            let mut lines = head.lines();
            let status = lines
                .next()
                .and_then(|l| l.trim().parse().ok())
                .unwrap_or(200);
            let fields = lines
                .filter_map(|line| line.split_once(':'))
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect();
            (status, fields)
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    for run in runtime.block_on(petstore_client::__private::rate_state_takes(&heads)) {
        for taken in &run.heads {
            for quota in taken.quota.iter().chain(&taken.latest) {
                assert!(quota.remaining <= quota.limit, "{quota:?}");
            }
        }
    }
});
