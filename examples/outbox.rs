//! The outbox: a Stripe payment fulfils its order once and sends one
//! receipt, delivered at least once with one downstream key to a mail
//! service that deduplicates on it.
//!
//! ```text
//! cargo run --example outbox                         # serve on $BIND (default 127.0.0.1:3000)
//! cargo run --example outbox -- --demo               # serve, send signed events, check, exit
//! cargo run --example outbox -- --demo --fail-rate 0.3
//! ```
//!
//! `POST /webhooks/stripe` (synchronous mode): for `checkout.session.completed`
//! and `payment_intent.succeeded` (two events for one payment) the handler
//! reads `data.object.metadata.order_id`, upserts the order in `demo_orders`
//! as paid, claims the business action `("fulfil_order", order_id)` and, only
//! when it got it, increments `fulfilments` and enqueues a `send_receipt`
//! effect, all in the claim's transaction.
//!
//! An `OutboxWorker` in the same process delivers `send_receipt` to a fake
//! mail service served here too: `POST /fake-mail` records every call it
//! receives as a row of `demo_sent` (in a transaction of its own) and answers
//! a repeated `Idempotency-Key` with its first answer; `GET /fake-mail/{key}`
//! says whether it has that key (the reconciliation asks it). With
//! `--fail-rate r` it answers, at random and each with probability r/3, 503
//! (nothing recorded), hangs past the worker's call timeout, or records the
//! call and drops the connection before answering (the remote acted and the
//! answer was lost: uncertain). `GET /effects` lists the orders and the keys
//! their receipts were sent with.
//!
//! Several processes may share one database (`DATABASE_URL`) and any may be
//! killed at any moment: each order is fulfilled once and its receipt sent
//! with one key (the fake service's `demo_sent` shows every call, repeats
//! included). Database: `DATABASE_URL`, or a throwaway PostgreSQL removed on
//! exit (needs the PostgreSQL server binaries). `STRIPE_WEBHOOK_SECRET` has a
//! test default. Ctrl-C or SIGTERM stops it gracefully.

#[allow(dead_code)] // the outbox example uses `terminated` and `server` of it
mod common;
use common::terminated;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use clap::Parser;
use deadpool_postgres::Pool;
use serde_json::{json, Value};
use tokio_postgres::NoTls;
use webhook_idempotency::outbox::{
    downstream_key, Effect, EffectContext, EffectResult, Effects, OutboxWorker, Reconciled,
};
use webhook_idempotency::providers::stripe;
use webhook_idempotency::worker::RetryPolicy;
use webhook_idempotency::{Provider, SigningSecret, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};

const DEFAULT_STRIPE_SECRET: &str = "whsec_outbox_example_secret";
/// The tenant scope of the example's one Stripe account.
const SCOPE: &str = "acct_outbox_demo";
/// How long the worker waits for the mail service's answer.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// Fulfil Stripe payments once and send one receipt each, through the outbox.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on (with --demo and no BIND: a free port).
    #[arg(long, env = "BIND")]
    bind: Option<SocketAddr>,
    /// PostgreSQL URL; unset: a throwaway local server.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// Stripe endpoint signing secret.
    #[arg(long, env = "STRIPE_WEBHOOK_SECRET", default_value = DEFAULT_STRIPE_SECRET, hide_default_value = true)]
    stripe_secret: String,
    /// Effects the outbox worker delivers at once.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// The outbox worker's lease, in seconds.
    #[arg(long, default_value_t = 10)]
    lease: u64,
    /// The share of the fake mail service's answers that fail (0 to 1).
    #[arg(long, default_value_t = 0.0, value_parser = rate)]
    fail_rate: f64,
    /// Send signed deliveries (both events of an order, duplicates, a
    /// tampered copy), wait for the receipts, print what happened and exit
    /// non-zero on a mismatch.
    #[arg(long)]
    demo: bool,
}

