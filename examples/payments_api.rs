//! Your own API with the `Idempotency-Key` header: a payments endpoint whose
//! clients retry safely. The key is claimed in PostgreSQL, the payment row,
//! the claim, the stored response and a receipt for the outbox commit in one
//! transaction; a retry gets the stored response back.
//!
//! ```text
//! cargo run --example payments_api               # serve on $BIND (default 127.0.0.1:3000)
//! cargo run --example payments_api -- --demo     # serve, call it as clients would, check, exit
//! ```
//!
//! The contract (other tools drive it):
//! - `DATABASE_URL`, or a throwaway PostgreSQL removed on exit; `BIND`.
//! - Callers authenticate with `Authorization: Bearer <api key>`, the keys from
//!   `API_KEYS` (comma-separated; a test key is printed when unset). The
//!   claim's scope is the API key's identity (`key_` + the first 16 hex digits
//!   of its SHA-256), never the key itself.
//! - `POST /payments` with `{"amount": <integer>, "currency": "<code>"}` (a
//!   positive amount in the currency's minor unit, a three-letter ISO 4217
//!   code such as `eur`) and an `Idempotency-Key` header (required) inserts
//!   one row into `demo_payments
//!   (id text primary key, scope text, amount bigint, currency text,
//!   created_at timestamptz)`, enqueues a `send_receipt` effect (delivered by
//!   an outbox worker in this process into `demo_receipts`, once per
//!   downstream key), and answers `201` with the payment as JSON and a
//!   `Location`. A body that is not such JSON answers `400` before anything
//!   executes: not stored, so a corrected retry with the same key runs.
//! - `GET /payments` lists the caller's payments; `GET /payments/{id}` (the
//!   `Location` of a created payment) shows one of them.
//!
//! `--demo` makes a first call, a retry (the replay), two concurrent calls
//! with a new key (one runs; the other gets 409 or the replay), a reuse of a
//! key with another body (422) and a call without a key (400), checks the
//! rows, and exits non-zero on any mismatch. Ctrl-C or SIGTERM stops it
//! gracefully.

#[allow(dead_code)] // this example uses `terminated`, `server` and `database` of it
mod common;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use clap::Parser;
use deadpool_postgres::Pool;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use webhook_idempotency::idempotency_key::{IdempotencyKeyLayer, IdempotentRequest};
use webhook_idempotency::outbox::{Effect, EffectContext, EffectResult, Effects, Enqueued, OutboxWorker};
use webhook_idempotency::WebhookTx;

const TEST_API_KEY: &str = "sk_test_payments_api_example";

/// A payments API whose POSTs are safe to retry with `Idempotency-Key`.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on (with --demo and no BIND: a free port).
    #[arg(long, env = "BIND")]
    bind: Option<SocketAddr>,
    /// PostgreSQL URL; unset: a throwaway local server.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// Accepted API keys, comma-separated.
    #[arg(long, env = "API_KEYS")]
    api_keys: Option<String>,
    /// Call the API as clients would, check the answers, exit.
    #[arg(long)]
    demo: bool,
}

/// The authenticated caller: the identity of its API key.
#[derive(Clone, Debug)]
struct Caller(String);

fn identity(api_key: &str) -> String {
    format!("key_{}", &hex::encode(Sha256::digest(api_key.as_bytes()))[..16])
}

/// `Authorization: Bearer <api key>` → [`Caller`] in the extensions, or 401.
async fn authenticate(State(keys): State<Arc<Vec<String>>>, mut req: Request, next: Next) -> Response {
    let bearer = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()?.strip_prefix("Bearer "));
    match bearer.filter(|k| keys.iter().any(|known| known == k)) {
        Some(key) => {
            let caller = Caller(identity(key));
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        None => {
            (StatusCode::UNAUTHORIZED, Json(json!({ "error": "a valid Bearer API key is required" }))).into_response()
        }
    }
}

