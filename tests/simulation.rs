//! The seeded simulation explorer: every seed generates a world (`common::simulation::world`),
//! runs it against the sandbox on tokio's paused clock, and checks the invariants: no ban, at
//! most one request per instance inside any `Retry-After`, no call longer than a window plus
//! `max_server_wait`, no panic, and the goodput floor the world's kind allows.
//!
//! - `cargo test --test simulation` runs the first `DEFAULT_WORLDS` seeds (2,000, about two
//!   minutes on two cores).
//! - `SIM_WORLDS=100000 cargo test --release --test simulation` runs a soak by hand;
//!   `SIM_FIRST=N` starts it at seed N, to go on with a soak stopped early.
//! - `SIM_SEED=1234 cargo test --test simulation` replays one world and prints its figures;
//!   with `SIM_LOG=1` also every request the sandbox received (`-- --nocapture`).
//!
//! A failing world prints its seed and the world in one line. Every failure it found has a
//! named regression test in the test file of its topic.

/// The shared test set-up (`tests/common`): only the helpers these tests use.
#[path = "common"]
#[allow(dead_code)]
mod common {
    pub mod matrix;
    pub mod simulation;
}

use common::matrix::{self, Cell, Expect, Figures, TABLE_HEADER};
use common::simulation::{TOO_FAR_OFF, hardships, world};

const DEFAULT_WORLDS: u64 = 2_000;
/// The worlds run on this many threads, one test each.
const PARTS: u64 = 2;

/// The seeds to run: `SIM_SEED` alone, or `SIM_WORLDS` of them from `SIM_FIRST` (0 unless set).
fn seeds() -> Vec<u64> {
    let read = |name: &str| {
        std::env::var(name).ok().map(|value| {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{name} must be a whole number, not {value:?}"))
        })
    };
    match (read("SIM_SEED"), read("SIM_WORLDS")) {
        (Some(seed), _) => vec![seed],
        (None, worlds) => {
            let first = read("SIM_FIRST").unwrap_or(0);
            (first..first + worlds.unwrap_or(DEFAULT_WORLDS)).collect()
        }
    }
}

/// Runs this part's share of the seeds: the failures, one line each, and the share of its runs
/// held to a goodput floor above zero (printed with the share drawn with one).
fn explore(part: u64) -> (Vec<String>, f64) {
    let seeds: Vec<u64> = seeds().into_iter().filter(|s| s % PARTS == part).collect();
    let replay = seeds.len() == 1;
    let rows = std::env::var_os("SIM_ROWS").is_some();
    let mut failures = Vec::new();
    let (mut stated, mut floors) = (0, 0);
    let worlds = seeds.len();
    for seed in seeds {
        let cell = world(seed);
        let figures = run(&cell);
        if matches!(cell.expect, Expect::Goodput(floor) if floor > 0.0) {
            stated += 1;
        }
        if figures.floor_in_force(&cell) {
            floors += 1;
        }
        if replay {
            println!("{TABLE_HEADER}\n{}\n{cell:?}", figures.row(&cell));
        } else if rows {
            println!("SIM_SEED={seed} {:?} {}", cell.expect, figures.row(&cell));
        }
        if let Err(problem) = figures.check(&cell) {
            let failure =
                format!("SIM_SEED={seed}: {problem}; figures {figures:?}; world {cell:?}");
            // At once, so that a soak stopped early still shows what it found.
            eprintln!("{failure}");
            failures.push(failure);
        }
    }
    // The share of runs held to a goodput above zero: the floor's reach.
    let reach = floors as f64 / worlds.max(1) as f64;
    println!(
        "part {part}: {stated} of {worlds} worlds ({:.1}%) drawn with a goodput floor above zero, \
         {floors} ({:.1}%) held to it",
        100.0 * stated as f64 / worlds.max(1) as f64,
        100.0 * reach
    );
    (failures, reach)
}

/// Runs one world on a runtime of its own, dropped with whatever the world left running: on
/// one runtime for all, the worlds before shaped a world's course (soak seed 3570 broke only
/// after them), and `SIM_SEED` did not replay it.
fn run(cell: &Cell) -> Figures {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime")
        .block_on(matrix::run(cell))
}