fn rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err("a number from 0 to 1".into()),
    }
}

#[derive(Clone)]
struct App {
    pool: Pool,
    fail_rate: f64,
    faults: Arc<Faults>,
}

/// What the fake mail service did, for the demo's summary.
#[derive(Default)]
struct Faults {
    unavailable: AtomicUsize,
    hung: AtomicUsize,
    dropped: AtomicUsize,
}

// ---- the webhook handler ----

async fn on_stripe(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    if !matches!(event.event_type(), Some("checkout.session.completed" | "payment_intent.succeeded")) {
        return StatusCode::OK; // nothing to do for other events
    }
    let Ok(payload) = event.json::<Value>() else { return StatusCode::BAD_REQUEST };
    let Some(order_id) = payload.pointer("/data/object/metadata/order_id").and_then(Value::as_str) else {
        tracing::warn!("payment event without metadata.order_id; nothing to fulfil");
        return StatusCode::OK;
    };
    match fulfil(&tx, order_id).await {
        Ok(()) => StatusCode::OK,
        Err(e) => {
            tracing::error!(error = %e, "fulfilment failed; rolled back");
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// The order paid; fulfilled and its receipt enqueued once, whichever of the
/// payment's events comes first. One transaction with the claim.
async fn fulfil(tx: &WebhookTx, order_id: &str) -> Result<(), Box<dyn std::error::Error>> {
    {
        let db = tx.client().await?;
        db.execute(
            "INSERT INTO demo_orders (scope, order_id, paid_at) VALUES ($1, $2, now())
             ON CONFLICT (scope, order_id) DO UPDATE SET paid_at = coalesce(demo_orders.paid_at, excluded.paid_at)",
            &[&SCOPE, &order_id],
        )
        .await?;
    } // the client goes back before the next statements borrow the connection
    if !tx.claim_action("fulfil_order", order_id).await? {
        return Ok(()); // the other event of this payment fulfilled it
    }
    tx.client()
        .await?
        .execute(
            "UPDATE demo_orders SET fulfilments = fulfilments + 1 WHERE scope = $1 AND order_id = $2",
            &[&SCOPE, &order_id],
        )
        .await?;
    tx.enqueue(Effect::json("send_receipt", json!({ "order_id": order_id }))).await?;
    Ok(())
}

// ---- the effect: a call to the mail service with the downstream key ----

fn effects(mail: String) -> Effects {
    let client = reqwest::Client::builder().timeout(CALL_TIMEOUT).build().expect("an HTTP client");
    let (send_client, send_url) = (client.clone(), mail.clone());
    Effects::new()
        .effect("send_receipt", move |ctx: EffectContext| {
            let (client, url) = (send_client.clone(), send_url.clone());
            async move { send_receipt(&client, &url, &ctx).await }
        })
        .reconcile("send_receipt", move |ctx: EffectContext| {
            let (client, url) = (client.clone(), mail.clone());
            async move { was_sent(&client, &url, &ctx).await }
        })
}

async fn send_receipt(client: &reqwest::Client, url: &str, ctx: &EffectContext) -> EffectResult {
    let sent = client
        .post(url)
        .header("Idempotency-Key", ctx.downstream_key())
        .header("Content-Type", ctx.content_type())
        .body(ctx.payload().clone())
        .send()
        .await;
    match sent {
        Ok(res) if res.status().is_success() => match res.json::<Value>().await {
            Ok(v) => EffectResult::delivered_as(v["message_id"].as_str().unwrap_or_default()),
            // The answer was cut off after the status: it was accepted.
            Err(_) => EffectResult::delivered(),
        },
        // Rate limited: call again when it says (`Retry-After` in seconds), else at the backoff.
        Ok(res) if res.status() == StatusCode::TOO_MANY_REQUESTS || res.status().is_server_error() => {
            let error = format!("mail service: {}", res.status());
            let after = res.headers().get("retry-after").and_then(|v| v.to_str().ok()?.trim().parse().ok());
            match after {
                Some(secs) => EffectResult::retry_after(error, Duration::from_secs(secs)),
                None => EffectResult::retry(error),
            }
        }
        Ok(res) => EffectResult::failed(format!("mail service refused it: {}", res.status())),
        // Refused before anything was sent: safe to retry.
        Err(e) if e.is_connect() => EffectResult::retry(format!("mail service unreachable: {e}")),
        // Sent, then no answer (a timeout, a dropped connection): it may have acted.
        Err(e) => EffectResult::uncertain(format!("no answer from the mail service: {e}")),
    }
}

async fn was_sent(client: &reqwest::Client, url: &str, ctx: &EffectContext) -> Reconciled {
    match client.get(format!("{url}/{}", ctx.downstream_key())).send().await {
        Ok(res) if res.status() == StatusCode::NOT_FOUND => Reconciled::NotDelivered,
        Ok(res) if res.status().is_success() => {
            let v: Value = res.json().await.unwrap_or_default();
            Reconciled::Delivered { remote_ref: v["message_id"].as_str().map(str::to_owned) }
        }
        Ok(res) => Reconciled::Unknown { error: format!("mail service: {}", res.status()) },
        Err(e) => Reconciled::Unknown { error: e.to_string() },
    }
}

// ---- the fake mail service: a remote with idempotency keys ----

/// The marker of a deliberate panic: the connection is dropped unanswered.
struct DropConnection;

async fn fake_mail(State(app): State<App>, headers: HeaderMap, body: Bytes) -> (StatusCode, Json<Value>) {
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned) else {
        return (StatusCode::BAD_REQUEST, Json(json!({ "error": "Idempotency-Key required" })));
    };
    let order_id = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["order_id"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let fault = (fastrand::f64() < app.fail_rate).then(|| fastrand::u8(0..3));
    match fault {
        Some(0) => {
            app.faults.unavailable.fetch_add(1, Ordering::Relaxed);
            return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": "try again" })));
        }
        Some(1) => {
            app.faults.hung.fetch_add(1, Ordering::Relaxed);
            std::future::pending::<()>().await // hangs past the caller's timeout
        }
        _ => {}
    }
    let message_id = match record(&app.pool, &key, &order_id).await {
        Ok(id) => id,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, Json(json!({ "error": e.to_string() }))),
    };
    if fault == Some(2) {
        // Acted, and the answer is lost: the connection closes unanswered.
        app.faults.dropped.fetch_add(1, Ordering::Relaxed);
        std::panic::panic_any(DropConnection);
    }
    (StatusCode::OK, Json(json!({ "message_id": message_id })))
}

/// Records the call and returns the key's first answer (its first call's
/// row), in a transaction of its own, serialised per key.
async fn record(pool: &Pool, key: &str, order_id: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&key]).await?;
    tx.execute("INSERT INTO demo_sent (downstream_key, order_id) VALUES ($1, $2)", &[&key, &order_id]).await?;
    let first: i64 = tx.query_one("SELECT min(id) FROM demo_sent WHERE downstream_key = $1", &[&key]).await?.get(0);
    tx.commit().await?;
    Ok(format!("msg_{first}"))
}

