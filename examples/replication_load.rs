//! Duplicates under synchronous replication: what confirming them with the
//! standby costs (`StoreConfig::synchronous_replication`).
//!
//! ```text
//! cargo run --release --all-features --example replication_load
//! LOAD_SECONDS=5 LOAD_SENDERS=1,4,16,64 cargo run --release --all-features --example replication_load
//! ```
//!
//! Starts a throwaway primary and its streaming standby (the tests' harness:
//! `TempPostgres::standby_of`, same machine), both restarted durable (`fsync
//! = on`), the primary with `synchronous_standby_names = '*'` (every commit
//! waits for the standby's flush) and `pg_stat_statements`. The webhook
//! layer (Stripe preset, pool of 16, called in this process through
//! `tower::ServiceExt::oneshot`: no HTTP, so what differs is the store path)
//! first processes 2,000 events, then answers duplicates of them (a random
//! one per request, signed at send time) from `LOAD_SENDERS` concurrent
//! senders (default 1, 4, 16, 64), `LOAD_SECONDS` per measurement (default
//! 5), with two settings on two pools of one run:
//!
//! - `never`: `SynchronousReplication::Never`, a duplicate answered from the
//!   row alone (one lookup: what every duplicate cost before);
//! - `detect`: the default, which finds `synchronous_standby_names` set and
//!   answers a duplicate once a confirming commit sent after its lookup was
//!   confirmed by the standby (concurrent duplicates share those commits).
//!
//! Each point measures never, detect, never, detect (the two of each summed),
//! so drift in the machine's load hits both alike; then, for scale, `new`:
//! new events through the same layer (each commits once, waiting for the
//! standby). Per point: duplicates/s,
//! p50/p99 ms (hdrhistogram), WAL bytes per duplicate
//! (`pg_current_wal_lsn()` difference), confirming commits per duplicate
//! (`pg_stat_statements` calls of the confirming statement), errors (any
//! answer but 200 with `Idempotent-Replayed`). The machine's cores are
//! shared by both servers and the senders: compare within one run.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::StreamExt;
use tower::ServiceExt;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::store::SynchronousReplication;
use webhook_idempotency::StoreConfig;
use webhook_idempotency::{Provider, SigningSecret, WebhookLayer, WebhookTx};
use webhook_test_support::TempPostgres;

const SECRET: &str = "whsec_replication_load";
const EVENTS: usize = 2_000;

fn pool(config: &tokio_postgres::Config, size: usize) -> Pool {
    let manager = Manager::from_config(
        config.clone(),
        tokio_postgres::NoTls,
        ManagerConfig { recycling_method: RecyclingMethod::Fast },
    );
    Pool::builder(manager).max_size(size).build().expect("pool config")
}