#[track_caller]
fn assert_no_failure(part: u64) {
    let (failures, reach) = explore(part);
    assert!(
        failures.is_empty(),
        "expected every world to keep the invariants, {} did not (replay one with \
         SIM_SEED=<seed> cargo test --test simulation):\n{}",
        failures.len(),
        failures.join("\n")
    );
    let default = ["SIM_SEED", "SIM_WORLDS", "SIM_FIRST", "SIM_MAX_INSTANCES"]
        .iter()
        .all(|name| std::env::var_os(name).is_none());
    if default {
        assert!(
            reach >= HELD_TO_A_FLOOR,
            "expected at least {:.0}% of the default worlds of part {part} held to a goodput \
             floor above zero, got {:.1}%",
            100.0 * HELD_TO_A_FLOOR,
            100.0 * reach
        );
    }
}

#[test]
fn worlds_with_even_seeds_keep_the_invariants() {
    assert_no_failure(0);
}

#[test]
fn worlds_with_odd_seeds_keep_the_invariants() {
    assert_no_failure(1);
}

/// Runs the world of `seed` and checks every invariant it is held to.
#[track_caller]
fn assert_world_keeps_the_invariants(seed: u64) {
    let cell = world(seed);
    let figures = run(&cell);
    assert_eq!(figures.check(&cell), Ok(()), "figures {figures:?}");
}

/// Soak seed 2958: a plan upgrade 0.451 s into a 2 s window was taken as made at the window's
/// start, and the window as allowing the new plan, which the client learns of only from an
/// answer after it (goodput 15.4% against a floor of 20%).
#[test]
fn a_plan_change_is_measured_in_the_window_it_falls_in_soak_seed_2958() {
    assert_world_keeps_the_invariants(2958);
}

/// Soak seed 6466: one instance on sliding windows with a day of 60 per 300 s spends the day
/// in its first 18 s, half its calls cancelled while under way, and is served again the
/// instant the day frees them, yet goodput read 0% against a floor of 17%: the sandbox did not
/// log a request whose call was cancelled before its answer, so the served measure missed
/// part of what the day had spent.
#[test]
fn a_sliding_day_spent_before_the_measured_minutes_soak_seed_6466() {
    assert_world_keeps_the_invariants(6466);
}

/// Soak seed 23381: 16 independent instances, started 1,877 ms apart after an earlier run
/// spent the window, with two injected 429s of `Retry-After: 1.5`: one instance sent 2
/// requests inside the `Retry-After` of a 429 it never saw: its own 429, during that one,
/// showed budget left, which did not count as others calling, so its gate held no second past
/// its own `Retry-After`.
#[test]
fn one_request_per_instance_per_cooldown_after_injected_429s_soak_seed_23381() {
    assert_world_keeps_the_invariants(23381);
}

/// Soak seed 70720: 8 independent instances started 846 ms apart, every answer 405 ms late,
/// 2 s windows of 20, and injected 429s of `Retry-After: 19`: one instance's second 429
/// showed 2 spent where it had sent 2 in all, one of them in the period before, and was not
/// taken for others calling; its gate reopened at its own `Retry-After`, and it sent 3
/// requests inside another's that ended a second later.
#[test]
fn a_period_counts_only_the_own_requests_sent_into_it_soak_seed_70720() {
    assert_world_keeps_the_invariants(70720);
}

/// Soak seeds 70994, 73658, 76954 and 80130: one process on windows of 2 to 5 s, every
/// answer (or every other) 177 to 496 ms late, a plan upgraded from 5 or 10 to 30 or 60 a
/// window: goodput 15.8%, 6.7%, 43.3% and 19.7% against floors of 29%, 9%, 45% and 22%. Rule
/// W keeps one request on the wire below 90 left, and the floor's model of round trips
/// measured what one request at a time reaches against the plan before the upgrade.
#[test]
fn round_trips_are_measured_against_the_upgraded_plan_soak_seeds_70994_73658_76954_80130() {
    for seed in [70994, 73658, 76954, 80130] {
        assert_world_keeps_the_invariants(seed);
    }
}

