//! Load: the layer against a hand-written axum handler and pgbench, side by side.
//!
//! ```text
//! cargo run --release --all-features --example load
//! LOAD_SECONDS=6 PGBENCH_SECONDS=10 cargo run --release --all-features --example load
//! LOAD_SENDERS=16 LOAD_VARIANTS=layer,hand cargo run --release --all-features --example load
//! LOAD_PG_OPTIONS="-c synchronous_commit=off" LOAD_SENDERS=16,64 LOAD_VARIANTS=layer,hand cargo run --release --all-features --example load
//! LOAD_POOL=8 LOAD_SENDERS=16,64 LOAD_VARIANTS=layer,hand cargo run --release --all-features --example load
//! ```
//!
//! Starts a throwaway PostgreSQL (the tests' harness), restarted durable
//! (`fsync = on`, `synchronous_commit = on`: the defaults; the harness turns
//! `fsync` off for tests), and measures, at 1, 4, 16 and 64 concurrent
//! senders, over real HTTP on 127.0.0.1 (axum::serve in a child process of
//! this binary, so its CPU is counted apart; one reqwest client in this
//! process; a pool of 16 connections for the layer's two routes and one for
//! the hand-written handler):
//!
//! - `layer`: `WebhookLayer` with the Stripe preset and its default, adaptive
//!   claim order (claim first while new events dominate, lookup first once
//!   duplicates do); the handler does one insert through `WebhookTx`
//!   (`prepare_cached`).
//! - `layer, claim first`: the same pinned with `lookup_first(false)` (no
//!   lookup before the claim's transaction, duplicates included).
//! - `hand-written`: an axum handler built from the same dependencies:
//!   Stripe signature checked with hmac/sha2 over the raw body, `BEGIN`, the
//!   claim `INSERT ... ON CONFLICT DO NOTHING RETURNING`, the business insert,
//!   `COMMIT`, all prepared; a duplicate is answered from the claim's empty
//!   result, then `ROLLBACK`.
//! - `sqlx layer` and `sqlx hand-written` (with the `sqlx` feature): the
//!   same two on an `sqlx::PgPool` of the same size, built as README's
//!   "Using sqlx" recommends (`test_before_acquire(false)`, for both): the
//!   layer's store `StoreConfig::from_sqlx`, its handler's insert through
//!   `WebhookTx::sqlx` (`sqlx::query`, cached per connection); the
//!   hand-written handler with sqlx's own `Transaction` (`pool.begin()`,
//!   the claim, the insert, `commit`). Each is compared with the
//!   hand-written handler of its own driver.
//! - `pgbench`: the same SQL from custom scripts (`-n -M prepared -T
//!   $PGBENCH_SECONDS -c N -j 2`), no HTTP and no signature.
//!
//! New events are pre-generated signed Stripe deliveries of about 1.1 KB;
//! duplicates re-send events the same variant already processed. Per point:
//! requests/s, p50/p99 latency (hdrhistogram; pgbench's from its `-l`
//! per-transaction log), WAL bytes per request (`pg_current_wal_lsn()`
//! difference / requests), PostgreSQL CPU per request (utime + stime of
//! the postmaster, its live children, and its waited-for children, from
//! `/proc/<pid>/stat`, before and after), the server process's and the load
//! generator's CPU per request (this process, or pgbench as a reaped child),
//! and statements per request (`pg_stat_statements` calls, loaded for the
//! run; pgbench's prepared-mode `BEGIN`/`COMMIT` are not counted by it).
//! Round trips per request are the protocol's, counted on the wire by
//! `tests/it/claim/budget.rs`.
//!
//! After the table: how many of `webhook_events`' updates were HOT
//! (`pg_stat_user_tables`), and a PNG of requests/s against senders
//! (`$LOAD_PLOT`, default `target/load.png`; text in `$LOAD_FONT`, default
//! DejaVu Sans; no plot, and a line saying why, when the font is missing).
//! `pgbench` and `pg_ctl` from `$PG_BIN`, default `/usr/lib/postgresql/15/bin`.
//!
//! PostgreSQL, the server and the senders share this machine's cores: the
//! numbers are relative to each other, from the same run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use hdrhistogram::Histogram;
use hmac::{KeyInit, Mac};
use serde::Deserialize;
use tokio_postgres::NoTls;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{Provider, SigningSecret, WebhookEvent, WebhookLayer, WebhookTx, IDEMPOTENT_REPLAYED};

