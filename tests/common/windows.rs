//! Services that report their rate window as others do, unlike the sandbox's fixed windows with
//! headers on every answer: a rolling window whose reset moves with every answer, and a fixed
//! window whose headers come only on its 429s. Each answers `GET /v1/pets` on a loopback port,
//! on the test's runtime and its paused clock, and writes a `Date` on that clock, starting at
//! [`CLOCK_START_UNIX`].
//!
//! Not wiremock: wiremock answers on a thread of its own, and while an answer is on its way
//! the paused clock jumps to the next timer of the test's runtime, so that a call waiting
//! behind one in flight sees its whole `max_server_wait` pass before the answer comes.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::CLOCK_START_UNIX;

/// One request a service answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrival {
    /// When the service read it, on the test's clock.
    pub at: Instant,
    /// Its `User-Agent`, which tells instances apart.
    pub instance: String,
    pub status: u16,
    /// The `Retry-After` of a 429.
    pub retry_after: Option<Duration>,
}

/// How a service keeps its window.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// At most `limit` requests in any `window`; headers on every answer, the reset when the
    /// oldest request counted leaves the window.
    Rolling,
    /// `limit` requests per window aligned to multiples of its length in Unix time; headers
    /// only on a 429.
    HeadersOnlyOn429,
}

/// What a service has counted.
#[derive(Debug, Default)]
struct Counted {
    /// The rolling window's requests, oldest first.
    times: VecDeque<Instant>,
    /// The fixed window's index and count.
    fixed: (u128, u64),
    arrivals: Vec<Arrival>,
}

/// A service on a loopback port; it stops with the test's runtime.
#[derive(Clone)]
pub struct WindowService {
    port: u16,
    counted: Arc<Mutex<Counted>>,
}

/// One answer: status, rate-limit headers (limit, remaining, reset), `Retry-After` seconds.
type Answer = (u16, Option<(u64, u64, u64)>, Option<u64>);

struct Rules {
    kind: Kind,
    limit: u64,
    window: Duration,
    /// Half of the round trip, spent on the way in and again on the way out.
    half_trip: Duration,
    start: Instant,
}

impl WindowService {
    /// A rolling window of `limit` requests in any `window`: every answer carries the
    /// `X-RateLimit-*` headers, and `X-RateLimit-Reset` is when the oldest request counted
    /// leaves the window, so it moves with every answer; a 429's `Retry-After` is the time
    /// until then.
    pub async fn rolling(limit: u64, window: Duration) -> Self {
        Self::start(Kind::Rolling, limit, window, Duration::ZERO).await
    }

    /// A fixed window of `limit` requests, aligned to multiples of `window` in Unix time,
    /// whose `X-RateLimit-*` headers come only on its 429s; each answer takes `round_trip`.
    pub async fn headers_only_on_429(limit: u64, window: Duration, round_trip: Duration) -> Self {
        Self::start(Kind::HeadersOnlyOn429, limit, window, round_trip).await
    }

    async fn start(kind: Kind, limit: u64, window: Duration, round_trip: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let counted = Arc::new(Mutex::new(Counted::default()));
        let rules = Arc::new(Rules {
            kind,
            limit,
            window,
            half_trip: round_trip / 2,
            start: Instant::now(),
        });
        let shared = counted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve(stream, rules.clone(), shared.clone()));
            }
        });
        Self { port, counted }
    }

    /// Its base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request answered, in order of arrival.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.counted.lock().unwrap().arrivals.clone()
    }

    /// The requests that arrived strictly inside the `Retry-After` of a 429, each after that
    /// 429 and its place in [`arrivals`](Self::arrivals): the waits a request must not be sent
    /// into.
    pub fn inside_a_retry_after(&self) -> Vec<((usize, Arrival), Arrival)> {
        let all = self.arrivals();
        let mut inside = Vec::new();
        for (place, limited) in all.iter().enumerate() {
            let Some(wait) = limited.retry_after else {
                continue;
            };
            let end = limited.at + wait;
            for arrival in all.iter().filter(|a| a.at > limited.at && a.at < end) {
                inside.push(((place, limited.clone()), arrival.clone()));
            }
        }
        inside
    }

    /// Successes that arrived in `[from, to)`.
    pub fn successes_between(&self, from: Instant, to: Instant) -> usize {
        self.arrivals()
            .iter()
            .filter(|a| a.status < 300 && a.at >= from && a.at < to)
            .count()
    }
}