/// Soak seed 14979: 16 clones of one client (one process), sliding windows of 5 per 2 s and a
/// day of 5 per 6 s, half the calls cancelled: goodput 0% against a floor of 15% once a 429
/// counted only the own requests sent into its period (soak seed 70720). The day's 429, the
/// window spent, was taken for the minute's next period, which had counted one own request:
/// five spent read as others calling, and each cooldown held a second longer. A spent period
/// is judged by all own requests sent, as before; one with budget left by those sent into it.
#[test]
fn a_429_of_a_day_with_the_minutes_limit_counts_every_own_request_soak_seed_14979() {
    assert_world_keeps_the_invariants(14979);
}

/// Soak seed 95777: four independent instances on 2 s windows of 5, answers 51 to 273 ms late,
/// injected 503s and 502s whose pages carry no rate-limit headers: one instance's two 502s
/// in a row read as a service without headers, rule S let two requests on the wire, and both
/// landed inside the `Retry-After` of a 429 another instance met.
#[test]
fn a_gateways_error_pages_do_not_start_the_slow_start_soak_seed_95777() {
    assert_world_keeps_the_invariants(95777);
}

/// Soak seed 26373: one instance on a day window of 5 per 120 s, whose injected 429s and 503s
/// spent one day's 5: goodput read 50% against a floor of 54%, as the served measure took
/// the faults off each minute's allowance but not off the day's.
#[test]
fn a_small_day_window_under_injected_quiet_soak_seed_26373() {
    assert_world_keeps_the_invariants(26373);
}

/// Soak seed 24043: one process, an earlier run's spent window, two injected 429s whose
/// `Retry-After` is a past date: goodput 41.7% against a floor of 54%. The floor's model of a
/// fault's quiet took the longer of its `Retry-After` and rule C's second, and the backoff;
/// the gate holds for the longer of the `Retry-After` and the backoff, then the second.
#[test]
fn a_fault_keeps_the_key_quiet_for_its_backoff_and_rule_cs_second_soak_seed_24043() {
    assert_world_keeps_the_invariants(24043);
}

/// Soak seed 39422: as seed 24043, with a `Retry-After` that cannot be read (41.7% against a
/// floor of 54% before the floor's model gave each fault rule C's second).
#[test]
fn an_unreadable_retry_after_keeps_the_key_quiet_for_the_backoff_and_a_second_soak_seed_39422() {
    assert_world_keeps_the_invariants(39422);
}

/// Soak seed 27777: as seed 24043, with no `Retry-After` at all.
#[test]
fn a_429_without_retry_after_keeps_the_key_quiet_for_the_backoff_and_a_second_soak_seed_27777() {
    assert_world_keeps_the_invariants(27777);
}

/// Soak seeds 42632, 47623 and 49623: as seed 24043 (an earlier run's spent window, 429s
/// without a readable `Retry-After`): one instance after a plan upgrade (8.5% against a floor of
/// 10%), 16 clones (43.5% against 54%) and one instance (40.5% against 54%).
#[test]
fn more_429s_without_a_readable_retry_after_after_an_earlier_run_soak_seeds_42632_47623_49623() {
    for seed in [42632, 47623, 49623] {
        assert_world_keeps_the_invariants(seed);
    }
}

/// Soak seeds 59226, 64399 and 64996: as seed 24043, 429s or 503s without a readable
/// `Retry-After` after an earlier run, or on sliding windows (29.2%, 10.0% and 3.9% against
/// floors of 39%, 25% and 5%).
#[test]
fn faults_without_a_readable_retry_after_soak_seeds_59226_64399_64996() {
    for seed in [59226, 64399, 64996] {
        assert_world_keeps_the_invariants(seed);
    }
}

/// Soak seed 53241: one instance, 10 per 5 s windows upgraded to 60 at 6.7 s, 242 ms round
/// trips: goodput 35.7% against a floor of 39%. Passes since a server error without rate-limit
/// headers no longer counts towards rule S's slow start (soak seed 95777).
#[test]
fn a_plan_upgrade_under_long_round_trips_soak_seed_53241() {
    assert_world_keeps_the_invariants(53241);
}

