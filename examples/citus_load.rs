//! New events and duplicates on a Citus cluster against a single PostgreSQL,
//! in one run.
//!
//! ```text
//! cargo run --release --all-features --example citus_load
//! LOAD_EVENTS=4000 LOAD_SENDERS=16 cargo run --release --all-features --example citus_load
//! ```
//!
//! Starts a throwaway single PostgreSQL and a throwaway Citus cluster (a
//! coordinator and two workers: the tests' harness, `webhook_test_support`),
//! every server on this machine with the harness's settings (`fsync = off`:
//! what differs is the path a statement takes, not the disk). On each, in
//! turn: `migrate` (which distributes the tables on the cluster, 32 shards),
//! a colocated effects table, then the webhook layer (Stripe preset, pool of
//! 16, called in this process through `tower::ServiceExt::oneshot`: no HTTP)
//! processes `LOAD_EVENTS` new events (default 2,000; 8 scopes, so rows
//! spread over the shards) from `LOAD_SENDERS` concurrent senders (default
//! 16), then the same events again as duplicates. Prints events/s for each
//! phase and the effects counted (one per event, else it fails). Citus needs
//! `../shared/citus/install.sh` (or any Citus 13 for PostgreSQL 15).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::StreamExt;
use tower::ServiceExt;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{Provider, SigningSecret, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};
use webhook_test_support::{Citus, TempPostgres};

const SECRET: &str = "whsec_citus_load";
const SCOPES: usize = 8;

fn pool(url: &str, size: usize) -> Pool {
    let config: tokio_postgres::Config = url.parse().expect("url");
    let manager =
        Manager::from_config(config, tokio_postgres::NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager).max_size(size).build().expect("pool config")
}

fn request(i: usize) -> http::Request<Body> {
    let body = format!(
        r#"{{"id":"evt_{i:06}","object":"event","type":"charge.succeeded","data":{{"object":{{"amount":{i}}}}}}}"#
    );
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    http::Request::post(format!("/webhooks/{}", i % SCOPES))
        .header("content-type", "application/json")
        .header("stripe-signature", stripe::FACTS.sign(&SigningSecret::from(SECRET), now, body.as_bytes()))
        .body(Body::from(body))
        .unwrap()
}

async fn effect(tx: WebhookTx, event: WebhookEvent) -> http::StatusCode {
    let Ok(client) = tx.client().await else { return http::StatusCode::INTERNAL_SERVER_ERROR };
    let written =
        client.execute("INSERT INTO effects (scope, event_key) VALUES ($1, $2)", &[&event.scope(), &event.key()]).await;
    if written.is_ok() {
        http::StatusCode::OK
    } else {
        http::StatusCode::INTERNAL_SERVER_ERROR
    }
}

/// One route per scope (`/webhooks/{n}`, scope `acct_{n}`), one pool.
fn app(pool: Pool) -> Router {
    let store = StoreConfig::new(pool);
    (0..SCOPES).fold(Router::new(), |router, n| {
        let layer = WebhookLayer::builder(store.clone(), Provider::stripe())
            .scope(format!("acct_{n}"))
            .secret(SECRET)
            .build()
            .expect("layer");
        router.route(&format!("/webhooks/{n}"), post(effect).layer(layer))
    })
}

/// Sends events `0..events` from `senders` concurrent senders; events/s and
/// the answers that were not 200.
async fn send(app: &Router, events: usize, senders: usize) -> (f64, usize) {
    let bad = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    futures_util::stream::iter(0..events)
        .for_each_concurrent(senders, |i| {
            let (app, bad) = (app.clone(), Arc::clone(&bad));
            async move {
                let status = app.oneshot(request(i)).await.map(|r| r.status()).unwrap_or_default();
                if status != http::StatusCode::OK {
                    bad.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
        .await;
    (events as f64 / started.elapsed().as_secs_f64(), bad.load(Ordering::Relaxed))
}

async fn run(name: &str, url: &str, distributed: bool, events: usize, senders: usize) -> Result<(), String> {
    let admin = pool(url, 2);
    webhook_idempotency::migrate(&admin.clone().into()).await.map_err(|e| e.to_string())?;
    let c = admin.get().await.map_err(|e| e.to_string())?;
    c.batch_execute(
        "CREATE TABLE effects (scope text NOT NULL, event_key text NOT NULL, PRIMARY KEY (scope, event_key))",
    )
    .await
    .map_err(|e| e.to_string())?;
    if distributed {
        c.batch_execute(
            "SELECT create_distributed_table('effects', 'scope', colocate_with => 'webhook_idempotency.webhook_events')",
        )
        .await
        .map_err(|e| e.to_string())?;
    }
    let app = app(pool(url, 16));
    let (new, bad_new) = send(&app, events, senders).await;
    let (duplicate, bad_duplicate) = send(&app, events, senders).await;
    let effects: i64 = c.query_one("SELECT count(*) FROM effects", &[]).await.map_err(|e| e.to_string())?.get(0);
    println!(
        "{name:<28} new events {new:>7.0}/s   duplicates {duplicate:>7.0}/s   not 200: {bad_new}/{bad_duplicate}   \
         effects {effects} of {events}"
    );
    if effects != events as i64 || bad_new + bad_duplicate > 0 {
        return Err(format!("{name}: {effects} effects for {events} events, {bad_new}/{bad_duplicate} not 200"));
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let number = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (events, senders) = (number("LOAD_EVENTS", 2_000), number("LOAD_SENDERS", 16));
    println!("{events} events from {senders} senders, pool 16, {SCOPES} scopes; every server fsync=off, one machine");
    let single = TempPostgres::start()?;
    run("single PostgreSQL", &single.url("postgres"), false, events, senders).await?;
    drop(single);
    let cluster = Citus::start(2)?;
    cluster.create_database("load", None)?;
    run("Citus (coordinator + 2)", &cluster.url("load"), true, events, senders).await?;
    Ok(())
}
