//! The scenario matrix of the rate discipline (see `tests/common/matrix.rs`): independent
//! instances on one key, clones and separately built clients, a server clock from 300 s behind
//! to 300 s ahead, a minute and a day window with the day binding, half the calls cancelled,
//! a 429 with a cut body, a first answer without quota headers, and `X-RateLimit-Limit: 0`;
//! then one test per cell for 16 and 32 independent instances, two backends 2 s apart behind
//! one limiter, a ±10 s step of the service's clock, a 2xx sent before a 429 arriving inside
//! its `Retry-After`, equal minute and day limits, and a plan change in mid-window.
//! Ten windows per cell on tokio's paused clock. Every cell: no ban, at most one request per
//! instance inside any `Retry-After`, at most one 429 per instance per window, the goodput
//! its kind requires, and no call longer than a window plus `max_server_wait`.
//! `cargo bench --bench goodput` prints the same cells as a table.

use crate::common;

use common::matrix::{self, Cell, Figures, TABLE_HEADER};

async fn check(cells: impl IntoIterator<Item = Cell>) -> Vec<Figures> {
    let mut table = vec![TABLE_HEADER.to_owned()];
    let mut failures = Vec::new();
    let mut all = Vec::new();
    for cell in cells {
        let figures = matrix::run(&cell).await;
        table.push(figures.row(&cell));
        if let Err(problem) = figures.check(&cell) {
            failures.push(format!("{}: {problem} ({figures:?})", cell.name));
        }
        all.push(figures);
    }
    println!("{}", table.join("\n"));
    assert!(
        failures.is_empty(),
        "expected every cell to meet its requirements, these did not:\n{}",
        failures.join("\n")
    );
    all
}

fn cells_named(filter: impl Fn(&str) -> bool) -> Vec<Cell> {
    let cells: Vec<Cell> = matrix::cells()
        .into_iter()
        .filter(|c| !ONE_CELL_TESTS.contains(&c.name.as_str()) && filter(&c.name))
        .collect();
    assert!(!cells.is_empty(), "expected some cell to match the filter");
    cells
}

/// The cell of this exact name.
fn cell(name: &str) -> Cell {
    matrix::cells()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("expected a cell named {name:?}"))
}

/// The cells with a test of their own, so that each can be marked on its own.
const ONE_CELL_TESTS: &[&str] = &[
    SIXTEEN_INSTANCES,
    THIRTY_TWO_INSTANCES,
    HALF_THE_ANSWERS_LATE,
    A_DAY_THAT_BINDS,
    RESET_IN_SECONDS,
    A_BACKEND_AHEAD_OF_THE_END,
    OTHERS_WAITING_THEIR_TURN,
    EVERY_ANSWER_LATE,
    BACKENDS_AHEAD_AND_BEHIND,
    RESET_IN_SECONDS_FROM_BACKENDS_APART,
    HALF_ANSWERED_AHEAD,
    HALF_CANCELLED,
    HELD_BY_A_FIRST_503,
    FIRST_WINDOW_OVER_BY_BACKENDS_AHEAD,
    STEP_BY_WHOLE_PERIODS,
    EARLY_CALLERS_OF_A_PERIOD,
    LATE_STARTER_AFTER_A_CANCEL,
    EARLY_CALLER_AT_ITS_OWN_PACE,
    LATE_STARTERS_AFTER_A_BURST,
    LATE_STARTERS_INTO_A_BURST,
    MOST_BACKENDS_A_SECOND_AHEAD,
    ONE_BACKEND_A_SECOND_AHEAD,
    A_SECOND_AHEAD_AND_SPENT_TO_ITS_END,
    HALF_THE_FLEET_JOINING_LATE,
    STAGGERED_START,
    SECOND_BACKEND_AHEAD_1,
    SECOND_BACKEND_AHEAD_4,
    FIRST_BACKEND_AHEAD_1,
    FIRST_BACKEND_AHEAD_4,
    SECOND_BACKEND_BEHIND_1,
    SECOND_BACKEND_BEHIND_4,
    STEP_AHEAD_1,
    STEP_AHEAD_4,
    STEP_BACK_1,
    STEP_BACK_4,
    LATE_ANSWER_1,
    LATE_ANSWER_4,
    EQUAL_LIMITS_1,
    EQUAL_LIMITS_4,
    UPGRADE_1,
    UPGRADE_4,
    DOWNGRADE_1,
    DOWNGRADE_4,
];