/// Soak seed 54091: two independent instances, sliding windows of 30 a minute,
/// `X-RateLimit-Remaining` repeated, backends' `Date`s 3 s and 2 s ahead: 39 × 429 in one
/// window, at most 36 allowed. With the budget unreadable every request probes, as without
/// headers, and each probe after a `Retry-After` can take the one request the window freed
/// while the next meets a 429; the explorer's cap allowed that pattern only where no headers
/// came. It now allows it wherever the answers do not tell the budget (cap 96).
#[test]
fn a_repeated_remaining_on_sliding_windows_soak_seed_54091() {
    assert_world_keeps_the_invariants(54091);
}

/// Soak seed 57901: 16 clones of one client (one process), rate-limit headers only on 429s,
/// 60 per 10 s and a day of 180 per 40 s: the key was banned (contract 1: one process is
/// never banned). The day's 429 left an assumed window of 180, whose guess no answer without
/// headers lowers: rule W let 12 requests on the wire, and the minute's 429 found 11 of them,
/// 10 inside its `Retry-After`. An assumed window now keeps at most 8 on the wire (rule S).
#[test]
fn one_process_with_headers_only_on_429s_is_not_banned_soak_seed_57901() {
    assert_world_keeps_the_invariants(57901);
}

/// Soak seed 60026: two independent instances, a sliding window of 30 a day, the budget in
/// every answer: 35 × 429 in one window, at most 34 allowed. The winner of a freed request,
/// whose answers since the refill show no others, sent its next at the next free, inside the
/// loser's `Retry-After` that the service rounded up past it: one request, as contract 1
/// allows, and a 429 for each instance at that free where the cap allowed one for the loser
/// alone. Passes (35 of 64) since the cap allows a 429 for each instance at each free.
#[test]
fn two_instances_on_a_sliding_day_soak_seed_60026() {
    assert_world_keeps_the_invariants(60026);
}

/// Soak seed 6941: one instance, two tasks, 30 s windows of 60, three injected 429s with
/// `Retry-After: 6` and two 502s at the start, every answer 142 ms late, and a downgrade to 5 a
/// minute 19.4 s in: goodput 23.6% against a floor of 25.2%. The injected waits kept the key
/// quiet through most of the downgrade's window, which allowed 57 of the run's 72 (the old plan
/// until the change), but the floor took it for one window of four. Passes since the windows
/// free of quiet are weighed by what each allows, as goodput is.
#[test]
fn injected_waits_through_the_window_of_a_downgrade_soak_seed_6941() {
    assert_world_keeps_the_invariants(6941);
}

/// Soak seed 60645: two clients of one process, three tasks each, half the answers 332 ms late,
/// 30 s windows of 60 and a downgrade to 5 a minute 3.6 s into a window: goodput 32.3% against a
/// floor of 45%. The measure allowed that window the old plan's 60, which one request at a time
/// cannot reach in the 3.6 s before the downgrade. Passes since, where the plan goes down, the
/// floor's room for round trips counts only the time before the change in its window.
#[test]
fn a_downgrade_early_in_a_window_with_late_answers_soak_seed_60645() {
    assert_world_keeps_the_invariants(60645);
}

/// Soak seed 60760: two independent instances, sliding windows of 20 per 2 s and a day of 20
/// per 4 s, `X-RateLimit-Remaining` negative: goodput 0% against a floor of 3%, measured over one
/// refill of the day. Passes (50%) since a floor on a sliding day that binds is measured over
/// three of its refills.
#[test]
fn two_instances_with_a_negative_remaining_on_a_sliding_four_second_day_soak_seed_60760() {
    assert_world_keeps_the_invariants(60760);
}