async fn create_payment(tx: WebhookTx, idem: IdempotentRequest, body: Bytes) -> Response {
    // Validation comes before execution: its 400 is not stored.
    let parsed: Result<Value, _> = serde_json::from_slice(&body);
    let (Some(amount), Some(currency)) = parsed
        .as_ref()
        .map(|v| {
            let amount = v["amount"].as_i64().filter(|a| *a > 0);
            let currency =
                v["currency"].as_str().filter(|c| c.len() == 3 && c.bytes().all(|b| b.is_ascii_alphabetic()));
            (amount, currency)
        })
        .unwrap_or((None, None))
    else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": "expected {\"amount\": <integer>, \"currency\": \"<code>\"}" })),
        )
            .into_response();
    };
    idem.began();
    // A fresh id per run: after the key's 24 hours a retry runs again and
    // creates its own payment (the key, not the id, makes a retry harmless).
    let id = format!("pay_{:020x}", fastrand::u128(..) >> 48);
    let inserted = async {
        let db = tx.client().await?;
        db.execute(
            "INSERT INTO demo_payments (id, scope, amount, currency, created_at) VALUES ($1, $2, $3, $4, now())",
            &[&id, &idem.scope(), &amount, &currency],
        )
        .await?;
        // Read back as the GET routes show it. Not `RETURNING created_at::text`:
        // Citus refuses a function that is not IMMUTABLE (timestamptz's text
        // form depends on the session's time zone) in a distributed RETURNING.
        let row = db
            .query_one("SELECT created_at::text FROM demo_payments WHERE scope = $1 AND id = $2", &[&idem.scope(), &id])
            .await?;
        drop(db);
        // Each claim of a key has effects of its own (a key used again after
        // it expired too), so a duplicate here is this handler enqueuing the
        // same effect twice: say so rather than drop it silently.
        if tx.enqueue(Effect::json("send_receipt", json!({ "payment_id": id }))).await? == Enqueued::Duplicate {
            tracing::warn!(payment = %id, "send_receipt was already enqueued for this request; not added again");
        }
        Ok::<String, Box<dyn std::error::Error + Send + Sync>>(row.get(0))
    };
    match inserted.await {
        Ok(created_at) => {
            let payment = json!({ "id": id, "amount": amount, "currency": currency, "created_at": created_at });
            (StatusCode::CREATED, [(header::LOCATION, format!("/payments/{id}"))], Json(payment)).into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "payment not written; rolled back");
            (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({ "error": "internal error" }))).into_response()
        }
    }
}

async fn show_payment(State(pool): State<Pool>, Path(id): Path<String>, req: Request) -> Response {
    let Some(Caller(scope)) = req.extensions().get::<Caller>().cloned() else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let Ok(db) = pool.get().await else { return StatusCode::SERVICE_UNAVAILABLE.into_response() };
    let sql = "SELECT json_build_object('id', id, 'amount', amount, 'currency', currency,
                                        'created_at', created_at::text)::text
                 FROM demo_payments WHERE scope = $1 AND id = $2";
    match db.query_opt(sql, &[&scope, &id]).await {
        Ok(Some(row)) => ([(header::CONTENT_TYPE, "application/json")], row.get::<_, String>(0)).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

async fn list_payments(State(pool): State<Pool>, req: Request) -> Response {
    let Some(Caller(scope)) = req.extensions().get::<Caller>().cloned() else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let Ok(db) = pool.get().await else { return StatusCode::SERVICE_UNAVAILABLE.into_response() };
    let sql = "SELECT coalesce(json_agg(json_build_object('id', id, 'amount', amount, 'currency', currency,
                                                         'created_at', created_at::text) ORDER BY created_at), '[]')::text
                 FROM demo_payments WHERE scope = $1";
    match db.query_one(sql, &[&scope]).await {
        Ok(row) => ([(header::CONTENT_TYPE, "application/json")], row.get::<_, String>(0)).into_response(),
        Err(_) => StatusCode::SERVICE_UNAVAILABLE.into_response(),
    }
}

