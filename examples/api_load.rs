//! Load: the `Idempotency-Key` layer against a hand-written axum handler
//! doing the same work, side by side in one run.
//!
//! ```text
//! cargo run --release --all-features --example api_load
//! API_LOAD_SECONDS=5 API_LOAD_SENDERS=16,64 API_LOAD_VARIANTS=layer,hand cargo run --release --all-features --example api_load
//! ```
//!
//! A throwaway PostgreSQL (the tests' harness), switched to durable commits
//! (`fsync = on`, `synchronous_commit = on`, reloaded); the server on
//! 127.0.0.1 in this process (axum::serve), one reqwest client, a pool of 16
//! connections per variant. Per variant and number of senders, first
//! requests (each a new key) for `API_LOAD_SECONDS`, then replays of keys
//! already done:
//!
//! - `layer`: `IdempotencyKeyLayer` in front of a handler doing one insert
//!   through `WebhookTx` (`prepare_cached`) and answering 201 with JSON.
//! - `hand-written`: an axum handler with the same dependencies and the same
//!   guarantees: a lookup of a completed key (a replay answers from it),
//!   else `BEGIN`, the key's `INSERT ... ON CONFLICT DO NOTHING RETURNING`
//!   (none: 409 and `ROLLBACK`), the business insert, the stored response's
//!   `UPDATE`, `COMMIT`; all prepared, the fingerprint checked.
//!
//! Requests/s and p50/p99 latency (hdrhistogram). The machine's cores are
//! shared by PostgreSQL, the server and the senders: the numbers are
//! relative to each other, from the same run.

#[allow(dead_code)] // this example uses `database` of it
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use deadpool_postgres::Pool;
use sha2::{Digest, Sha256};
use webhook_idempotency::idempotency_key::{IdempotencyKeyLayer, IdempotentRequest};
use webhook_idempotency::WebhookTx;

const BODY: &str = r#"{"amount": 1250, "currency": "eur", "description": "order 1234, two items"}"#;

