//! The Lua script that keeps the shared rate-limit state (`src/rate/redis.lua`), run on a real
//! `redis-server` with chosen arguments: each rule of its contract, one at a time, without a
//! fleet's timing in the way.

use crate::common;

use std::time::Duration;

use common::redis_server::RedisServer;
use redis::aio::MultiplexedConnection;

const SCRIPT: &str = include_str!("../../src/rate/redis.lua");
const NAME: &str = "petstore-client:v1:00000000000000000000000000000000";

/// One window report: limit, remaining, period, ms until it ends, admission number.
type Report = (u64, u64, i64, u64, u64);

/// How long a lease may be spent, ms, as the client asks.
const LEASE_MS: i64 = 100;

struct State {
    connection: MultiplexedConnection,
    script: redis::Script,
    /// Whether the instance it plays spends from the window budgets.
    metered: bool,
    /// The highest admission number the instance it plays was given (1: it saw the state and
    /// was given none; 0: it never saw it).
    seen: u64,
    /// How many requests each admission asks for: more than one asks for a lease.
    want: u64,
    /// How long a lease may be spent, ms.
    horizon: i64,
    /// Leases given back with the next call, as the script reads them.
    returns: String,
    /// The requests the instance it plays sent without an admission, told with its next call:
    /// `<ms ago they were answered>:<requests>`, separated by spaces.
    admitted_here: String,
    /// How many ms before each call the requests whose answers it reports were sent.
    sent_ago: u64,
    /// How many ms before each call its last request was admitted, if one was.
    admitted_ago: Option<u64>,
}

impl State {
    async fn new(server: &RedisServer) -> Self {
        let connection = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .expect("a connection to the test's redis-server");
        Self {
            connection,
            script: redis::Script::new(SCRIPT),
            metered: true,
            seen: 0,
            want: 1,
            horizon: LEASE_MS,
            returns: String::new(),
            admitted_here: String::new(),
            sent_ago: 0,
            admitted_ago: None,
        }
    }

    /// A state whose first request, the probe, was answered with `window`.
    async fn probed(server: &RedisServer, window: Report) -> Self {
        let mut state = Self::new(server).await;
        assert_eq!(
            state.admit(&[]).await,
            [0, 1, 1],
            "expected the first request to go as the probe, numbered 1"
        );
        state.report("ok", &[window]).await;
        state
    }

    async fn call(&mut self, mode: &str, outcome: &str, reports: &[Report]) -> Vec<i64> {
        let mut invocation = self.script.key(NAME);
        invocation
            .arg(mode)
            .arg(if self.metered { "1" } else { "0" })
            .arg(2_000)
            .arg(outcome)
            .arg(match self.admitted_ago {
                Some(ago) => format!("{}:{ago}", self.seen),
                None => self.seen.to_string(),
            })
            .arg(self.want)
            .arg(self.horizon)
            .arg(std::mem::take(&mut self.returns))
            .arg(std::mem::take(&mut self.admitted_here));
        for &(limit, remaining, period, ends_in, admitted) in reports {
            invocation
                .arg(limit)
                .arg(remaining)
                .arg(period)
                .arg(ends_in)
                .arg(admitted)
                .arg(self.sent_ago);
        }
        invocation.invoke_async(&mut self.connection).await.unwrap()
    }

    async fn admit(&mut self, reports: &[Report]) -> Vec<i64> {
        self.call("admit", "", reports).await
    }

    /// Admits the requests numbered `numbers`, each expected to go, not as the probe.
    async fn admits(&mut self, numbers: std::ops::RangeInclusive<i64>) {
        for n in numbers {
            assert_eq!(
                self.admit(&[]).await,
                [0, 0, n],
                "expected admission {n} to go"
            );
        }
    }

    async fn report(&mut self, outcome: &str, reports: &[Report]) {
        self.call("report", outcome, reports).await;
    }

    /// An admission that asks for `want` requests at once.
    async fn lease(&mut self, want: u64) -> Vec<i64> {
        self.want = want;
        let reply = self.admit(&[]).await;
        self.want = 1;
        reply
    }

    /// Every field of the state, for a failure's message.
    async fn fields(&mut self) -> Vec<(String, String)> {
        redis::cmd("HGETALL")
            .arg(NAME)
            .query_async(&mut self.connection)
            .await
            .unwrap()
    }

    /// Forgets the state, for the next case of a test.
    async fn clear(&mut self) {
        let _: () = redis::cmd("DEL")
            .arg(NAME)
            .query_async(&mut self.connection)
            .await
            .unwrap();
    }