/// The receipt effect: recorded once per downstream key (a receipts service
/// that deduplicates on it).
fn effects(pool: Pool) -> Effects {
    Effects::new().effect("send_receipt", move |ctx: EffectContext| {
        let pool = pool.clone();
        async move {
            let payment: Value = ctx.json().unwrap_or_default();
            let Ok(db) = pool.get().await else { return EffectResult::retry("no connection") };
            let sql = "INSERT INTO demo_receipts (downstream_key, payment_id) VALUES ($1, $2)
                       ON CONFLICT (downstream_key) DO NOTHING";
            match db.execute(sql, &[&ctx.downstream_key(), &payment["payment_id"].as_str().unwrap_or("")]).await {
                Ok(_) => EffectResult::delivered(),
                Err(e) => EffectResult::retry(e.to_string()),
            }
        }
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "error".into()))
        .init();
    let (pool, _url, _throwaway) =
        common::database(args.database_url.as_deref(), 16).await.map_err(|e| -> Box<dyn std::error::Error> { e })?;
    pool.get()
        .await?
        .batch_execute(
            "BEGIN; SELECT pg_advisory_xact_lock(hashtext('examples/payments_api'));
             CREATE TABLE IF NOT EXISTS demo_payments (id text NOT NULL, scope text NOT NULL, amount bigint NOT NULL,
                                                       currency text NOT NULL, created_at timestamptz NOT NULL,
                                                       PRIMARY KEY (scope, id));
             CREATE TABLE IF NOT EXISTS demo_receipts (downstream_key text PRIMARY KEY, payment_id text NOT NULL);
             COMMIT;",
        )
        .await?;
    // On Citus, the payments sit on their key's shard (the Idempotency-Key
    // layer's scope is the caller) and commit with it (`demo_receipts` is
    // the receipts service's own table); on one PostgreSQL this does nothing.
    webhook_idempotency::store::colocate(&pool.clone().into(), "demo_payments", "scope").await?;
    let keys: Vec<String> = match &args.api_keys {
        Some(list) => list.split(',').map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned).collect(),
        None => {
            println!("API_KEYS unset: test key {TEST_API_KEY} (Authorization: Bearer {TEST_API_KEY})");
            vec![TEST_API_KEY.to_owned()]
        }
    };
    if keys.is_empty() {
        return Err("API_KEYS holds no key".into());
    }
    let idempotency = IdempotencyKeyLayer::builder(pool.clone())
        .scope(|parts| parts.extensions.get::<Caller>().map(|c| c.0.clone()))
        .build()?;
    let router = Router::new()
        .route("/payments", post(create_payment).get(list_payments))
        .route("/payments/{id}", get(show_payment))
        .with_state(pool.clone())
        // The last layer added runs first: authentication, then the key (it
        // needs the caller). route_layer: unknown paths stay 404.
        .route_layer(idempotency)
        .layer(middleware::from_fn_with_state(Arc::new(keys), authenticate));

    let bind = args.bind.unwrap_or_else(|| if args.demo { "127.0.0.1:0" } else { "127.0.0.1:3000" }.parse().unwrap());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    println!(
        "listening on http://{addr}: POST /payments (Idempotency-Key required), GET /payments, GET /payments/{{id}}"
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let shutdown = |mut s: tokio::sync::watch::Receiver<bool>| async move {
        let _ = s.wait_for(|stopped| *stopped).await;
    };
    let worker =
        OutboxWorker::builder(pool.clone(), effects(pool.clone())).poll_interval(Duration::from_millis(100)).build()?;
    let worker = tokio::spawn(worker.run(shutdown(stopped.clone())));
    let server = tokio::spawn(common::server::serve(listener, router, shutdown(stopped.clone())));
    let signals = tokio::spawn({
        let stop = stop.clone();
        async move {
            common::terminated().await;
            let _ = stop.send(true);
        }
    });
    let outcome = if args.demo {
        let outcome = demo(addr, &pool).await;
        let _ = stop.send(true);
        outcome
    } else {
        let _ = stopped.clone().wait_for(|s| *s).await;
        Ok(())
    };
    signals.abort();
    worker.await?;
    server.await??;
    outcome
}

// ---- --demo ----

struct Answer {
    status: u16,
    replayed: bool,
    body: Bytes,
}