/// Soak seed 48814: four clones of one client started 1.2 s apart after an earlier run, 5 per
/// 10 s windows, two backends whose `Date`s are 1 s and 3 s ahead of the limiter's clock: one
/// call of the key's only user held 651 ms while its budget lasted (contract 2). Each window's
/// end was placed a second early, its probe met a 429, and one call's retries backed off
/// longer with each. Passes since a request the service counted in a period it sent at that
/// period's placed end moves the placing of resets a second later.
#[test]
fn backends_ahead_of_the_limiter_hold_the_only_user_soak_seed_48814() {
    assert_world_keeps_the_invariants(48814);
}

/// Soak seed 34452: one instance, sliding windows of 5 per 2 s and a day of 5 per 6 s, the reset
/// given in seconds, 56 ms round trips: goodput 0% against a floor of 30%. Passes since a reset
/// given in seconds is placed that many seconds after the answer's arrival, not after the service's
/// clock as read then, rounded up to the second.
#[test]
fn a_sliding_six_second_day_with_the_reset_in_seconds_soak_seed_34452() {
    assert_world_keeps_the_invariants(34452);
}

/// Soak seed 34728: 16 clones of one client (one process), two host names, a window of 10 a
/// day with the reset given in seconds: 126 calls of the key's only user held while its budget
/// lasted, the longest 1.09 s (contract 2). The window's end, placed from a reset in seconds
/// read on an answer's arrival, came after the next period's first answer, which was taken
/// for another window while the spent one held the calls. An answer for the next period now
/// names a window whose end was placed late by up to the rounding and the answer's round trip.
#[test]
fn a_day_window_with_the_reset_in_seconds_holds_the_only_user_soak_seed_34728() {
    assert_world_keeps_the_invariants(34728);
}

/// Soak seed 35948: two independent instances under two host names, 5 per 2 s windows, the reset
/// given in seconds: goodput 40% against a floor of 50%. Passes since a reset given in seconds is
/// placed that many seconds after the answer's arrival, not after the service's clock as read then,
/// rounded up to the second.
#[test]
fn two_instances_on_two_second_windows_with_the_reset_in_seconds_soak_seed_35948() {
    assert_world_keeps_the_invariants(35948);
}

/// Soak seed 36231: four clones started 1.24 s apart, sliding windows of 30 per 2 s and a day
/// of 30 per 4 s, `X-RateLimit-Remaining` negative: goodput 0% against a floor of 11%, measured
/// over one refill of the day. Passes (50%) as soak seed 60760 does.
#[test]
fn a_negative_remaining_on_a_sliding_four_second_day_soak_seed_36231() {
    assert_world_keeps_the_invariants(36231);
}

/// Soak seed 6466 ran otherwise when replayed, by the retries' random jitter: a world replays
/// exactly.
#[test]
fn a_world_replays_exactly_soak_seed_6466() {
    let cell = world(6466);
    let (first, again) = (run(&cell), run(&cell));
    assert_eq!(format!("{first:?}"), format!("{again:?}"));
}

/// Seed 1 ran otherwise when replayed, as did every world where an instance names the service
/// `localhost`: the system's resolver answered on a blocking thread, in real time that the
/// paused clock skipped through by a different amount each run.
#[test]
fn a_world_with_two_host_names_replays_exactly_seed_1() {
    let cell = world(1);
    assert!(
        cell.two_hosts,
        "expected seed 1 to name the service two ways"
    );
    let (first, again) = (run(&cell), run(&cell));
    assert_eq!(format!("{first:?}"), format!("{again:?}"));
}

/// The least share of each half of the first [`DEFAULT_WORLDS`] worlds whose run is held to a
/// goodput floor above zero. The rest are runs of fleets past the contract (more than 9
/// independent instances, drawn in 15% of independent worlds; more than one without quota
/// headers) that met a ban, which the contract allows them (nearly every fleet of 16 or 32), and
/// worlds whose backends are too far off the limiter's clock to measure in a run.
const HELD_TO_A_FLOOR: f64 = 0.86;