    /// The window of `period`: (limit, left).
    async fn window(&mut self, period: i64) -> Option<(i64, i64)> {
        let value: Option<String> = redis::cmd("HGET")
            .arg(NAME)
            .arg(format!("p:{period}"))
            .query_async(&mut self.connection)
            .await
            .unwrap();
        let value = value?;
        let mut parts = value.split(':').map(|part| part.parse::<i64>().unwrap());
        Some((parts.next().unwrap(), parts.next().unwrap()))
    }
}

/// A hold's kind and length, with the length checked to be within `around` ± 100 ms.
fn held(reply: &[i64], kind: i64, around: i64) {
    assert_eq!(
        reply[0], kind,
        "expected a hold of kind {kind} (1 quiet, 2 probe, 3 spent window), the reply was {reply:?}"
    );
    assert!(
        (reply[1] - around).abs() <= 100,
        "expected a hold of {around} ± 100 ms, the reply was {reply:?}"
    );
}

#[tokio::test]
async fn one_probe_finds_out_a_window_then_admissions_spend_it_until_it_is_spent() {
    let server = RedisServer::start();
    let mut state = State::new(&server).await;
    // Nothing known: the first request is the probe, numbered 1; the next waits for it.
    assert_eq!(
        state.admit(&[]).await,
        [0, 1, 1],
        "expected the first request to go as the probe, numbered 1"
    );
    held(&state.admit(&[]).await, 2, 2_000);
    // The probe's answer: 2 left of 60, the period ends in 10 s.
    state.report("ok", &[(60, 2, 1_000, 10_000, 1)]).await;
    assert_eq!(
        state.window(1_000).await,
        Some((60, 2)),
        "expected the period's window with its limit and what is left, as the probe reported"
    );
    assert_eq!(
        state.admit(&[]).await,
        [0, 0, 2],
        "expected admission 2 to go"
    );
    assert_eq!(
        state.admit(&[]).await,
        [0, 0, 3],
        "expected admission 3 to go"
    );
    // The hold tells the spent window, for the instances to keep should the state be lost: its
    // limit, ms until its period ends, and the period.
    let spent = state.admit(&[]).await;
    held(&spent, 3, 10_000);
    assert_eq!(
        (spent.len(), spent[2], spent[4]),
        (5, 60, 1_000),
        "expected the spent window's limit and period with the hold, the reply was {spent:?}"
    );
    assert!(
        (spent[3] - 10_000).abs() <= 100,
        "expected the period to end in 10 s ± 100 ms, the reply was {spent:?}"
    );
    // A higher report of the same period gives nothing back.
    state.report("", &[(60, 40, 1_000, 10_000, 3)]).await;
    held(&state.admit(&[]).await, 3, 10_000);
}

#[tokio::test]
async fn a_window_opens_net_of_the_admissions_after_the_request_that_reported_it() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 59, 1_000, 10_000, 1)).await;
    state.admits(2..=5).await;
    assert_eq!(
        state.window(1_000).await,
        Some((60, 55)),
        "expected the window's limit and what is left after four admissions"
    );
    // The next period, reported late by the answer to admission 3: the two admitted after it
    // may not be counted in its 58 yet.
    state.report("", &[(60, 58, 1_060, 70_000, 3)]).await;
    assert_eq!(
        state.window(1_060).await,
        Some((60, 56)),
        "expected the next period net of the two admitted after the report"
    );
    // A window the headers show for the first time (the day, now binding) opens the same way.
    state.report("", &[(1_000, 20, 90_000, 600_000, 4)]).await;
    assert_eq!(
        state.window(90_000).await,
        Some((1_000, 19)),
        "expected the day's window net of the one admitted after the report"
    );
    // Within an open window a report only lowers what is left, as it says.
    state.report("", &[(60, 50, 1_060, 70_000, 5)]).await;
    assert_eq!(
        state.window(1_060).await,
        Some((60, 50)),
        "expected the report to lower what is left"
    );
}

/// Issue 21, a Redis 50 to 300 ms away: the replies to two admissions came back far apart, so
/// that the one admitted first reached the service after the other. The window opened from the
/// later one's answer did not count it, and the fleet spent one more request than the period
/// allowed: a 429.
#[tokio::test]
async fn a_request_admitted_before_the_one_that_opened_a_window_and_counted_after_it_is_spent_from_it()
 {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 59, 1_000, 10_000, 1)).await;
    state.admits(2..=5).await;
    // The service counted them in the next period in the order 2, 4, 3, 5: 4's answer opens
    // it, net of 5.
    state.report("", &[(60, 50, 1_060, 70_000, 4)]).await;
    assert_eq!(state.window(1_060).await, Some((60, 49)));
    // 2 came before 4, in its 50 already.
    state.report("", &[(60, 51, 1_060, 70_000, 2)]).await;
    assert_eq!(
        state.window(1_060).await,
        Some((60, 49)),
        "expected the answer to a request counted before the opener's to change nothing"
    );
    // 3 came after 4: counted neither in its 50 nor among the admissions after it.
    state.report("", &[(60, 49, 1_060, 70_000, 3)]).await;
    assert_eq!(
        state.window(1_060).await,
        Some((60, 48)),
        "expected the window to count the request admitted before its opener and counted after"
    );
    // Exact, not careful: the 48 the service has left go, and no more.
    state.admits(6..=53).await;
    held(&state.admit(&[]).await, 3, 70_000);
}

