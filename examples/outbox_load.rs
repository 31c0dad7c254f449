//! Outbox load benchmarks: the worker's drain to a local no-op endpoint, the
//! enqueue's extra cost inside a handler's transaction, and the PostgreSQL
//! ceiling of the same SQL measured with pgbench in the same run.
//! BENCHMARKS.md, "Outbox", publishes its output.
//!
//! ```text
//! scripts/outbox-bench.sh                 # a durable throwaway server, then this example
//! cargo run --release --all-features --example outbox_load -- --database-url postgresql://... --pgbench .../pgbench
//! ```
//!
//! Without `--database-url` it starts the tests' throwaway server (fsync
//! off: quick, not durable, not the published numbers).
//!
//! 1. **Drain**: `--backlog` pending outbox rows (a 200-byte JSON payload
//!    each, written as `WebhookTx::enqueue` writes them), drained by an
//!    `OutboxWorker` with concurrency C whose effect POSTs the payload with
//!    its downstream key to a no-op axum endpoint on loopback (reqwest,
//!    keep-alive); time until every row is `done`, and the WAL written per
//!    delivered effect.
//! 2. **Enqueue cost**: the synchronous layer (Stripe preset) at `--senders`
//!    senders over HTTP, the handler writing one business row, without and
//!    with one `enqueue`, alternated twice, `--secs` each after 1 s of
//!    warm-up; latency percentiles (HDR histogram) and WAL per event.
//! 3. **Ceiling**: pgbench (`-n -T <secs> -c <clients> -j 2`) with
//!    `scripts/outbox-bench/*.sql`: the drain's SQL as a procedure (lease a
//!    batch, then mark each row delivered in its own commit, as the worker
//!    does), and the handler's transaction without and with the enqueue
//!    statement.

#[path = "common/bench.rs"]
mod bench;
use bench::{conninfo, field, load1, load_span, pgbench_bin, pool, serve};

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use clap::Parser;
use deadpool_postgres::Pool;
use hdrhistogram::Histogram;
use tokio::sync::oneshot;
use webhook_idempotency::outbox::{Effect, EffectContext, EffectResult, Effects, OutboxWorker};
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{Provider, SigningSecret, WebhookEvent, WebhookLayer, WebhookTx};

const SECRET: &str = "whsec_outbox_load_secret";
const SCOPE: &str = "acct_bench";

#[derive(Parser, Debug)]
#[command(about = "Outbox load benchmarks (see BENCHMARKS.md)")]
struct Args {
    /// The server to measure (a database `outbox_bench_<pid>` is created on
    /// it). Default: a throwaway server with fsync off (not durable).
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// pgbench for the ceiling (default: the newest /usr/lib/postgresql/*/bin/pgbench).
    #[arg(long)]
    pgbench: Option<PathBuf>,
    /// Pending rows each drain run starts with.
    #[arg(long, default_value_t = 20_000)]
    backlog: usize,
    /// Worker concurrencies, one drain run each.
    #[arg(long, value_delimiter = ',', default_value = "4,8,16")]
    concurrency: Vec<usize>,
    /// The worker's fetch cooldowns in milliseconds, one drain run each per
    /// concurrency (the library's default is 5; 0 leases as soon as a slot
    /// frees).
    #[arg(long, value_delimiter = ',', default_value = "5")]
    fetch_cooldown_ms: Vec<u64>,
    /// Concurrent senders of the enqueue-cost runs.
    #[arg(long, default_value_t = 16)]
    senders: usize,
    /// Seconds measured per enqueue-cost run.
    #[arg(long, default_value_t = 10)]
    secs: u64,
    /// Seconds per pgbench run.
    #[arg(long, default_value_t = 15)]
    pgbench_secs: u64,
    /// pgbench clients.
    #[arg(long, default_value_t = 16)]
    pgbench_clients: usize,
    /// Rounds of the enqueue-cost pair (without, with), alternated.
    #[arg(long, default_value_t = 4)]
    rounds: usize,
    /// Pending rows the drain ceiling starts with (more than it can drain in
    /// --pgbench-secs).
    #[arg(long, default_value_t = 600_000)]
    ceiling_backlog: usize,
}