/// Answers one connection's requests, one after another, until it closes.
async fn serve(mut stream: TcpStream, rules: Arc<Rules>, counted: Arc<Mutex<Counted>>) {
    let mut buffer = Vec::with_capacity(4096);
    loop {
        let Some((head_end, body_len, instance)) = read_head(&mut stream, &mut buffer).await else {
            return;
        };
        while buffer.len() < head_end + body_len {
            if stream.read_buf(&mut buffer).await.unwrap_or(0) == 0 {
                return;
            }
        }
        buffer.drain(..head_end + body_len);
        tokio::time::sleep(rules.half_trip).await;
        let now = Instant::now();
        let answer = {
            let mut counted = counted.lock().unwrap();
            let answer = rules.answer(&mut counted, now);
            counted.arrivals.push(Arrival {
                at: now,
                instance,
                status: answer.0,
                retry_after: answer.2.map(Duration::from_secs),
            });
            answer
        };
        let response = rules.response(answer, now);
        tokio::time::sleep(rules.half_trip).await;
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Reads one request head: (end of head, content length, `User-Agent`).
async fn read_head(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(usize, usize, String)> {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let field = |wanted: &str| {
                head.lines().find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.trim()
                        .eq_ignore_ascii_case(wanted)
                        .then(|| value.trim().to_owned())
                })
            };
            let body_len = field("content-length").and_then(|v| v.parse().ok());
            let instance = field("user-agent").unwrap_or_default();
            return Some((end + 4, body_len.unwrap_or(0), instance));
        }
        if stream.read_buf(buffer).await.ok()? == 0 {
            return None;
        }
    }
}

fn ceil_secs(duration: Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

impl Rules {
    /// `at` as time since the Unix epoch.
    fn unix(&self, at: Instant) -> Duration {
        Duration::from_secs(CLOCK_START_UNIX) + at.saturating_duration_since(self.start)
    }

    fn answer(&self, counted: &mut Counted, now: Instant) -> Answer {
        match self.kind {
            Kind::Rolling => self.rolling(counted, now),
            Kind::HeadersOnlyOn429 => self.fixed(counted, now),
        }
    }

    fn rolling(&self, counted: &mut Counted, now: Instant) -> Answer {
        let times = &mut counted.times;
        while times.front().is_some_and(|at| *at + self.window <= now) {
            times.pop_front();
        }
        let admitted = (times.len() as u64) < self.limit;
        if admitted {
            times.push_back(now);
        }
        let frees_at = *times.front().unwrap_or(&now) + self.window;
        let headers = Some((
            self.limit,
            self.limit - times.len() as u64,
            ceil_secs(self.unix(frees_at)),
        ));
        if admitted {
            (200, headers, None)
        } else {
            (429, headers, Some(ceil_secs(frees_at - now).max(1)))
        }
    }

    fn fixed(&self, counted: &mut Counted, now: Instant) -> Answer {
        let unix = self.unix(now);
        let index = unix.as_nanos() / self.window.as_nanos();
        if counted.fixed.0 != index {
            counted.fixed = (index, 0);
        }
        if counted.fixed.1 < self.limit {
            counted.fixed.1 += 1;
            return (200, None, None);
        }
        let end =
            Duration::from_nanos(u64::try_from((index + 1) * self.window.as_nanos()).unwrap());
        let wait = ceil_secs(end - unix).max(1);
        (429, Some((self.limit, 0, end.as_secs())), Some(wait))
    }

    /// The bytes of `answer`, with a `Date` read at `now`.
    fn response(&self, (status, quota, retry_after): Answer, now: Instant) -> String {
        let (reason, body) = match status {
            200 => ("OK", "[]".to_owned()),
            _ => (
                "Too Many Requests",
                format!(
                    r#"{{"code":"rate_limited","message":"rate limit exceeded","status":{status}}}"#
                ),
            ),
        };
        let date = UNIX_EPOCH + Duration::from_secs(self.unix(now).as_secs());
        let mut head = format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\ndate: {}\r\n",
            body.len(),
            httpdate::fmt_http_date(date)
        );
        if let Some((limit, remaining, reset)) = quota {
            head.push_str(&format!(
                "x-ratelimit-limit: {limit}\r\nx-ratelimit-remaining: {remaining}\r\n\
                 x-ratelimit-reset: {reset}\r\n"
            ));
        }
        if let Some(seconds) = retry_after {
            head.push_str(&format!("retry-after: {seconds}\r\n"));
        }
        format!("{head}\r\n{body}")
    }
}