#[tokio::test]
async fn a_late_report_of_a_period_that_has_ended_does_not_reopen_it() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 30, 1_000, 50, 1)).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The reporter's clock still had time left in that period: the store's says it is over.
    let reply = state.admit(&[(60, 20, 1_000, 5_000, 1)]).await;
    assert_eq!(
        reply[..2],
        [0, 1],
        "the next period is probed, not spent blind"
    );
    assert_eq!(
        state.window(1_000).await,
        None,
        "expected the ended period's window removed, not reopened by the late report"
    );
    held(&state.admit(&[]).await, 2, 2_000);
}

#[tokio::test]
async fn a_quiet_holds_everyone_then_one_probe_goes_before_the_rest() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 50, 1_000, 60_000, 1)).await;
    // A 429 seen by some instance: quiet for 300 ms.
    state.report("300", &[]).await;
    held(&state.admit(&[]).await, 1, 300);
    tokio::time::sleep(Duration::from_millis(350)).await;
    one_probe_then_the_rest(&mut state, "after the quiet", 1).await;
}

/// The next request goes as the probe (`probe`: 1, or 2 for the probe of a lost state), the
/// one after it waits, and the probe's normal answer releases the others.
async fn one_probe_then_the_rest(state: &mut State, when: &str, probe_kind: i64) {
    let probe = state.admit(&[]).await;
    assert_eq!(
        probe[..2],
        [0, probe_kind],
        "expected the first request {when} to go as the probe, got {probe:?}"
    );
    held(&state.admit(&[]).await, 2, 2_000);
    state
        .report("ok", &[(60, 48, 1_000, 59_000, probe[2] as u64)])
        .await;
    assert_eq!(
        state.admit(&[]).await[..2],
        [0, 0],
        "expected the others to go {when}, after the probe's normal answer"
    );
}

/// A state lost in Redis (evicted, flushed, restarted without persistence) reads as unknown to
/// an instance that saw it, never as a fresh budget: one request probes, told the state was
/// lost, and the others wait for its answer, whether the service meters the key or not.
#[tokio::test]
async fn a_lost_state_reads_as_unknown_to_an_instance_that_saw_it() {
    let server = RedisServer::start();
    for metered in [true, false] {
        let mut state = State::probed(&server, (60, 50, 1_000, 60_000, 1)).await;
        (state.metered, state.seen) = (metered, 1);
        // A 429, then the state is lost.
        state.report("30000", &[]).await;
        state.clear().await;
        let when = format!("after the loss (metered: {metered})");
        one_probe_then_the_rest(&mut state, &when, 2).await;
        state.clear().await;
    }
    // An instance that never saw the state finds a new one: unmetered, it goes at once.
    let mut state = State::new(&server).await;
    state.metered = false;
    assert_eq!(
        state.admit(&[]).await[..2],
        [0, 0],
        "expected a new state to admit at once"
    );
}

/// A failover to a replica that lagged keeps the state as it was: it counts fewer admissions than
/// the master gave, and its window counts them as still left. An admission given one of them
/// finds the state lost, as a report of one does: the window is unknown until one request
/// probes, numbered past every number the lost admissions had, and the others wait for its
/// answer; what a lease of them did not spend is not given back.
#[tokio::test]
async fn a_state_that_counts_fewer_admissions_than_were_given_reads_as_lost() {
    let server = RedisServer::start();
    // How the loss is found, and the probe's kind (2: told lost). The window is unknown until
    // the probe's answer either way: the report of a lost admission opens none.
    for (found_by, probe_kind) in [("an admission", 2), ("a report", 1)] {
        let mut state = State::probed(&server, (60, 50, 1_000, 60_000, 1)).await;
        state.admits(2..=3).await;
        // The master gave 4 to 9 more, a lease among them; this copy counts 3.
        match probe_kind {
            2 => state.seen = 9,
            _ => state.report("", &[(60, 40, 1_000, 59_000, 9)]).await,
        }
        let probe = state.admit(&[]).await;
        assert_eq!(
            probe[..2],
            [0, probe_kind],
            "expected one probe after the loss found by {found_by}, got {probe:?} ({:?})",
            state.fields().await
        );
        assert!(
            probe[2] > 9,
            "expected the probe numbered past the lost admissions, got {probe:?}"
        );
        assert_eq!(
            state.window(1_000).await,
            None,
            "expected none of the rolled-back window's count after the loss found by {found_by}"
        );
        state.seen = 0;
        held(&state.admit(&[]).await, 2, 2_000);
        state.returns = "5@5:1000".to_owned();
        state
            .report("ok", &[(60, 30, 1_000, 58_000, probe[2] as u64)])
            .await;
        assert_eq!(
            state.window(1_000).await,
            Some((60, 30)),
            "expected the window as the probe found it, nothing given back to it ({found_by})"
        );
        assert_eq!(
            state.admit(&[]).await[..2],
            [0, 0],
            "expected the others to go after the probe's answer ({found_by})"
        );
        state.clear().await;
    }
}