async fn call(
    client: &reqwest::Client,
    addr: SocketAddr,
    key: Option<&str>,
    body: &str,
) -> Result<Answer, reqwest::Error> {
    let mut req = client
        .post(format!("http://{addr}/payments"))
        .bearer_auth(TEST_API_KEY)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        req = req.header("Idempotency-Key", key);
    }
    let res = req.send().await?;
    let (status, replayed) = (res.status().as_u16(), res.headers().contains_key("idempotent-replayed"));
    Ok(Answer { status, replayed, body: res.bytes().await? })
}

async fn demo(addr: SocketAddr, pool: &Pool) -> Result<(), Box<dyn std::error::Error>> {
    let client = reqwest::Client::new();
    let mut failures = Vec::new();
    let mut check = |what: &str, ok: bool, seen: String| {
        println!("{:<52} {:<5} {seen}", what, if ok { "ok" } else { "FAIL" });
        if !ok {
            failures.push(what.to_owned());
        }
    };
    let body = r#"{"amount": 1250, "currency": "eur"}"#;
    let first = call(&client, addr, Some("demo-key-1"), body).await?;
    check("first call: 201, not a replay", first.status == 201 && !first.replayed, format!("{}", first.status));
    let id = serde_json::from_slice::<Value>(&first.body).ok().and_then(|v| v["id"].as_str().map(str::to_owned));
    let shown = client
        .get(format!("http://{addr}/payments/{}", id.unwrap_or_default()))
        .bearer_auth(TEST_API_KEY)
        .send()
        .await?
        .status()
        .as_u16();
    check("the created payment at its Location: 200", shown == 200, shown.to_string());
    let retry = call(&client, addr, Some("demo-key-1"), body).await?;
    check(
        "retry: the stored 201, byte-identical, replayed",
        retry.status == 201 && retry.replayed && retry.body == first.body,
        format!("{} replayed={}", retry.status, retry.replayed),
    );
    let (a, b) =
        tokio::join!(call(&client, addr, Some("demo-key-2"), body), call(&client, addr, Some("demo-key-2"), body));
    let (a, b) = (a?, b?);
    let ran = [&a, &b].iter().filter(|x| x.status == 201 && !x.replayed).count();
    let other_ok = [&a, &b].iter().all(|x| x.status == 201 || x.status == 409);
    check(
        "concurrent retry: one runs, the other 409 or replay",
        ran == 1 && other_ok,
        format!("{} / {}", a.status, b.status),
    );
    let reused = call(&client, addr, Some("demo-key-1"), r#"{"amount": 99, "currency": "eur"}"#).await?;
    check("same key, another body: 422", reused.status == 422, format!("{}", reused.status));
    let missing = call(&client, addr, None, body).await?;
    check("no Idempotency-Key: 400", missing.status == 400, format!("{}", missing.status));
    let invalid = call(&client, addr, Some("demo-key-3"), r#"{"amount": "lots"}"#).await?;
    let corrected = call(&client, addr, Some("demo-key-3"), body).await?;
    check(
        "validation 400 not stored: the corrected retry runs",
        invalid.status == 400 && corrected.status == 201 && !corrected.replayed,
        format!("{} then {}", invalid.status, corrected.status),
    );

    let db = pool.get().await?;
    let payments: i64 = db.query_one("SELECT count(*) FROM demo_payments", &[]).await?.get(0);
    check("payments written: 3 (keys 1, 2, 3), each once", payments == 3, payments.to_string());
    let open = "SELECT count(*) FROM webhook_idempotency.webhook_outbox WHERE state NOT IN ('done', 'dead')";
    let started = std::time::Instant::now();
    while db.query_one(open, &[]).await?.get::<_, i64>(0) > 0 && started.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let receipts: i64 = db.query_one("SELECT count(*) FROM demo_receipts", &[]).await?.get(0);
    check("receipts sent through the outbox: 3", receipts == 3, receipts.to_string());
    if failures.is_empty() {
        println!("payments_api demo: all checks passed");
        Ok(())
    } else {
        Err(format!("payments_api demo: {} check(s) failed: {}", failures.len(), failures.join("; ")).into())
    }
}
