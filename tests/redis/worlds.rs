//! Generated worlds of a fleet sharing its state through a real `redis-server`
//! (`common::redis_worlds`): each seed draws 4 to 64 instances, their tasks, the windows and
//! up to two Redis faults at instants of the run (a restart, a freeze, a flush, the state
//! flushed again and again, an eviction, a failover to a replica that lags, slow replies), how
//! the service shows the quota (in another shape, only on 429s, or not at all) and its round
//! trips, runs it on the real clock against the sandbox and a `redis-server` of its own, and checks the
//! invariants: at most one request per instance inside any `Retry-After`, no call pending past
//! its bound, no call failed but on the rate limit, and no ban unless a fleet of more than 9
//! met a Redis that stopped answering for a while (then the count is the contract's, as
//! without shared state). Each world prints its seed, what was drawn and its figures, goodput
//! among them (printed, never asserted).
//!
//! - `cargo test --all-features --test redis worlds` runs the first `DEFAULT_WORLDS` seeds.
//! - `SIM_WORLDS=300 cargo test --all-features --test redis worlds -- --nocapture` runs more.
//! - `REDIS_SEED=N` runs that seed's world alone.

use crate::common;

use common::redis_worlds::{Outcome, RedisFault, WITHOUT_SHARED_STATE, World, run, world};
use petstore_sandbox::QuotaFields;

/// About two minutes on two loaded cores, four worlds at a time.
const DEFAULT_WORLDS: u64 = 30;
/// The worlds run in this many tests, each on `AT_ONCE` threads: a world mostly waits on the
/// real clock, and each has its own `redis-server`, sandbox and runtime.
const PARTS: u64 = 2;
const AT_ONCE: usize = 2;

fn read(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|value| {
        value
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{name} must be a whole number, not {value:?}"))
    })
}

/// The seeds to run: `REDIS_SEED` alone, or the first `SIM_WORLDS` (by default
/// `DEFAULT_WORLDS`).
fn seeds() -> Vec<u64> {
    match (read("REDIS_SEED"), read("SIM_WORLDS")) {
        (Some(seed), _) => vec![seed],
        (None, worlds) => (0..worlds.unwrap_or(DEFAULT_WORLDS)).collect(),
    }
}

/// Runs one world on a multi-threaded runtime of its own, dropped with whatever the world left
/// running; the world's line, and what it saw.
fn play(world: &World) -> (String, Outcome) {
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(run(world));
    let line = format!("REDIS_SEED={} {world}: {outcome}", world.seed);
    println!("{line}");
    (line, outcome)
}

/// Plays `world`; its failure if it broke an invariant.
fn keeps_the_invariants(world: &World) -> Result<(), String> {
    let (line, outcome) = play(world);
    outcome
        .check(world)
        .map_err(|broken| format!("{line}\n  broke: {broken}"))
}