/// After a loss, admissions are numbered past every number the lost state gave, whoever finds
/// the loss: an instance that was given none (only holds) found it with its highest number 1,
/// and the new state numbered from 1,000,002, below the lost state's 5,000,001 and on. An
/// instance given one of those then found the new state lost too, and its window unknown.
#[tokio::test]
async fn admissions_after_a_loss_are_numbered_past_the_lost_states_whoever_finds_it() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 50, 1_000, 60_000, 1)).await;
    // A state found rolled back by an instance given 4,000,000: numbered past it since.
    state.seen = 4_000_000;
    let first = state.admit(&[]).await[2];
    state.seen = 0;
    state
        .report("ok", &[(60, 49, 1_000, 59_000, first as u64)])
        .await;
    state.admits(first + 1..=first + 3).await;
    let highest = first + 3;
    // Lost again, and found by an instance given nothing but holds.
    state.clear().await;
    state.seen = 1;
    let probe = state.admit(&[]).await;
    assert_eq!(
        probe[..2],
        [0, 2],
        "expected the finder's probe, got {probe:?}"
    );
    assert!(
        probe[2] > highest,
        "expected the probe numbered past the lost state's {highest}, got {probe:?}"
    );
    state.seen = 0;
    state
        .report("ok", &[(60, 40, 1_000, 58_000, probe[2] as u64)])
        .await;
    // The instance given the lost state's highest number goes as the others do.
    state.seen = highest as u64;
    assert_eq!(
        state.admit(&[]).await[..2],
        [0, 0],
        "expected the new state not found lost again: {:?}",
        state.fields().await
    );
}

/// Redis world seed 234: 53 instances, 30 per 2 s window, `FLUSHALL` every 20 ms.
/// Once the state was flushed, the answer to a request the lost state had admitted found the
/// loss and opened the window again with what the service had left when that request arrived;
/// its `ok` ended the probe. The requests the lost state had admitted after it were on the
/// wire, counted by neither: the new state admitted as many too many (12), 13 × 429, banned.
/// Such a report now only lowers a window already open, and leaves a probe due: the window is
/// found out by a request the new state admitted.
#[tokio::test]
async fn a_report_of_a_request_a_lost_state_admitted_opens_no_window_and_ends_no_probe() {
    let server = RedisServer::start();
    // Found by the report itself, or by an admission first (the finder's own probe out).
    for found_by_an_admission in [false, true] {
        let mut state = State::probed(&server, (30, 29, 1_000, 2_000, 1)).await;
        state.admits(2..=20).await;
        state.clear().await;
        state.seen = 1;
        if found_by_an_admission {
            let probe = state.admit(&[]).await;
            assert_eq!(
                probe[..2],
                [0, 2],
                "expected the finder's probe, got {probe:?}"
            );
        }
        // The answer to admission 10 of the lost state, with what was left when it arrived.
        state.report("ok", &[(30, 20, 1_000, 1_900, 10)]).await;
        let case = if found_by_an_admission {
            "found by an admission"
        } else {
            "found by the report"
        };
        assert_eq!(
            state.window(1_000).await,
            None,
            "expected no window opened by the lost state's report ({case}): {:?}",
            state.fields().await
        );
        state.seen = 0;
        if !found_by_an_admission {
            let probe = state.admit(&[]).await;
            assert_eq!(
                probe[..2],
                [0, 1],
                "expected one probe ({case}), got {probe:?}"
            );
        }
        held(&state.admit(&[]).await, 2, 2_000);
        state.clear().await;
    }
}

