//! The deprecation notice of `getPet`: exposed on the response, and warned once per operation
//! per process. Alone in its test binary, since the warning is process-wide.

mod common;

use chrono::{TimeZone, Utc};
use common::{
    API_KEY, Captured, PET_42, api_request, capture, client, fixtures, json, mount_list, start,
};
use wiremock::ResponseTemplate;

fn deprecation_warnings(captured: &Captured, operation: &str) -> usize {
    captured
        .text()
        .lines()
        .filter(|line| {
            line.contains("WARN") && line.contains("reports this operation as deprecated")
        })
        .filter(|line| line.contains(&format!("operation=\"{operation}\"")))
        .count()
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
