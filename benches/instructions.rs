//! Instructions per call, counted by callgrind through `gungraun`: the crate against the raw
//! `reqwest` + `serde_json` baseline of `benches/support` (same `reqwest::Client`, same pool,
//! same per-attempt timeout), and the cost per call when 1 to 1,000 tasks share one client.
//! Instruction counts do not depend on the machine's load, as wall-clock ratios do.
//!
//! What is counted: only the benchmark's thread, from entering the benchmark function to
//! leaving it (gungraun's default entry point: callgrind's `--toggle-collect` on that function,
//! with `--collect-atstart=no`; callgrind keeps that state per thread, so a thread that never
//! enters the function is never counted; gungraun's per-thread output files show the server's
//! thread at 0). The client runs on a current-thread runtime on that
//! thread, so everything it does per call is counted: building the request, admission and
//! pacing, hyper's connection task, timers, reading and decoding the response. The loopback
//! server runs on a runtime of its own, on another thread: not counted. Neither is set-up (the
//! runtimes, the server, the clients, a warm-up that opens the connections and fills the
//! rate-limit state) nor dropping what the call returned (after the function returns). A
//! teardown checks that the measured calls opened no connection.
//!
//! Under contention, `n` create calls run at once on one client, each a task of its own, on
//! that one thread: the total divided by `n` is the cost per call. Both sides are measured, and
//! the crate twice: with the budget known (no call held) and on a client that has not seen a
//! response yet (one call probes, `n - 1` wait for it). One thread, so contention here means
//! waiters and calls in flight, not threads spinning on a lock.
//!
//! Run with (valgrind from the system, e.g. `apt-get install valgrind`):
//!
//! ```sh
//! cargo install gungraun-runner --version 0.20.0 --locked   # the same version as gungraun
//! cargo bench --bench instructions
//! ```

mod support;

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gungraun::{library_benchmark, library_benchmark_group, main};
use petstore_client::{NewPet, Pet, PetId, PetStoreClient, RateLimitScope};
use support::{Raw, crate_client, fan_out, http_client, start_server_with_limit};
use tokio::runtime::Runtime;

/// The `X-RateLimit-Limit` the server reports. The client keeps its default pacing,
/// `Pacing::Shared`, so that the pacing computation users run is measured; with this budget
/// the pacing gap (at most 60 s spread over what remains) rounds to zero nanoseconds, so no
/// call is ever held for pacing, whatever the timing, and the counts stay deterministic. The
/// service's real budgets would hold calls for real time, which is not what this bench
/// measures.
const LIMIT: u64 = 1_000_000_000_000_000_000;

/// One benchmark's world, built in set-up.
struct World {
    /// Current-thread: the client's work runs on the benchmark's thread, the one counted.
    client_rt: Runtime,
    /// The server's runtime, with its own worker thread (not counted); kept alive.
    _server_rt: Runtime,
    addr: SocketAddr,
    http: reqwest::Client,
    client: PetStoreClient,
    raw: Arc<Raw>,
    /// Connections the server has accepted, and how many it had at the end of set-up.
    accepted: Arc<AtomicUsize>,
    warmed: usize,
    /// How many calls at once the warm-up prepared for.
    tasks: usize,
}

impl World {
    fn new() -> Self {
        let server_rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (addr, accepted) = server_rt.block_on(start_server_with_limit(LIMIT));
        let client_rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let http = http_client();
        Self {
            client_rt,
            _server_rt: server_rt,
            client: crate_client(addr, http.clone()),
            raw: Arc::new(Raw::new(addr, http.clone())),
            addr,
            http,
            accepted,
            warmed: 0,
            tasks: 0,
        }
    }

    fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Runs `n` create calls at once on each side, until a round opens no new connection:
    /// then the pool holds a connection for each of `n` concurrent calls.
    fn warm_up(mut self, n: usize) -> Self {
        for _ in 0..10 {
            let before = self.connections();
            self.client_rt.block_on(async {
                crate_creates(&self.client, n).await;
                raw_creates(&self.raw, n).await;
            });
            if self.connections() == before {
                break;
            }
        }
        self.warmed = self.connections();
        self.tasks = n;
        self
    }
}

/// The six measured calls.
#[derive(Clone, Copy)]
enum Call {
    ListPetsCrate,
    ListPetsRaw,
    CreatePetCrate,
    CreatePetRaw,
    GetPetCrate,
    GetPetRaw,
}

impl Call {
    const ALL: [Self; 6] = [
        Self::ListPetsCrate,
        Self::ListPetsRaw,
        Self::CreatePetCrate,
        Self::CreatePetRaw,
        Self::GetPetCrate,
        Self::GetPetRaw,
    ];

    fn run(self, world: &World) {
        world.client_rt.block_on(async {
            match self {
                Self::ListPetsCrate => {
                    world.client.list_pets().limit(100).send().await.unwrap();
                }
                Self::ListPetsRaw => {
                    world.raw.list_pets().await;
                }
                Self::CreatePetCrate => {
                    world.client.create_pet(rex()).send().await.unwrap();
                }
                Self::CreatePetRaw => {
                    world.raw.create_pet(&rex()).await;
                }
                #[allow(deprecated)]
                Self::GetPetCrate => {
                    world.client.get_pet(101).send().await.unwrap();
                }
                Self::GetPetRaw => {
                    world.raw.get_pet(PetId::from(101)).await;
                }
            }
        });
    }
}

/// How many times set-up makes the measured call before it is measured.
const WARM_CALLS: usize = 10;

