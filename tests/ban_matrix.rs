//! The scenario matrix of the rate discipline (see `tests/common/matrix.rs`): independent
//! instances on one key, clones and separately built clients, a server clock from 300 s behind
//! to 300 s ahead, a minute and a day window with the day binding, half the calls cancelled,
//! a 429 with a cut body, a first answer without quota headers, and `X-RateLimit-Limit: 0`.
//! Ten windows per cell on tokio's paused clock. Every cell: no ban, at most one request per
//! instance inside any `Retry-After`, at most one 429 per instance per window, the goodput
//! its kind requires, and no call longer than a window plus `max_server_wait`.
//! `cargo bench --bench goodput` prints the same cells as a table.

mod common;

use common::matrix::{self, Cell, TABLE_HEADER};

async fn check(cells: impl IntoIterator<Item = Cell>) {
    let mut table = vec![TABLE_HEADER.to_owned()];
    let mut failures = Vec::new();
    for cell in cells {
        let figures = matrix::run(&cell).await;
        table.push(figures.row(&cell));
        if let Err(problem) = figures.check(&cell) {
            failures.push(format!("{}: {problem} ({figures:?})", cell.name));
        }
    }
    println!("{}", table.join("\n"));
    assert!(
        failures.is_empty(),
        "expected every cell to meet its requirements, these did not:\n{}",
        failures.join("\n")
    );
}

fn cells_named(filter: impl Fn(&str) -> bool) -> Vec<Cell> {
    let cells: Vec<Cell> = matrix::cells()
        .into_iter()
        .filter(|c| filter(&c.name))
        .collect();
    assert!(!cells.is_empty(), "expected some cell to match the filter");
    cells
}

#[tokio::test(start_paused = true)]
async fn instances_sharing_a_key() {
    check(cells_named(|name| {
        name.contains("instance") && !name.contains(',')
            || name.contains("one process")
            || name.contains("clones")
    }))
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_skewed_server_clock() {
    check(cells_named(|name| name.starts_with("server clock"))).await;
}

#[tokio::test(start_paused = true)]
async fn two_windows_cancellation_and_odd_answers() {
    check(cells_named(|name| {
        !name.starts_with("server clock") && name.contains(',') && !name.contains("one process")
    }))
    .await;
}

#[test]
fn every_cell_is_in_exactly_one_test() {
    let groups = [
        |name: &str| {
            name.contains("instance") && !name.contains(',')
                || name.contains("one process")
                || name.contains("clones")
        },
        |name: &str| name.starts_with("server clock"),
        |name: &str| {
            !name.starts_with("server clock") && name.contains(',') && !name.contains("one process")
        },
    ];
    for cell in matrix::cells() {
        let homes = groups.iter().filter(|g| g(&cell.name)).count();
        assert_eq!(
            homes, 1,
            "expected the cell {:?} in exactly one test, it is in {homes}",
            cell.name
        );
    }
}