/// Found tracing Redis worlds seed 111 (34 instances, Redis flushed every 20 ms, on a loaded
/// machine): a request admitted by a state lost since can reach the service after the probe
/// whose answer opened the window again, while admissions of the new state are on the wire, and
/// be counted in neither. Its answer, with less left than the opener's, is the window's to
/// spend; one with more left arrived before the opener, which counts it.
#[tokio::test]
async fn a_request_a_lost_state_admitted_and_counted_after_the_window_opened_again_is_spent_from_it()
 {
    let server = RedisServer::start();
    for (left_at_arrival, left_after) in [(19, 17), (21, 18)] {
        let mut state = State::probed(&server, (30, 29, 1_000, 2_000, 1)).await;
        state.admits(2..=10).await;
        state.clear().await;
        state.seen = 10;
        let probe = state.admit(&[]).await;
        assert_eq!(
            probe[..2],
            [0, 2],
            "expected the finder's probe, got {probe:?}"
        );
        let first = probe[2];
        state.seen = u64::try_from(first).unwrap();
        state
            .report("ok", &[(30, 20, 1_000, 1_900, state.seen)])
            .await;
        state.admits(first + 1..=first + 2).await;
        // The answer to admission 7 of the lost state.
        state
            .report("", &[(30, left_at_arrival, 1_000, 1_900, 7)])
            .await;
        assert_eq!(
            state.window(1_000).await,
            Some((30, left_after)),
            "expected {left_at_arrival} left at its arrival to leave {left_after}: {:?}",
            state.fields().await
        );
        state.clear().await;
        state.seen = 0;
    }
}

/// Redis worlds seed 111, 34 instances, Redis flushed every 20 ms: one instance found each
/// loss and the others, admitted by the state it opened anew, trusted its count, which missed
/// the lost state's admissions on the wire. An instance whose admissions all came from a state
/// lost while admitting (its finder was admitted within 2 s) is told so, with its admission or
/// its probe's; one admitted by the new state, or given none, is not, nor any after a state
/// lost while idle (a restart after an outage).
#[tokio::test]
async fn an_instance_admitted_by_a_state_lost_while_admitting_is_told_so() {
    let server = RedisServer::start();
    for (finder_admitted_ago, told) in [(30, true), (3_000, false)] {
        let mut state = State::probed(&server, (30, 29, 1_000, 2_000, 1)).await;
        state.admits(2..=10).await;
        state.clear().await;
        (state.seen, state.admitted_ago) = (4, Some(finder_admitted_ago));
        let finder = state.admit(&[]).await;
        assert_eq!(
            finder[..2],
            [0, 2],
            "expected the finder's probe, got {finder:?}"
        );
        state.admitted_ago = None;
        state.seen = 9;
        held(&state.admit(&[]).await, 2, 2_000);
        state.seen = u64::try_from(finder[2]).unwrap();
        state
            .report("ok", &[(30, 20, 1_000, 1_900, state.seen)])
            .await;
        state.seen = 9;
        let admitted = state.admit(&[]).await;
        let code = if told { 3 } else { 0 };
        assert_eq!(
            admitted[..2],
            [0, code],
            "finder admitted {finder_admitted_ago} ms before: got {admitted:?}"
        );
        state.seen = u64::try_from(admitted[2]).unwrap();
        assert_eq!(
            state.admit(&[]).await[..2],
            [0, 0],
            "expected an instance admitted by the new state not told"
        );
        state.seen = 1;
        assert_eq!(
            state.admit(&[]).await[..2],
            [0, 0],
            "expected an instance given no admission not told"
        );
        // Told with its probe's admission while the state is unknown.
        state.report("30000", &[]).await;
        let _: () = redis::cmd("HDEL")
            .arg(NAME)
            .arg("cool")
            .query_async(&mut state.connection)
            .await
            .unwrap();
        state.seen = 8;
        let probe = state.admit(&[]).await;
        let code = if told { 4 } else { 1 };
        assert_eq!(probe[..2], [0, code], "expected its probe, got {probe:?}");
        state.clear().await;
        state.seen = 0;
    }
}

/// A Redis that evicts the state as soon as it is written lets an instance that never saw it open
/// a new one, numbered from 1, whose count is lower than the numbers the other instances were
/// given: it reads as lost to them too, but its probe, already out, still goes alone.
#[tokio::test]
async fn a_state_opened_anew_reads_as_lost_to_the_others_and_its_probe_goes_alone() {
    let server = RedisServer::start();
    let mut state = State::new(&server).await;
    assert_eq!(
        state.admit(&[]).await,
        [0, 1, 1],
        "expected the opener's probe"
    );
    state.seen = 50;
    held(&state.admit(&[]).await, 2, 2_000);
    state.seen = 0;
    held(&state.admit(&[]).await, 2, 2_000);
}