const SIXTEEN_INSTANCES: &str = "16 independent instances, 4 tasks each";
const THIRTY_TWO_INSTANCES: &str = "32 independent instances, 4 tasks each";
const HALF_THE_ANSWERS_LATE: &str =
    "32 independent instances, half the answers 382 ms late, 2 s windows";
const A_DAY_THAT_BINDS: &str = "32 independent instances, a day of 160 that binds over 96 a minute";
const RESET_IN_SECONDS: &str =
    "32 independent instances, the reset in seconds from now, 2 s windows";
const A_BACKEND_AHEAD_OF_THE_END: &str =
    "32 independent instances, backends 1 s behind and 2 s ahead, 2 s windows";
const OTHERS_WAITING_THEIR_TURN: &str =
    "16 independent instances started 737 ms apart, a day of 192 over 160 a half-minute";
const EVERY_ANSWER_LATE: &str = "16 independent instances, every answer 429 ms late, 2 s windows";
const BACKENDS_AHEAD_AND_BEHIND: &str =
    "32 independent instances, backends 2 s ahead and 3 s behind, 5 s windows";
const RESET_IN_SECONDS_FROM_BACKENDS_APART: &str =
    "32 independent instances, the reset in seconds from backends 4 s apart, 10 s windows";
const HALF_ANSWERED_AHEAD: &str =
    "32 independent instances, half of them answered by a backend 2 s ahead, 60 s windows";
const HALF_CANCELLED: &str = "32 independent instances, half the calls cancelled, 5 s windows";
const HELD_BY_A_FIRST_503: &str =
    "32 independent instances, one held 4 s by a first 503, 5 s windows";
const FIRST_WINDOW_OVER_BY_BACKENDS_AHEAD: &str =
    "32 independent instances, 2 of 3 backends 1 s ahead, a first window of under a second";
const STEP_BY_WHOLE_PERIODS: &str =
    "32 independent instances, the clock steps two whole 10 s periods forward";
const EARLY_CALLERS_OF_A_PERIOD: &str =
    "32 independent instances, every answer 163 ms late, 2 s windows and a 10 s day";
const EARLY_CALLER_AT_ITS_OWN_PACE: &str =
    "32 independent instances started 235 ms apart, the first three held 18 s by a 503";
const LATE_STARTER_AFTER_A_CANCEL: &str = "32 independent instances, half the calls cancelled, a tenth of the answers 87 ms late, IETF fields";
const LATE_STARTERS_AFTER_A_BURST: &str =
    "16 independent instances started 164 ms apart after one's burst, backends 2 and 3 s behind";
const LATE_STARTERS_INTO_A_BURST: &str =
    "32 independent instances started 182 ms apart, 2 s windows and a 4 s day";
const MOST_BACKENDS_A_SECOND_AHEAD: &str =
    "32 independent instances, half the calls cancelled, 2 of 3 backends a second ahead";
const ONE_BACKEND_A_SECOND_AHEAD: &str =
    "32 independent instances, one of two backends a second ahead, 2 s windows";
const A_SECOND_AHEAD_AND_SPENT_TO_ITS_END: &str =
    "32 independent instances, one of two backends a second ahead, a window spent to its end";