const SECRET: &str = "whsec_load_test_secret";
const SCOPE: &str = "load";
/// Connections per server variant (`LOAD_POOL` overrides it, for the tuning
/// table).
const POOL: usize = 16;
const SENDERS: [usize; 4] = [1, 4, 16, 64];
/// The business table every variant inserts into.
const EFFECTS: &str = "CREATE TABLE load_effects (
    id bigserial PRIMARY KEY, event_key text NOT NULL, amount bigint NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now())";
const EFFECT_INSERT: &str = "INSERT INTO load_effects (event_key, amount) VALUES ($1, $2)";
/// The hand-written claim: the row is written `done` in the transaction
/// that does the work, so one statement claims and records it.
const HAND_CLAIM: &str = "INSERT INTO webhook_idempotency.webhook_events
        (scope, provider, event_key, event_type, state, response_status, completed_at)
     VALUES ($1, 'stripe', $2, $3, 'done', 200, now())
     ON CONFLICT (scope, provider, event_key) DO NOTHING RETURNING 1";
/// The routes of the server, one per variant (pgbench aside).
#[cfg(feature = "sqlx")]
const PATHS: &[&str] = &["layer", "claim-first", "hand", "sqlx-layer", "sqlx-hand"];
#[cfg(not(feature = "sqlx"))]
const PATHS: &[&str] = &["layer", "claim-first", "hand"];
/// Stripe's default tolerance for the signed timestamp (seconds).
const TOLERANCE: u64 = 300;

/// The fields both handlers read from the body.
#[derive(Deserialize)]
struct StripeEvent {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    data: Data,
}
#[derive(Deserialize)]
struct Data {
    object: Object,
}
#[derive(Deserialize)]
struct Object {
    amount: i64,
}

