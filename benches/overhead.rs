//! Round-trip overhead of `PetStoreClient` against the same request made with a plain
//! `reqwest::Client` and `serde_json`, over the same pool to the same loopback server, at
//! concurrency 1 and 32. Retries and pacing are on (the server's quota never binds); no
//! tracing subscriber is installed.
//!
//! Target: the crate's median within 3% of the raw baseline (`benches/ratios.py` prints it).

mod support;

use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use petstore_client::NewPet;
use support::{Raw, crate_client, fan_out, http_client, runtime, start_server};

fn overhead(c: &mut Criterion) {
    let rt = runtime();
    let addr = rt.block_on(start_server());
    let http = http_client();
    let client = crate_client(addr, http.clone());
    let raw = Arc::new(Raw::new(addr, http));
    let new_pet = NewPet::new("Rex", 3);

    for n in [1usize, 32] {
        let mut group = c.benchmark_group(format!("list_pets_c{n}"));
        group.bench_function("crate", |b| {
            b.to_async(&rt).iter(|| {
                fan_out(n, || {
                    let client = client.clone();
                    async move { client.list_pets().limit(100).send().await.unwrap().len() }
                })
            });
        });
        group.bench_function("raw", |b| {
            b.to_async(&rt).iter(|| {
                fan_out(n, || {
                    let raw = raw.clone();
                    async move { raw.list_pets().await.len() }
                })
            });
        });
        group.finish();

        let mut group = c.benchmark_group(format!("create_pet_c{n}"));
        group.bench_function("crate", |b| {
            b.to_async(&rt).iter(|| {
                fan_out(n, || {
                    let (client, new_pet) = (client.clone(), new_pet.clone());
                    async move { client.create_pet(new_pet).send().await.unwrap().id }
                })
            });
        });
        group.bench_function("raw", |b| {
            b.to_async(&rt).iter(|| {
                fan_out(n, || {
                    let (raw, new_pet) = (raw.clone(), new_pet.clone());
                    async move { raw.create_pet(&new_pet).await.id }
                })
            });
        });
        group.finish();
    }
}

criterion_group!(benches, overhead);
criterion_main!(benches);