/// Issue 21: Lua numbers are doubles, and `%d` of one at or above 2^63 wrote
/// -9223372036854775808. An "unlimited" `X-RateLimit-Limit` named a field the next read could
/// not parse, so every admission became the fleet's one probe; an "unlimited"
/// `X-RateLimit-Remaining` was stored as spent and held the fleet until the window ended.
#[tokio::test]
async fn numbers_at_or_above_2_63_read_as_ample_neither_spent_nor_unknown() {
    const TWO_63: u64 = 1 << 63;
    let server = RedisServer::start();
    for (limit, remaining) in [(u64::MAX, u64::MAX), (TWO_63, TWO_63), (1 << 62, TWO_63)] {
        let mut state = State::probed(&server, (limit, remaining, 1_000, 10_000, 1)).await;
        for n in 2..=3 {
            let reply = state.admit(&[]).await;
            assert_eq!(
                reply,
                [0, 0, n],
                "with limit {limit} and remaining {remaining}: expected admission {n} to go, \
                 neither held nor as the probe; the state is {:?}",
                state.fields().await
            );
        }
        state.clear().await;
    }
}

/// Issue 21: a span too long for `%d` was written negative: a spent window said to end in
/// u64::MAX ms read back as no window at all, so the fleet probed into it, and a quiet that
/// long was lost at once.
#[tokio::test]
async fn absurdly_long_spans_hold_long_rather_than_being_lost() {
    const DAY: i64 = 86_400_000;
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 0, 1_000, u64::MAX, 1)).await;
    let reply = state.admit(&[]).await;
    assert!(
        reply[0] == 3 && reply[1] >= DAY,
        "expected the spent window to hold for a day at least, the reply was {reply:?} and \
         the state is {:?}",
        state.fields().await
    );
    state.clear().await;
    let mut state = State::probed(&server, (60, 50, 1_000, 60_000, 1)).await;
    state.report(&u64::MAX.to_string(), &[]).await;
    let reply = state.admit(&[]).await;
    assert!(
        reply[0] == 1 && reply[1] >= DAY,
        "expected the quiet to hold for a day at least, the reply was {reply:?} and the state \
         is {:?}",
        state.fields().await
    );
}

/// Found in issue 21's `DEBUG SLEEP` fault runs: while Redis did not answer, an instance sent
/// requests on its own, and Redis never counted them: its reports lower a window only as far
/// as the service's count, which misses the requests on their way. The fleet spent 62 in a
/// window of 60. The instance now tells how many it sent with its next call.
#[tokio::test]
async fn requests_sent_without_redis_are_spent_from_every_open_window_when_told() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 59, 1_000, 10_000, 1)).await;
    state.report("", &[(1_000, 900, 90_000, 600_000, 1)]).await;
    state.admits(2..=5).await;
    state.admitted_here = "0:3".to_owned();
    assert_eq!(
        state.admit(&[]).await,
        [0, 0, 6],
        "expected admission 6 to go"
    );
    assert_eq!(
        (state.window(1_000).await, state.window(90_000).await),
        (Some((60, 51)), Some((1_000, 892))),
        "expected the minute and the day to spend admissions 2 to 6 and the three sent without \
         Redis"
    );
}

/// `tools/fleet`, 32 processes, Redis killed for 3 s: once it was back, a probe's answer opened
/// the window again before the instances told of what they had sent while it was down, and
/// those requests, counted in what the probe's answer had left, were spent from it once more:
/// the window served 32 to 42 of its 60. A request is not spent from a window whose opening
/// answer was to a request sent after it was answered.
#[tokio::test]
async fn requests_sent_without_redis_are_not_spent_from_a_window_opened_by_a_later_request() {
    let server = RedisServer::start();
    let mut state = State::new(&server).await;
    assert_eq!(state.admit(&[]).await, [0, 1, 1], "expected the probe");
    // The probe was sent 3 s before its answer opened the window.
    state.sent_ago = 3_000;
    state.report("ok", &[(60, 30, 1_000, 10_000, 1)]).await;
    // Two answered 5 s ago, before the probe was sent; one 1 s ago, after it, and perhaps not
    // counted in its 30.
    state.admitted_here = "5000:2 1000:1".to_owned();
    assert_eq!(
        state.admit(&[]).await,
        [0, 0, 2],
        "expected admission 2 to go"
    );
    assert_eq!(
        state.window(1_000).await,
        Some((60, 28)),
        "expected the window to spend admission 2 and the request answered after the probe went"
    );
}

/// The highest admission number the reports answer is read from each report's six values: a
/// duration taken for one would read as a number past the state's, and the state as lost.
#[tokio::test]
async fn an_admission_with_several_reports_reads_each_reports_admission_number() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 59, 1_000, 10_000, 1)).await;
    state.admits(2..=4).await;
    state.seen = 4;
    state.sent_ago = 20;
    let reports = [
        (60, 57, 1_000, 9_000, 2),
        (60, 56, 1_000, 9_000, 3),
        (60, 55, 1_000, 9_000, 4),
    ];
    assert_eq!(
        state.admit(&reports).await,
        [0, 0, 5],
        "expected admission 5 to go, the state kept"
    );
}