/// The layer's handler: one insert in the claim's transaction.
async fn layer_handler(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    let Ok(body) = event.json::<StripeEvent>() else { return StatusCode::BAD_REQUEST };
    let Ok(client) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR };
    let Ok(stmt) = client.prepare_cached(EFFECT_INSERT).await else { return StatusCode::INTERNAL_SERVER_ERROR };
    match client.execute(&stmt, &[&event.key(), &body.data.object.amount]).await {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The sqlx variants: the layer's handler and the hand-written one.
#[cfg(feature = "sqlx")]
mod on_sqlx {
    use super::*;
    use webhook_idempotency::sqlx::sqlx;

    /// The layer's handler on sqlx: one insert in the claim's transaction.
    pub(super) async fn layer_handler(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
        let Ok(body) = event.json::<StripeEvent>() else { return StatusCode::BAD_REQUEST };
        let Ok(mut db) = tx.sqlx().await else { return StatusCode::INTERNAL_SERVER_ERROR };
        match sqlx::query(EFFECT_INSERT).bind(event.key()).bind(body.data.object.amount).execute(&mut db).await {
            Ok(_) => StatusCode::OK,
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    #[derive(Clone)]
    pub(super) struct Hand {
        pub(super) pool: sqlx::PgPool,
        pub(super) secret: Arc<Vec<u8>>,
    }

    /// The hand-written handler on sqlx.
    pub(super) async fn hand_handler(State(h): State<Hand>, headers: HeaderMap, body: Bytes) -> Response {
        let sig = headers.get("stripe-signature").and_then(|v| v.to_str().ok()).unwrap_or("");
        if !stripe_ok(&h.secret, sig, &body, unix_now()) {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        let Ok(event) = serde_json::from_slice::<StripeEvent>(&body) else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        match hand_tx(&h.pool, &event).await {
            Ok(true) => StatusCode::OK.into_response(),
            Ok(false) => (StatusCode::OK, [(IDEMPOTENT_REPLAYED, "true")]).into_response(),
            Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }

    /// `Ok(true)`: processed; `Ok(false)`: a duplicate (rolled back).
    async fn hand_tx(pool: &sqlx::PgPool, event: &StripeEvent) -> Result<bool, sqlx::Error> {
        let mut tx = pool.begin().await?;
        let claimed =
            sqlx::query(HAND_CLAIM).bind(SCOPE).bind(&event.id).bind(&event.kind).fetch_optional(&mut *tx).await?;
        if claimed.is_none() {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(EFFECT_INSERT).bind(&event.id).bind(event.data.object.amount).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// An sqlx pool of `size` over `url`, as README's "Using sqlx" builds it.
    pub(super) fn pool(url: &str, size: usize) -> Result<sqlx::PgPool, Box<dyn std::error::Error>> {
        let options: sqlx::postgres::PgConnectOptions = url.parse()?;
        Ok(sqlx::postgres::PgPoolOptions::new()
            .max_connections(u32::try_from(size)?)
            .test_before_acquire(false)
            .connect_lazy_with(options))
    }
}

#[derive(Clone)]
struct Hand {
    pool: Pool,
    secret: Arc<Vec<u8>>,
}

/// Stripe's scheme by hand: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`
/// (<https://docs.stripe.com/webhooks#verify-manually>).
fn stripe_ok(secret: &[u8], header: &str, body: &[u8], now: u64) -> bool {
    let mut ts = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => ts = v.parse::<u64>().ok(),
            Some(("v1", v)) => sigs.extend(hex::decode(v).ok()),
            _ => {}
        }
    }
    let Some(ts) = ts else { return false };
    if now.abs_diff(ts) > TOLERANCE {
        return false;
    }
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(ts.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = mac.finalize().into_bytes();
    sigs.iter().any(|s| subtle::ConstantTimeEq::ct_eq(s.as_slice(), expected.as_slice()).into())
}

async fn hand_handler(State(h): State<Hand>, headers: HeaderMap, body: Bytes) -> Response {
    let sig = headers.get("stripe-signature").and_then(|v| v.to_str().ok()).unwrap_or("");
    if !stripe_ok(&h.secret, sig, &body, unix_now()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(event) = serde_json::from_slice::<StripeEvent>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    match hand_tx(&h.pool, &event).await {
        Ok(true) => StatusCode::OK.into_response(),
        Ok(false) => (StatusCode::OK, [(IDEMPOTENT_REPLAYED, "true")]).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `Ok(true)`: processed; `Ok(false)`: a duplicate (rolled back).
async fn hand_tx(pool: &Pool, event: &StripeEvent) -> Result<bool, Box<dyn std::error::Error>> {
    let mut client = pool.get().await?;
    let claim = client.prepare_cached(HAND_CLAIM).await?;
    let insert = client.prepare_cached(EFFECT_INSERT).await?;
    let tx = client.transaction().await?;
    if tx.query_opt(&claim, &[&SCOPE, &event.id, &event.kind]).await?.is_none() {
        tx.rollback().await?;
        return Ok(false);
    }
    tx.execute(&insert, &[&event.id, &event.data.object.amount]).await?;
    tx.commit().await?;
    Ok(true)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs()
}

/// One signed delivery: its `Stripe-Signature` header and body.
struct Delivery {
    signature: String,
    body: Bytes,
}

/// `n` new signed deliveries of about 1.1 KB, ids `evt_<tag>_<i>`.
fn deliveries(tag: &str, n: usize) -> Vec<Delivery> {
    let secret = SigningSecret::from(SECRET);
    let now = unix_now();
    let pad = "x".repeat(800);
    (0..n)
        .map(|i| {
            let body = format!(
                r#"{{"id":"evt_{tag}_{i:08}","object":"event","api_version":"2024-06-20","created":{now},"livemode":false,"pending_webhooks":1,"type":"payment_intent.succeeded","data":{{"object":{{"id":"pi_{tag}_{i:08}","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded","description":"{pad}"}}}}}}"#
            );
            Delivery { signature: stripe::FACTS.sign(&secret, now, body.as_bytes()), body: Bytes::from(body) }
        })
        .collect()
}

/// One measured point.
#[derive(Default, Clone)]
struct Point {
    requests: u64,
    unexpected: u64,
    seconds: f64,
    p50_us: u64,
    p99_us: u64,
    wal_bytes: u64,
    pg_cpu_ticks: u64,
    /// The server process's CPU (HTTP variants) in clock ticks.
    server_cpu_ticks: u64,
    /// The load generator's CPU: this process's own (HTTP senders) or
    /// pgbench's (a reaped child), in clock ticks.
    client_cpu_ticks: u64,
    /// Statements PostgreSQL ran (`pg_stat_statements` calls).
    statements: u64,
}

impl Point {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.seconds
    }
}

/// What the server-side counters read: WAL position, PostgreSQL CPU ticks,
/// statements, the server process's and this process's CPU ticks.
struct Counters {
    pool: Pool,
    postmaster: u32,
    server: u32,
}

/// utime + stime (own) and cutime + cstime (reaped children) of `pid`, in
/// clock ticks (`/proc/<pid>/stat`, proc(5)).
fn process_cpu(pid: &str) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { return (0, 0) };
    let f: Vec<u64> = rest.split(' ').map(|v| v.parse().unwrap_or(0)).collect();
    let n = |i: usize| f.get(i).copied().unwrap_or(0);
    (n(11) + n(12), n(13) + n(14))
}

impl Counters {
    /// Resets `pg_stat_statements`.
    async fn reset_statements(&self) {
        let c = self.pool.get().await.expect("connection");
        c.batch_execute("SELECT pg_stat_statements_reset()").await.expect("pg_stat_statements loaded");
    }

    /// Statements run since the reset, the counters' own left out.
    async fn statements(&self) -> u64 {
        let c = self.pool.get().await.expect("connection");
        let row = c
            .query_one(
                "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements
                  WHERE query NOT LIKE '%pg_current_wal_lsn%' AND query NOT LIKE '%pg_stat_statements%'",
                &[],
            )
            .await
            .expect("pg_stat_statements");
        row.get::<_, i64>(0) as u64
    }

    async fn wal(&self) -> u64 {
        let row = self
            .pool
            .get()
            .await
            .expect("connection")
            .query_one("SELECT (pg_current_wal_lsn() - '0/0')::bigint", &[])
            .await
            .expect("wal position");
        row.get::<_, i64>(0) as u64
    }

    /// The postmaster's live children.
    fn children(&self) -> usize {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let ppid = stat.rfind(')').and_then(|i| stat[i + 2..].split(' ').nth(1)?.parse::<u32>().ok());
                ppid == Some(self.postmaster)
            })
            .count()
    }

    /// Waits (at most 5 s) until the postmaster has reaped the backends of
    /// clients that left, so their CPU time is in its cutime + cstime.
    async fn settle(&self, children: usize) {
        let until = Instant::now() + Duration::from_secs(5);
        while self.children() > children && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// utime + stime of the postmaster and its live children, plus the
    /// postmaster's cutime + cstime (children that exited), in clock ticks.
    fn cpu(&self) -> u64 {
        let mut total = 0;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // Fields after the `(comm)`, which may contain spaces.
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
            let f: Vec<&str> = rest.split(' ').collect();
            let (Some(pid), Ok(ppid)) =
                (entry.file_name().to_str().and_then(|p| p.parse::<u32>().ok()), f[1].parse::<u32>())
            else {
                continue;
            };
            let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            // rest[0] is field 3 (state): utime is field 14 -> index 11.
            if pid == self.postmaster {
                total += n(11) + n(12) + n(13) + n(14);
            } else if ppid == self.postmaster {
                total += n(11) + n(12);
            }
        }
        total
    }
}

/// Sends `events` (new: each once; duplicates: cycled) from `senders` tasks
/// for `seconds`, expecting 200 and the replay header iff `duplicate`.
async fn http_point(
    client: &reqwest::Client,
    url: &str,
    events: Arc<Vec<Delivery>>,
    senders: usize,
    duplicate: bool,
    seconds: f64,
    counters: &Counters,
) -> Point {
    let next = Arc::new(AtomicUsize::new(0));
    counters.reset_statements().await;
    let (wal0, cpu0) = (counters.wal().await, counters.cpu());
    let (server0, client0) = (process_cpu(&counters.server.to_string()).0, process_cpu("self").0);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..senders)
        .map(|_| {
            let (client, url, events, next) = (client.clone(), url.to_owned(), Arc::clone(&events), Arc::clone(&next));
            tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
                let (mut n, mut unexpected) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let d = if duplicate {
                        &events[i % events.len()]
                    } else if let Some(d) = events.get(i) {
                        d
                    } else {
                        break; // ran out of pre-generated events
                    };
                    let t = Instant::now();
                    let res = client
                        .post(&url)
                        .header("stripe-signature", &d.signature)
                        .header("content-type", "application/json")
                        .body(d.body.clone())
                        .send()
                        .await;
                    let ok = match res {
                        Ok(r) => {
                            let replayed = r.headers().contains_key(IDEMPOTENT_REPLAYED);
                            let status = r.status();
                            let _ = r.bytes().await;
                            status == 200 && replayed == duplicate
                        }
                        Err(_) => false,
                    };
                    hist.saturating_record(t.elapsed().as_micros() as u64);
                    n += 1;
                    unexpected += u64::from(!ok);
                }
                (hist, n, unexpected)
            })
        })
        .collect();
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    let mut point = Point::default();
    for t in tasks {
        let (h, n, u) = t.await.expect("sender");
        hist.add(h).expect("same bounds");
        point.requests += n;
        point.unexpected += u;
    }
    point.seconds = start.elapsed().as_secs_f64();
    point.server_cpu_ticks = process_cpu(&counters.server.to_string()).0 - server0;
    point.client_cpu_ticks = process_cpu("self").0 - client0;
    point.wal_bytes = counters.wal().await - wal0;
    point.pg_cpu_ticks = counters.cpu() - cpu0;
    point.statements = counters.statements().await;
    point.p50_us = hist.value_at_quantile(0.5);
    point.p99_us = hist.value_at_quantile(0.99);
    point
}

/// pgbench with `script` at `clients`, latencies from its per-transaction log.
async fn pgbench_point(
    bin: &Path,
    port: u16,
    script: &Path,
    clients: usize,
    seconds: u64,
    counters: &Counters,
) -> Result<Point, Box<dyn std::error::Error>> {
    let logs = tempfile::tempdir()?;
    let prefix = logs.path().join("pgbench");
    let children = counters.children();
    counters.reset_statements().await;
    let (wal0, cpu0) = (counters.wal().await, counters.cpu());
    let reaped0 = process_cpu("self").1;
    let out = tokio::process::Command::new(bin.join("pgbench"))
        .args(["-n", "-M", "prepared", "-h", "127.0.0.1", "-U", "postgres", "-p", &port.to_string()])
        .args(["-T", &seconds.to_string(), "-c", &clients.to_string(), "-j", &clients.min(2).to_string()])
        .arg("-l")
        .arg(format!("--log-prefix={}", prefix.display()))
        .arg("-f")
        .arg(script)
        .arg("postgres")
        .output()
        .await?;
    if !out.status.success() {
        return Err(format!("pgbench failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    counters.settle(children).await;
    let mut point = Point {
        wal_bytes: counters.wal().await - wal0,
        pg_cpu_ticks: counters.cpu() - cpu0,
        client_cpu_ticks: process_cpu("self").1 - reaped0,
        statements: counters.statements().await,
        seconds: seconds as f64,
        ..Point::default()
    };
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    for entry in std::fs::read_dir(logs.path())? {
        // client_id transaction_no latency_us script_no epoch_s epoch_us
        for line in std::fs::read_to_string(entry?.path())?.lines() {
            if let Some(us) = line.split(' ').nth(2).and_then(|v| v.parse::<u64>().ok()) {
                hist.saturating_record(us);
                point.requests += 1;
            }
        }
    }
    point.p50_us = hist.value_at_quantile(0.5);
    point.p99_us = hist.value_at_quantile(0.99);
    let stdout = String::from_utf8_lossy(&out.stdout);
    point.unexpected = stdout
        .lines()
        .find_map(|l| l.strip_prefix("number of failed transactions: "))
        .and_then(|v| v.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    Ok(point)
}

/// Restarts the harness's server with `fsync` at its default (on): the
/// harness starts it with `-c fsync=off`, which no configuration file can
/// override, so the server is stopped and started again on the same data
/// directory and port without it.
fn restart_durable(pg: &webhook_test_support::TempPostgres, data: &Path, bin: &Path) -> std::io::Result<()> {
    pg.stop_server()?;
    let root = data.parent().expect("data directory has a parent");
    // `LOAD_PG_OPTIONS` adds server settings for the tuning table
    // (BENCHMARKS.md): e.g. "-c synchronous_commit=off".
    let extra = std::env::var("LOAD_PG_OPTIONS").unwrap_or_default();
    let options = format!(
        "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} -c max_connections=400 \
         -c shared_buffers=64MB -c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all {extra}",
        pg.port(),
        root.display()
    );
    let pg_ctl = bin.join("pg_ctl");
    let root_user = std::fs::read_to_string("/proc/self/status")?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(|euid| euid == "0"))
        .unwrap_or(false);
    let mut cmd = if root_user {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(pg_ctl);
        c
    } else {
        Command::new(pg_ctl)
    };
    let out = cmd
        .arg("-D")
        .arg(data)
        .arg("-l")
        .arg(root.join("server-durable.log"))
        .args(["-w", "-t", "60", "-o", &options, "start"])
        .output()?;
    if !out.status.success() {
        return Err(std::io::Error::other(format!("pg_ctl start: {}", String::from_utf8_lossy(&out.stderr))));
    }
    Ok(())
}

/// Requests/s against senders, one panel for new events and one for
/// duplicates, a line per variant; text in DejaVu Sans (`$LOAD_FONT`).
fn draw(path: &str, rows: &[(&str, &str, usize, Point)]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let font = std::env::var("LOAD_FONT").unwrap_or_else(|_| "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    let font: &'static [u8] =
        Box::leak(std::fs::read(&font).map_err(|e| format!("font {font}: {e}"))?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, font).map_err(|_| "font not usable")?;
    let root = BitMapBackend::new(path, (1100, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 2));
    let variants = [
        ("layer", RED),
        ("layer, claim first", MAGENTA),
        ("hand-written", BLUE),
        ("sqlx layer", RGBColor(230, 140, 0)),
        ("sqlx hand-written", CYAN),
        ("pgbench", BLACK),
    ];
    for (panel, kind) in panels.iter().zip(["new", "duplicate"]) {
        let max = rows.iter().filter(|r| r.1 == kind).map(|r| r.3.rate()).fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{kind} events/s (durable PostgreSQL)"), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0.8f64..80f64).log_scale(), 0f64..max * 1.15)?;
        chart
            .configure_mesh()
            .x_desc("concurrent senders (log scale)")
            .y_desc("requests/s")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for (variant, color) in variants {
            let pts: Vec<(f64, f64)> =
                rows.iter().filter(|r| r.0 == variant && r.1 == kind).map(|r| (r.2 as f64, r.3.rate())).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(variant)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart.draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

fn pool(url: &str, size: usize) -> Result<Pool, Box<dyn std::error::Error>> {
    let manager = Manager::from_config(url.parse()?, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Ok(Pool::builder(manager).max_size(size).build()?)
}

fn env_secs(name: &str, default: f64) -> f64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The server process: `--serve <database url>`; prints `listening on
/// <addr>` once bound, then serves until killed.
async fn serve(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let size = std::env::var("LOAD_POOL").ok().and_then(|v| v.parse().ok()).unwrap_or(POOL);
    let layer_pool = pool(url, size)?;
    let hand_pool = pool(url, size)?;
    let layer = WebhookLayer::builder(layer_pool.clone(), Provider::stripe()).scope(SCOPE).secret(SECRET).build()?;
    let claim_first = WebhookLayer::builder(layer_pool, Provider::stripe())
        .scope(SCOPE)
        .secret(SECRET)
        .lookup_first(false)
        .build()?;
    let hand = Hand { pool: hand_pool, secret: Arc::new(SECRET.as_bytes().to_vec()) };
    let app = Router::new()
        .route("/layer", post(layer_handler).layer(layer))
        .route("/claim-first", post(layer_handler).layer(claim_first))
        .route("/hand", post(hand_handler).with_state(hand));
    #[cfg(feature = "sqlx")]
    let app = {
        let store = webhook_idempotency::StoreConfig::from_sqlx(on_sqlx::pool(url, size)?);
        let layer = WebhookLayer::builder(store, Provider::stripe()).scope(SCOPE).secret(SECRET).build()?;
        let hand = on_sqlx::Hand { pool: on_sqlx::pool(url, size)?, secret: Arc::new(SECRET.as_bytes().to_vec()) };
        app.route("/sqlx-layer", post(on_sqlx::layer_handler).layer(layer))
            .route("/sqlx-hand", post(on_sqlx::hand_handler).with_state(hand))
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, url] = args.as_slice() {
        if flag == "--serve" {
            return serve(url).await;
        }
    }
    let seconds = env_secs("LOAD_SECONDS", 6.0);
    let pgbench_seconds = env_secs("PGBENCH_SECONDS", 10.0) as u64;
    let pg_bin = PathBuf::from(std::env::var("PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into()));

    let pg = webhook_test_support::TempPostgres::start()?;
    let url = pg.url("postgres");
    let data: String = {
        let admin = pool(&url, 1)?;
        let client = admin.get().await?;
        client.query_one("SHOW data_directory", &[]).await?.get(0)
    };
    restart_durable(&pg, Path::new(&data), &pg_bin)?;
    let admin = pool(&url, 2)?;
    webhook_idempotency::migrate(&admin.clone().into()).await?;
    let c = admin.get().await?;
    c.batch_execute(EFFECTS).await?;
    let mut settings = Vec::new();
    for name in ["fsync", "synchronous_commit", "server_version", "shared_buffers"] {
        let value: String = c.query_one(&format!("SHOW {name}"), &[]).await?.get(0);
        settings.push(format!("{name}={value}"));
    }
    let postmaster: u32 = std::fs::read_to_string(Path::new(&data).join("postmaster.pid"))
        .ok()
        .and_then(|s| s.lines().next()?.trim().parse().ok())
        .unwrap_or(0);
    drop(c);
    let counters = Counters { pool: admin.clone(), postmaster, server: 0 };
    println!("PostgreSQL on 127.0.0.1:{} ({}), postmaster pid {postmaster}", pg.port(), settings.join(", "));

    // The server, in a process of its own (this binary with `--serve`), so
    // its CPU is counted apart from the senders': both variants behind one
    // axum::serve, each with its own pool.
    let mut server = tokio::process::Command::new(std::env::current_exe()?)
        .args(["--serve", &url])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let server_pid = server.id().ok_or("server exited")?;
    let addr = {
        use tokio::io::AsyncBufReadExt;
        let stdout = server.stdout.take().ok_or("server stdout")?;
        let mut line = String::new();
        tokio::io::BufReader::new(stdout).read_line(&mut line).await?;
        line.trim().strip_prefix("listening on ").ok_or("server did not start")?.to_owned()
    };
    let counters = Counters { server: server_pid, ..counters };
    println!("server pid {server_pid} on {addr}");
    let client = reqwest::Client::builder().pool_max_idle_per_host(128).build()?;

    // pgbench scripts: the hand-written handler's SQL, random keys.
    let scripts = tempfile::tempdir()?;
    let claim_sql = |key: &str| {
        format!(
            "INSERT INTO webhook_idempotency.webhook_events \
             (scope, provider, event_key, event_type, state, response_status, completed_at) \
             VALUES ('pgbench', 'stripe', {key}, 'payment_intent.succeeded', 'done', 200, now()) \
             ON CONFLICT (scope, provider, event_key) DO NOTHING RETURNING 1;\n"
        )
    };
    let new_script = scripts.path().join("new.sql");
    std::fs::write(
        &new_script,
        format!(
            "\\set k random(1, 1000000000)\nBEGIN;\n{}INSERT INTO load_effects (event_key, amount) VALUES ('evt_' || :k, 2000);\nCOMMIT;\n",
            claim_sql("'evt_' || :k")
        ),
    )?;
    // Duplicates: keys 1..=DUP_KEYS exist (inserted below).
    const DUP_KEYS: u32 = 10_000;
    let dup_script = scripts.path().join("dup.sql");
    std::fs::write(
        &dup_script,
        format!("\\set k random(1, {DUP_KEYS})\nBEGIN;\n{}ROLLBACK;\n", claim_sql("'dup_' || :k")),
    )?;
    admin.get().await?.batch_execute("CREATE EXTENSION pg_stat_statements").await?;
    admin
        .get()
        .await?
        .batch_execute(&format!(
            "INSERT INTO webhook_idempotency.webhook_events (scope, provider, event_key, state, response_status) \
             SELECT 'pgbench', 'stripe', 'dup_' || i, 'done', 200 FROM generate_series(1, {DUP_KEYS}) i; \
             CHECKPOINT"
        ))
        .await?;

    // Warm-up: connections, prepared statements, page cache.
    for &path in PATHS {
        let target = format!("http://{addr}/{path}");
        let warm_tag = Arc::new(deliveries(&format!("warm{path}"), 400));
        http_point(&client, &target, warm_tag, 16, false, 1.0, &counters).await;
    }

    // rows: (variant, kind, senders, point)
    let mut rows: Vec<(&str, &str, usize, Point)> = Vec::new();
    // `LOAD_SENDERS=16,64` and `LOAD_VARIANTS=layer,hand` narrow a run (for
    // profiling one point); pgbench runs unless LOAD_VARIANTS leaves it out.
    let senders_list: Vec<usize> = std::env::var("LOAD_SENDERS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| SENDERS.to_vec());
    let all = format!("{},pgbench", PATHS.join(","));
    let variants = std::env::var("LOAD_VARIANTS").unwrap_or(all);
    let variants: Vec<&str> = variants.split(',').map(str::trim).collect();
    for &senders in &senders_list {
        for path in PATHS.iter().copied().filter(|p| variants.contains(p)) {
            let target = format!("http://{addr}/{path}");
            // Enough for the fastest plausible rate; a point that runs out stops early.
            let n = (4_000.0 * seconds) as usize;
            let events = Arc::new(deliveries(&format!("{path}{senders}"), n));
            let new = http_point(&client, &target, Arc::clone(&events), senders, false, seconds, &counters).await;
            let processed = (new.requests as usize).clamp(1, 20_000);
            let done: Vec<Delivery> = events
                .iter()
                .take(processed)
                .map(|d| Delivery { signature: d.signature.clone(), body: d.body.clone() })
                .collect();
            drop(events);
            let dup = http_point(&client, &target, Arc::new(done), senders, true, seconds, &counters).await;
            let name = match path {
                "layer" => "layer",
                "claim-first" => "layer, claim first",
                "sqlx-layer" => "sqlx layer",
                "sqlx-hand" => "sqlx hand-written",
                _ => "hand-written",
            };
            eprintln!("{name:>12} x{senders:<3} new {:>7.0}/s  dup {:>7.0}/s", new.rate(), dup.rate());
            rows.push((name, "new", senders, new));
            rows.push((name, "duplicate", senders, dup));
        }
        let pgbench =
            if variants.contains(&"pgbench") { &[("new", &new_script), ("duplicate", &dup_script)][..] } else { &[] };
        for &(kind, script) in pgbench {
            let p = pgbench_point(&pg_bin, pg.port(), script, senders, pgbench_seconds, &counters).await?;
            eprintln!("{:>12} x{senders:<3} {kind} {:>7.0}/s", "pgbench", p.rate());
            rows.push(("pgbench", kind, senders, p));
        }
    }

    let ticks_per_s = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    println!();
    println!(
        "| variant | kind | senders | req/s | p50 ms | p99 ms | WAL B/req | PG CPU µs/req | server CPU µs/req | sender CPU µs/req | statements/req | round trips/req | vs hand-written | vs pgbench | errors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (variant, kind, senders, p) in &rows {
        let find = |v: &str| rows.iter().find(|(rv, rk, rs, _)| *rv == v && rk == kind && rs == senders).map(|r| &r.3);
        // Each layer against the hand-written handler of its own driver.
        let hand = if variant.starts_with("sqlx") { "sqlx hand-written" } else { "hand-written" };
        let ratio = |v: &str| match find(v) {
            Some(o) if *variant != v => format!("{:.2}x", p.rate() / o.rate()),
            _ => String::new(),
        };
        let per = p.requests.max(1) as f64;
        let us = |ticks: u64| ticks as f64 / ticks_per_s * 1e6 / per;
        let server = if *variant == "pgbench" { "–".to_owned() } else { format!("{:.0}", us(p.server_cpu_ticks)) };
        // Round trips by construction (tests/it/claim/budget.rs counts the
        // layer's on the wire): the layer pipelines BEGIN with the claim and
        // the commit check with COMMIT; tokio-postgres's Transaction and
        // pgbench send one statement per round trip.
        // The adaptive layer claims first among new events and looks up first
        // among duplicates (its statements per request show which it did).
        // sqlx sends one statement per round trip and pings a connection
        // when it goes back to its pool: the layer's BEGIN + SET LOCAL, claim,
        // insert, check, COMMIT (a duplicate: the lookup), the hand-written
        // BEGIN, claim, insert, COMMIT (a duplicate: BEGIN, claim, ROLLBACK),
        // each plus that ping.
        let trips = match (*variant, *kind) {
            ("sqlx layer", "new") => 6,
            ("sqlx layer", _) => 2,
            ("sqlx hand-written", "new") => 5,
            ("sqlx hand-written", _) => 4,
            ("layer" | "layer, claim first", "new") => 3,
            ("layer, claim first", _) => 2,
            (_, "new") => 4,
            ("layer", _) => 1,
            _ => 3,
        };
        println!(
            "| {variant} | {kind} | {senders} | {:.0} | {:.2} | {:.2} | {:.0} | {:.0} | {server} | {:.0} | {:.2} | {trips} | {} | {} | {} |",
            p.rate(),
            p.p50_us as f64 / 1000.0,
            p.p99_us as f64 / 1000.0,
            p.wal_bytes as f64 / per,
            us(p.pg_cpu_ticks),
            us(p.client_cpu_ticks),
            p.statements as f64 / per,
            ratio(hand),
            ratio("pgbench"),
            p.unexpected,
        );
    }
    // The layer's `done` UPDATE: HOT (heap-only, no index entries) or not.
    let row = admin
        .get()
        .await?
        .query_one(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
             WHERE schemaname = 'webhook_idempotency' AND relname = 'webhook_events'",
            &[],
        )
        .await?;
    let (updates, hot): (i64, i64) = (row.get(0), row.get(1));
    println!("\nwebhook_events updates: {updates}, of which HOT: {hot} (statistics are reported with a delay of up to 0.5 s)");
    let plot = std::env::var("LOAD_PLOT").unwrap_or_else(|_| "target/load.png".into());
    match draw(&plot, &rows) {
        Ok(()) => println!("\nplot: {plot}"),
        Err(e) => println!("\nno plot: {e}"),
    }
    Ok(())
}