/// The 200-byte receipt payload every row carries.
fn receipt(order: &str) -> serde_json::Value {
    serde_json::json!({ "order_id": order, "to": "customer@example.com", "template": "receipt",
                        "lines": "x".repeat(120) })
}

struct Db {
    config: tokio_postgres::Config,
    admin: Pool,
}

impl Db {
    async fn exec(&self, sql: &str) {
        self.admin.get().await.expect("connection").batch_execute(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    async fn count(&self, sql: &str) -> i64 {
        self.admin.get().await.expect("connection").query_one(sql, &[]).await.expect(sql).get(0)
    }

    async fn reset(&self) {
        self.exec("TRUNCATE webhook_idempotency.webhook_events, webhook_idempotency.webhook_outbox, bench_effects")
            .await;
        self.exec("CHECKPOINT").await;
    }

    /// The WAL position, for bytes written between two calls.
    async fn wal(&self) -> i64 {
        self.count("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").await
    }

    /// `n` pending `send_receipt` rows with their payloads.
    async fn backlog(&self, n: usize) {
        let payload = receipt("ord_template").to_string().into_bytes();
        self.admin
            .get()
            .await
            .expect("connection")
            .execute(
                "INSERT INTO webhook_idempotency.webhook_outbox
                     (scope, provider, event_key, effect, state, run_at, payload, content_type)
                 SELECT $1, 'stripe', 'evt_o_' || g, 'send_receipt', 'pending', now(), $3, 'application/json'
                 FROM generate_series(1, $2::int) g",
                &[&SCOPE, &(n as i32), &payload],
            )
            .await
            .expect("backlog");
        self.exec("VACUUM ANALYZE webhook_idempotency.webhook_outbox").await;
        self.exec("CHECKPOINT").await;
    }
}

// ---------------------------------------------------------------- drain

struct DrainRun {
    concurrency: usize,
    cooldown_ms: u64,
    done: i64,
    secs: f64,
    wal_per_effect: f64,
    load: String,
}

async fn drain_run(db: &Db, n: usize, concurrency: usize, cooldown_ms: u64) -> DrainRun {
    db.reset().await;
    db.backlog(n).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let remote = Router::new().route(
        "/noop",
        post(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async { StatusCode::OK }
        }),
    );
    let (addr, stop_remote) = serve(remote).await;
    let url = format!("http://{addr}/noop");
    let client = reqwest::Client::builder().pool_max_idle_per_host(concurrency).build().expect("client");
    let effects = Effects::new().effect("send_receipt", move |ctx: EffectContext| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            match client
                .post(url)
                .header("Idempotency-Key", ctx.downstream_key())
                .body(ctx.payload().clone())
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => EffectResult::delivered(),
                Ok(r) => EffectResult::retry(r.status()),
                Err(e) => EffectResult::uncertain(e),
            }
        }
    });
    let worker = OutboxWorker::builder(pool(&db.config, concurrency + 2), effects)
        .concurrency(concurrency)
        .poll_interval(Duration::from_millis(50))
        .fetch_cooldown(Duration::from_millis(cooldown_ms))
        .build()
        .expect("worker config");
    let (load, wal) = (load1(), db.wal().await);
    let start = Instant::now();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    let limit = Duration::from_secs(300);
    let done = loop {
        let done = db.count("SELECT count(*) FROM webhook_idempotency.webhook_outbox WHERE state = 'done'").await;
        if done as usize >= n || start.elapsed() > limit {
            break done;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let secs = start.elapsed().as_secs_f64();
    let load = load_span(load);
    let wal_per_effect = (db.wal().await - wal) as f64 / done.max(1) as f64;
    let _ = stop.send(());
    task.await.expect("worker");
    let _ = stop_remote.send(());
    eprintln!("  {} calls reached the endpoint for {done} rows", calls.load(Ordering::Relaxed));
    DrainRun { concurrency, cooldown_ms, done, secs, wal_per_effect, load }
}

// ---------------------------------------------------------------- enqueue cost

struct CostRun {
    enqueue: bool,
    other: u64,
    rate: f64,
    latency: Histogram<u64>,
    wal_per_event: f64,
    load: String,
}

fn business_app(pool: Pool, enqueue: bool) -> Router {
    let layer = WebhookLayer::builder(pool, Provider::stripe()).scope(SCOPE).secret(SECRET).build().expect("layer");
    let handler = move |tx: WebhookTx, event: WebhookEvent| async move {
        {
            let Ok(db) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR };
            let sql = "INSERT INTO bench_effects (scope, event_key, event_type) VALUES ($1, $2, $3)";
            if db.execute(sql, &[&event.scope(), &event.key(), &event.event_type()]).await.is_err() {
                return StatusCode::INTERNAL_SERVER_ERROR;
            }
        }
        if enqueue && tx.enqueue(Effect::json("send_receipt", receipt(event.key()))).await.is_err() {
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
        StatusCode::OK
    };
    Router::new().route("/webhooks/stripe", post(handler).layer(layer))
}

fn body(id: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"id":"{id}","object":"event","type":"payment_intent.succeeded","created":1700000000,"data":{{"object":{{"id":"pi_1","metadata":{{"order_id":"{id}"}}}}}}}}"#
    ))
}