/// Every world is drawn with a goodput floor above zero but those whose backends are too far
/// off the limiter's clock to measure in a run: the explorer can fail on goodput in any
/// other, and past the contract in any run that meets no ban.
#[test]
fn every_world_but_backends_too_far_off_is_drawn_with_a_goodput_floor() {
    for seed in 0..DEFAULT_WORLDS {
        let cell = world(seed);
        let unmeasured = hardships(&cell).contains(&(TOO_FAR_OFF, 0.0));
        assert!(
            unmeasured || matches!(cell.expect, Expect::Goodput(floor) if floor > 0.0),
            "SIM_SEED={seed} is held to {:?}: {}",
            cell.expect,
            cell.name
        );
    }
}

/// Soak seed 67028: one instance, half its calls cancelled, sliding windows of 5 per 10 s and a
/// day of 5 per 50 s, injected 429s and 503s, backends' clocks apart and a plan upgrade: 3
/// calls in the run, goodput 0% against a floor of 2%. The day's own 429 (39 s) came between
/// the injected ones, and the gate's strikes ran on through it: each 503 after it backed off
/// 8 s. Starting the count again after a quiet that asked at least the backoff (or the longest
/// backoff) passes it, but let two instances racing for a sliding window's freed requests
/// probe after every long wait: soak seed 38496 met 42 × 429 in one window where 36 are
/// allowed (26 with the strikes kept). Measured over three of the day's refills rather than
/// one, as soak seed 60760 is, the strikes kept, it passes (58.8%).
#[test]
fn injected_quiets_around_a_day_long_retry_after_soak_seed_67028() {
    assert_world_keeps_the_invariants(67028);
}

/// Soak seed 38496: two independent instances race for the requests a sliding window of 30
/// per 10 minutes frees, behind backends whose clocks are up to 3 s apart: 51 × 429, at most 26
/// in one window. With the gate's strikes started again after each long `Retry-After` (tried
/// for soak seed 67028), each instance probed after every long wait: 70 × 429, 42 in one
/// window, where 36 are allowed.
#[test]
fn two_instances_racing_on_a_sliding_ten_minute_window_soak_seed_38496() {
    assert_world_keeps_the_invariants(38496);
}

/// Soak seed 67375: two clients built apart in one process, one of them naming the service
/// `localhost`, an hour window of 60 with the reset given in seconds (IETF fields), every
/// answer 285 ms late: 5 calls of the key's only user held while its budget lasted, the longest
/// 1.145 s (contract 2), as in soak seed 34728, and fixed with it.
#[test]
fn an_hour_window_with_the_reset_in_seconds_holds_the_only_user_soak_seed_67375() {
    assert_world_keeps_the_invariants(67375);
}

/// Soak seed 69856: four independent instances, windows of 10 per 2 s with the reset given in
/// seconds (IETF fields), every answer 127 ms late: each window served is followed by one served by
/// none, as with others seen a window reopens a second after the latest its reset may be: goodput
/// 45% against a floor of 50%. Passes since a reset given in seconds is placed that many seconds
/// after the answer's arrival, not after the service's clock as read then, rounded up to the
/// second.
#[test]
fn a_fleet_on_two_second_windows_with_the_reset_in_seconds_soak_seed_69856() {
    assert_world_keeps_the_invariants(69856);
}

/// Soak seeds 74609 and 80317: one process whose clients name the service two ways, answers
/// 163 or 392 ms late, a plan downgraded (20 to 5 a window, 30 to 5): 2 and 4 calls of the
/// key's only user held while its budget lasted, the longest 92 and 200 ms (contract 2); in
/// 74609 also backends' clocks up to 2 s behind. The fall from the old plan's remaining to the
/// new one's read as others (80317: 26 instances, then 5 after the next period's first
/// answer), and rule F spread the 4 left over the window, a second past its end. An answer
/// with another limit now refills the window: others show only by the fall after it.
#[test]
fn a_plan_downgrade_does_not_hold_the_only_user_soak_seeds_74609_80317() {
    for seed in [74609, 80317] {
        assert_world_keeps_the_invariants(seed);
    }
}

