//! The quickstart on sqlx: the store on an `sqlx::PgPool`, the handler
//! writing with `sqlx::query!` inside the claim's transaction.
//!
//! ```text
//! cargo run --features sqlx --example sqlx -- --demo  # serve, send real fixtures, check, exit
//! cargo run --features sqlx --example sqlx            # serve on $BIND (default 127.0.0.1:3000)
//! ```
//!
//! The same contract as `examples/quickstart.rs`: `DATABASE_URL`, or a
//! throwaway PostgreSQL started here (removed on exit); `BIND`;
//! `STRIPE_WEBHOOK_SECRET` and `GITHUB_WEBHOOK_SECRET` (test secrets when
//! unset); `GET /effects` lists the effects. Its `--demo` sends each
//! provider's fixture, a duplicate, 20 concurrent copies of a new event, a
//! tampered copy, and (Stripe) an event whose handler fails once, then
//! checks one effect per event and exits non-zero when an answer or a
//! count differs.
//!
//! `sqlx::query!` checks its SQL at compile time against the query data
//! committed under `.sqlx/` (`SQLX_OFFLINE=true` in `.cargo/config.toml`:
//! no database is needed to build). After changing a query, regenerate it
//! against a database holding the table below: `SQLX_OFFLINE=false
//! DATABASE_URL=... SQLX_OFFLINE_DIR=$PWD/.sqlx cargo build --features sqlx
//! --example sqlx` (or `cargo sqlx prepare`).

#[allow(dead_code)] // the sqlx example uses `database`, `terminated` and `server` of it
mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use clap::Parser;
use serde::Serialize;
use webhook_idempotency::providers::{github, stripe};
use webhook_idempotency::sqlx::sqlx::{self, PgPool};
use webhook_idempotency::{Provider, SigningSecret, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};

const DEFAULT_STRIPE_SECRET: &str = "whsec_sqlx_example_test_secret";
const DEFAULT_GITHUB_SECRET: &str = "sqlx-example-github-test-secret";
const SCOPE: &str = "sqlx-example";
const STRIPE_FIXTURE: &str = include_str!("fixtures/stripe/payment_intent.succeeded.json");
const GITHUB_FIXTURE: &[u8] = include_bytes!("fixtures/github/push.json");
/// The demo's event whose handler fails on its first attempt.
const FAILS_ONCE: &str = "evt_sqlx_FailsOnce";

/// Serve Stripe and GitHub webhooks exactly once, on sqlx.
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
    /// GitHub webhook secret.
    #[arg(long, env = "GITHUB_WEBHOOK_SECRET", default_value = DEFAULT_GITHUB_SECRET, hide_default_value = true)]
    github_secret: String,
    /// Send the fixtures, print what happened and exit.
    #[arg(long)]
    demo: bool,
}

#[derive(Serialize)]
struct Effect {
    provider: String,
    event_key: String,
    event_type: Option<String>,
}