async fn cost_run(db: &Db, enqueue: bool, senders: usize, secs: u64, round: usize) -> CostRun {
    db.reset().await;
    let secret = SigningSecret::from(SECRET);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    let tag = format!("c{round}{}", if enqueue { "e" } else { "p" });
    let requests: Arc<Vec<(Bytes, String)>> = Arc::new(
        (0..4_000 * (secs as usize + 1))
            .map(|i| {
                let b = body(&format!("evt_{tag}_{i}"));
                let sig = stripe::FACTS.sign(&secret, now, &b);
                (b, sig)
            })
            .collect(),
    );
    let (addr, stop) = serve(business_app(pool(&db.config, senders), enqueue)).await;
    let url = format!("http://{addr}/webhooks/stripe");
    let client = reqwest::Client::builder().pool_max_idle_per_host(senders).build().expect("client");
    let next = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let measure_from = start + Duration::from_secs(1);
    let until = measure_from + Duration::from_secs(secs);
    let (load, wal_at) = (load1(), Arc::new(tokio::sync::OnceCell::new()));
    let wal_from = {
        let wal_at = Arc::clone(&wal_at);
        let admin = db.admin.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(measure_from.into()).await;
            let c = admin.get().await.expect("connection");
            let lsn: i64 = c
                .query_one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint", &[])
                .await
                .expect("lsn")
                .get(0);
            let events: i64 = c.query_one("SELECT count(*) FROM bench_effects", &[]).await.expect("count").get(0);
            let _ = wal_at.set((lsn, events));
        })
    };
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
                    let res = client.post(&url).header("stripe-signature", sig).body(body.clone()).send().await;
                    if sent < measure_from {
                        continue;
                    }
                    match res {
                        Ok(r) if r.status() == StatusCode::OK && !r.headers().contains_key("idempotent-replayed") => {
                            ok += 1;
                            hist.saturating_record(sent.elapsed().as_nanos() as u64);
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
    wal_from.await.expect("wal sampler");
    let (lsn0, events0) = *wal_at.get().expect("sampled");
    let (lsn1, events1) = (db.wal().await, db.count("SELECT count(*) FROM bench_effects").await);
    let wal_per_event = (lsn1 - lsn0) as f64 / (events1 - events0).max(1) as f64;
    CostRun { enqueue, other, rate: ok as f64 / measured, latency, wal_per_event, load }
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1e6
}

// ---------------------------------------------------------------- ceiling

struct PgbenchRun {
    name: &'static str,
    tps: f64,
    latency_ms: f64,
    load: String,
    note: String,
    /// Rows marked done per second (the drain ceilings).
    rows_per_sec: Option<f64>,
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/outbox-bench").join(name)
}

fn pgbench_run(db: &Db, bin: &PathBuf, name: &'static str, file: &str, secs: u64, clients: usize) -> PgbenchRun {
    let load = load1();
    let out = Command::new(bin)
        .args(["-n", "-T", &secs.to_string(), "-c", &clients.to_string(), "-j", "2", "-D", "n=0"])
        .arg("-f")
        .arg(script(file))
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
        load: load_span(load),
        note: String::new(),
        rows_per_sec: None,
    }
}