const HALF_THE_FLEET_JOINING_LATE: &str = "32 independent instances of one task, one of two backends a second ahead, half the fleet joining each period a second late";
const STAGGERED_START: &str = "16 independent instances started 5 ms apart, 10 s windows";
const SECOND_BACKEND_AHEAD_1: &str = "2 backends, the second 2 s ahead of the limiter, 1 instance";
const SECOND_BACKEND_AHEAD_4: &str = "2 backends, the second 2 s ahead of the limiter, 4 instances";
const FIRST_BACKEND_AHEAD_1: &str = "2 backends, the first 2 s ahead of the limiter, 1 instance";
const FIRST_BACKEND_AHEAD_4: &str = "2 backends, the first 2 s ahead of the limiter, 4 instances";
const SECOND_BACKEND_BEHIND_1: &str = "2 backends, the second 2 s behind the limiter, 1 instance";
const SECOND_BACKEND_BEHIND_4: &str = "2 backends, the second 2 s behind the limiter, 4 instances";
const STEP_AHEAD_1: &str = "service clock steps +10 s in mid-window, 1 instance";
const STEP_AHEAD_4: &str = "service clock steps +10 s in mid-window, 4 instances";
const STEP_BACK_1: &str = "service clock steps -10 s in mid-window, 1 instance";
const STEP_BACK_4: &str = "service clock steps -10 s in mid-window, 4 instances";
const LATE_ANSWER_1: &str =
    "a 2xx sent before an injected 429 arrives during its Retry-After, 1 instance";
const LATE_ANSWER_4: &str =
    "a 2xx sent before an injected 429 arrives during its Retry-After, 4 instances";
const EQUAL_LIMITS_1: &str = "equal minute and day limits, 1 instance";
const EQUAL_LIMITS_4: &str = "equal minute and day limits, 4 instances";
const UPGRADE_1: &str = "plan upgraded 60 → 120/min in mid-window, 1 instance";
const UPGRADE_4: &str = "plan upgraded 60 → 120/min in mid-window, 4 instances";
const DOWNGRADE_1: &str = "plan downgraded 60 → 30/min in mid-window, 1 instance";
const DOWNGRADE_4: &str = "plan downgraded 60 → 30/min in mid-window, 4 instances";

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

