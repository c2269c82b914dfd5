//! A minimal loopback HTTP/1.1 server answering fixed, realistic bytes, so that the benches
//! measure the client and not a server framework; and the raw `reqwest` + `serde_json`
//! baseline the crate is compared against.

#![allow(dead_code)] // each bench uses part of this module

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use petstore_client::{NewPet, Pet, PetId, PetStoreClient};
use serde::de::DeserializeOwned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub const KEY: &str = "FAKE-bench-key";

/// Paired rounds a bench makes: `full`, or 3 when `BENCH_QUICK` is set (not empty, not `0`), as
/// `scripts/benchmarks.sh --quick` does to check that the script runs. Quick figures are noisy.
pub fn rounds(full: usize) -> usize {
    let quick = std::env::var_os("BENCH_QUICK").is_some_and(|v| !v.is_empty() && v != "0");
    if quick { full.min(3) } else { full }
}

/// A JSON list of `n` pets, as the service would send it.
pub fn pets_json(n: usize) -> String {
    let statuses = ["available", "pending", "sold"];
    let pets: Vec<String> = (1..=n)
        .map(|i| {
            format!(
                r#"{{"id":{i},"name":"Pet number {i}","categoryId":{},"status":"{}"}}"#,
                i % 7,
                statuses[i % 3]
            )
        })
        .collect();
    format!("[{}]", pets.join(","))
}

/// A reply; with `limit`, the rate-limit headers report it (and `limit - 1` remaining).
fn response(status: &str, body: &str, limit: Option<u64>) -> Vec<u8> {
    let quota = limit.map_or(String::new(), |limit| {
        format!(
            "x-ratelimit-limit: {limit}\r\nx-ratelimit-remaining: {}\r\n\
             x-ratelimit-reset: 4102444800\r\n",
            limit - 1
        )
    });
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         {quota}date: Sun, 22 Nov 2026 12:00:00 GMT\r\n\r\n{body}",
        body.len(),
    )
    .into_bytes()
}

/// The fixed replies, one per kind of request.
#[derive(Clone)]
struct Replies {
    list: Arc<[u8]>,
    pet: Arc<[u8]>,
    created: Arc<[u8]>,
}

impl Replies {
    fn new(limit: Option<u64>) -> Self {
        let rex = r#"{"id":101,"name":"Rex","categoryId":3,"status":"available"}"#;
        Self {
            list: response("200 OK", &pets_json(100), limit).into(),
            pet: response("200 OK", rex, limit).into(),
            created: response("201 Created", rex, limit).into(),
        }
    }

    fn to(&self, request: Request) -> &[u8] {
        match request {
            Request::List => &self.list,
            Request::Get => &self.pet,
            Request::Create => &self.created,
        }
    }
}

/// Starts the server on the current runtime; `GET /v1/pets` answers a 100-pet list,
/// `GET /v1/pets/{id}` a pet, `POST` a created pet. The rate-limit headers
/// report a limit of 1,000,000,000 a window.
pub async fn start_server() -> SocketAddr {
    start_server_with_limit(1_000_000_000).await.0
}

/// [`start_server`] reporting `limit` as `X-RateLimit-Limit` (and `limit - 1` remaining);
/// also returns the count of connections it has accepted.
pub async fn start_server_with_limit(limit: u64) -> (SocketAddr, Arc<AtomicUsize>) {
    serve(Some(limit), Duration::ZERO).await
}

/// A server as [`start_server`]'s whose replies carry no rate-limit headers, as a service that
/// does not report its limits, each sent `latency` after its request was read (a distant
/// service's round trip).
pub async fn start_server_without_rate_limit_headers(latency: Duration) -> SocketAddr {
    serve(None, latency).await.0
}

async fn serve(limit: Option<u64>, latency: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let replies = Replies::new(limit);
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::Relaxed);
            socket.set_nodelay(true).unwrap();
            let replies = replies.clone();
            tokio::spawn(async move {
                let mut buf = Vec::with_capacity(4096);
                loop {
                    let Some((head_end, body_len, request)) =
                        read_head(&mut socket, &mut buf).await
                    else {
                        return;
                    };
                    while buf.len() < head_end + body_len {
                        if socket.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                            return;
                        }
                    }
                    buf.drain(..head_end + body_len);
                    if !latency.is_zero() {
                        tokio::time::sleep(latency).await;
                    }
                    let reply = replies.to(request);
                    if socket.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// What a request asks for.
#[derive(Clone, Copy)]
enum Request {
    List,
    Get,
    Create,
}

impl Request {
    /// From the request line, as `GET /v1/pets?limit=100 HTTP/1.1`.
    fn from_line(line: &str) -> Self {
        let mut parts = line.split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = target.split_once('?').map_or(target, |(path, _)| path);
        if method == "POST" {
            Self::Create
        } else if path.ends_with("/pets") {
            Self::List
        } else {
            Self::Get
        }
    }
}

/// Reads one request head: (end of head, content length, what it asks for).
async fn read_head(
    socket: &mut tokio::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(usize, usize, Request)> {
    loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..pos]).ok()?;
            let body_len = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            let line = head.lines().next().unwrap_or("");
            return Some((pos + 4, body_len, Request::from_line(line)));
        }
        if socket.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
}