/// An evicting Redis loses the state after every write, and each report opens its window
/// again. A request sent without an admission and answered after the request whose answer
/// opened it was sent may not be in what that answer had left, though the window was opened
/// after it.
#[tokio::test]
async fn a_window_opened_later_spends_requests_sent_without_redis_after_its_opener() {
    let server = RedisServer::start();
    let mut state = State::new(&server).await;
    assert_eq!(state.admit(&[]).await, [0, 1, 1], "expected the probe");
    // Told in the call whose report opens the window: the probe was sent 4 s ago, the two
    // requests answered 2 s ago, after it.
    state.sent_ago = 4_000;
    state.admitted_here = "2000:2".to_owned();
    state.report("ok", &[(60, 30, 1_000, 10_000, 1)]).await;
    assert_eq!(
        state.window(1_000).await,
        Some((60, 28)),
        "expected the window opened after them to spend the two sent after its opener"
    );
}

/// Issue 21: windows were kept by their limit, and never removed: a service whose reported
/// limit varies left a field per value, every one read and rewritten by each admission.
#[tokio::test]
async fn a_limit_that_varies_keeps_one_window_that_is_spent_exactly() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (1_000, 500, 1_000, 60_000, 1)).await;
    for limit in 1_000..2_000 {
        // Out of order, as answers arrive: the lowest, 10, is what is left.
        state
            .report("", &[(limit, 10 + limit % 7, 1_000, 60_000, 0)])
            .await;
    }
    let fields = state.fields().await;
    assert!(
        fields.len() <= 6,
        "expected the five fields of the state and one window at most, got {} fields: {:?}",
        fields.len(),
        &fields[..fields.len().min(8)]
    );
    state.admits(2..=11).await;
    held(&state.admit(&[]).await, 3, 60_000);
}

/// Issue 21: a window the headers show for the first time opened a field of its own, for good.
#[tokio::test]
async fn at_most_four_windows_are_kept_and_the_first_to_end_goes_first() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (60, 50, 1_000, 10_000, 1)).await;
    for i in 1..=6 {
        state
            .report("", &[(60 + i, 40, 1_000 + i as i64, 10_000 + i * 1_000, 0)])
            .await;
    }
    let fields = state.fields().await;
    let windows = fields.len() - 1;
    assert!(
        windows <= 4,
        "expected four windows at most beside the admission count, got {fields:?}"
    );
    assert_eq!(
        (state.window(1_000).await, state.window(1_006).await),
        (None, Some((66, 40))),
        "expected the window that ends first to go and the one that ends last to stay, the \
         state is {fields:?}"
    );
}

/// A lease's reply: admissions from `first`, `granted` of them, to be spent within `lasts` ms,
/// taken from the windows of `periods` (sorted).
#[derive(Debug, PartialEq)]
struct Leased {
    first: i64,
    granted: i64,
    lasts: i64,
    periods: Vec<i64>,
}

fn leased(reply: &[i64]) -> Leased {
    assert!(
        reply.len() >= 6 && reply[0] == 0,
        "expected a lease, the reply was {reply:?}"
    );
    let mut periods = reply[6..].to_vec();
    periods.sort_unstable();
    Leased {
        first: reply[2],
        granted: reply[3],
        lasts: reply[4],
        periods,
    }
}

/// Issue 21, item 6: a lease is as many admissions at once, taken off every open window, and
/// at most a sixteenth of what the leanest window has left, so that no instance takes the
/// others' share.
#[tokio::test]
async fn a_lease_is_taken_from_every_window_and_is_a_share_of_what_is_left() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (1_000, 1_000, 1_000, 60_000, 1)).await;
    state
        .report("", &[(100_000, 800, 90_000, 600_000, 1)])
        .await;
    assert_eq!(
        leased(&state.lease(20).await),
        Leased {
            first: 2,
            granted: 20,
            lasts: LEASE_MS,
            periods: vec![1_000, 90_000]
        },
        "expected the 20 asked for, admissions 2 to 21, for {LEASE_MS} ms"
    );
    assert_eq!(
        (state.window(1_000).await, state.window(90_000).await),
        (Some((1_000, 980)), Some((100_000, 780))),
        "expected the lease taken off both windows"
    );
    let share = leased(&state.lease(1_000).await);
    assert_eq!(
        (share.first, share.granted),
        (22, 780 / 16),
        "expected a sixteenth of the day's 780 left, from admission 22"
    );
    assert_eq!(
        state.admit(&[]).await,
        [0, 0, 22 + 780 / 16],
        "expected a plain admission numbered after the lease, in the same short reply"
    );
    // Nearly spent: one request at least, never more than is left.
    state.report("", &[(1_000, 3, 1_000, 60_000, 0)]).await;
    assert_eq!(leased(&state.lease(1_000).await).granted, 1);
    assert_eq!(state.window(1_000).await, Some((1_000, 2)));
}