/// The one business effect per event, written with `sqlx::query!` in the
/// claim's transaction (`&mut db` is an `sqlx::Executor`).
async fn apply(tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    let Ok(mut db) = tx.sqlx().await else { return StatusCode::INTERNAL_SERVER_ERROR };
    let written = sqlx::query!(
        "INSERT INTO sqlx_effects (scope, provider, event_key, event_type) VALUES ($1, $2, $3, $4)",
        event.scope(),
        event.provider(),
        event.key(),
        event.event_type(),
    )
    .execute(&mut db)
    .await;
    if let Err(e) = written {
        tracing::error!(error = %e, "business write failed");
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    if event.key() == FAILS_ONCE && event.attempt() == 1 {
        return StatusCode::INTERNAL_SERVER_ERROR; // the write above rolls back with the claim
    }
    StatusCode::OK
}

async fn effects(State(pool): State<PgPool>) -> Result<Json<Vec<Effect>>, StatusCode> {
    let rows = sqlx::query_as!(Effect, "SELECT provider, event_key, event_type FROM sqlx_effects ORDER BY id")
        .fetch_all(&pool)
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(Json(rows))
}

fn app(pool: PgPool, args: &Args) -> Result<Router, webhook_idempotency::ConfigError> {
    let store = StoreConfig::from_sqlx(pool.clone());
    let stripe_layer = WebhookLayer::builder(store.clone(), Provider::stripe())
        .scope(SCOPE)
        .secret(args.stripe_secret.as_str())
        .build()?;
    let github_layer =
        WebhookLayer::builder(store, Provider::github()).scope(SCOPE).secret(args.github_secret.as_str()).build()?;
    Ok(Router::new()
        .route("/webhooks/stripe", post(apply).layer(stripe_layer))
        .route("/webhooks/github", post(apply).layer(github_layer))
        .route("/effects", get(effects))
        .with_state(pool))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| (if args.demo { "error" } else { "info" }).into()),
        )
        .init();
    // The throwaway server lives until the end of main; migrated there.
    let (_deadpool, url, _throwaway) =
        common::database(args.database_url.as_deref(), 2).await.map_err(|e| -> Box<dyn std::error::Error> { e })?;
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(32).connect(&url).await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS sqlx_effects (
             id bigserial, scope text NOT NULL, provider text NOT NULL, event_key text NOT NULL, event_type text,
             applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (scope, id))",
    )
    .execute(&pool)
    .await?;
    // On Citus, the effects sit on their claim's shard; elsewhere nothing.
    webhook_idempotency::store::colocate(&StoreConfig::from_sqlx(pool.clone()), "sqlx_effects", "scope").await?;

    let bind = args.bind.unwrap_or_else(|| if args.demo { "127.0.0.1:0" } else { "127.0.0.1:3000" }.parse().unwrap());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}: POST /webhooks/stripe, POST /webhooks/github, GET /effects");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(common::server::serve(listener, app(pool.clone(), &args)?, async move {
        tokio::select! {
            () = common::terminated() => {}
            _ = stopped => {}
        }
    }));
    let outcome = if args.demo { demo(addr, &args, &pool).await } else { Ok(()) };
    let _ = stop.send(());
    server.await??;
    outcome
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The Stripe fixture under event id `id`, signed now.
fn stripe_delivery(secret: &str, id: &str) -> (Vec<(&'static str, String)>, Bytes) {
    let body = Bytes::from(STRIPE_FIXTURE.replacen(
        "\"id\": \"evt_3MtweELkdIwHu7ix0mYVGtRj\"",
        &format!("\"id\": \"{id}\""),
        1,
    ));
    let signature = stripe::FACTS.sign(&SigningSecret::from(secret), now(), &body);
    (vec![("content-type", "application/json".into()), ("stripe-signature", signature)], body)
}

/// The GitHub fixture as delivery `guid`, signed.
fn github_delivery(secret: &str, guid: &str) -> (Vec<(&'static str, String)>, Bytes) {
    let body = Bytes::from_static(GITHUB_FIXTURE);
    let signature = github::FACTS.sign(&SigningSecret::from(secret), 0, &body);
    let headers = vec![
        ("content-type", "application/json".into()),
        ("x-github-event", "push".into()),
        ("x-github-delivery", guid.into()),
        ("x-hub-signature-256", signature),
    ];
    (headers, body)
}

async fn send(
    http: &reqwest::Client,
    url: &str,
    (headers, body): &(Vec<(&'static str, String)>, Bytes),
) -> Result<u16, reqwest::Error> {
    let mut request = http.post(url).body(body.clone());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    Ok(request.send().await?.status().as_u16())
}

async fn demo(addr: SocketAddr, args: &Args, pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
    let http = reqwest::Client::new();
    let mut wrong = Vec::new();
    let mut check = |what: &str, got: u16, want: &[u16]| {
        let ok = want.contains(&got);
        println!("{what:<45} {got}  {}", if ok { "ok" } else { "UNEXPECTED" });
        if !ok {
            wrong.push(what.to_owned());
        }
    };
    for provider in ["stripe", "github"] {
        let url = format!("http://{addr}/webhooks/{provider}");
        let (first, burst) = match provider {
            "stripe" => (
                stripe_delivery(&args.stripe_secret, "evt_sqlx_first"),
                stripe_delivery(&args.stripe_secret, "evt_sqlx_burst"),
            ),
            _ => (
                github_delivery(&args.github_secret, "5b0e1a40-0000-4000-8000-00000000aaaa"),
                github_delivery(&args.github_secret, "5b0e1a40-0000-4000-8000-00000000bbbb"),
            ),
        };
        check(&format!("{provider}: first delivery"), send(&http, &url, &first).await?, &[200]);
        check(&format!("{provider}: duplicate"), send(&http, &url, &first).await?, &[200]);
        let copies: Vec<_> = (0..20)
            .map(|_| {
                let (http, url, burst) = (http.clone(), url.clone(), burst.clone());
                tokio::spawn(async move { send(&http, &url, &burst).await })
            })
            .collect();
        let mut answers = BTreeMap::new();
        for copy in copies {
            *answers.entry(copy.await??).or_insert(0) += 1;
        }
        for (status, n) in answers {
            check(&format!("{provider}: new event, 20 at once: x{n}"), status, &[200, 409]);
        }
        let tampered = (first.0.clone(), Bytes::from([&first.1[..], b" "].concat()));
        check(&format!("{provider}: tampered copy"), send(&http, &url, &tampered).await?, &[401]);
    }
    let failing = stripe_delivery(&args.stripe_secret, FAILS_ONCE);
    let url = format!("http://{addr}/webhooks/stripe");
    check("stripe: handler fails (attempt 1)", send(&http, &url, &failing).await?, &[500]);
    check("stripe: retry (attempt 2)", send(&http, &url, &failing).await?, &[200]);

    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT event_key, count(*) FROM sqlx_effects WHERE scope = $1 GROUP BY 1 ORDER BY 1")
            .bind(SCOPE)
            .fetch_all(pool)
            .await?;
    println!("\nevent                                    effects");
    for (key, n) in &counts {
        println!("{key:<40} {n}");
    }
    let once = counts.len() == 5 && counts.iter().all(|(_, n)| *n == 1);
    if !wrong.is_empty() || !once {
        return Err(format!(
            "sqlx demo: unexpected answers {wrong:?} or effects {counts:?} (5 events, one effect each)"
        )
        .into());
    }
    println!("\nOK: every answer as expected, exactly one effect per event (5 events), written with sqlx::query!");
    Ok(())
}