// ---------------------------------------------------------------- main

#[tokio::main]
async fn main() {
    let args = Args::parse();
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
    let name = format!("outbox_bench_{}", std::process::id());
    pool(&server, 1)
        .get()
        .await
        .expect("connect to the server")
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create database");
    let mut config = server.clone();
    config.dbname(&name);
    let admin = pool(&config, 2);
    webhook_idempotency::migrate(&admin.clone().into()).await.expect("migrate");
    let db = Db { config, admin };
    db.exec(
        "CREATE TABLE bench_effects (id bigserial PRIMARY KEY, scope text NOT NULL, event_key text NOT NULL,
                                     event_type text, created_at timestamptz NOT NULL DEFAULT now())",
    )
    .await;
    db.exec(&std::fs::read_to_string(script("drain_procedure.sql")).expect("drain_procedure.sql")).await;
    let settings: Vec<String> = db
        .admin
        .get()
        .await
        .expect("connection")
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
    println!("server: {}", settings.join(", "));
    println!("load = 1-minute load average before→after each run\n");

    eprintln!("warm-up: enqueue-cost run, 3 s");
    let _ = cost_run(&db, true, args.senders, 3, 0).await;

    let mut drains = Vec::new();
    for &c in &args.concurrency {
        for &ms in &args.fetch_cooldown_ms {
            eprintln!("drain: {} rows, concurrency {c}, cooldown {ms} ms", args.backlog);
            drains.push(drain_run(&db, args.backlog, c, ms).await);
        }
    }
    println!(
        "### Outbox drain ({} pending rows, effect = one HTTP POST to a no-op endpoint on loopback)\n",
        args.backlog
    );
    println!("| concurrency | fetch cooldown | effects/s | seconds | WAL per effect | load |");
    println!("|---|---|---|---|---|---|");
    for r in &drains {
        println!(
            "| {} | {} ms | {:.0} | {:.1}{} | {:.0} B | {} |",
            r.concurrency,
            r.cooldown_ms,
            r.done as f64 / r.secs,
            r.secs,
            if r.done as usize == args.backlog { String::new() } else { format!(" ({} done)", r.done) },
            r.wal_per_effect,
            r.load
        );
    }
    println!();

    let mut costs = Vec::new();
    for round in 1..=args.rounds {
        for enqueue in [false, true] {
            eprintln!("enqueue cost: round {round}, enqueue {enqueue}, {} senders, {} s", args.senders, args.secs);
            costs.push(cost_run(&db, enqueue, args.senders, args.secs, round).await);
        }
    }
    println!(
        "### Enqueue cost (synchronous layer, {} senders over HTTP, one business insert per event)\n",
        args.senders
    );
    println!("| handler | events/s | p50 | p99 | WAL per event | errors | load |");
    println!("|---|---|---|---|---|---|---|");
    for r in &costs {
        println!(
            "| {} | {:.0} | {:.2} ms | {:.2} ms | {:.0} B | {} | {} |",
            if r.enqueue { "insert + enqueue" } else { "insert" },
            r.rate,
            ms(&r.latency, 0.5),
            ms(&r.latency, 0.99),
            r.wal_per_event,
            r.other,
            r.load
        );
    }
    println!();

    let mut ceiling = Vec::new();
    match pgbench_bin(args.pgbench.clone()) {
        None => eprintln!("pgbench not found: no ceiling"),
        Some(bin) => {
            let (secs, clients) = (args.pgbench_secs, args.pgbench_clients);
            let runs: [(&'static str, &str, usize); 4] = [
                ("(d) the worker's SQL, batch 16: lease 16, one fenced mark-delivered for the 16", "drain16.sql", 16),
                ("(d') as (d), each row marked in a commit of its own", "drain16_per_row.sql", 16),
                ("(e) handler transaction: business INSERT, COMMIT", "handler.sql", 0),
                ("(e') handler transaction: business INSERT + the enqueue statement, COMMIT", "handler_enqueue.sql", 0),
            ];
            for (label, file, batch) in runs {
                eprintln!("ceiling: {file}");
                db.reset().await;
                if batch > 0 {
                    db.backlog(args.ceiling_backlog).await;
                }
                let mut r = pgbench_run(&db, &bin, label, file, secs, clients);
                if batch > 0 {
                    let done =
                        db.count("SELECT count(*) FROM webhook_idempotency.webhook_outbox WHERE state = 'done'").await;
                    let rate = done as f64 / secs as f64;
                    r.rows_per_sec = Some(rate);
                    r.note = format!("{rate:.0} rows done/s ({done} rows; {batch} per transaction)");
                    if done as usize >= args.ceiling_backlog {
                        r.note.push_str(": the backlog ran out, raise --ceiling-backlog");
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

    println!("### Targets (this run)\n");
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    if let (Some(best), Some(d)) =
        (drains.iter().max_by(|x, y| (x.done as f64 / x.secs).total_cmp(&(y.done as f64 / y.secs))), ceiling.first())
    {
        let rate = best.done as f64 / best.secs;
        let ceiling_rate = d.rows_per_sec.unwrap_or(f64::NAN);
        let per_row = ceiling.get(1).and_then(|r| r.rows_per_sec).unwrap_or(f64::NAN);
        let ratio = rate / ceiling_rate;
        println!(
            "- drain ≥ 0.8x the pgbench ceiling (d): best {rate:.0} effects/s (concurrency {}) vs {ceiling_rate:.0} rows/s = {ratio:.2}x: **{}**",
            best.concurrency,
            verdict(ratio >= 0.8)
        );
        println!("  (vs (d'), one commit per row: {per_row:.0} rows/s = {:.2}x)", rate / per_row);
    }
    let mean = |enqueue: bool, f: &dyn Fn(&CostRun) -> f64| {
        let v: Vec<f64> = costs.iter().filter(|r| r.enqueue == enqueue).map(f).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    if !costs.is_empty() {
        let (p, e) = (mean(false, &|r| ms(&r.latency, 0.5)), mean(true, &|r| ms(&r.latency, 0.5)));
        let added = (e / p - 1.0) * 100.0;
        println!(
            "- enqueue adds ≤ 10% to a new event's latency (p50, mean of {} rounds): {p:.2} ms → {e:.2} ms = {added:+.1}%: **{}**",
            args.rounds,
            verdict(added <= 10.0)
        );
        let mut paired: Vec<f64> = costs
            .chunks(2)
            .filter(|pair| pair.len() == 2)
            .map(|pair| (ms(&pair[1].latency, 0.5) / ms(&pair[0].latency, 0.5) - 1.0) * 100.0)
            .collect();
        paired.sort_by(f64::total_cmp);
        println!(
            "  (per round, with against the run just before without: {}; median {:+.1}%)",
            paired.iter().map(|d| format!("{d:+.1}%")).collect::<Vec<_>>().join(", "),
            paired.get(paired.len() / 2).copied().unwrap_or(f64::NAN)
        );
        let (wp, we) = (mean(false, &|r| r.wal_per_event), mean(true, &|r| r.wal_per_event));
        println!(
            "  (WAL per event {wp:.0} B → {we:.0} B; throughput {:.0}/s → {:.0}/s)",
            mean(false, &|r| r.rate),
            mean(true, &|r| r.rate)
        );
    }
    if let (Some(h), Some(he)) = (ceiling.get(2), ceiling.get(3)) {
        println!(
            "  (the SQL alone, pgbench (e) → (e'): {:.2} ms → {:.2} ms average latency, {:.0} → {:.0} tps)",
            h.latency_ms, he.latency_ms, h.tps, he.tps
        );
    }
    drop(db);
    if let Ok(c) = pool(&server, 1).get().await {
        let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
    }
}