async fn fake_mail_lookup(State(app): State<App>, Path(key): Path<String>) -> (StatusCode, Json<Value>) {
    let Ok(client) = app.pool.get().await else { return (StatusCode::SERVICE_UNAVAILABLE, Json(Value::Null)) };
    match client.query_one("SELECT min(id) FROM demo_sent WHERE downstream_key = $1", &[&key]).await {
        Ok(row) => match row.get::<_, Option<i64>>(0) {
            Some(first) => (StatusCode::OK, Json(json!({ "message_id": format!("msg_{first}") }))),
            None => (StatusCode::NOT_FOUND, Json(json!({ "error": "no such key" }))),
        },
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, Json(Value::Null)),
    }
}

/// `GET /effects`: every order with the keys its receipt was sent with.
async fn list_effects(State(app): State<App>) -> Result<Json<Value>, StatusCode> {
    let client = app.pool.get().await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    let rows = client
        .query(
            "SELECT o.order_id, o.paid_at IS NOT NULL, o.fulfilments,
                    coalesce(json_agg(json_build_object('downstream_key', s.downstream_key, 'calls', s.calls))
                             FILTER (WHERE s.downstream_key IS NOT NULL), '[]')::text
             FROM demo_orders o
             LEFT JOIN (SELECT order_id, downstream_key, count(*) AS calls FROM demo_sent GROUP BY 1, 2) s
                    USING (order_id)
             GROUP BY 1, 2, 3 ORDER BY 1",
            &[],
        )
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    let orders: Vec<Value> = rows
        .iter()
        .map(|r| {
            let sent: Value = serde_json::from_str(r.get::<_, &str>(3)).unwrap_or_default();
            json!({ "order_id": r.get::<_, String>(0), "paid": r.get::<_, bool>(1),
                    "fulfilments": r.get::<_, i32>(2), "sent": sent })
        })
        .collect();
    Ok(Json(Value::Array(orders)))
}

