//! The database paths, against a real PostgreSQL: one new event claimed,
//! written and committed, and one duplicate of a done event, first through
//! [`ClaimStore`] alone (`claim/*`), then through the whole `WebhookService`
//! with the Stripe preset (`layer/*`: signature, key extraction, claim,
//! handler, commit).
//!
//! The server is the test suite's throwaway one (`webhook-test-support`:
//! `initdb` into a temporary directory, a server on a free loopback port, run
//! as the `postgres` user when the bench runs as root, deleted afterwards).
//! It runs with **`fsync=off`**: a COMMIT does not wait for the disk, so these
//! numbers are the CPU and round-trip cost of the protocol (statements, their
//! round trips over loopback, the server's work), not a durable commit's. On a
//! production server add one WAL flush (`fsync`/`fdatasync` latency of its
//! disk) per new event; a duplicate writes nothing and flushes nothing.
//!
//! One pool of 4 connections, one current-thread Tokio runtime, one request
//! at a time: latency, not throughput (`examples/load.rs` measures that).
//! Every iteration checks its outcome (claimed and committed, or replayed),
//! so a broken path panics instead of being timed.
//!
//! `cargo bench --all-features --bench claim`
#![allow(missing_docs)] // criterion's macros generate undocumented functions

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use tower::{Layer, ServiceExt};
use webhook_idempotency::providers::stripe;
use webhook_idempotency::store::claim::{Claim, ClaimStore};
use webhook_idempotency::{
    Provider, ScopedEvent, SigningSecret, WebhookEvent, WebhookLayer, WebhookTx, IDEMPOTENT_REPLAYED,
};
use webhook_test_support::TempPostgres;

const SECRET: &str = "whsec_bench_secret";
/// The business write each new event makes, in the claim's transaction.
const INSERT: &str = "INSERT INTO effects (event_key) VALUES ($1)";

/// A Stripe event of about 300 bytes with id `id`.
fn stripe_body(id: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"id":"{id}","object":"event","api_version":"2024-06-20","created":1700000000,"type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_bench_1","object":"payment_intent","amount":2000,"currency":"usd"}}}}}}"#
    ))
}

/// A delivery of `body` signed now with [`SECRET`].
fn signed(body: Bytes) -> Request<Full<Bytes>> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    Request::post("/webhooks/stripe")
        .header("content-type", "application/json")
        .header("stripe-signature", stripe::FACTS.sign(&SigningSecret::from(SECRET), now, &body))
        .header("content-length", body.len())
        .body(Full::new(body))
        .unwrap()
}

/// The server, a migrated database with an `effects` table, and a pool of 4.
fn database(rt: &tokio::runtime::Runtime) -> (TempPostgres, Pool) {
    let pg = TempPostgres::start().expect("start a throwaway PostgreSQL (see webhook-test-support)");
    let manager = Manager::from_config(
        pg.url("postgres").parse().unwrap(),
        tokio_postgres::NoTls,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    let pool = Pool::builder(manager).max_size(4).build().unwrap();
    rt.block_on(async {
        webhook_idempotency::migrate(&pool.clone().into()).await.expect("migrate");
        pool.get()
            .await
            .unwrap()
            .batch_execute("CREATE TABLE effects (id bigserial PRIMARY KEY, event_key text NOT NULL)")
            .await
            .unwrap();
    });
    (pg, pool)
}

/// Claims `event`, inserts its effect, commits; panics on any other outcome.
async fn claim_and_commit(store: &ClaimStore, event: &ScopedEvent) {
    match store.claim(event).await.expect("claim") {
        Claim::Acquired(claimed) => {
            let client = claimed.tx().client().await.expect("transaction open");
            client.execute(INSERT, &[&event.key()]).await.expect("insert");
            drop(client);
            claimed.commit(200).await.expect("commit");
        }
        other => panic!("a new event must be claimed, got {other:?}"),
    }
}

/// The handler behind the layer: one insert through `WebhookTx`, then 200.
async fn handler(req: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
    let tx = req.extensions().get::<WebhookTx>().expect("inside WebhookLayer");
    let event = req.extensions().get::<WebhookEvent>().expect("inside WebhookLayer");
    let client = tx.client().await.expect("transaction open");
    let status = match client.execute(INSERT, &[&event.key()]).await {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let mut res = Response::new(Full::new(Bytes::new()));
    *res.status_mut() = status;
    Ok(res)
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let _guard = rt.enter();
    let (_pg, pool) = database(&rt);
    let mut next = 0u64;
    let mut fresh = move |prefix: &str| {
        next += 1;
        format!("{prefix}_{next}")
    };

    let store = ClaimStore::builder(pool.clone()).build().unwrap();
    let done = ScopedEvent::new("bench", "acct", "evt_done").event_type("bench.done");
    rt.block_on(claim_and_commit(&store, &done));
    let mut group = c.benchmark_group("claim");
    group.bench_function("new+commit", |b| {
        b.iter_batched(
            || ScopedEvent::new("bench", "acct", fresh("evt_store")).event_type("bench.new"),
            |event| rt.block_on(claim_and_commit(&store, &event)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("duplicate", |b| {
        b.iter(|| match rt.block_on(store.claim(&done)).expect("claim") {
            Claim::Done { status: Some(200) } => {}
            other => panic!("a done event must answer Done with its status, got {other:?}"),
        })
    });
    group.finish();

    let layer = WebhookLayer::builder(pool, Provider::stripe()).scope("acct").secret(SECRET).build().unwrap();
    let svc = layer.layer(tower::service_fn(handler));
    let duplicate = stripe_body("evt_layer_done");
    let first = rt.block_on(svc.clone().oneshot(signed(duplicate.clone()))).unwrap();
    assert_eq!(first.status(), StatusCode::OK, "the first delivery commits");
    let mut group = c.benchmark_group("layer");
    group.bench_function("new", |b| {
        b.iter_batched(
            || (svc.clone(), signed(stripe_body(&fresh("evt_layer")))),
            |(svc, req)| {
                let res = rt.block_on(svc.oneshot(req)).unwrap();
                assert_eq!(res.status(), StatusCode::OK, "a new event commits");
                assert!(!res.headers().contains_key(IDEMPOTENT_REPLAYED), "a new event is not a replay");
                res
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("duplicate", |b| {
        b.iter_batched(
            || (svc.clone(), signed(duplicate.clone())),
            |(svc, req)| {
                let res = rt.block_on(svc.oneshot(req)).unwrap();
                assert_eq!(res.status(), StatusCode::OK, "a duplicate is answered 200");
                assert_eq!(res.headers()[IDEMPOTENT_REPLAYED], "true", "a duplicate is a replay");
                res
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches_group, benches);
criterion_main!(benches_group);