#[track_caller]
fn assert_no_failure(part: u64) {
    let seeds: Vec<u64> = seeds()
        .into_iter()
        .filter(|seed| seed % PARTS == part)
        .collect();
    // Each thread runs every `AT_ONCE`th of the part's seeds, one world after another.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..AT_ONCE)
            .map(|thread| {
                let seeds = &seeds;
                scope.spawn(move || {
                    seeds
                        .iter()
                        .skip(thread)
                        .step_by(AT_ONCE)
                        .filter_map(|seed| keeps_the_invariants(&world(*seed)).err())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("a thread of worlds"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "expected every world to keep the invariants, {} did not (replay one with \
         REDIS_SEED=<seed> cargo test --all-features --test redis worlds):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn redis_worlds_with_even_seeds_keep_the_invariants() {
    assert_no_failure(0);
}

#[test]
fn redis_worlds_with_odd_seeds_keep_the_invariants() {
    assert_no_failure(1);
}

/// A seed is its world: the draw reads nothing but the seed. Every fault is drawn for fleets
/// past the contract, and the worlds where one stops Redis answering are the only ones not
/// held to no ban.
#[test]
fn a_seed_draws_the_same_world_and_every_fault_for_every_fleet() {
    let mut past_the_contract = std::collections::BTreeSet::new();
    for seed in 0..1_000 {
        let drawn = world(seed);
        assert_eq!(drawn, world(seed), "seed {seed}");
        assert!((4..=64).contains(&drawn.instances), "seed {seed}: {drawn}");
        let stops = drawn
            .faults
            .iter()
            .any(|(_, fault)| fault.stops_answering());
        let small = drawn.instances <= WITHOUT_SHARED_STATE;
        assert_eq!(
            drawn.held_to_no_ban(),
            small || !stops,
            "seed {seed}: {drawn}"
        );
        if !small {
            past_the_contract.extend(drawn.faults.iter().map(|(_, fault)| kind(fault)));
            past_the_contract.insert(quota(drawn.quota_fields));
            if drawn.round_trip.is_some() {
                past_the_contract.insert("round trips");
            }
        }
    }
    assert_eq!(past_the_contract.len(), 7 + 4, "{past_the_contract:?}");
}

/// How the service shows the quota, in the kinds a fleet meets.
fn quota(fields: QuotaFields) -> &'static str {
    match fields {
        QuotaFields::OnlyOn429 => "quota only on 429s",
        QuotaFields::Absent => "no quota",
        _ => "quota on every answer",
    }
}

/// A fault's kind, without its durations.
fn kind(fault: &RedisFault) -> &'static str {
    match fault {
        RedisFault::Restart { .. } => "restart",
        RedisFault::Freeze { .. } => "freeze",
        RedisFault::Flush => "flush",
        RedisFault::FlushAgainAndAgain { .. } => "flush again and again",
        RedisFault::Evict => "evict",
        RedisFault::Failover { .. } => "failover",
        RedisFault::SlowReplies { .. } => "slow replies",
    }
}

/// Replays `seed` as first drawn ([`World::first_drawn`]), which broke an invariant when it
/// was found, and holds it to no ban as well as to the invariants of its kind: each fix since
/// keeps its fleet from a ban. On the real clock a world does not run the same each time: each
/// test says how often its world broke when replayed.
#[track_caller]
fn replay(seed: u64) {
    let (line, outcome) = held_to_its_kind(&world(seed).first_drawn());
    assert_eq!(outcome.bans, 0, "{line}");
}

/// Seed 8, without any fault: 52 instances, 2 tasks each, 20 per 2 s
/// window. Once, with four worlds running at once on a loaded machine, the key was banned (47 ×
/// 429 in 67 requests; 46 inside a wait, from 46 instances), at most one request per instance
/// inside a `Retry-After`: as many instances as when each goes on alone. Banned in 1 of 12 runs
/// then, before two fixes to when an instance trusts Redis's count of the fleet; 0 × 429 in 27
/// runs after them, 12 of them four at once, on a loaded machine.
#[test]
fn fifty_two_instances_on_a_redis_without_a_fault_seed_8() {
    replay(8);
}

/// Seed 36: 18 instances, 30 per 2 s window, Redis killed at 2.77 s and
/// started again empty 0.83 s later. The key was banned (14 × 429), though no instance sent more
/// than one request inside a `Retry-After`: the instances, each on its own while Redis was down
/// (and for up to a second after, until each tried it again), each took itself for the only
/// one on the key and put more than the service's ten into one cooldown. Banned in 2 of 4 runs,
/// then in 1 of 6 with 0 to 17 × 429 a run. Each instance now counts, while Redis is down, at
/// least the instances Redis last said listen for the key's cooldowns: 0 × 429 in 9 runs.
#[test]
fn eighteen_instances_through_a_restart_of_redis_seed_36() {
    replay(36);
}

/// Seed 156: 48 instances, 20 per 3 s window, Redis killed at 3.81 s and
/// started again empty 0.3 s later: banned (47 × 429 in 107 requests; 46 inside a wait, from 46
/// instances), at most one request per instance inside a `Retry-After`. Banned in 2 of 3 runs.
/// A restart of 46 ms under 27 instances (seed 56) banned in 1 of 4. Still banned in 5 of 7 runs
/// once a request is decided again when Redis gives no verdict: while Redis is down, every
/// instance probes the next window at once (47 requests within 25 ms, 27 of them 429s). Each
/// instance now draws whether it probes a period (rule N): 0 bans in 7 runs, 0 or 1 × 429.
#[test]
fn forty_eight_instances_through_a_short_restart_of_redis_seed_156() {
    replay(156);
}

/// Seed 76: 34 instances, 5 per 3 s window, Redis killed twice, at 4.02 s
/// (down 0.19 s) and 4.47 s (down 0.24 s): banned (32 requests inside a wait, from 32
/// instances), at most one request per instance inside a `Retry-After`. Banned in 3 of 3 runs;
/// in 2 of 7 once a request is decided again when Redis gives no verdict, and in 1 of 2 just
/// before rule N. Since: 0 bans in 7 runs, 0 to 4 × 429.
#[test]
fn thirty_four_instances_through_two_short_restarts_seed_76() {
    replay(76);
}

/// Seed 54: 61 instances, 60 per 2 s window, Redis frozen at 2.38 s for
/// 0.67 s, then failed over at 3.73 s to a replica 0.78 s behind: banned (21 × 429 in 81
/// requests; 54 inside a wait, from 54 instances), at most one request per instance inside a
/// `Retry-After`. Banned in 3 of 3 runs; a freeze alone, or a failover alone, under fleets of
/// 11 to 62 did not ban in the runs made. Not banned in 7 runs once a request is decided
/// again when Redis gives no verdict, nor in 2 just before rule N, nor in 7 since; then banned
/// in 2 of 8 runs on a loaded machine (1 ban, 12 and 15 requests inside a wait, from as many
/// instances). A freeze is a Redis that stops answering, where a fleet of more than 9 is held
/// to the count alone, as the docs say: so is this world.
#[test]
fn sixty_one_instances_through_a_freeze_then_a_failover_seed_54() {
    replay_held_to_the_count(54);
}

/// Seed 9: 36 instances, 10 per 2 s sliding window, every reply of Redis
/// 48 to 167 ms late each way for 2.2 s from 1.96 s: banned (27 × 429 in 47 requests), at most
/// one request per instance inside a `Retry-After` (19 to 27 requests inside a wait, each from
/// another instance). Banned in 3 of 3 runs: a request admitted while Redis counted the fleet,
/// whose admission then timed out, went as if its instance were the key's only user. Decided
/// again by the instance's own count of the fleet, 0 bans in 16 runs.
#[test]
fn thirty_six_instances_through_slow_replies_seed_9() {
    replay(9);
}

/// Seed 38: 46 instances, 5 per 3 s window, Redis flushed every 20 ms for 2.5 s from 2.86 s,
/// and its replies 95 to 387 ms late each way for 1.4 s from 2.99 s: banned (35 × 429 in 50
/// requests), at most one request per instance inside a `Retry-After`. Banned in 2 of 3 runs;
/// in 4 of 7 once a request is decided again when Redis gives no verdict; in 2 of 7 once rule
/// N drew only after two periods seen. With rule N's first period as long as it was seen, 0
/// bans in 7 runs; since the answer to a request a lost state admitted opens no window, 0 bans
/// in 16 runs, four at once, 0 to 3 × 429.
#[test]
fn forty_six_instances_while_redis_keeps_losing_the_state_seed_38() {
    replay(38);
}

/// Replays `seed` as drawn, and holds it to the invariants of its kind.
#[track_caller]
fn replay_as_drawn(seed: u64) {
    held_to_its_kind(&world(seed));
}

/// Replays `seed` as first drawn ([`World::first_drawn`]), held to the invariants of its kind
/// only.
#[track_caller]
fn replay_held_to_the_count(seed: u64) {
    held_to_its_kind(&world(seed).first_drawn());
}

/// Plays `world` and holds it to the invariants of its kind: its line and outcome.
#[track_caller]
fn held_to_its_kind(world: &World) -> (String, Outcome) {
    let (line, outcome) = play(world);
    if let Err(broken) = outcome.check(world) {
        panic!("{line}\n  broke: {broken}");
    }
    (line, outcome)
}

/// Seed 65: 8 instances, 3 tasks each, 30 per 2 s window, the quota only on 429s, no fault:
/// 8 × 429, and an instance sent 2 requests inside one `Retry-After`: it went on doubling its
/// requests on the wire without rate-limit headers, as a key's only user may, while Redis
/// counted 8 instances. With others counted, an instance keeps one on the wire (rule S):
/// 0 breaks in 3 runs.
#[test]
fn eight_instances_on_a_service_that_shows_the_quota_only_on_429s_seed_65() {
    replay_as_drawn(65);
}

/// Seed 36: 18 instances, 2 tasks each, 30 per 2 s window, no quota on any answer, Redis
/// restarted 2.77 s in, down 831 ms: an instance sent 2 requests inside one `Retry-After`.
/// Fixed as seed 65 was: 0 breaks in 3 runs.
#[test]
fn eighteen_instances_without_quota_headers_through_a_restart_seed_36() {
    replay_as_drawn(36);
}

/// Seed 56: 27 instances, 4 tasks each, 60 per 2 s window and 60 per 10 s day, no quota on any
/// answer, Redis restarted 0.97 s in, down 46 ms: an instance sent 2 requests inside one
/// `Retry-After`. Fixed as seed 65 was: 0 breaks in 2 runs.
#[test]
fn twenty_seven_instances_without_quota_headers_through_a_short_restart_seed_56() {
    replay_as_drawn(56);
}

/// Seed 90: 22 instances, 2 tasks each, 60 per 2 s window, no quota on any answer, replies
/// 69 to 247 ms late from 2.49 s, then Redis restarted 2.83 s in, down 837 ms: 41 × 429 and a
/// ban (a fleet of more than 9 while Redis did not answer), and an instance sent 2 requests
/// inside one `Retry-After`. Fixed as seed 65 was: 0 breaks in 2 runs.
#[test]
fn twenty_two_instances_without_quota_headers_through_slow_replies_and_a_restart_seed_90() {
    replay_as_drawn(90);
}

/// Seed 111: 34 instances, 3 tasks each, 20 per 2 s window, Redis flushed every 20 ms for
/// 2.61 s from 3.29 s, and once more at 3.49 s: banned (14 × 429, 13 inside a wait from 13
/// instances), at most one request per instance inside a `Retry-After`, in a run of 300 worlds
/// four at a time beside the rest of the Redis tests. Replayed 60 times since, up to eight at
/// once: no ban, up to 7 requests inside a wait. Traced: an instance admitted by the state
/// another instance opened anew after a loss trusts its count, which misses the lost state's
/// admissions still on the wire. Telling every such instance of the loss, so that each counted
/// the others itself for 2 s, kept it to 2 inside a wait in 24 replays, but cost a fleet of 32
/// a quarter of the window after a restart of Redis. Told only when the instance that found
/// the loss was admitted within 2 s, as it is while Redis is flushed and not after an outage:
/// at most 1 inside a wait in 24 replays, eight at once, and the restart costs nothing.
#[test]
fn thirty_four_instances_while_redis_is_flushed_again_and_again_seed_111() {
    replay_as_drawn(111);
}
