//! Signature verification per provider at 1 KiB and 1 MiB bodies, with a
//! raw HMAC-SHA256 over the same bytes as the floor.
//!
//! `cargo bench --bench verify`
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::time::{Duration, UNIX_EPOCH};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use webhook_idempotency::verify::github::{self, GitHubVerifier};
use webhook_idempotency::verify::stripe::{self, StripeVerifier};
use webhook_idempotency::verify::{Delivery, SigningSecret, Verifier};

fn parts(name: &str, value: &str) -> http::request::Parts {
    http::Request::builder().header(name, value).body(()).unwrap().into_parts().0
}

fn bench(c: &mut Criterion) {
    let secret = SigningSecret::from("whsec_bench_secret_0123456789abcdef");
    let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut group = c.benchmark_group("verify");
    for (label, size) in [("1KiB", 1024), ("1MiB", 1024 * 1024)] {
        let body: Vec<u8> = (0..size).map(|i| b"{\"a\": 1}\n"[i % 9]).collect();
        group.throughput(Throughput::Bytes(size as u64));

        group.bench_with_input(BenchmarkId::new("raw_hmac_sha256", label), &body, |b, body| {
            b.iter(|| {
                let mut mac = Hmac::<Sha256>::new_from_slice(secret.expose()).unwrap();
                mac.update(body);
                mac.finalize()
            })
        });

        let stripe_parts = parts("stripe-signature", &stripe::sign(&secret, 1_700_000_000, &body));
        let v = StripeVerifier::new();
        group.bench_with_input(BenchmarkId::new("stripe", label), &body, |b, body| {
            b.iter(|| v.verify(&Delivery::new(&stripe_parts, body, std::slice::from_ref(&secret), now)).unwrap())
        });

        let github_parts = parts("x-hub-signature-256", &github::sign(&secret, &body));
        let v = GitHubVerifier::new();
        group.bench_with_input(BenchmarkId::new("github", label), &body, |b, body| {
            b.iter(|| v.verify(&Delivery::new(&github_parts, body, std::slice::from_ref(&secret), now)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