#[tokio::test(start_paused = true)]
async fn sixteen_independent_instances() {
    check([cell(SIXTEEN_INSTANCES)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances() {
    check([cell(THIRTY_TWO_INSTANCES)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_with_half_the_answers_late() {
    check([cell(HALF_THE_ANSWERS_LATE)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_under_a_day_that_binds() {
    check([cell(A_DAY_THAT_BINDS)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_with_the_reset_in_seconds_from_now() {
    check([cell(RESET_IN_SECONDS)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_with_a_backend_ahead_of_the_windows_end() {
    check([cell(A_BACKEND_AHEAD_OF_THE_END)]).await;
}

#[tokio::test(start_paused = true)]
async fn sixteen_staggered_instances_while_the_others_wait_their_turn() {
    check([cell(OTHERS_WAITING_THEIR_TURN)]).await;
}

#[tokio::test(start_paused = true)]
async fn sixteen_independent_instances_whose_every_answer_is_late() {
    check([cell(EVERY_ANSWER_LATE)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_behind_backends_ahead_and_behind() {
    check([cell(BACKENDS_AHEAD_AND_BEHIND)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_told_the_reset_in_seconds_by_backends_apart() {
    check([cell(RESET_IN_SECONDS_FROM_BACKENDS_APART)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_half_of_them_answered_by_a_backend_ahead() {
    check([cell(HALF_ANSWERED_AHEAD)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_half_of_whose_calls_are_cancelled() {
    check([cell(HALF_CANCELLED)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_one_held_by_a_first_503() {
    check([cell(HELD_BY_A_FIRST_503)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_whose_first_window_backends_ahead_date_over() {
    check([cell(FIRST_WINDOW_OVER_BY_BACKENDS_AHEAD)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_through_a_step_of_whole_periods() {
    check([cell(STEP_BY_WHOLE_PERIODS)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_some_calling_early_in_each_period() {
    check([cell(EARLY_CALLERS_OF_A_PERIOD)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_one_starting_late_after_a_cancelled_call() {
    check([cell(LATE_STARTER_AFTER_A_CANCEL)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_one_spending_at_its_own_pace_calls_first() {
    check([cell(EARLY_CALLER_AT_ITS_OWN_PACE)]).await;
}

#[tokio::test(start_paused = true)]
async fn sixteen_independent_instances_starting_after_one_spent_most_of_a_window() {
    check([cell(LATE_STARTERS_AFTER_A_BURST)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_starting_into_periods_a_new_one_spent() {
    check([cell(LATE_STARTERS_INTO_A_BURST)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_behind_backends_mostly_a_second_ahead() {
    check([cell(MOST_BACKENDS_A_SECOND_AHEAD)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_behind_one_backend_a_second_ahead() {
    check([cell(ONE_BACKEND_A_SECOND_AHEAD)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_a_second_ahead_into_a_429_at_a_window_end() {
    check([cell(A_SECOND_AHEAD_AND_SPENT_TO_ITS_END)]).await;
}

#[tokio::test(start_paused = true)]
async fn thirty_two_independent_instances_half_of_them_joining_each_period_a_second_late() {
    check([cell(HALF_THE_FLEET_JOINING_LATE)]).await;
}

/// What `cargo run --release -p petstore-fleet -- --processes 16` does on the real clock, on the
/// paused one. Found there: the first instance, alone, spent the window at once without a 429,
/// and the first request of every instance that started after it met the spent window (86
/// requests, 26 × 429, 25 inside one `Retry-After`, a ban).
#[tokio::test(start_paused = true)]
async fn sixteen_independent_instances_started_one_after_another() {
    check([cell(STAGGERED_START)]).await;
}

#[tokio::test(start_paused = true)]
async fn two_backends_the_second_ahead_one_instance() {
    check([cell(SECOND_BACKEND_AHEAD_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn two_backends_the_second_ahead_four_instances() {
    check([cell(SECOND_BACKEND_AHEAD_4)]).await;
}

#[tokio::test(start_paused = true)]
async fn two_backends_the_first_ahead_one_instance() {
    check([cell(FIRST_BACKEND_AHEAD_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn two_backends_the_first_ahead_four_instances() {
    check([cell(FIRST_BACKEND_AHEAD_4)]).await;
}

#[tokio::test(start_paused = true)]
async fn two_backends_the_second_behind_one_instance() {
    check([cell(SECOND_BACKEND_BEHIND_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn two_backends_the_second_behind_four_instances() {
    check([cell(SECOND_BACKEND_BEHIND_4)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_clock_step_ahead_one_instance() {
    check([cell(STEP_AHEAD_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_clock_step_ahead_four_instances() {
    check([cell(STEP_AHEAD_4)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_clock_step_back_one_instance() {
    check([cell(STEP_BACK_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_clock_step_back_four_instances() {
    check([cell(STEP_BACK_4)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_late_answer_across_a_cooldown_one_instance() {
    let figures = check([cell(LATE_ANSWER_1)]).await;
    assert!(
        figures[0].late_answers >= 1,
        "expected a 2xx answered after the injected 429 to a request sent before it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_answer_across_a_cooldown_four_instances() {
    let figures = check([cell(LATE_ANSWER_4)]).await;
    assert!(
        figures[0].late_answers >= 1,
        "expected a 2xx answered after the injected 429 to a request sent before it"
    );
}

#[tokio::test(start_paused = true)]
async fn equal_minute_and_day_limits_one_instance() {
    check([cell(EQUAL_LIMITS_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn equal_minute_and_day_limits_four_instances() {
    check([cell(EQUAL_LIMITS_4)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_plan_upgrade_in_mid_window_one_instance() {
    check([cell(UPGRADE_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_plan_upgrade_in_mid_window_four_instances() {
    check([cell(UPGRADE_4)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_plan_downgrade_in_mid_window_one_instance() {
    check([cell(DOWNGRADE_1)]).await;
}

#[tokio::test(start_paused = true)]
async fn a_plan_downgrade_in_mid_window_four_instances() {
    check([cell(DOWNGRADE_4)]).await;
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
        let homes = if ONE_CELL_TESTS.contains(&cell.name.as_str()) {
            1
        } else {
            groups.iter().filter(|g| g(&cell.name)).count()
        };
        assert_eq!(
            homes, 1,
            "expected the cell {:?} in exactly one test, it is in {homes}",
            cell.name
        );
    }
    for name in ONE_CELL_TESTS {
        assert_eq!(
            matrix::cells().iter().filter(|c| c.name == *name).count(),
            1,
            "expected exactly one cell named {name:?}"
        );
    }
}