/// Issue 21, item 6: near a window's end a lease lasts only until then and holds only what
/// the time left needs, so that little of it is left unspent when the window ends.
#[tokio::test]
async fn near_a_windows_end_a_lease_is_short_and_small() {
    let server = RedisServer::start();
    // A horizon of a minute, 30 s before the end: time for a loaded machine.
    let mut state = State::probed(&server, (10_000, 10_000, 1_000, 30_000, 1)).await;
    state.horizon = 60_000;
    let lease = leased(&state.lease(100).await);
    assert!(
        (20_000..=30_000).contains(&lease.lasts) && lease.granted <= 50,
        "expected a lease until the end, 30 s away, and of half the 100 asked for over a \
         minute: {lease:?}"
    );
}

/// Issue 21, item 6: no lease while the fleet must find out the state (the probe goes alone)
/// or holds for a quiet; a service that does not meter the key is leased what is asked.
#[tokio::test]
async fn no_lease_while_unknown_or_quiet_and_an_unmetered_one_is_whole() {
    let server = RedisServer::start();
    let mut state = State::new(&server).await;
    let probe = state.lease(50).await;
    assert_eq!(
        (probe[..3].to_vec(), probe[3]),
        (vec![0, 1, 1], 1),
        "expected the probe alone, with no lease: {probe:?}"
    );
    state.report("ok", &[(1_000, 900, 1_000, 60_000, 1)]).await;
    state.report("300", &[]).await;
    state.want = 50;
    held(&state.admit(&[]).await, 1, 300);
    tokio::time::sleep(Duration::from_millis(350)).await;
    let probe = state.admit(&[]).await;
    assert_eq!(
        (probe[..2].to_vec(), probe[3]),
        (vec![0, 1], 1),
        "expected the probe after the quiet alone, with no lease: {probe:?}"
    );
    state.clear().await;

    state.metered = false;
    let lease = leased(&state.lease(50).await);
    assert_eq!(
        (lease.granted, lease.lasts, lease.periods),
        (50, LEASE_MS, vec![]),
        "expected the 50 asked for, from no window"
    );
}

/// Issue 21, item 6: what a lease did not spend goes back to the windows it was taken from
/// that are still open, never above their limit, and never to a state lost since it was lent.
#[tokio::test]
async fn what_a_lease_did_not_spend_goes_back_to_its_open_windows() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (1_000, 1_000, 1_000, 60_000, 1)).await;
    let lease = leased(&state.lease(40).await);
    assert_eq!(
        state.window(1_000).await,
        Some((1_000, 1_000 - lease.granted))
    );
    // 30 not spent, and a window that has ended (or was lost) gets nothing.
    state.returns = format!("30@{}:1000:999", lease.first);
    state.admit(&[]).await;
    assert_eq!(
        state.window(1_000).await,
        Some((1_000, 1_000 - lease.granted + 30 - 1)),
        "expected the 30 back, and the admission with them spent"
    );
    assert_eq!(state.window(999).await, None);
    state.returns = format!("5000@{}:1000", lease.first);
    state.report("", &[]).await;
    assert_eq!(
        state.window(1_000).await,
        Some((1_000, 1_000)),
        "expected never more than the limit"
    );
    // A lease lent before the state was lost: the window opened again never lent it.
    state.clear().await;
    let mut state = State::probed(&server, (1_000, 500, 1_000, 60_000, 1)).await;
    state.returns = format!("30@{}:1000", lease.first);
    state.report("", &[]).await;
    assert_eq!(
        state.window(1_000).await,
        Some((1_000, 500)),
        "expected nothing back from a lease of a lost state"
    );
}

/// Issue 21, item 6: a window spent because its budget is out on leases may get some back when
/// they end: it holds the others 20 ms at a time while a lease is out and for a lease's time
/// after, then until the window ends, as any spent window.
#[tokio::test]
async fn a_window_spent_on_leases_holds_briefly_until_they_are_given_back() {
    let server = RedisServer::start();
    let mut state = State::probed(&server, (1_000, 40, 1_000, 60_000, 1)).await;
    assert_eq!(leased(&state.lease(1_000).await).granted, 40 / 16);
    while state.admit(&[]).await[0] == 0 {}
    let reply = state.admit(&[]).await;
    assert!(
        reply[0] == 3 && reply[1] <= LEASE_MS / 5,
        "expected a hold of {} ms at most while the lease is out, the reply was {reply:?}",
        LEASE_MS / 5
    );
    tokio::time::sleep(Duration::from_millis(2 * LEASE_MS as u64 + 50)).await;
    let reply = state.admit(&[]).await;
    assert!(
        reply[0] == 3 && reply[1] > 50_000,
        "expected a hold until the window ends once no lease can come back, the reply was \
         {reply:?}"
    );
}
