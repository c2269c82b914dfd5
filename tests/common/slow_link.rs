//! A loopback TCP link that delivers every byte some time after it was sent, each way, as a
//! distant server's link would: the real server behind it is slowed, never mocked. The delay
//! is fixed, or drawn for each chunk from a range (a congested link); bytes in flight do not
//! wait for one another, so requests sent together arrive together, and a chunk never
//! overtakes the one before it. The delays can change while the link runs.

use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub struct SlowLink {
    port: u16,
    /// Where each new connection is linked to; existing ones stay where they were.
    target: Arc<AtomicU16>,
    /// The range each chunk's delay is drawn from, for every connection.
    delays: Arc<Mutex<RangeInclusive<Duration>>>,
    accept: JoinHandle<()>,
}

impl SlowLink {
    /// Listens on a free loopback port and links each connection to `target_port` on loopback,
    /// `delay` each way.
    pub async fn start(target_port: u16, delay: Duration) -> Self {
        Self::start_varying(target_port, delay..=delay).await
    }

    /// As [`start`](Self::start), each chunk delayed by an amount in `delays`, drawn from a
    /// fixed sequence, so that a run can be told again.
    pub async fn start_varying(target_port: u16, delays: RangeInclusive<Duration>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let target = Arc::new(AtomicU16::new(target_port));
        let delays = Arc::new(Mutex::new(delays));
        let accept = tokio::spawn({
            let target = Arc::clone(&target);
            let delays = Arc::clone(&delays);
            async move {
                while let Ok((near, _)) = listener.accept().await {
                    let target_port = target.load(Ordering::SeqCst);
                    let Ok(far) = TcpStream::connect(("127.0.0.1", target_port)).await else {
                        continue;
                    };
                    // Nagle's algorithm would hold small writes for an acknowledgement: the delay
                    // is the link's alone.
                    let _ = (near.set_nodelay(true), far.set_nodelay(true));
                    let (near_read, near_write) = near.into_split();
                    let (far_read, far_write) = far.into_split();
                    tokio::spawn(delayed(
                        near_read,
                        far_write,
                        Delays::new(Arc::clone(&delays), 1),
                    ));
                    tokio::spawn(delayed(
                        far_read,
                        near_write,
                        Delays::new(Arc::clone(&delays), 2),
                    ));
                }
            }
        });
        Self {
            port,
            target,
            delays,
            accept,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Links each connection made from now on to `target_port`, as a virtual address moved
    /// to another server after a failover would.
    pub fn retarget(&self, target_port: u16) {
        self.target.store(target_port, Ordering::SeqCst);
    }

    /// Delays each chunk read from now on, on every connection, by an amount in `delays`;
    /// chunks already read keep theirs.
    pub fn set_delays(&self, delays: RangeInclusive<Duration>) {
        *self.delays.lock().expect("the delays") = delays;
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Delays drawn uniformly from a range by a xorshift generator with a fixed seed.
struct Delays {
    range: Arc<Mutex<RangeInclusive<Duration>>>,
    state: u64,
}

impl Delays {
    fn new(range: Arc<Mutex<RangeInclusive<Duration>>>, seed: u64) -> Self {
        Self {
            range,
            state: 0x9E37_79B9_7F4A_7C15 ^ seed,
        }
    }

    fn next(&mut self) -> Duration {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let range = self.range.lock().expect("the delays").clone();
        let (low, high) = (range.start().as_micros(), range.end().as_micros());
        let span = u64::try_from(high - low).unwrap_or(u64::MAX);
        let micros = low + u128::from(self.state % span.saturating_add(1));
        Duration::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
    }
}

/// Copies `from` to `to`, each chunk a delay after it was read, until either side closes.
async fn delayed(
    mut from: impl AsyncReadExt + Unpin,
    mut to: impl AsyncWriteExt + Unpin + Send + 'static,
    mut delays: Delays,
) {
    let (sender, mut receiver) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let deliver = tokio::spawn(async move {
        while let Some((at, chunk)) = receiver.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    let mut buffer = vec![0; 16 * 1024];
    while let Ok(read @ 1..) = from.read(&mut buffer).await {
        if sender
            .send((Instant::now() + delays.next(), buffer[..read].to_vec()))
            .is_err()
        {
            break;
        }
    }
    drop(sender);
    let _ = deliver.await;
}
