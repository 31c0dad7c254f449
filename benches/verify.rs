//! Signature verification per preset at 1 KiB, 64 KiB and 1 MiB bodies, with
//! a raw HMAC-SHA256 of the same bytes in the same run as the floor.
//!
//! `cargo bench --all-features --bench verify`
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::time::{Duration, UNIX_EPOCH};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use webhook_idempotency::providers;
use webhook_idempotency::verify::*;

const NOW: u64 = 1_700_000_000;
const SECRET: &str = "bench-secret-0123456789abcdef";

/// A JSON body of about `size` bytes, with the fields the body-reading
/// verifiers need.
fn body(size: usize) -> Vec<u8> {
    let head = format!("{{\"id\":\"evt_1\",\"webhookTimestamp\":{},\"pad\":\"", NOW * 1000);
    let mut b = head.into_bytes();
    b.resize(size.saturating_sub(2), b'x');
    b.extend_from_slice(b"\"}");
    b
}

/// One verifier ready to verify its body: request head, secrets and the
/// body (Mailgun's carries its signature).
struct Case {
    name: String,
    verifier: Box<dyn Verifier>,
    parts: http::request::Parts,
    secrets: Vec<SigningSecret>,
    body: Vec<u8>,
}

/// Every preset in the registry (its signed example over `b`), then the
/// generic builder.
fn cases(b: &[u8]) -> Vec<Case> {
    let mut v: Vec<Case> = providers::all()
        .iter()
        .map(|preset| {
            let ex = preset.example("delivery-1", UNIX_EPOCH + Duration::from_secs(NOW), b);
            let verifier: Box<dyn Verifier> = Box::new(ProviderVerifier(ex.provider));
            Case { name: preset.name.to_owned(), verifier, parts: ex.parts, secrets: ex.secrets, body: ex.body }
        })
        .collect();
    let s = SigningSecret::from(SECRET);
    for (name, alg) in [("generic (HMAC-SHA256)", Algorithm::Sha256), ("generic (HMAC-SHA512)", Algorithm::Sha512)] {
        let parts =
            http::Request::post("/").header("x-sig", hex::encode(hmac(alg, &s, &[b]))).body(()).unwrap().into_parts().0;
        v.push(Case {
            name: name.to_owned(),
            verifier: Box::new(generic::HmacVerifier::builder("x-sig").algorithm(alg).build().unwrap()),
            parts,
            secrets: vec![s.clone()],
            body: b.to_vec(),
        });
    }
    v
}

/// A provider's verifier, as the layer calls it (signature only).
struct ProviderVerifier(webhook_idempotency::Provider);

impl Verifier for ProviderVerifier {
    fn verify(&self, delivery: &Delivery<'_>) -> Result<(), VerifyError> {
        self.0.verify(delivery)
    }
}

fn bench(c: &mut Criterion) {
    let now = UNIX_EPOCH + Duration::from_secs(NOW);
    for (label, size) in [("1KiB", 1024), ("64KiB", 64 * 1024), ("1MiB", 1024 * 1024)] {
        let mut group = c.benchmark_group(format!("verify/{label}"));
        group.throughput(Throughput::Bytes(size as u64));
        let b = body(size);
        group.bench_with_input(BenchmarkId::from_parameter("raw HMAC-SHA256"), &b, |bench, body| {
            bench.iter(|| {
                let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(SECRET.as_bytes()).unwrap();
                mac.update(body);
                mac.finalize()
            })
        });
        // The floors for the presets on other hashes.
        let secret = SigningSecret::from(SECRET);
        for (label, alg) in [("raw HMAC-SHA1", Algorithm::Sha1), ("raw HMAC-SHA512", Algorithm::Sha512)] {
            group.bench_with_input(BenchmarkId::from_parameter(label), &b, |bench, body| {
                bench.iter(|| hmac(alg, &secret, &[body]))
            });
        }
        for case in cases(&b) {
            let delivery = Delivery::new(&case.parts, &case.body, &case.secrets, now);
            case.verifier.verify(&delivery).unwrap_or_else(|e| panic!("{}: {e}", case.name));
            group.bench_function(BenchmarkId::from_parameter(&case.name), |bench| {
                bench.iter(|| case.verifier.verify(&delivery).unwrap())
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