// ---- main ----

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "error".into()))
        .init();
    // The fake service's dropped connections are deliberate panics: not printed.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info.payload().is::<DropConnection>() {
            default_hook(info);
        }
    }));
    let (pool, url, _throwaway) =
        common::database(args.database_url.as_deref(), 32).await.map_err(|e| -> Box<dyn std::error::Error> { e })?;
    pool.get()
        .await?
        .batch_execute(
            // Several processes may start at once: one creates the tables.
            "BEGIN; SELECT pg_advisory_xact_lock(hashtext('examples/outbox'));
             CREATE TABLE IF NOT EXISTS demo_orders (scope text NOT NULL, order_id text NOT NULL, paid_at timestamptz,
                                                     fulfilments int NOT NULL DEFAULT 0,
                                                     PRIMARY KEY (scope, order_id));
             CREATE TABLE IF NOT EXISTS demo_sent (id bigserial, downstream_key text NOT NULL, order_id text NOT NULL,
                                                   received_at timestamptz DEFAULT now());
             CREATE INDEX IF NOT EXISTS demo_sent_key ON demo_sent (downstream_key);
             COMMIT;",
        )
        .await?;
    // On Citus, the orders sit on their claim's shard and commit with it
    // (`demo_sent` is the mail service's own table); on one PostgreSQL this
    // does nothing.
    webhook_idempotency::store::colocate(&pool.clone().into(), "demo_orders", "scope").await?;

    let bind = args.bind.unwrap_or_else(|| if args.demo { "127.0.0.1:0" } else { "127.0.0.1:3000" }.parse().unwrap());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let layer = WebhookLayer::builder(pool.clone(), Provider::stripe())
        .scope(SCOPE)
        .secret(args.stripe_secret.as_str())
        .build()?;
    let faults = Arc::new(Faults::default());
    let app = App { pool: pool.clone(), fail_rate: args.fail_rate, faults: Arc::clone(&faults) };
    let router = Router::new()
        .route("/webhooks/stripe", post(on_stripe).layer(layer))
        .route("/fake-mail", post(fake_mail))
        .route("/fake-mail/{key}", get(fake_mail_lookup))
        .route("/effects", get(list_effects))
        .with_state(app);
    println!(
        "listening on http://{addr}: POST /webhooks/stripe, POST /fake-mail, GET /fake-mail/{{key}}, GET /effects"
    );

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let retry = RetryPolicy::attempts(Duration::from_millis(200), Duration::from_secs(5), 25);
    // The worker LISTENs for the commits' notifications on a connection of its own.
    let store = StoreConfig::new(pool.clone()).listen_connection(url.parse()?, NoTls);
    let worker = OutboxWorker::builder(store, effects(format!("http://{addr}/fake-mail")))
        .concurrency(args.workers.max(1))
        .lease(Duration::from_secs(args.lease.max(1)))
        .handler_timeout(CALL_TIMEOUT * 3)
        .poll_interval(Duration::from_millis(200))
        .retry(retry)
        .build()?;
    let shutdown = |mut s: tokio::sync::watch::Receiver<bool>| async move {
        let _ = s.wait_for(|stopped| *stopped).await;
    };
    let worker = tokio::spawn(worker.run(shutdown(stopped.clone())));
    // Header-read and idle timeouts, a connection limit, graceful shutdown (examples/common/mod.rs).
    let server = tokio::spawn(common::server::serve(listener, router, shutdown(stopped.clone())));
    let signals = tokio::spawn({
        let stop = stop.clone();
        async move {
            terminated().await;
            let _ = stop.send(true);
        }
    });

    let outcome = if args.demo { demo(addr, &args.stripe_secret, &pool, &faults).await } else { Ok(()) };
    if args.demo {
        let _ = stop.send(true);
    } else {
        let _ = stopped.clone().wait_for(|s| *s).await;
    }
    signals.abort();
    worker.await?;
    // A hung fake-mail call keeps its connection: the server gets a bound.
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    outcome
}

