//! A minimal loopback HTTP/1.1 server answering fixed, realistic bytes, so that the benches
//! measure the client and not a server framework; and the raw `reqwest` + `serde_json`
//! baseline the crate is compared against.

#![allow(dead_code)] // each bench uses part of this module

use std::net::SocketAddr;

use petstore_client::{NewPet, Pet, PetStoreClient};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub const KEY: &str = "FAKE-bench-key";

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

fn response(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         x-ratelimit-limit: 1000000000\r\nx-ratelimit-remaining: 999999999\r\n\
         x-ratelimit-reset: 4102444800\r\ndate: Sun, 22 Nov 2026 12:00:00 GMT\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Starts the server on the current runtime; GET answers a 100-pet list, POST a created pet.
pub async fn start_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let list = response("200 OK", &pets_json(100));
    let created = response(
        "201 Created",
        r#"{"id":101,"name":"Rex","categoryId":3,"status":"available"}"#,
    );
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            socket.set_nodelay(true).unwrap();
            let (list, created) = (list.clone(), created.clone());
            tokio::spawn(async move {
                let mut buf = Vec::with_capacity(4096);
                loop {
                    let Some((head_end, body_len, is_post)) =
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
                    let reply = if is_post { &created } else { &list };
                    if socket.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Reads one request head: (end of head, content length, whether it is a POST).
async fn read_head(
    socket: &mut tokio::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(usize, usize, bool)> {
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
            return Some((pos + 4, body_len, head.starts_with("POST")));
        }
        if socket.read_buf(buf).await.ok()? == 0 {
            return None;
        }
    }
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
        Self {
            http,
            list_url: format!("http://{addr}/v1/pets?limit=100"),
            pets_url: format!("http://{addr}/v1/pets"),
            authorization: format!("Bearer {KEY}"),
        }
    }

    pub async fn list_pets(&self) -> Vec<Pet> {
        let response = self
            .http
            .get(&self.list_url)
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
