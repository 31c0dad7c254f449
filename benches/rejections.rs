//! The paths that do no database work: a bad Stripe signature (401), a
//! `Stripe-Signature` of 5,000 entries (401, refused by its size), a
//! declared `Content-Length` over the body limit (413), through
//! `WebhookService` with a pool to a closed port (a connection attempt would
//! fail the request with another status, which the bench asserts against);
//! and key extraction (`JsonPointerKey`, `DerivedKey`) on a 1 KB body.
//!
//! `cargo bench --all-features --bench rejections`
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{Layer, ServiceExt};
use webhook_idempotency::key::{DerivedKey, JsonPointerKey, KeyExtractor};
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{Provider, SigningSecret, WebhookLayer};

const SECRET: &str = "whsec_bench_secret";
const LIMIT: usize = 64 * 1024;

/// A Stripe event of about 1 KB.
fn body() -> Bytes {
    let pad = "x".repeat(700);
    Bytes::from(format!(
        r#"{{"id":"evt_bench_1","object":"event","api_version":"2024-06-20","created":1700000000,"type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_bench_1","object":"payment_intent","amount":2000,"currency":"usd","description":"{pad}"}}}}}}"#
    ))
}

/// A pool whose every connection attempt is refused: nothing listens on
/// the port (bound, read, released).
fn closed_pool() -> Pool {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let manager = Manager::from_config(
        url.parse().unwrap(),
        tokio_postgres::NoTls,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Pool::builder(manager).max_size(4).build().unwrap()
}

fn service(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _guard = rt.enter();
    let layer = WebhookLayer::builder(closed_pool(), Provider::stripe())
        .scope("bench")
        .secret(SECRET)
        .body_limit(LIMIT)
        .build()
        .unwrap();
    let inner = tower::service_fn(|_req: Request<Full<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
    });
    let svc = layer.layer(inner);
    let body = body();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    // Signed with another secret: a well-formed header that does not match.
    let bad = stripe::FACTS.sign(&SigningSecret::from("whsec_other"), now, &body);
    // The third security review's header: 5,000 `v1=` entries (340 KB).
    let long_list = format!("t={now},{}", vec![format!("v1={}", "0".repeat(64)); 5_000].join(","));
    let cases: [(&str, StatusCode, Box<dyn Fn() -> Request<Full<Bytes>>>); 3] = [
        (
            "401 bad signature, 1 KB",
            StatusCode::UNAUTHORIZED,
            Box::new(|| {
                Request::post("/")
                    .header("stripe-signature", &bad)
                    .header("content-length", body.len())
                    .body(Full::new(body.clone()))
                    .unwrap()
            }),
        ),
        (
            "401 Stripe-Signature of 5,000 v1 entries (340 KB), 1 KB",
            StatusCode::UNAUTHORIZED,
            Box::new(|| {
                Request::post("/")
                    .header("stripe-signature", &long_list)
                    .header("content-length", body.len())
                    .body(Full::new(body.clone()))
                    .unwrap()
            }),
        ),
        (
            "413 declared length over the limit",
            StatusCode::PAYLOAD_TOO_LARGE,
            Box::new(|| {
                Request::post("/")
                    .header("stripe-signature", &bad)
                    .header("content-length", LIMIT + 1)
                    .body(Full::new(body.clone()))
                    .unwrap()
            }),
        ),
    ];
    let mut group = c.benchmark_group("rejections");
    for (name, want, request) in &cases {
        let status = rt.block_on(svc.clone().oneshot(request())).unwrap().status();
        assert_eq!(status, *want, "{name}");
        group.bench_function(*name, |b| {
            b.iter_batched(
                || (svc.clone(), request()),
                |(svc, req)| rt.block_on(svc.oneshot(req)).unwrap().status(),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

fn keys(c: &mut Criterion) {
    let body = body();
    let parts = Request::post("/").header("x-delivery", "d-1").body(()).unwrap().into_parts().0;
    let extractors: [(&str, Box<dyn KeyExtractor>); 3] = [
        ("JsonPointerKey /id + /type", Box::new(JsonPointerKey::new("/id").event_type("/type"))),
        (
            "DerivedKey header + json pointer",
            Box::new(DerivedKey::new().header(http::HeaderName::from_static("x-delivery")).json("/data/object/id")),
        ),
        ("DerivedKey canonical body", Box::new(DerivedKey::new().canonical_body().event_type_json("/type"))),
    ];
    let mut group = c.benchmark_group("key extraction, 1 KB");
    for (name, extractor) in &extractors {
        assert!(extractor.extract(&parts, &body).is_ok(), "{name}");
        group.bench_function(*name, |b| b.iter(|| extractor.extract(&parts, &body).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, service, keys);
criterion_main!(benches);
