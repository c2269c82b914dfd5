//! The crate's decode path for a list of pets against `serde_json::from_slice::<Vec<Pet>>`.
//!
//! Target: ratio <= 1.05 (`benches/ratios.py` prints it).

mod support;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use petstore_client::Pet;

fn decode(c: &mut Criterion) {
    for n in [100usize, 1000] {
        let body = support::pets_json(n).into_bytes();
        let mut group = c.benchmark_group(format!("decode_{n}"));
        group.bench_function("crate", |b| {
            b.iter(|| petstore_client::__private::decode_pets(black_box(&body)).unwrap());
        });
        group.bench_function("raw", |b| {
            b.iter(|| serde_json::from_slice::<Vec<Pet>>(black_box(&body)).unwrap());
        });
        // Validating UTF-8 first can beat `from_slice`: this row decides which the crate uses.
        group.bench_function("from_str", |b| {
            b.iter(|| {
                let text = std::str::from_utf8(black_box(&body)).unwrap();
                serde_json::from_str::<Vec<Pet>>(text).unwrap()
            });
        });
        group.finish();
    }
}

criterion_group!(benches, decode);
criterion_main!(benches);
