//! Inbox-mode load benchmarks: accept throughput and latency over real HTTP,
//! worker drain throughput, accept-to-handler latency, and the PostgreSQL
//! ceiling measured with pgbench in the same run. BENCHMARKS.md, "Inbox mode",
//! publishes its output.
//!
//! ```text
//! scripts/inbox-bench.sh                    # a durable throwaway server, then this example
//! cargo run --release --all-features --example inbox_load -- --database-url postgresql://... --pgbench /usr/lib/postgresql/15/bin/pgbench
//! ```
//!
//! Without `--database-url` it starts the tests' throwaway server
//! (`test-support/`), which runs with `fsync = off`: quick, but not durable,
//! so its numbers are not the published ones.
//!
//! 1. **Accept**: `axum::serve` on loopback with the layer in inbox mode
//!    (Stripe preset); N sender tasks POST pre-generated, individually signed
//!    deliveries (1,100-byte bodies, `providers::stripe::FACTS.sign`) over HTTP/1.1
//!    keep-alive (reqwest), one request in flight per sender. 1 s warm-up, then
//!    `--accept-secs`; latency percentiles from an HDR histogram (µs).
//! 2. **Drain**: `--backlog` pending rows inserted directly, then an
//!    [`InboxWorker`] with concurrency C drains them with a no-op handler and
//!    with one business insert (`bench_effects`) per event; time until every
//!    row is `done`.
//! 3. **Accept-to-handler**: one sender at `--latency-rate` deliveries/s while
//!    a worker runs; latency from the sender receiving the 2xx to the handler
//!    starting (0 when the handler started first), with `listen` and with
//!    polling only.
//! 4. **Ceiling**: pgbench with `scripts/inbox-bench/*.sql` on the same
//!    server, `-n -T <secs> -c <clients> -j 2`.
//!
//! Every measurement starts on emptied tables after a CHECKPOINT, and
//! reports the 1-minute load average before and after it (`/proc/loadavg`).
//! With `pg_stat_statements` loaded (the script does), the accept rows also
//! count the statements the server ran per accepted delivery.

#[path = "common/bench.rs"]
mod bench;
use bench::{conninfo, field, load1, load_span, pgbench_bin, pool, serve};

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use clap::Parser;
use deadpool_postgres::Pool;
use hdrhistogram::Histogram;
use tokio::sync::{oneshot, Notify};
use webhook_idempotency::inbox::InboxWorker;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{Mode, Provider, SigningSecret, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};

const SECRET: &str = "whsec_inbox_load_secret";
const SCOPE: &str = "acct_bench";
/// The delivery body's size and fill, from `--body-bytes` and `--body-fill`.
static BODY: std::sync::OnceLock<(usize, String)> = std::sync::OnceLock::new();
const HEAD: &str =
    r#"{"method": "POST", "uri": "/webhooks/stripe", "headers": [["content-type", "application/json"]]}"#;

#[derive(Parser, Debug)]
#[command(about = "Inbox-mode load benchmarks (see BENCHMARKS.md)")]
struct Args {
    /// The server to measure (a database `inbox_bench_<pid>` is created on
    /// it). Default: a throwaway server with fsync off (not durable).
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// pgbench for the ceiling (default: the newest /usr/lib/postgresql/*/bin/pgbench).
    #[arg(long)]
    pgbench: Option<PathBuf>,
    /// Concurrent senders, one accept run each.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    senders: Vec<usize>,
    /// Seconds measured per accept run (after 1 s of warm-up).
    #[arg(long, default_value_t = 10)]
    accept_secs: u64,
    /// Pending rows each drain run starts with.
    #[arg(long, default_value_t = 20_000)]
    backlog: usize,
    /// Worker concurrencies, one drain run each per handler.
    #[arg(long, value_delimiter = ',', default_value = "4,8,16")]
    concurrency: Vec<usize>,
    /// The workers' fetch cooldowns in milliseconds, one drain run each
    /// (`InboxWorker::builder(..).fetch_cooldown(..)`; the default is the
    /// library's, 5; 0 leases as soon as a slot frees).
    #[arg(long, value_delimiter = ',', default_value = "5")]
    fetch_cooldown_ms: Vec<u64>,
    /// Worker concurrency of the accept-to-handler runs.
    #[arg(long, default_value_t = 8)]
    latency_concurrency: usize,
    /// Seconds of sending per accept-to-handler run.
    #[arg(long, default_value_t = 10)]
    latency_secs: u64,
    /// Deliveries per second in the accept-to-handler runs.
    #[arg(long, default_value_t = 50)]
    latency_rate: u32,
    /// Seconds per pgbench run.
    #[arg(long, default_value_t = 15)]
    pgbench_secs: u64,
    /// pgbench clients.
    #[arg(long, default_value_t = 16)]
    pgbench_clients: usize,
    /// Skip phases: any of accept, drain, latency, ceiling.
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Bytes per delivery body.
    #[arg(long, default_value_t = 1100)]
    body_bytes: usize,
    /// What pads the body to its size: `x` (one repeated byte, which
    /// PostgreSQL's compression shrinks to nothing), `hex` (pseudo-random hex
    /// digits, which it barely shrinks) or `records` (charge-like JSON records
    /// with pseudo-random ids, escaped inside the body's string, which it
    /// shrinks about as much as a real JSON payload: 2x).
    #[arg(long, default_value = "x")]
    body_fill: String,
}

