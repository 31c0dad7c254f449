//! The cost of `transaction_pooler(true)` against the default mode, on the
//! same PostgreSQL in the same run.
//!
//! ```text
//! cargo run --release --example pooler_cost                  # 2000 deliveries, 16 senders
//! cargo run --release --example pooler_cost -- --deliveries 5000 --senders 32 --rounds 3
//! ```
//!
//! Each round sends `--deliveries` new Stripe events (signed, in process,
//! no HTTP) through the layer with `--senders` concurrent senders, once per
//! mode, the modes' order alternating between rounds; the handler writes
//! one row through `WebhookTx`. It prints deliveries per second for each
//! mode and round, and the ratio of their medians. Both modes connect
//! straight to PostgreSQL (no pooler between): this measures what the mode
//! itself costs (each statement parsed and planned on every use instead of
//! once per connection), not a pooler's hop.
//!
//! Database: `DATABASE_URL` (a fresh database is created there and dropped
//! at the end), or a throwaway PostgreSQL started here (the tests' harness,
//! `test-support/`). Compare ratios within one run, never absolute figures
//! across runs or machines.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::http::{Request, StatusCode};
use axum::routing::post;
use axum::Router;
use clap::Parser;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tower::ServiceExt;
use webhook_idempotency::providers::stripe;
use webhook_idempotency::{Provider, SigningSecret, WebhookEvent, WebhookLayer, WebhookTx};

const SECRET: &str = "whsec_pooler_cost_secret";

/// Command-line options.
#[derive(Parser)]
struct Args {
    /// New events sent per mode and round.
    #[arg(long, default_value_t = 2000)]
    deliveries: usize,
    /// Concurrent senders (and the app pool's size).
    #[arg(long, default_value_t = 16)]
    senders: usize,
    /// Rounds; each measures both modes.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

async fn handler(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    let Ok(client) = tx.client().await else { return StatusCode::INTERNAL_SERVER_ERROR };
    match client.execute("INSERT INTO cost_effects (event_key) VALUES ($1)", &[&event.key()]).await {
        Ok(_) => StatusCode::OK,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Deliveries per second of `n` new events through `app` with `senders` tasks.
async fn run(app: Router, prefix: &str, n: usize, senders: usize) -> Result<f64, String> {
    let next = Arc::new(AtomicUsize::new(0));
    let ts = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_err(|e| e.to_string())?.as_secs();
    let started = Instant::now();
    let tasks: Vec<_> = (0..senders)
        .map(|_| {
            let (app, next, prefix) = (app.clone(), next.clone(), prefix.to_owned());
            tokio::spawn(async move {
                let secret = SigningSecret::from(SECRET);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok(());
                    }
                    let body = format!("{{\"id\":\"evt_{prefix}_{i}\",\"type\":\"invoice.paid\"}}");
                    let req = Request::post("/webhooks/stripe")
                        .header("stripe-signature", stripe::FACTS.sign(&secret, ts, body.as_bytes()))
                        .body(axum::body::Body::from(body))
                        .map_err(|e| e.to_string())?;
                    let status = app.clone().oneshot(req).await.map_err(|e| e.to_string())?.status();
                    if status != StatusCode::OK {
                        return Err(format!("evt_{prefix}_{i}: {status}"));
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(n as f64 / started.elapsed().as_secs_f64())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let mut _server = None;
    let admin: tokio_postgres::Config = match std::env::var("DATABASE_URL") {
        Ok(url) => url.parse()?,
        Err(_) => {
            let server = webhook_test_support::TempPostgres::start()?;
            let url = server.url("postgres");
            _server = Some(server);
            url.parse()?
        }
    };
    let (client, conn) = admin.connect(NoTls).await?;
    tokio::spawn(conn);
    let dbname = format!("pooler_cost_{}", std::process::id());
    client.batch_execute(&format!("CREATE DATABASE {dbname}")).await?;
    let mut config = admin.clone();
    config.dbname(&dbname);
    let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    let pool = Pool::builder(manager).max_size(args.senders).build()?;
    webhook_idempotency::migrate(&pool.clone().into()).await?;
    pool.get()
        .await?
        .batch_execute("CREATE TABLE cost_effects (id bigserial PRIMARY KEY, event_key text NOT NULL)")
        .await?;

    let app = |pooler: bool| {
        let store = webhook_idempotency::StoreConfig::new(pool.clone()).transaction_pooler(pooler);
        let layer = WebhookLayer::builder(store, Provider::stripe()).scope("acct_cost").secret(SECRET).build()?;
        Ok::<_, Box<dyn std::error::Error>>(Router::new().route("/webhooks/stripe", post(handler).layer(layer)))
    };
    // Warm the pool's connections (and the default mode's statement cache).
    run(app(false)?, "warm", args.senders * 4, args.senders).await?;

    println!("{} deliveries of new events per mode and round, {} senders", args.deliveries, args.senders);
    let (mut default_rates, mut pooler_rates) = (Vec::new(), Vec::new());
    for round in 0..args.rounds {
        let order = if round % 2 == 0 { [false, true] } else { [true, false] };
        for pooler in order {
            let rate = run(app(pooler)?, &format!("r{round}_{pooler}"), args.deliveries, args.senders).await?;
            let mode = if pooler { "transaction_pooler(true)" } else { "default" };
            println!("round {round}: {mode:<25} {rate:>8.0} deliveries/s");
            if pooler { &mut pooler_rates } else { &mut default_rates }.push(rate);
        }
    }
    let (d, p) = (median(&mut default_rates), median(&mut pooler_rates));
    println!("median: default {d:.0}/s, transaction_pooler(true) {p:.0}/s, ratio {:.2}", p / d);
    drop(pool);
    client.batch_execute(&format!("DROP DATABASE {dbname} WITH (FORCE)")).await?;
    Ok(())
}
