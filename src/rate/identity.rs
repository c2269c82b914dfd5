//! Which state a client spends: its API key's on the service its base URL names. The process's
//! registry and the fleet's store both find it by [`service`], so URL spellings share a budget.

use std::net::IpAddr;

use url::{Host, Url};

/// The service `base_url` names, alike for every spelling: lower-case scheme, port (the scheme's
/// default if none is written) and path with one trailing slash, but no host: one key is one budget
/// however its host is spelled (see `RateLimitScope::Process`).
pub(crate) fn service(base_url: &Url) -> String {
    let port = base_url.port_or_known_default().unwrap_or_default();
    format!(
        "{}://:{port}{}/",
        base_url.scheme(),
        base_url.path().trim_end_matches('/'),
    )
}

/// Whether `url` names this machine: `localhost`, or a loopback address.
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(url: &str) -> String {
        service(&Url::parse(url).unwrap())
    }

    #[test]
    fn spellings_of_one_base_url_name_one_service() {
        let canonical = of("https://petstore.example.com/v1/");
        for spelling in [
            "https://petstore.example.com/v1",
            "HTTPS://PetStore.Example.COM/v1",
            "https://petstore.example.com:443/v1/",
            "https://petstore.example.com/v1//",
            "https://petstore.example.com./v1/",
            "https://petstore.internal/v1/",
            "https://93.184.215.14/v1/",
        ] {
            assert_eq!(of(spelling), canonical, "{spelling}");
        }
        assert_eq!(
            of("http://example.com:80/v1"),
            of("http://[2001:DB8::1]/v1")
        );
    }

    #[test]
    fn another_scheme_port_or_path_is_another_service() {
        let local = of("http://localhost:8080/v1/");
        for other in [
            "https://localhost:8080/v1/",
            "http://localhost:8081/v1/",
            "http://localhost/v1/",
            "http://localhost:8080/v2/v1/",
            "http://localhost:8080/V1/",
        ] {
            assert_ne!(of(other), local, "{other}");
        }
    }
}
