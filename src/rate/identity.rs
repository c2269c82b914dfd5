//! Which rate-limit state a client spends: the one of its API key on the service its base URL
//! names. The registry of this process and the store of the fleet both find a state by the
//! service as [`service`] writes it, so that spellings of one base URL share one budget.

use std::net::IpAddr;

use url::{Host, Url};

/// The service `base_url` names, written the same for every spelling of it: scheme and host in
/// lower case and the scheme's default port left out (as `Url` parses them), the path with one
/// trailing slash, and every loopback host (`localhost`, `127.0.0.0/8`, `::1`) as
/// `localhost`, since each reaches only this machine. Any other host is kept as written and
/// never resolved: two DNS names of one address, or a name and its address, are two services.
pub(crate) fn service(base_url: &Url) -> String {
    let host = if is_loopback(base_url) {
        "localhost"
    } else {
        base_url.host_str().unwrap_or_default()
    };
    let port = base_url.port().map(|port| format!(":{port}"));
    format!(
        "{}://{host}{}{}/",
        base_url.scheme(),
        port.as_deref().unwrap_or_default(),
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
        let canonical = "https://petstore.example.com/v1/";
        for spelling in [
            "https://petstore.example.com/v1/",
            "https://petstore.example.com/v1",
            "HTTPS://PetStore.Example.COM/v1",
            "https://petstore.example.com:443/v1/",
            "https://petstore.example.com/v1//",
        ] {
            assert_eq!(of(spelling), canonical, "{spelling}");
        }
        assert_eq!(of("http://example.com:80/v1"), "http://example.com/v1/");
        assert_eq!(of("http://[2001:DB8::1]:80/v1"), "http://[2001:db8::1]/v1/");
    }

    #[test]
    fn every_loopback_host_is_one_and_no_other_name_is_resolved() {
        let local = of("http://localhost:8080/v1/");
        assert_eq!(local, "http://localhost:8080/v1/");
        for spelling in [
            "http://127.0.0.1:8080/v1",
            "http://127.1.2.3:8080/v1/",
            "http://[::1]:8080/v1",
            "http://LocalHost:8080/v1/",
        ] {
            assert_eq!(of(spelling), local, "{spelling}");
        }
        for other in [
            "https://localhost:8080/v1/",
            "http://localhost:8081/v1/",
            "http://localhost/v1/",
            "http://localhost:8080/v2/v1/",
            "http://127.0.0.1.nip.io:8080/v1/",
            "http://10.0.0.1:8080/v1/",
        ] {
            assert_ne!(of(other), local, "{other}");
        }
        // Not resolved: a name and its address, or two names of one host, stay apart.
        assert_ne!(
            of("https://petstore.example.com/v1/"),
            of("https://93.184.215.14/v1/")
        );
        assert_ne!(
            of("https://petstore.example.com/v1/"),
            of("https://www.petstore.example.com/v1/")
        );
        // The path's case is the service's to decide.
        assert_ne!(of("https://example.com/V1/"), of("https://example.com/v1/"));
    }
}