/// The runtime the loopback benches run on: two worker threads.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The `reqwest::Client` both sides use: same settings, same pool.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

pub fn crate_client(addr: SocketAddr, http: reqwest::Client) -> PetStoreClient {
    PetStoreClient::builder()
        .base_url(format!("http://{addr}/v1"))
        .api_key(KEY)
        .http_client(http)
        .build()
        .unwrap()
}

/// The crate's default per-attempt timeout, which the baseline applies too (same settings).
const ATTEMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The baseline: the same request by hand, with `reqwest` and `serde_json`, and the same
/// per-request timeout as the crate's default.
pub struct Raw {
    http: reqwest::Client,
    list_url: String,
    pets_url: String,
    authorization: String,
}

impl Raw {
    pub fn new(addr: SocketAddr, http: reqwest::Client) -> Self {
        Self::at(&format!("http://{addr}/v1"), KEY, http)
    }

    /// The baseline against the service at `base_url` (ending in `/v1`), with `key`.
    pub fn at(base_url: &str, key: &str, http: reqwest::Client) -> Self {
        let base_url = base_url.trim_end_matches('/');
        Self {
            http,
            list_url: format!("{base_url}/pets?limit=100"),
            pets_url: format!("{base_url}/pets"),
            authorization: format!("Bearer {key}"),
        }
    }

    pub async fn list_pets(&self) -> Vec<Pet> {
        self.get(&self.list_url).await
    }

    /// `getPet`: the URL is built per call, as the crate does.
    pub async fn get_pet(&self, id: PetId) -> Pet {
        self.get(format!("{}/{id}", self.pets_url)).await
    }

    async fn get<T: DeserializeOwned>(&self, url: impl reqwest::IntoUrl) -> T {
        let response = self
            .http
            .get(url)
            .timeout(ATTEMPT_TIMEOUT)
            .header("authorization", &self.authorization)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }

    pub async fn create_pet(&self, pet: &NewPet) -> Pet {
        let response = self
            .http
            .post(&self.pets_url)
            .timeout(ATTEMPT_TIMEOUT)
            .header("authorization", &self.authorization)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(serde_json::to_vec(pet).unwrap())
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success());
        serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
    }
}

/// The baseline as a user who knows only the specification writes it: on a 429, sleep the
/// `Retry-After` seconds and send again. Each call returns how many 429s it met: `Ok` when
/// it ended in a decoded success, `Err` otherwise (a transport error, another status).
impl Raw {
    pub async fn list_pets_patiently(&self) -> Result<u64, u64> {
        self.patiently::<Vec<Pet>>(|| self.http.get(&self.list_url))
            .await
    }

    pub async fn create_pet_patiently(&self, pet: &NewPet) -> Result<u64, u64> {
        let body = serde_json::to_vec(pet).unwrap();
        self.patiently::<Pet>(|| {
            self.http
                .post(&self.pets_url)
                .header("content-type", "application/json")
                .body(body.clone())
        })
        .await
    }

    async fn patiently<T: DeserializeOwned>(
        &self,
        request: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<u64, u64> {
        let mut limited = 0;
        loop {
            let response = request()
                .timeout(ATTEMPT_TIMEOUT)
                .header("authorization", &self.authorization)
                .header("accept", "application/json")
                .send()
                .await
                .map_err(|_| limited)?;
            if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS {
                limited += 1;
                let wait = response
                    .headers()
                    .get("retry-after")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.trim().parse::<f64>().ok())
                    .unwrap_or(1.0);
                let wait = std::time::Duration::from_secs_f64(wait.clamp(0.0, 3_600.0));
                tokio::time::sleep(wait).await;
                continue;
            }
            if !response.status().is_success() {
                return Err(limited);
            }
            let body = response.bytes().await.map_err(|_| limited)?;
            return match serde_json::from_slice::<T>(&body) {
                Ok(_) => Ok(limited),
                Err(_) => Err(limited),
            };
        }
    }
}

/// Runs `n` calls made by `call` concurrently, as separate tasks.
pub async fn fan_out<T, F>(n: usize, call: impl Fn() -> F) -> Vec<T>
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send + 'static,
{
    let mut set = JoinSet::new();
    for _ in 0..n {
        set.spawn(call());
    }
    set.join_all().await
}