/// Soak seed 81516: one process, windows of 30 an hour under a day of 30 per 3 hours, three
/// injected 429s counted against the day, and a plan downgrade: goodput 33.3% against a floor
/// of 45%, the calls held past `max_server_wait` failing as throttled. The client spent the
/// day's 30 in the hour the downgrade came in, before it came, and the measure allowed that
/// hour only the new plan's 5, then the day's 25 more in the next two. Passes (100%) since a
/// window allows the plan in force when it begins.
#[test]
fn injected_429s_and_a_downgrade_on_a_long_day_soak_seed_81516() {
    assert_world_keeps_the_invariants(81516);
}

/// Soak seed 86145: one process, windows of 5 per 30 minutes under a day of 5 per 2 hours, an
/// earlier run's 2 requests and three injected 429s spent the day: every call failed as
/// throttled past `max_server_wait`, rightly, yet goodput read 0% against a floor of 90%. The
/// explorer took the injected 429 that took the day's last request for the limiter's own, did
/// not count it as spent, and allowed a request the service could not serve. The sandbox's log
/// now tells an injected fault's answer apart.
#[test]
fn injected_429s_that_spend_a_long_day_soak_seed_86145() {
    assert_world_keeps_the_invariants(86145);
}

/// Soak seed 88817: 16 clones of one client (one process), sliding windows, rate-limit headers
/// only on 429s, injected 503s of `Retry-After: 9`, the service's clock stepped 19 s forward:
/// the key was banned (contract 1) while a spent period's 429 was judged by the own requests
/// sent into it; judged by all sent, as a spent period may be a longer window's, it is not.
#[test]
fn one_process_with_headers_only_on_429s_and_a_clock_step_is_not_banned_soak_seed_88817() {
    assert_world_keeps_the_invariants(88817);
}

/// Soak seed 88844: one instance, sliding windows of 30 per 10 s and a day of 30 per 30 s, the
/// reset given in seconds, two injected 503s without `Retry-After`, a tenth of the answers
/// 460 ms late: goodput 6.7% against a floor of 21%, then 20%: the day's refill came a second
/// and a half before the measured span ended, and the client, which reads the reset rounded
/// up to the second, spent most of it after. Passes (76.3%) as soak seed 60760 does.
#[test]
fn a_sliding_thirty_second_day_with_the_reset_in_seconds_soak_seed_88844() {
    assert_world_keeps_the_invariants(88844);
}

/// Soak seed 89426: one instance, a window of 10 per 10 minutes with the reset given in
/// seconds (IETF fields), answers 187 to 310 ms late: 6 calls of the key's only user held
/// while its budget lasted, the longest 1.071 s (contract 2), as in soak seed 34728, and fixed
/// with it.
#[test]
fn a_ten_minute_window_with_the_reset_in_seconds_holds_the_only_user_soak_seed_89426() {
    assert_world_keeps_the_invariants(89426);
}

/// Soak seed 91171: eight independent instances, sliding windows of 5 per 5 s and a day of 5
/// per 10 s, answers 90 ms late: 51 × 429 with at most one request per instance inside any
/// `Retry-After`, and goodput 0% against a floor of 4%: the one refill of the day measured
/// came a second before the span ended, and rule C's second after another's `Retry-After`
/// put the instances' requests just past it. Passes (75%) as soak seed 60760 does.
#[test]
fn eight_instances_on_a_sliding_ten_second_day_soak_seed_91171() {
    assert_world_keeps_the_invariants(91171);
}

/// Soak seed 97429: two independent instances under two host names, 20 per 2 s and a day of
/// 40 per 6 s, the reset given in seconds, six injected 429s: goodput 47.5% against a floor of
/// 50%, the next period's first answer taken for another window. Passes since that answer
/// names a window whose end was placed late.
#[test]
fn two_instances_on_two_second_windows_and_a_six_second_day_soak_seed_97429() {
    assert_world_keeps_the_invariants(97429);
}

/// Soak seed 97621: four clients built apart in one process, two host names, a sliding window
/// of 30 per 5 s without rate-limit headers, three 503s whose `Retry-After` is a date, every
/// answer 160 ms late: 10 × 429 in one window, one over the cap of its kind. The window,
/// spent, freed one request at a time: each probe after a `Retry-After` of a second or two took
/// it, and the request after the probe met a 429. Passes since the cap counts those.
#[test]
fn four_clients_on_a_sliding_window_without_headers_soak_seed_97621() {
    assert_world_keeps_the_invariants(97621);
}