/// A Stripe event of exactly `--body-bytes` bytes (1,100 by default).
fn body(id: &str) -> Bytes {
    let (bytes, fill) = BODY.get().map_or((1100, "x"), |(b, f)| (*b, f.as_str()));
    let head = format!(
        r#"{{"id":"{id}","object":"event","api_version":"2024-06-20","created":1700000000,"livemode":false,"pending_webhooks":1,"type":"payment_intent.succeeded","request":{{"id":"req_bench","idempotency_key":null}},"data":{{"object":{{"id":"pi_bench","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded","description":""#
    );
    let tail = r#""}}}"#;
    let pad = bytes.saturating_sub(head.len() + tail.len());
    // xorshift64 from the id: the same body for the same id.
    let mut x = id.bytes().fold(0x9e37_79b9_7f4a_7c15u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let hex = |n: usize, next: &mut dyn FnMut() -> u64| -> String {
        (0..n).map(|_| char::from(b"0123456789abcdef"[(next() >> 60) as usize])).collect()
    };
    let mut fill = match fill {
        "hex" => hex(pad, &mut next),
        "records" => {
            let mut out = String::with_capacity(pad + 128);
            while out.len() < pad {
                let (id, order, amount) = (hex(24, &mut next), hex(12, &mut next), next() % 100_000);
                out.push_str(&format!(
                    r#"{{\"id\":\"ch_{id}\",\"object\":\"charge\",\"amount\":{amount},\"currency\":\"usd\",\"status\":\"succeeded\",\"metadata\":{{\"order_id\":\"ord_{order}\"}}}},"#
                ));
            }
            out
        }
        _ => "x".repeat(pad),
    };
    fill.truncate(pad);
    // A cut escape would escape the closing quote: pad it back with x.
    while fill.ends_with('\\') {
        fill.pop();
    }
    while fill.len() < pad {
        fill.push('x');
    }
    Bytes::from(format!("{head}{fill}{tail}"))
}

/// `n` signed deliveries with ids `evt_<tag>_<i>`: (body, `Stripe-Signature`).
fn signed(tag: &str, n: usize) -> Vec<(Bytes, String)> {
    let secret = SigningSecret::from(SECRET);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_secs();
    (0..n)
        .map(|i| {
            let b = body(&format!("evt_{tag}_{i}"));
            let sig = stripe::FACTS.sign(&secret, now, &b);
            (b, sig)
        })
        .collect()
}

struct Db {
    config: tokio_postgres::Config,
    admin: Pool,
    stat_statements: bool,
}

impl Db {
    async fn exec(&self, sql: &str) {
        self.admin.get().await.expect("connection").batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    async fn count(&self, sql: &str) -> i64 {
        self.admin.get().await.expect("connection").query_one(sql, &[]).await.expect(sql).get(0)
    }

    /// Empties the tables and flushes dirty pages, so each run starts alike.
    async fn reset(&self) {
        self.exec("TRUNCATE webhook_idempotency.webhook_events, bench_effects").await;
        self.exec("CHECKPOINT").await;
        if self.stat_statements {
            self.exec("SELECT pg_stat_statements_reset()").await;
        }
    }

    /// Statements run since the last reset (not counting these look-ups).
    async fn statements(&self) -> Vec<(i64, String)> {
        if !self.stat_statements {
            return Vec::new();
        }
        let rows = self
            .admin
            .get()
            .await
            .expect("connection")
            .query(
                "SELECT calls, regexp_replace(left(query, 60), '\\s+', ' ', 'g') FROM pg_stat_statements
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                   AND query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC",
                &[],
            )
            .await
            .expect("pg_stat_statements");
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    }
}

fn us(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

// ---------------------------------------------------------------- accept

struct AcceptRun {
    senders: usize,
    ok: u64,
    other: u64,
    rate: f64,
    latency: Histogram<u64>,
    per_accept: Option<f64>,
    load: String,
}

fn inbox_app(pool: Pool) -> Router {
    let layer = WebhookLayer::builder(pool, Provider::stripe())
        .scope(SCOPE)
        .secret(SECRET)
        .mode(Mode::Inbox)
        .build()
        .expect("layer config");
    Router::new().route("/webhooks/stripe", post(|| async { StatusCode::OK }).layer(layer))
}

async fn accept_run(db: &Db, senders: usize, secs: u64) -> AcceptRun {
    db.reset().await;
    // Enough for ~6,000 accepts/s; a run that uses them all up ends early.
    let requests = Arc::new(signed(&format!("a{senders}"), 6_000 * (secs as usize + 1)));
    let (addr, stop) = serve(inbox_app(pool(&db.config, senders))).await;
    let url = format!("http://{addr}/webhooks/stripe");
    let client = reqwest::Client::builder().pool_max_idle_per_host(senders).build().expect("client");
    let next = Arc::new(AtomicUsize::new(0));
    let load = load1();
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(1);
    let until = measure_from + Duration::from_secs(secs);
    let tasks: Vec<_> = (0..senders)
        .map(|_| {
            let (client, url, next, requests) = (client.clone(), url.clone(), Arc::clone(&next), Arc::clone(&requests));
            tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
                let (mut ok, mut other) = (0u64, 0u64);
                loop {
                    let sent = Instant::now();
                    if sent >= until {
                        break;
                    }
                    let Some((body, sig)) = requests.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                    let res = client
                        .post(&url)
                        .header("content-type", "application/json")
                        .header("stripe-signature", sig)
                        .body(body.clone())
                        .send()
                        .await;
                    let elapsed = sent.elapsed();
                    if sent < measure_from {
                        continue;
                    }
                    match res {
                        Ok(r) if r.status() == StatusCode::OK && !r.headers().contains_key("idempotent-replayed") => {
                            ok += 1;
                            hist.saturating_record(elapsed.as_nanos() as u64);
                        }
                        _ => other += 1,
                    }
                }
                (hist, ok, other)
            })
        })
        .collect();
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let (mut ok, mut other) = (0, 0);
    for t in tasks {
        let (h, o, x) = t.await.expect("sender");
        latency.add(h).expect("same bounds");
        ok += o;
        other += x;
    }
    let measured = Instant::now().saturating_duration_since(measure_from).as_secs_f64();
    let load = load_span(load);
    let _ = stop.send(());
    let rows = db.count("SELECT count(*) FROM webhook_idempotency.webhook_events").await;
    let statements = db.statements().await;
    let per_accept = (!statements.is_empty() && rows > 0).then(|| {
        let total: i64 = statements.iter().map(|s| s.0).sum();
        total as f64 / rows as f64
    });
    if !statements.is_empty() {
        eprintln!("  statements during the {senders}-sender run ({rows} rows accepted, warm-up included):");
        for (calls, q) in statements.iter().take(4) {
            eprintln!("    {calls:>8}  {q}");
        }
    }
    AcceptRun { senders, ok, other, rate: ok as f64 / measured, latency, per_accept, load }
}

// ---------------------------------------------------------------- drain

#[derive(Clone)]
struct Handled {
    count: Arc<AtomicUsize>,
    target: usize,
    all: Arc<Notify>,
    /// When each event's handler started (accept-to-handler runs only).
    started: Option<Arc<Mutex<HashMap<String, Instant>>>>,
}

impl Handled {
    fn new(target: usize, timed: bool) -> Self {
        Self { count: Arc::default(), target, all: Arc::new(Notify::new()), started: timed.then(Arc::default) }
    }

    fn one(&self) {
        if self.count.fetch_add(1, Ordering::Relaxed) + 1 == self.target {
            self.all.notify_one();
        }
    }
}

async fn noop(State(h): State<Handled>) -> StatusCode {
    h.one();
    StatusCode::OK
}

async fn business(State(h): State<Handled>, tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    if let Some(started) = &h.started {
        started.lock().expect("lock").entry(event.key().to_owned()).or_insert_with(Instant::now);
    }
    let Ok(db) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR };
    let Ok(stmt) =
        db.prepare_cached("INSERT INTO bench_effects (scope, event_key, event_type) VALUES ($1, $2, $3)").await
    else {
        return StatusCode::INTERNAL_SERVER_ERROR;
    };
    match db.execute(&stmt, &[&event.scope(), &event.key(), &event.event_type()]).await {
        Ok(_) => {
            drop(db);
            h.one();
            StatusCode::OK
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn handlers(h: Handled, with_insert: bool) -> Router {
    let route = if with_insert { post(business) } else { post(noop) };
    Router::new().route("/webhooks/stripe", route).with_state(h)
}

fn spawn_worker(worker: InboxWorker<Router>) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    (stop, task)
}

/// Inserts `n` pending rows (keys `evt_d_<i>`) as the layer would.
async fn backlog(db: &Db, n: usize) {
    let payload = body("evt_d_template").to_vec();
    let c = db.admin.get().await.expect("connection");
    c.execute(
        "INSERT INTO webhook_idempotency.webhook_events
             (scope, provider, event_key, event_type, state, attempts, payload, request_head, run_at)
         SELECT $1, 'stripe', 'evt_d_' || g, 'payment_intent.succeeded', 'pending', 0, $2, $3::text::jsonb, now()
         FROM generate_series(1, $4::int) g",
        &[&SCOPE, &payload, &HEAD, &(n as i32)],
    )
    .await
    .expect("backlog");
    c.batch_execute("VACUUM ANALYZE webhook_idempotency.webhook_events").await.expect("analyze");
    c.batch_execute("CHECKPOINT").await.expect("checkpoint");
}

struct DrainRun {
    concurrency: usize,
    cooldown_ms: u64,
    with_insert: bool,
    done: i64,
    secs: f64,
    load: String,
    per_event: Option<f64>,
    /// WAL bytes written per processed event (lease, handler, mark done).
    wal_per_event: f64,
}

async fn drain_run(db: &Db, n: usize, concurrency: usize, cooldown_ms: u64, with_insert: bool) -> DrainRun {
    db.reset().await;
    backlog(db, n).await;
    if db.stat_statements {
        db.exec("SELECT pg_stat_statements_reset()").await;
    }
    let h = Handled::new(n, false);
    let worker = InboxWorker::builder(pool(&db.config, concurrency + 2), handlers(h.clone(), with_insert))
        .concurrency(concurrency)
        .fetch_cooldown(Duration::from_millis(cooldown_ms))
        .build()
        .expect("worker config");
    let wal = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint";
    let wal_before = db.count(wal).await;
    let load = load1();
    let start = Instant::now();
    let (stop, task) = spawn_worker(worker);
    let limit = Duration::from_secs(120);
    let _ = tokio::time::timeout(limit, h.all.notified()).await;
    // The handler ran for every row; each commit follows it within milliseconds.
    let done = loop {
        let done = db.count("SELECT count(*) FROM webhook_idempotency.webhook_events WHERE state = 'done'").await;
        if done as usize >= n || start.elapsed() > limit {
            break done;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let secs = start.elapsed().as_secs_f64();
    let wal_per_event = (db.count(wal).await - wal_before) as f64 / done.max(1) as f64;
    let load = load_span(load);
    let _ = stop.send(());
    task.await.expect("worker");
    let statements = db.statements().await;
    let per_event =
        (!statements.is_empty() && done > 0).then(|| statements.iter().map(|s| s.0).sum::<i64>() as f64 / done as f64);
    if !statements.is_empty() {
        eprintln!("  statements during drain c={concurrency} insert={with_insert} ({done} rows done):");
        for (calls, q) in statements.iter().take(6) {
            eprintln!("    {calls:>8}  {q}");
        }
    }
    DrainRun { concurrency, cooldown_ms, with_insert, done, secs, load, per_event, wal_per_event }
}

// ---------------------------------------------------------------- accept-to-handler

struct LatencyRun {
    mode: &'static str,
    sent: usize,
    handled: usize,
    latency: Histogram<u64>,
    handler_first: usize,
    load: String,
}

async fn latency_run(
    db: &Db,
    mode: &'static str,
    poll: Duration,
    listen: bool,
    concurrency: usize,
    secs: u64,
    rate: u32,
) -> LatencyRun {
    db.reset().await;
    let n = (secs * u64::from(rate)) as usize;
    let requests = signed(&format!("l{}", poll.as_millis()), n);
    let (addr, stop_server) = serve(inbox_app(pool(&db.config, 4))).await;
    let h = Handled::new(n, true);
    let mut store = StoreConfig::new(pool(&db.config, concurrency + 2));
    if listen {
        store = store.listen_connection(db.config.clone(), tokio_postgres::NoTls);
    }
    let worker = InboxWorker::builder(store, handlers(h.clone(), true)).concurrency(concurrency).poll_interval(poll);
    let (stop_worker, task) = spawn_worker(worker.build().expect("worker config"));
    // Let the listener connect and the first poll pass.
    tokio::time::sleep(poll.min(Duration::from_millis(500)) + Duration::from_millis(200)).await;
    let url = format!("http://{addr}/webhooks/stripe");
    let client = reqwest::Client::new();
    let mut acked: Vec<(String, Instant)> = Vec::with_capacity(n);
    let mut every = tokio::time::interval(Duration::from_secs(1) / rate);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let load = load1();
    for (i, (body, sig)) in requests.into_iter().enumerate() {
        every.tick().await;
        let res = client
            .post(&url)
            .header("content-type", "application/json")
            .header("stripe-signature", sig)
            .body(body)
            .send()
            .await;
        if matches!(res, Ok(r) if r.status() == StatusCode::OK) {
            acked.push((format!("evt_l{}_{i}", poll.as_millis()), Instant::now()));
        }
    }
    let _ = tokio::time::timeout(poll + Duration::from_secs(10), h.all.notified()).await;
    let load = load_span(load);
    let _ = stop_worker.send(());
    task.await.expect("worker");
    let _ = stop_server.send(());
    let started = h.started.as_ref().expect("timed").lock().expect("lock");
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram");
    let mut handler_first = 0;
    for (key, ack) in &acked {
        if let Some(s) = started.get(key) {
            let d = s.saturating_duration_since(*ack);
            if d.is_zero() {
                handler_first += 1;
            }
            latency.saturating_record(d.as_nanos() as u64);
        }
    }
    LatencyRun { mode, sent: acked.len(), handled: latency.len() as usize, latency, handler_first, load }
}

// ---------------------------------------------------------------- ceiling

struct PgbenchRun {
    name: &'static str,
    tps: f64,
    latency_ms: f64,
    transactions: u64,
    load: String,
    note: String,
    /// Rows each transaction of the script processes (16 for the batched
    /// lease), for rows per second.
    rows_per_txn: f64,
}

async fn pgbench_run(
    db: &Db,
    bin: &PathBuf,
    name: &'static str,
    script: &str,
    secs: u64,
    clients: usize,
    extra: &[&str],
) -> PgbenchRun {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/inbox-bench").join(script);
    let load = load1();
    let out = Command::new(bin)
        .args(["-n", "-T", &secs.to_string(), "-c", &clients.to_string(), "-j", "2"])
        .args(extra)
        .arg("-f")
        .arg(&script)
        .arg(conninfo(&db.config))
        .output()
        .expect("run pgbench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        eprintln!("pgbench {name} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    }
    PgbenchRun {
        name,
        tps: field(&stdout, "tps ="),
        latency_ms: field(&stdout, "latency average ="),
        transactions: field(&stdout, "number of transactions actually processed:") as u64,
        load: load_span(load),
        note: String::new(),
        rows_per_txn: 1.0,
    }
}

/// Pre-leased rows for complete.sql: `evt_b_<client>_<n>`, running, token md5(key).
async fn leased_rows(db: &Db, clients: usize, per_client: usize) {
    let payload = body("evt_b_template").to_vec();
    db.admin
        .get()
        .await
        .expect("connection")
        .execute(
            "INSERT INTO webhook_idempotency.webhook_events
                 (scope, provider, event_key, event_type, state, attempts, payload, request_head, run_at,
                  locked_until, lease_token)
             SELECT $1, 'stripe', k, 'payment_intent.succeeded', 'running', 1, $2, $3::text::jsonb, now(),
                    now() + interval '1 hour', md5(k)::uuid
             FROM generate_series(0, $4::int - 1) c, generate_series(1, $5::int) n,
                  LATERAL (SELECT 'evt_b_' || c || '_' || n AS k) key",
            &[&SCOPE, &payload, &HEAD, &(clients as i32), &(per_client as i32)],
        )
        .await
        .expect("leased rows");
    db.exec("VACUUM ANALYZE webhook_idempotency.webhook_events").await;
    db.exec("CHECKPOINT").await;
}

// ---------------------------------------------------------------- main

#[tokio::main]
async fn main() {
    let args = Args::parse();
    assert!(["x", "hex", "records"].contains(&args.body_fill.as_str()), "--body-fill: x, hex or records");
    BODY.set((args.body_bytes, args.body_fill.clone())).expect("set once");
    let _server;
    let url = match &args.database_url {
        Some(url) => url.clone(),
        None => {
            eprintln!("no --database-url: a throwaway server with fsync = off (NOT durable; for trying this out)");
            let pg = webhook_test_support::TempPostgres::start().expect("throwaway PostgreSQL");
            let url = pg.url("postgres");
            _server = pg;
            url
        }
    };
    let server: tokio_postgres::Config = url.parse().expect("database URL");
    let name = format!("inbox_bench_{}", std::process::id());
    {
        let admin = pool(&server, 1);
        let c = admin.get().await.expect("connect to the server");
        c.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create database");
    }
    let mut config = server.clone();
    config.dbname(&name);
    let admin = pool(&config, 2);
    webhook_idempotency::migrate(&admin.clone().into()).await.expect("migrate");
    let c = admin.get().await.expect("connection");
    c.batch_execute(
        "CREATE TABLE bench_effects (id bigserial PRIMARY KEY, scope text NOT NULL, event_key text NOT NULL,
                                     event_type text, created_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .expect("bench_effects");
    let stat_statements = c.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").await.is_ok()
        && c.batch_execute("SELECT pg_stat_statements_reset()").await.is_ok();
    let settings: Vec<String> = c
        .query(
            "SELECT name || '=' || setting FROM pg_settings
             WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'wal_sync_method', 'shared_buffers')
             ORDER BY name",
            &[],
        )
        .await
        .expect("settings")
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(c);
    let db = Db { config, admin, stat_statements };
    let skip = |phase: &str| args.skip.iter().any(|s| s == phase);
    println!("server: {}", settings.join(", "));
    println!(
        "body: {} bytes ({} fill), signed per request; load = 1-minute load average before→after each run\n",
        args.body_bytes, args.body_fill
    );

    // Warm-up, discarded: WAL segments of a fresh cluster, caches, connections.
    eprintln!("warm-up: 16 senders, 3 s");
    let _ = accept_run(&db, 16, 3).await;

    let mut accepts = Vec::new();
    if !skip("accept") {
        for &n in &args.senders {
            eprintln!("accept: {n} senders, {} s", args.accept_secs);
            accepts.push(accept_run(&db, n, args.accept_secs).await);
        }
        println!("### Accept (HTTP, layer in inbox mode, one autocommit statement per delivery)\n");
        println!("| senders | accepted/s | p50 | p99 | max | statements per accept | errors | load |");
        println!("|---|---|---|---|---|---|---|---|");
        for r in &accepts {
            println!(
                "| {} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms | {} | {} | {} |",
                r.senders,
                r.rate,
                us(&r.latency, 0.5) / 1000.0,
                us(&r.latency, 0.99) / 1000.0,
                r.latency.max() as f64 / 1e6,
                r.per_accept.map_or("-".into(), |p| format!("{p:.2}")),
                r.other,
                r.load
            );
        }
        println!("\n({} accepted in total)\n", accepts.iter().map(|r| r.ok).sum::<u64>());
    }

    let mut drains = Vec::new();
    if !skip("drain") {
        for with_insert in [false, true] {
            for &c in &args.concurrency {
                for &ms in &args.fetch_cooldown_ms {
                    eprintln!(
                        "drain: {} rows, concurrency {c}, cooldown {ms} ms, business insert {with_insert}",
                        args.backlog
                    );
                    drains.push(drain_run(&db, args.backlog, c, ms, with_insert).await);
                }
            }
        }
        println!("### Worker drain ({} pending rows)\n", args.backlog);
        println!(
            "| handler | concurrency | fetch cooldown | events/s | seconds | statements per event | WAL B per event | load |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for r in &drains {
            println!(
                "| {} | {} | {} ms | {:.0} | {:.1}{} | {} | {:.0} | {} |",
                if r.with_insert { "one business insert" } else { "no-op" },
                r.concurrency,
                r.cooldown_ms,
                r.done as f64 / r.secs,
                r.secs,
                if r.done as usize == args.backlog { String::new() } else { format!(" ({} done)", r.done) },
                r.per_event.map_or("-".into(), |p| format!("{p:.2}")),
                r.wal_per_event,
                r.load
            );
        }
        println!();
    }

    let mut latencies = Vec::new();
    if !skip("latency") {
        let c = args.latency_concurrency;
        let (s, rate) = (args.latency_secs, args.latency_rate);
        eprintln!("accept-to-handler: listen, poll 100 ms, poll 1 s ({s} s each at {rate}/s)");
        latencies.push(latency_run(&db, "NOTIFY (listen) + poll 1 s", Duration::from_secs(1), true, c, s, rate).await);
        latencies.push(latency_run(&db, "poll 100 ms", Duration::from_millis(100), false, c, s, rate).await);
        latencies.push(latency_run(&db, "poll 1 s", Duration::from_secs(1), false, c, s, rate).await);
        println!("### Accept-to-handler latency ({rate} deliveries/s, one sender, worker concurrency {c})\n");
        println!("| wake-up | median | p99 | max | handled / accepted | handler before the 2xx arrived | load |");
        println!("|---|---|---|---|---|---|---|");
        for r in &latencies {
            println!(
                "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {} / {} | {} | {} |",
                r.mode,
                us(&r.latency, 0.5) / 1000.0,
                us(&r.latency, 0.99) / 1000.0,
                r.latency.max() as f64 / 1e6,
                r.handled,
                r.sent,
                r.handler_first,
                r.load
            );
        }
        println!();
    }

    let mut ceiling = Vec::new();
    if !skip("ceiling") {
        match pgbench_bin(args.pgbench.clone()) {
            None => eprintln!("pgbench not found: no ceiling"),
            Some(bin) => {
                let (secs, clients) = (args.pgbench_secs, args.pgbench_clients);
                eprintln!("ceiling: pgbench {secs} s, {clients} clients");
                let runs: [(&'static str, &str, &[&str]); 9] = [
                    ("(a) accept INSERT, autocommit", "accept_insert.sql", &[]),
                    ("(a') accept INSERT + pg_notify in one statement (the layer's)", "accept_notify.sql", &[]),
                    ("(a'') accept INSERT, then pg_notify in its own statement", "accept_then_notify.sql", &[]),
                    ("(b) business INSERT + fenced mark-done + COMMIT", "complete.sql", &["-D", "n=0"]),
                    ("(c) lease 1 row + (b): the worker's protocol", "lease_complete.sql", &[]),
                    ("(c') as (c), the lease using its partial indexes", "lease_cte_complete.sql", &[]),
                    ("(c'') as (c'), the lease with synchronous_commit = off", "lease_cte_async_complete.sql", &[]),
                    (
                        "(d) lease 16 rows, then per row BEGIN + the fenced read + (b): the worker leasing ahead",
                        "lease16_complete.sql",
                        &[],
                    ),
                    (
                        "(d') as (d), pipelined as the worker sends it: BEGIN + read, INSERT, mark-done + COMMIT",
                        "lease16_pipelined_complete.sql",
                        &["-M", "extended"],
                    ),
                ];
                for (label, script, extra) in runs {
                    db.reset().await;
                    match script {
                        "complete.sql" => leased_rows(&db, clients, 8_000).await,
                        s if s.starts_with("lease") => backlog(&db, args.backlog.max(100_000)).await,
                        _ => {}
                    }
                    let mut r = pgbench_run(&db, &bin, label, script, secs, clients, extra).await;
                    if script.contains("complete") {
                        let done = db
                            .count("SELECT count(*) FROM webhook_idempotency.webhook_events WHERE state = 'done'")
                            .await;
                        r.note = format!("{done} rows marked done of {} transactions", r.transactions);
                        if script.starts_with("lease16") {
                            r.rows_per_txn = done as f64 / r.transactions.max(1) as f64;
                            r.note = format!(
                                "{done} rows marked done by {} transactions of 16 rows: {:.0} rows/s",
                                r.transactions,
                                done as f64 / secs as f64
                            );
                        }
                    }
                    ceiling.push(r);
                }
                println!("### Ceiling: pgbench on the same server (-n -T {secs} -c {clients} -j 2)\n");
                println!("| script | tps | latency average | load | note |");
                println!("|---|---|---|---|---|");
                for r in &ceiling {
                    println!("| {} | {:.0} | {:.2} ms | {} | {} |", r.name, r.tps, r.latency_ms, r.load, r.note);
                }
                println!();
            }
        }
    }

    println!("### Targets (this run)\n");
    let at = |n: usize| accepts.iter().find(|r| r.senders == n);
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    if let (Some(a16), Some(pa)) = (at(16), ceiling.first()) {
        let ratio = a16.rate / pa.tps;
        println!(
            "- accept throughput at 16 senders ≥ 0.8x pgbench (a): {:.0}/s vs {:.0} tps = {ratio:.2}x: **{}**",
            a16.rate,
            pa.tps,
            verdict(ratio >= 0.8)
        );
        for r in ceiling.iter().take(3).skip(1) {
            println!("  (vs {}: {:.0} tps = {:.2}x)", r.name, r.tps, a16.rate / r.tps);
        }
    }
    if let Some(a64) = at(64) {
        let p99 = us(&a64.latency, 0.99) / 1000.0;
        println!("- accept p99 < 20 ms at 64 senders: {p99:.2} ms: **{}**", verdict(p99 < 20.0));
    }
    if let Some(pb) = ceiling.get(3) {
        if let Some(best) = drains
            .iter()
            .filter(|r| r.with_insert)
            .max_by(|x, y| (x.done as f64 / x.secs).total_cmp(&(y.done as f64 / y.secs)))
        {
            let rate = best.done as f64 / best.secs;
            let ratio = rate / pb.tps;
            println!(
                "- drain with one business insert ≥ 0.8x pgbench (b): best {rate:.0}/s (concurrency {}) vs {:.0} tps = {ratio:.2}x: **{}**",
                best.concurrency,
                pb.tps,
                verdict(ratio >= 0.8)
            );
            for r in ceiling.iter().skip(4) {
                let rows = r.tps * r.rows_per_txn;
                println!("  (vs {}: {rows:.0} rows/s = {:.2}x)", r.name, rate / rows);
            }
        }
    }
    if let Some(l) = latencies.first() {
        let med = us(&l.latency, 0.5) / 1000.0;
        println!("- median accept-to-handler < 10 ms with NOTIFY: {med:.2} ms: **{}**", verdict(med < 10.0));
    }
    drop(db);
    let admin = pool(&server, 1);
    if let Ok(c) = admin.get().await {
        let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
    }
}