fn body(i: usize) -> Vec<u8> {
    format!(r#"{{"id":"evt_{i:06}","object":"event","type":"charge.succeeded","data":{{"object":{{"amount":{i}}}}}}}"#)
        .into_bytes()
}

fn request(i: usize) -> http::Request<Body> {
    let body = body(i);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    http::Request::post("/webhooks/stripe")
        .header("content-type", "application/json")
        .header("stripe-signature", stripe::FACTS.sign(&SigningSecret::from(SECRET), now, &body))
        .body(Body::from(body))
        .unwrap()
}

fn app(pool: Pool, replication: SynchronousReplication) -> Router {
    let store = StoreConfig::new(pool).synchronous_replication(replication);
    let layer = WebhookLayer::builder(store, Provider::stripe()).scope("acct_load").secret(SECRET).build().unwrap();
    Router::new().route(
        "/webhooks/stripe",
        post(|tx: WebhookTx| async move {
            let client = tx.client().await.unwrap();
            client.execute("INSERT INTO effects DEFAULT VALUES", &[]).await.unwrap();
            http::StatusCode::OK
        })
        .layer(layer),
    )
}

/// What one measurement counted.
#[derive(Default)]
struct Run {
    answered: u64,
    errors: u64,
    seconds: f64,
    wal: u64,
    confirms: u64,
    histogram: Option<hdrhistogram::Histogram<u64>>,
}

impl Run {
    fn add(&mut self, other: Run) {
        self.answered += other.answered;
        self.errors += other.errors;
        self.seconds += other.seconds;
        self.wal += other.wal;
        self.confirms += other.confirms;
        match (&mut self.histogram, other.histogram) {
            (Some(h), Some(o)) => h.add(o).unwrap(),
            (h, o) => *h = h.take().or(o),
        }
    }
}

async fn counters(observer: &tokio_postgres::Client) -> (u64, u64) {
    let row = observer
        .query_one(
            "SELECT (pg_current_wal_lsn() - '0/0')::bigint,
                    coalesce((SELECT sum(calls) FROM pg_stat_statements
                               WHERE query LIKE '%pg_logical_emit_message%'
                                 AND query NOT LIKE '%pg_stat_statements%'), 0)::bigint",
            &[],
        )
        .await
        .unwrap();
    (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64)
}

/// The next new event's number.
static NEXT_NEW: AtomicUsize = AtomicUsize::new(EVENTS);

/// `senders` concurrent senders through `app` for `seconds`: duplicates of
/// the processed events, or new events.
async fn measure(app: &Router, observer: &tokio_postgres::Client, senders: usize, seconds: f64, new: bool) -> Run {
    let (wal0, confirms0) = counters(observer).await;
    let answered = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..senders)
        .map(|s| {
            let (app, answered, errors) = (app.clone(), Arc::clone(&answered), Arc::clone(&errors));
            tokio::spawn(async move {
                let mut histogram = hdrhistogram::Histogram::<u64>::new(3).unwrap();
                let mut n = s * 7_919;
                while Instant::now() < until {
                    n = if new { NEXT_NEW.fetch_add(1, Ordering::Relaxed) } else { (n * 31 + 17) % EVENTS };
                    let t = Instant::now();
                    let res = app.clone().oneshot(request(n)).await.unwrap();
                    histogram.record(t.elapsed().as_micros() as u64).unwrap();
                    let replayed = res.headers().contains_key("idempotent-replayed");
                    if res.status() == http::StatusCode::OK && replayed != new {
                        answered.fetch_add(1, Ordering::Relaxed);
                    } else {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                histogram
            })
        })
        .collect();
    let mut histogram = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    for task in tasks {
        histogram.add(task.await.unwrap()).unwrap();
    }
    let seconds = started.elapsed().as_secs_f64();
    let (wal1, confirms1) = counters(observer).await;
    Run {
        answered: answered.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        seconds,
        wal: wal1 - wal0,
        confirms: confirms1 - confirms0,
        histogram: Some(histogram),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: f64 = std::env::var("LOAD_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let senders: Vec<usize> = std::env::var("LOAD_SENDERS")
        .unwrap_or_else(|_| "1,4,16,64".into())
        .split(',')
        .map(|s| s.trim().parse().expect("LOAD_SENDERS: numbers"))
        .collect();

    let primary = TempPostgres::start()?;
    let standby = TempPostgres::standby_of(&primary)?;
    primary.synchronous_standby()?;
    // Durable, both: the harness starts them with fsync off.
    for server in [&standby, &primary] {
        server.stop_server()?;
    }
    primary.start_server_with("-c shared_preload_libraries=pg_stat_statements")?;
    standby.start_server_with("")?;

    let config: tokio_postgres::Config = primary.url("postgres").parse()?;
    let (observer, conn) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    observer
        .batch_execute("CREATE EXTENSION pg_stat_statements; CREATE TABLE effects (id bigserial PRIMARY KEY)")
        .await?;
    let setup = pool(&config, 4);
    webhook_idempotency::migrate(&setup.clone().into()).await?;
    let sync: String = observer.query_one("SELECT sync_state FROM pg_stat_replication", &[]).await?.get(0);
    assert_eq!(sync, "sync", "the standby is synchronous");

    let never = app(pool(&config, 16), SynchronousReplication::Never);
    let detect = app(pool(&config, 16), SynchronousReplication::Detect);
    let first: Vec<_> = futures_util::stream::iter((0..EVENTS).map(|i| never.clone().oneshot(request(i))))
        .buffer_unordered(16)
        .collect()
        .await;
    assert!(first.into_iter().all(|r| r.unwrap().status() == http::StatusCode::OK), "every event processed");
    // Warm both pools (connections, prepared statements).
    measure(&never, &observer, 16, 1.0, false).await;
    measure(&detect, &observer, 16, 1.0, false).await;

    println!(
        "| senders | setting | requests/s | p50 ms | p99 ms | WAL B/req | confirming commits/req | detect vs never | \
         errors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for &n in &senders {
        let (mut a, mut b) = (Run::default(), Run::default());
        for _ in 0..2 {
            a.add(measure(&never, &observer, n, seconds, false).await);
            b.add(measure(&detect, &observer, n, seconds, false).await);
        }
        let c = measure(&never, &observer, n, seconds, true).await;
        let rate = |r: &Run| r.answered as f64 / r.seconds;
        for (name, r) in [("never", &a), ("detect", &b), ("new events", &c)] {
            let h = r.histogram.as_ref().unwrap();
            let ratio = if name == "detect" { format!("{:.2}x", rate(&b) / rate(&a)) } else { String::new() };
            println!(
                "| {n} | {name} | {:.0} | {:.2} | {:.2} | {:.0} | {:.3} | {ratio} | {} |",
                rate(r),
                h.value_at_quantile(0.5) as f64 / 1000.0,
                h.value_at_quantile(0.99) as f64 / 1000.0,
                r.wal as f64 / r.answered.max(1) as f64,
                r.confirms as f64 / r.answered.max(1) as f64,
                r.errors
            );
        }
    }
    Ok(())
}