async fn layer_handler(tx: WebhookTx, req: IdempotentRequest) -> Response {
    let Ok(db) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR.into_response() };
    let Ok(stmt) = db.prepare_cached("INSERT INTO payments (scope, key, amount) VALUES ($1, $2, 1250)").await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    match db.execute(&stmt, &[&req.scope(), &req.key()]).await {
        Ok(_) => (StatusCode::CREATED, [("content-type", "application/json")], "{\"id\":\"pay\",\"amount\":1250}")
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The same work without the crate: lookup, claim, insert, stored response, commit.
async fn hand_handler(State(pool): State<Pool>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let fingerprint = Sha256::digest(&body).to_vec();
    match hand_tx(&pool, "caller_1", key, &fingerprint).await {
        Ok(Some((status, body))) => (
            StatusCode::from_u16(status as u16).unwrap_or(StatusCode::OK),
            [("content-type", "application/json")],
            body,
        )
            .into_response(),
        Ok(None) => StatusCode::CONFLICT.into_response(),
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

async fn hand_tx(
    pool: &Pool,
    scope: &str,
    key: &str,
    fingerprint: &[u8],
) -> Result<Option<(i16, Vec<u8>)>, Box<dyn std::error::Error>> {
    let mut db = pool.get().await?;
    let lookup = db
        .prepare_cached(
            "SELECT fingerprint, status, body FROM hand_keys WHERE scope = $1 AND key = $2 AND status IS NOT NULL",
        )
        .await?;
    if let Some(row) = db.query_opt(&lookup, &[&scope, &key]).await? {
        if row.get::<_, &[u8]>(0) != fingerprint {
            return Ok(Some((422, b"{}".to_vec())));
        }
        return Ok(Some((row.get(1), row.get(2))));
    }
    let claim = db
        .prepare_cached(
            "INSERT INTO hand_keys (scope, key, fingerprint) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING 1",
        )
        .await?;
    let insert = db.prepare_cached("INSERT INTO payments (scope, key, amount) VALUES ($1, $2, 1250)").await?;
    let store = db.prepare_cached("UPDATE hand_keys SET status = $3, body = $4 WHERE scope = $1 AND key = $2").await?;
    let tx = db.transaction().await?;
    if tx.query_opt(&claim, &[&scope, &key, &fingerprint]).await?.is_none() {
        tx.rollback().await?;
        return Ok(None);
    }
    tx.execute(&insert, &[&scope, &key]).await?;
    let body = b"{\"id\":\"pay\",\"amount\":1250}".to_vec();
    tx.execute(&store, &[&scope, &key, &201i16, &body]).await?;
    tx.commit().await?;
    Ok(Some((201, body)))
}

struct Point {
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    other: usize,
}

/// `senders` clients sending `keys` (each once, in turn) for `seconds`.
async fn point(url: &str, keys: Arc<Vec<String>>, senders: usize, seconds: f64, expect: u16) -> Point {
    let client = reqwest::Client::new();
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let tasks: Vec<_> = (0..senders)
        .map(|_| {
            let (client, url, keys, next) = (client.clone(), url.to_owned(), Arc::clone(&keys), Arc::clone(&next));
            tokio::spawn(async move {
                let mut histogram = hdrhistogram::Histogram::<u64>::new(3).unwrap();
                let mut other = 0;
                while Instant::now() < deadline {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(key) = keys.get(i) else { break };
                    let sent = Instant::now();
                    let res = client.post(&url).header("idempotency-key", key).body(BODY).send().await;
                    match res {
                        Ok(res) if res.status().as_u16() == expect => {
                            let _ = res.bytes().await;
                            histogram.record(sent.elapsed().as_micros() as u64).unwrap();
                        }
                        _ => other += 1,
                    }
                }
                (histogram, other)
            })
        })
        .collect();
    let mut histogram = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    let mut other = 0;
    for task in tasks {
        let (h, o) = task.await.unwrap();
        histogram.add(h).unwrap();
        other += o;
    }
    let took = started.elapsed().as_secs_f64();
    Point {
        per_second: histogram.len() as f64 / took,
        p50_ms: histogram.value_at_quantile(0.5) as f64 / 1000.0,
        p99_ms: histogram.value_at_quantile(0.99) as f64 / 1000.0,
        other,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "error".into()))
        .init();
    let seconds: f64 = std::env::var("API_LOAD_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let senders_list: Vec<usize> = std::env::var("API_LOAD_SENDERS")
        .unwrap_or_else(|_| "16,64".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let variants = std::env::var("API_LOAD_VARIANTS").unwrap_or_else(|_| "layer,hand".into());
    let (pool, _url, _throwaway) = common::database(None, 16).await.map_err(|e| -> Box<dyn std::error::Error> { e })?;
    {
        let db = pool.get().await?;
        db.batch_execute("ALTER SYSTEM SET fsync = on").await?;
        db.batch_execute("ALTER SYSTEM SET synchronous_commit = on").await?;
        db.batch_execute("SELECT pg_reload_conf()").await?;
        db.batch_execute(
            "CREATE TABLE payments (id bigserial PRIMARY KEY, scope text NOT NULL, key text NOT NULL, amount bigint);
             CREATE TABLE hand_keys (scope text, key text, fingerprint bytea NOT NULL, status smallint, body bytea,
                                     created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (scope, key))",
        )
        .await?;
    }
    let hand_pool = common::database(Some(&_url), 16).await.map_err(|e| -> Box<dyn std::error::Error> { e })?.0;
    let layer = IdempotencyKeyLayer::builder(pool.clone()).scope(|_| Some("caller_1".to_owned())).build()?;
    let app = Router::new()
        .route("/layer/payments", post(layer_handler).layer(layer))
        .route("/hand/payments", post(hand_handler).with_state(hand_pool));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    println!("| senders | variant | first requests/s | p50 ms | p99 ms | replays/s | p50 ms | p99 ms |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    let mut tag = 0;
    for &senders in &senders_list {
        for variant in variants.split(',') {
            tag += 1;
            let url = format!("http://{addr}/{variant}/payments");
            let keys: Arc<Vec<String>> = Arc::new((0..400_000).map(|i| format!("k-{tag}-{i}")).collect());
            let sessions = "SELECT sessions FROM pg_stat_database WHERE datname = current_database()";
            let before: i64 = pool.get().await?.query_one(sessions, &[]).await?.get(0);
            let first = point(&url, Arc::clone(&keys), senders, seconds, 201).await;
            // Replays of the keys the first phase completed.
            let done = keys.iter().take(first.per_second as usize * seconds as usize).cloned().collect::<Vec<_>>();
            let replays = Arc::new(done.iter().cycle().take(done.len() * 20).cloned().collect::<Vec<_>>());
            let replay = point(&url, replays, senders, seconds, 201).await;
            let after: i64 = pool.get().await?.query_one(sessions, &[]).await?.get(0);
            eprintln!("{variant} at {senders}: {} sessions opened", after - before);
            let name = if variant == "layer" { "IdempotencyKeyLayer" } else { "hand-written" };
            println!(
                "| {senders} | {name} | {:.0} | {:.2} | {:.2} | {:.0} | {:.2} | {:.2} |{}",
                first.per_second,
                first.p50_ms,
                first.p99_ms,
                replay.per_second,
                replay.p50_ms,
                replay.p99_ms,
                if first.other + replay.other > 0 {
                    format!(" ({} other answers)", first.other + replay.other)
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}