/// Set-up for one call: every call once (the connection, the rate-limit state, anything
/// initialised lazily), then the measured call a few more times, so that what it leaves
/// behind (buffer sizes, the timer wheel) is what it finds, as in a client that makes that
/// call again and again.
fn warmed(measured: Call) -> World {
    let mut world = World::new();
    for call in Call::ALL {
        call.run(&world);
    }
    for _ in 0..WARM_CALLS {
        measured.run(&world);
    }
    world.warmed = world.connections();
    world.tasks = 1;
    world
}

/// Set-up for `n` concurrent calls.
fn tasks(n: usize) -> World {
    World::new().warm_up(n)
}

/// Set-up for `n` concurrent calls of a client that knows nothing of the budget yet (built
/// afresh, with a rate-limit state of its own, on the warmed pool): the first call probes
/// alone and the other `n - 1` are held until its response, then released. This is the case
/// with waiters: their cost per call should not grow with how many there are.
fn held(n: usize) -> World {
    let mut world = tasks(n);
    world.client = PetStoreClient::builder()
        .base_url(format!("http://{}/v1", world.addr))
        .api_key(support::KEY)
        .http_client(world.http.clone())
        .rate_limit_scope(RateLimitScope::Client)
        .build()
        .unwrap();
    world
}

/// Teardown: the measured call opened no connection (else connecting would be counted).
fn no_new_connection<T>((world, _): (World, T)) {
    assert_eq!(
        world.connections(),
        world.warmed,
        "the measured calls opened connections: the warm-up did not fill the pool"
    );
}

fn rex() -> NewPet {
    NewPet::new("Rex", 3)
}

async fn crate_creates(client: &PetStoreClient, n: usize) -> Vec<Pet> {
    fan_out(n, || {
        let client = client.clone();
        async move { client.create_pet(rex()).send().await.unwrap() }
    })
    .await
}

async fn raw_creates(raw: &Arc<Raw>, n: usize) -> Vec<Pet> {
    fan_out(n, || {
        let raw = raw.clone();
        async move { raw.create_pet(&rex()).await }
    })
    .await
}

// Each benchmark returns the world and the result, so that dropping them is not counted.

#[library_benchmark(teardown = no_new_connection)]
#[bench::once(warmed(Call::ListPetsCrate))]
fn list_pets_crate(world: World) -> (World, Vec<Pet>) {
    let pets = world
        .client_rt
        .block_on(world.client.list_pets().limit(100).send())
        .unwrap();
    (world, black_box(pets))
}

#[library_benchmark(teardown = no_new_connection)]
#[bench::once(warmed(Call::ListPetsRaw))]
fn list_pets_raw(world: World) -> (World, Vec<Pet>) {
    let pets = world.client_rt.block_on(world.raw.list_pets());
    (world, black_box(pets))
}

#[library_benchmark(teardown = no_new_connection)]
#[bench::once(warmed(Call::CreatePetCrate))]
fn create_pet_crate(world: World) -> (World, Pet) {
    let pet = world
        .client_rt
        .block_on(world.client.create_pet(black_box(rex())).send())
        .unwrap();
    (world, black_box(pet))
}

#[library_benchmark(teardown = no_new_connection)]
#[bench::once(warmed(Call::CreatePetRaw))]
fn create_pet_raw(world: World) -> (World, Pet) {
    let pet = world
        .client_rt
        .block_on(world.raw.create_pet(&black_box(rex())));
    (world, black_box(pet))
}

#[library_benchmark(teardown = no_new_connection)]
#[bench::once(warmed(Call::GetPetCrate))]
fn get_pet_crate(world: World) -> (World, Pet) {
    #[allow(deprecated)] // getPet is deprecated by the API, and still measured until removed
    let call = world.client.get_pet(black_box(101));
    let pet = world.client_rt.block_on(call.send()).unwrap();
    (world, black_box(pet))
}

#[library_benchmark(teardown = no_new_connection)]
#[bench::once(warmed(Call::GetPetRaw))]
fn get_pet_raw(world: World) -> (World, Pet) {
    let pet = world
        .client_rt
        .block_on(world.raw.get_pet(black_box(PetId::from(101))));
    (world, black_box(pet))
}

// `n` create calls at once on one client, each a task of its own: divide by `n` for the cost
// per call. Admission and pacing are O(1) per call if that cost does not grow with `n`.

#[library_benchmark(teardown = no_new_connection)]
#[benches::tasks(args = [1, 32, 256, 1000], setup = tasks)]
fn concurrent_creates_crate(world: World) -> (World, Vec<Pet>) {
    let n = world.tasks;
    let pets = world.client_rt.block_on(crate_creates(&world.client, n));
    (world, black_box(pets))
}

#[library_benchmark(teardown = no_new_connection)]
#[benches::tasks(args = [1, 32, 256, 1000], setup = tasks)]
fn concurrent_creates_raw(world: World) -> (World, Vec<Pet>) {
    let n = world.tasks;
    let pets = world.client_rt.block_on(raw_creates(&world.raw, n));
    (world, black_box(pets))
}

library_benchmark_group!(
    name = one_call_each;
    benchmarks =
        list_pets_crate, list_pets_raw,
        create_pet_crate, create_pet_raw,
        get_pet_crate, get_pet_raw
);

#[library_benchmark(teardown = no_new_connection)]
#[benches::tasks(args = [1, 32, 256, 1000], setup = held)]
fn concurrent_creates_crate_behind_probe(world: World) -> (World, Vec<Pet>) {
    let n = world.tasks;
    let pets = world.client_rt.block_on(crate_creates(&world.client, n));
    (world, black_box(pets))
}

library_benchmark_group!(
    name = concurrent_tasks;
    benchmarks =
        concurrent_creates_crate, concurrent_creates_raw, concurrent_creates_crate_behind_probe
);

main!(library_benchmark_groups = one_call_each, concurrent_tasks);
