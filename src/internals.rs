//! The crate's decode path, header parsers and rate state, exposed to its tests, benches and
//! fuzz targets only (`petstore_client::__private`). Not public API.

/// Decodes a `listPets` body exactly as a call does.
pub fn decode_pets(body: &[u8]) -> crate::Result<Vec<crate::Pet>> {
    crate::execute::decode(
        crate::execute::Operation::ListPets,
        ::http::StatusCode::OK,
        body,
    )
}

/// Runs every response-header parser over `headers`, given as `name: value` lines.
pub fn parse_headers(headers: &[u8]) {
    let mut map = ::http::HeaderMap::new();
    for line in headers.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if let (Ok(name), Ok(value)) = (
            ::http::HeaderName::from_bytes(name),
            ::http::HeaderValue::from_bytes(value),
        ) {
            map.append(name, value);
        }
    }
    let head = crate::headers::Head::of(&map);
    let server = crate::clock::ServerTime::of_response(
        head.date.first(),
        tokio::time::Instant::now(),
        &crate::clock::Clock::new(),
    );
    let quota = crate::headers::Quota::read(&head, &server).quota();
    let retry_after = crate::headers::retry_after(&head, &server);
    if let Some(quota) = quota {
        let _ = server.instant_of(quota.reset.timestamp());
    }
    let _ = crate::headers::Deprecation::from_head(&head);
    let _ = crate::error::ApiError::from_response(
        ::http::StatusCode::TOO_MANY_REQUESTS,
        headers,
        quota,
        retry_after,
    );
}

/// What a client's rate state made of one response head.
#[derive(Debug, Clone, Copy)]
pub struct HeadTaken {
    /// The quota read from the head, as a call's `Response::quota` would show it.
    pub quota: Option<crate::Quota>,
    /// The wait `Retry-After` asked for, read on the service's clock.
    pub retry_after: Option<std::time::Duration>,
    /// The client's latest quota afterwards, as `PetStoreClient::quota` would show it.
    pub latest: Option<crate::Quota>,
}

/// One [`rate_state_takes`] run with one pacing mode.
#[derive(Debug)]
pub struct RateStateRun {
    /// The pacing mode of the run.
    pub pacing: crate::Pacing,
    /// What the state made of each head it was given, in order (none from the one
    /// whose admission failed).
    pub heads: Vec<HeadTaken>,
    /// The admission that ended the run early: a hold past the give-up instant.
    pub held: Option<crate::Error>,
}

/// Feeds response heads to a real client-side rate state, as the request path does: for
/// each pacing mode in turn, a fresh state (`RateLimitScope::Client`), and for each head
/// `(status, [(name, value)])` a request admitted by the real `RateLimiter` (giving up as
/// a call does, `RetryPolicy::max_server_wait` from now) whose head is reported through
/// the real `Permit`. Status 0 is a request that never left (connection refused), another
/// status that is not an HTTP status a request whose head never came (timed out, counted
/// as spent). Header lines that are not valid HTTP are left out; repeated names are kept.
///
/// A run ends at the first admission that fails. Holds within the give-up instant wait,
/// so run it on a paused clock (`start_paused`), where they take no time.
pub async fn rate_state_takes(heads: &[(u16, Vec<(String, String)>)]) -> Vec<RateStateRun> {
    let base_url = url::Url::parse("http://petstore.invalid/v1").expect("a valid URL");
    let policy = crate::RetryPolicy::default();
    let mut runs = Vec::new();
    for pacing in [
        crate::Pacing::Shared,
        crate::Pacing::Sole,
        crate::Pacing::Off,
    ] {
        let rate = crate::rate::RateLimiter::new(
            crate::RateLimitScope::Client,
            pacing,
            &base_url,
            "FAKE-key",
            None,
        );
        let mut run = RateStateRun {
            pacing,
            heads: Vec::with_capacity(heads.len()),
            held: None,
        };
        for (status, fields) in heads {
            let give_up_at = crate::clock::after(policy.max_server_wait());
            let permit = match rate.admit("listPets", give_up_at).await {
                Ok((permit, _)) => permit,
                Err(held) => {
                    run.held = Some(crate::execute::throttled(held));
                    break;
                }
            };
            let Ok(status) = ::http::StatusCode::from_u16(*status) else {
                if *status == 0 {
                    permit.not_sent();
                } else {
                    drop(permit);
                }
                run.heads.push(HeadTaken {
                    quota: None,
                    retry_after: None,
                    latest: rate.latest(),
                });
                continue;
            };
            let mut map = ::http::HeaderMap::new();
            for (name, value) in fields {
                if let (Ok(name), Ok(value)) = (
                    ::http::HeaderName::from_bytes(name.as_bytes()),
                    ::http::HeaderValue::from_bytes(value.as_bytes()),
                ) {
                    map.append(name, value);
                }
            }
            let report = permit
                .at_head(
                    status,
                    &crate::headers::Head::of(&map),
                    tokio::time::Instant::now(),
                    &|n| policy.step(n),
                )
                .await;
            run.heads.push(HeadTaken {
                quota: report.quota,
                retry_after: report.retry_after,
                latest: rate.latest(),
            });
        }
        runs.push(run);
    }
    runs
}
