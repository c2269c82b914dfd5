//! Allocations and bytes allocated per `list_pets` call, the crate against the raw
//! `reqwest` + `serde_json` baseline, counted by a global allocator on the client's thread
//! only (the server runs on a thread of its own). Also: cloning the client allocates nothing.
//!
//! Target: ratio <= 1.2. Run with `cargo bench --bench allocations`.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use support::{Raw, crate_client, http_client, start_server};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: delegates to the system allocator; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn count(size: usize) {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations and bytes per iteration of `f`, on this thread.
fn measure(iterations: u64, mut f: impl FnMut()) -> (f64, f64) {
    ALLOCATIONS.store(0, Ordering::Relaxed);
    BYTES.store(0, Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    for _ in 0..iterations {
        f();
    }
    COUNTING.with(|c| c.set(false));
    let n = iterations as f64;
    (
        ALLOCATIONS.load(Ordering::Relaxed) as f64 / n,
        BYTES.load(Ordering::Relaxed) as f64 / n,
    )
}

fn main() {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = server_rt.block_on(start_server());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = http_client();
    let client = crate_client(addr, http.clone());
    let raw = Raw::new(addr, http);

    // Warm the pool and lazily initialised state on both paths.
    for _ in 0..50 {
        rt.block_on(client.list_pets().limit(100).send()).unwrap();
        rt.block_on(raw.list_pets());
    }
    const CALLS: u64 = 2000;
    let (crate_allocs, crate_bytes) = measure(CALLS, || {
        rt.block_on(client.list_pets().limit(100).send()).unwrap();
    });
    let (raw_allocs, raw_bytes) = measure(CALLS, || {
        rt.block_on(raw.list_pets());
    });
    let (clone_allocs, _) = measure(CALLS, || {
        std::hint::black_box(client.clone());
    });

    println!("| what | crate | raw | crate/raw | target |");
    println!("| --- | --- | --- | --- | --- |");
    println!(
        "| allocations per list_pets(limit 100) call ({CALLS} calls) | {crate_allocs:.1} | {raw_allocs:.1} | {:.3} | <= 1.2 |",
        crate_allocs / raw_allocs
    );
    println!(
        "| bytes allocated per list_pets(limit 100) call | {crate_bytes:.0} | {raw_bytes:.0} | {:.3} | <= 1.2 |",
        crate_bytes / raw_bytes
    );
    println!("| allocations per client clone | {clone_allocs:.1} | | | 0 |");
}