/// Soak seed 202480: 32 independent instances, 2 tasks each, 30 per 10 s windows,
/// `X-RateLimit-Remaining` repeated, two injected 429s with `Retry-After: 11` at the start,
/// half the calls cancelled, backends' `Date`s 3 s ahead, 2 s behind and 1 s ahead, every
/// answer 304 ms late: banned (50 × 429, 47 requests inside a wait), and four instances sent 2
/// requests inside one `Retry-After` (contract 1): the injected one, which no header foretold
/// (29 of 30 were left) and which none of them saw. Each met a 429 of its own inside it, whose
/// `Retry-After` showed the window's end at 10 s; each waited that and rule C's second, and sent
/// its next at 11.03 to 11.18 s, before the injected wait ended at 11.3 s. Not fixed: an
/// instance cannot know a wait longer than every answer it received shows.
#[test]
#[ignore = "an instance sends 2 requests inside one Retry-After"]
fn thirty_two_instances_with_a_repeated_remaining_and_injected_429s_soak_seed_202480() {
    assert_world_keeps_the_invariants(202480);
}

/// Soak seed 205781: one instance, sliding windows of 60 per 10 s, three injected 503s whose
/// `Retry-After` is a date in 1970, a 502 without rate-limit headers, backends' `Date`s 180 s
/// and 44 s ahead, every answer 90 ms late: 3 × 429 in one window, at most 2 allowed. Every
/// reset was placed in the past by the `Date`s, so answers showing the window spent were
/// dropped. Passes since resets are placed no earlier than the requests counted before them
/// allow.
#[test]
fn one_instance_with_503s_of_a_past_retry_after_on_sliding_windows_soak_seed_205781() {
    assert_world_keeps_the_invariants(205781);
}

/// Soak seed 206713: two independent instances, 5 per 2 s windows, answers 422 ms late:
/// goodput 40% against a floor of 47%, one full window served by none. Each instance took the
/// answer to a request sent before a window ended, which arrived after, for that window still
/// open for a second with one request left, and sent nothing until the window after. Fails if
/// such an answer is not dropped.
#[test]
fn two_instances_with_answers_arriving_after_their_window_ended_soak_seed_206713() {
    assert_world_keeps_the_invariants(206713);
}

/// Soak seed 210236: three independent instances started 624 ms apart, 4 tasks each, 10 per 2 s
/// windows, the IETF fields, every answer 193 ms late: goodput 33.3% against a floor of 50%, one
/// full window of three served. Passes since a reset given in seconds is placed that many seconds
/// after the answer's arrival, not after the service's clock as read then, rounded up to the
/// second.
#[test]
fn three_instances_started_apart_on_two_second_windows_soak_seed_210236() {
    assert_world_keeps_the_invariants(210236);
}

/// Soak seed 219243: eight independent instances, every other naming the service `localhost`, 20
/// per 2 s windows, the reset given in seconds, answers 61 ms late and half of them 158 ms more:
/// goodput 33.3% against a floor of 50%, one full window of three served. Passes since a reset
/// given in seconds is placed that many seconds after the answer's arrival, not after the service's
/// clock as read then, rounded up to the second.
#[test]
fn eight_instances_under_two_host_names_on_two_second_windows_soak_seed_219243() {
    assert_world_keeps_the_invariants(219243);
}

/// Soak seed 219392: four independent instances, 2 tasks each, 20 per 2 s windows, the reset given
/// in seconds, a tenth of the answers 161 ms late: goodput 47.5% against a floor of 50%, the second
/// full window served by none. Passes since a reset given in seconds is placed that many seconds
/// after the answer's arrival, not after the service's clock as read then, rounded up to the
/// second.
#[test]
fn four_instances_on_two_second_windows_with_the_reset_in_seconds_soak_seed_219392() {
    assert_world_keeps_the_invariants(219392);
}