// ---- --demo ----

async fn demo(addr: SocketAddr, secret: &str, pool: &Pool, faults: &Faults) -> Result<(), Box<dyn std::error::Error>> {
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/webhooks/stripe");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let event = |id: &str, kind: &str, order: Option<&str>| {
        let metadata = order.map_or(json!({}), |o| json!({ "order_id": o }));
        Bytes::from(
            json!({ "id": id, "object": "event", "type": kind, "created": now,
                    "data": { "object": { "id": format!("obj_{id}"), "metadata": metadata } } })
            .to_string(),
        )
    };
    // Orders 1-3 get both events of their payment, 4-5 one; every event is
    // sent three times at once (a sender's retries racing).
    let mut bodies = Vec::new();
    for n in 1..=5 {
        let order = format!("ord_{n}");
        if n <= 3 {
            bodies.push(event(&format!("evt_cs_{n}"), "checkout.session.completed", Some(&order)));
        }
        bodies.push(event(&format!("evt_pi_{n}"), "payment_intent.succeeded", Some(&order)));
    }
    bodies.push(event("evt_other", "customer.created", None));
    let send = |body: Bytes, signature: String| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            // As a sender does: 409 (a copy in flight) and 5xx are retried.
            let mut tries = 0;
            loop {
                let res = client.post(&url).header("Stripe-Signature", &signature).body(body.clone()).send().await?;
                let status = res.status().as_u16();
                tries += 1;
                if (status == 409 || status >= 500) && tries < 20 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                return Ok::<_, reqwest::Error>((status, res.headers().contains_key("idempotent-replayed")));
            }
        }
    };
    let sends = bodies.iter().flat_map(|b| {
        let signature = stripe::FACTS.sign(&SigningSecret::from(secret), now, b);
        (0..3).map(move |_| send(b.clone(), signature.clone()))
    });
    let answers: Vec<(u16, bool)> =
        futures_util::future::join_all(sends).await.into_iter().collect::<Result<_, _>>()?;
    let tampered = send(
        event("evt_pi_1", "payment_intent.succeeded", Some("ord_9")),
        stripe::FACTS.sign(&SigningSecret::from(secret), now, b"x"),
    )
    .await?;
    let (fresh, replayed) =
        (answers.iter().filter(|a| **a == (200, false)).count(), answers.iter().filter(|a| **a == (200, true)).count());
    let other = answers.iter().filter(|(s, _)| *s != 200).count();
    println!(
        "deliveries: {} sent ({} events x 3): {fresh} processed, {replayed} replayed, {other} other; tampered copy: {}",
        answers.len(),
        bodies.len(),
        tampered.0
    );

    // Wait for the outbox to drain.
    let c = pool.get().await?;
    let open = "SELECT count(*) FROM webhook_idempotency.webhook_outbox WHERE state NOT IN ('done', 'dead')";
    let started = std::time::Instant::now();
    while c.query_one(open, &[]).await?.get::<_, i64>(0) > 0 {
        if started.elapsed() > Duration::from_secs(180) {
            return Err("the outbox did not drain within 180 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("outbox drained in {:.1} s", started.elapsed().as_secs_f64());
    let runs: i64 = c
        .query_one("SELECT coalesce(sum(attempts), 0)::bigint FROM webhook_idempotency.webhook_outbox", &[])
        .await?
        .get(0);
    let recorded: i64 = c.query_one("SELECT count(*) FROM demo_sent", &[]).await?.get(0);
    println!(
        "mail service: {recorded} calls recorded; {} answered 503, {} hung past the caller's timeout, {} recorded then \
         dropped before answering (uncertain, reconciled); the worker's runs: {runs} (calls and reconciliations)",
        faults.unavailable.load(Ordering::Relaxed),
        faults.hung.load(Ordering::Relaxed),
        faults.dropped.load(Ordering::Relaxed)
    );

    let mut mismatches = Vec::new();
    println!("{:<6} {:>11}  {:<18} {:<61} {:>5}", "order", "fulfilments", "fulfilled by", "receipt key", "calls");
    for n in 1..=5 {
        let order = format!("ord_{n}");
        let fulfilments: i32 =
            c.query_one("SELECT fulfilments FROM demo_orders WHERE order_id = $1", &[&order]).await?.get(0);
        let by: String = c
            .query_one(
                "SELECT event_key FROM webhook_idempotency.webhook_actions WHERE action = 'fulfil_order' AND business_key = $1",
                &[&order],
            )
            .await?
            .get(0);
        let expected = downstream_key(SCOPE, "stripe", &by, "send_receipt", 0);
        let keys: Vec<(String, i64)> = c
            .query("SELECT downstream_key, count(*) FROM demo_sent WHERE order_id = $1 GROUP BY 1", &[&order])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let state: String = c
            .query_one(
                "SELECT state FROM webhook_idempotency.webhook_outbox WHERE event_key = $1 AND effect = 'send_receipt'",
                &[&by],
            )
            .await?
            .get(0);
        let calls = keys.iter().map(|(_, n)| n).sum::<i64>();
        println!(
            "{order:<6} {fulfilments:>11}  {by:<18} {:<61} {calls:>5}",
            keys.first().map_or("-", |k| k.0.as_str())
        );
        if fulfilments != 1 {
            mismatches.push(format!("{order}: fulfilled {fulfilments} times"));
        }
        if state != "done" {
            mismatches.push(format!("{order}: receipt {state}"));
        } else if keys.len() != 1 || keys[0].0 != expected {
            mismatches.push(format!("{order}: receipt keys {keys:?}, expected one: {expected}"));
        }
    }
    if fresh != bodies.len() || replayed + fresh != answers.len() {
        mismatches.push(format!("expected {} processed and the rest replayed", bodies.len()));
    }
    if tampered.0 != 400 && tampered.0 != 401 {
        mismatches.push(format!("the tampered copy got {}", tampered.0));
    }
    let others: i64 = c
        .query_one("SELECT count(*) FROM demo_orders WHERE order_id NOT LIKE 'ord\\__' ESCAPE '\\'", &[])
        .await?
        .get(0);
    if others != 0 {
        mismatches.push(format!("{others} unexpected orders"));
    }
    if mismatches.is_empty() {
        println!("OK: every order fulfilled once, every receipt sent with one downstream key (calls above 1 are the mail service's repeats of a key)");
        Ok(())
    } else {
        Err(format!("mismatch: {}", mismatches.join("; ")).into())
    }
}
