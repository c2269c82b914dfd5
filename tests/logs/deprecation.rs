//! The deprecation notice of `getPet`: exposed on the response, and warned once per operation
//! per process. No other test of its binary calls `getPet`, since the warning is process-wide.

use crate::common;

use chrono::{TimeZone, Utc};
use common::{
    API_KEY, Captured, PET_42, api_request, capture, client, fixtures, json, mount_list, start,
};
use wiremock::ResponseTemplate;

/// The deprecation warnings logged for `operation`.
fn deprecation_warning_lines(captured: &Captured, operation: &str) -> Vec<String> {
    captured
        .text()
        .lines()
        .filter(|line| {
            line.contains("WARN") && line.contains("reports this operation as deprecated")
        })
        .filter(|line| line.contains(&format!("operation=\"{operation}\"")))
        .map(str::to_owned)
        .collect()
}

fn deprecation_warnings(captured: &Captured, operation: &str) -> usize {
    deprecation_warning_lines(captured, operation).len()
}

fn deprecated(template: ResponseTemplate) -> ResponseTemplate {
    template
        .insert_header("Deprecation", "@1688169599")
        .insert_header("Sunset", "Thu, 05 Dec 2030 00:00:00 GMT")
}

#[tokio::test]
#[allow(deprecated)]
async fn a_deprecation_notice_is_exposed_and_warned_once_per_operation_per_process() {
    let (captured, _guard) = capture(tracing::Level::WARN);
    let server = start().await;
    api_request("GET", PET_42)
        .respond_with(deprecated(json(200, fixtures::PET_42)))
        .expect(3)
        .mount(&server)
        .await;
    mount_list(&server, deprecated(json(200, "[]")), 1).await;
    let first = client(&server);

    let response = first.get_pet(42).send_with_meta().await.unwrap();
    let notice = response.deprecation().expect("a deprecation notice");
    assert!(
        notice.deprecated,
        "expected the notice to say deprecated, got {notice:?}"
    );
    assert_eq!(
        notice.deprecated_at,
        Utc.timestamp_opt(1_688_169_599, 0).single(),
        "expected the date of the Deprecation header"
    );
    let sunset = Utc.with_ymd_and_hms(2030, 12, 5, 0, 0, 0).single();
    assert_eq!(
        notice.sunset, sunset,
        "expected the date of the Sunset header"
    );
    assert_eq!(
        deprecation_warnings(&captured, "getPet"),
        1,
        "expected one warning for getPet"
    );
    let warning = &deprecation_warning_lines(&captured, "getPet")[0];
    assert!(
        warning.contains("deprecated_at=2023-06-30T23:59:59Z sunset=2030-12-05T00:00:00Z"),
        "expected both dates in RFC 3339, got {warning}"
    );
    assert!(
        warning.contains("method=\"PetStoreClient::get_pet\""),
        "expected the method to change, got {warning}"
    );

    first.clone().get_pet(42).send().await.unwrap();
    assert_eq!(
        deprecation_warnings(&captured, "getPet"),
        1,
        "a clone is the same client"
    );

    first.list_pets().send().await.unwrap();
    assert_eq!(
        deprecation_warnings(&captured, "listPets"),
        1,
        "each operation warns"
    );

    // A program that builds a client per run or per task is warned once, not every time.
    client(&server).get_pet(42).send().await.unwrap();
    assert_eq!(
        deprecation_warnings(&captured, "getPet"),
        1,
        "a new client in the same process warned again"
    );
    assert!(
        !captured.text().contains(API_KEY),
        "the API key leaked into the logs:\n{}",
        captured.text()
    );
}

/// The sandbox's `getPet` sends `Sunset` and no `Deprecation`: the warning gives the one date
/// there is. Through `PetStoreClient::request`, an operation of its own, so that the warning
/// of the test above (once per operation per process) does not stand in its way.
#[tokio::test]
async fn the_deprecation_warning_shows_the_dates_there_are_and_nothing_for_the_others() {
    let (captured, _guard) = capture(tracing::Level::WARN);
    let server = start().await;
    api_request("GET", PET_42)
        .respond_with(
            json(200, fixtures::PET_42).insert_header("Sunset", "Thu, 05 Dec 2030 00:00:00 GMT"),
        )
        .expect(1)
        .mount(&server)
        .await;

    client(&server)
        .request(petstore_client::reqwest::Method::GET, "pets/42")
        .send_for_bytes()
        .await
        .unwrap();

    let warnings = deprecation_warning_lines(&captured, "request");
    assert_eq!(warnings.len(), 1, "expected one warning, got {warnings:?}");
    let warning = &warnings[0];
    assert!(
        warning.contains(" sunset=2030-12-05T00:00:00Z"),
        "expected the sunset date in RFC 3339, got {warning}"
    );
    assert!(
        !warning.contains("deprecated_at"),
        "expected no deprecation date where the service gave none, got {warning}"
    );
}
