//! Quickstart: Stripe and GitHub webhooks, each event applied exactly once.
//!
//! ```text
//! cargo run --example quickstart            # serve on $BIND (default 127.0.0.1:3000)
//! cargo run --example quickstart -- --demo  # serve, send real fixtures, print what happened
//! ```
//!
//! `POST /webhooks/stripe` and `POST /webhooks/github` sit behind
//! `WebhookLayer`; their handler writes one row per event into `demo_effects`
//! through `WebhookTx`. `GET /effects` lists the rows as JSON.
//!
//! `--demo` checks six outcomes and exits non-zero when one differs: first
//! delivery processed, duplicate replayed, 20 concurrent copies applied once,
//! tampered copy rejected, a handler failure rolled back and its retry
//! processed (attempts counted in the table), and a copy sent while the first
//! delivery is still running answered 409. Without `RUST_LOG`, the server's
//! log lines (warn and above) are held and printed after the tables.
//!
//! Database: `DATABASE_URL`, or a throwaway PostgreSQL started here and
//! removed on exit by the tests' harness (`test-support/`; needs the
//! PostgreSQL server binaries; as root it runs the server as the `postgres`
//! user). Secrets: `STRIPE_WEBHOOK_SECRET` and
//! `GITHUB_WEBHOOK_SECRET`, with test defaults.

mod common;
use common::HeldLog;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use clap::Parser;
use deadpool_postgres::Pool;
use serde::Serialize;
use webhook_idempotency::providers::{self, github, stripe, KeyKind, UrlArg};
use webhook_idempotency::{Provider, SigningSecret, WebhookEvent, WebhookLayer, WebhookTx};

// Every preset's test key (`PresetInfo::test_key`), which `webhook-dev send` signs with when given none.
const DEFAULT_STRIPE_SECRET: &str = providers::TEST_SECRET;
const DEFAULT_GITHUB_SECRET: &str = providers::TEST_SECRET;

const STRIPE_FIXTURE: &[u8] = include_bytes!("fixtures/stripe/payment_intent.succeeded.json");
const STRIPE_HEADERS: &str = include_str!("fixtures/stripe/payment_intent.succeeded.headers");
const GITHUB_FIXTURE: &[u8] = include_bytes!("fixtures/github/push.json");
const GITHUB_HEADERS: &str = include_str!("fixtures/github/push.headers");

/// `--demo` events the handler treats specially (by event id suffix).
const FAILS_ONCE: &str = "FailsOnce";
const SLOW: &str = "SlowInFlight";
/// The demo route's wait for an in-flight delivery of the same event.
const DEMO_LOCK_TIMEOUT: Duration = Duration::from_millis(300);

/// Signals between `--demo` and the handler: the slow event's handler says it
/// holds the claim, then waits for the demo to release it.
#[derive(Default)]
struct DemoHooks {
    enabled: bool,
    slow_started: tokio::sync::Notify,
    slow_release: tokio::sync::Notify,
}

/// Serve Stripe and GitHub webhooks exactly once.
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
    /// Send the fixtures (one delivery, a duplicate, 20 concurrent copies, a
    /// tampered copy per provider), print the results and exit.
    #[arg(long)]
    demo: bool,
}

#[derive(Serialize)]
struct Effect {
    provider: String,
    event_key: String,
    event_type: Option<String>,
    effect: String,
}

/// The one business effect per event, written in the claim's transaction.
///
/// With `--demo`: an event whose id ends in `FailsOnce` writes its effect and
/// then fails on its first attempt (the layer rolls the effect back and
/// records the attempt), succeeding on the retry; one ending in
/// `SlowInFlight` holds its claim until the demo releases it.
async fn apply(
    Extension(hooks): Extension<Arc<DemoHooks>>,
    tx: WebhookTx,
    event: WebhookEvent,
) -> Result<StatusCode, StatusCode> {
    // Event types this demo has no specific effect for are still recorded once.
    let effect =
        describe(&event).unwrap_or_else(|| format!("{} (no specific effect)", event.event_type().unwrap_or("event")));
    let client = tx.client().await.map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    client
        .execute(
            "INSERT INTO demo_effects (provider, scope, event_key, event_type, effect) VALUES ($1, $2, $3, $4, $5)",
            &[&event.provider(), &event.scope(), &event.key(), &event.event_type(), &effect],
        )
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "business write failed");
            StatusCode::INTERNAL_SERVER_ERROR
        })?;
    if hooks.enabled && event.key().ends_with(FAILS_ONCE) && event.attempt() == 1 {
        // The effect above is rolled back with the claim.
        return Err(StatusCode::INTERNAL_SERVER_ERROR);
    }
    if hooks.enabled && event.key().ends_with(SLOW) {
        hooks.slow_started.notify_one();
        // Bounded, so a demo that never releases cannot hang the server.
        let _ = tokio::time::timeout(Duration::from_secs(30), hooks.slow_release.notified()).await;
    }
    Ok(StatusCode::OK)
}

fn describe(event: &WebhookEvent) -> Option<String> {
    let v: serde_json::Value = event.json().ok()?;
    Some(match event.provider() {
        "stripe" => {
            let pi = &v["data"]["object"];
            format!(
                "{} {}: {} {}",
                event.event_type()?,
                pi["id"].as_str()?,
                pi["amount_received"].as_i64().or(pi["amount"].as_i64())?,
                pi["currency"].as_str().unwrap_or("?")
            )
        }
        _ => {
            let after = v["after"].as_str().unwrap_or("?");
            format!("{} {} -> {}", event.event_type()?, v["ref"].as_str()?, after.get(..7).unwrap_or(after))
        }
    })
}

async fn effects(State(pool): State<Pool>) -> Result<Json<Vec<Effect>>, StatusCode> {
    let client = pool.get().await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    let rows = client
        .query("SELECT provider, event_key, event_type, effect FROM demo_effects ORDER BY id", &[])
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(Json(
        rows.iter()
            .map(|r| Effect { provider: r.get(0), event_key: r.get(1), event_type: r.get(2), effect: r.get(3) })
            .collect(),
    ))
}

fn app(
    pool: Pool,
    args: &Args,
    addr: SocketAddr,
    hooks: Arc<DemoHooks>,
    prometheus: metrics_exporter_prometheus::PrometheusHandle,
) -> Result<Router, webhook_idempotency::ConfigError> {
    let mut presets = vec![
        (stripe::FACTS.name, Provider::stripe(), args.stripe_secret.clone()),
        (github::FACTS.name, Provider::github(), args.github_secret.clone()),
    ];
    presets.extend(other_presets(addr));
    let mut router = Router::new();
    let mut mounted = Vec::new();
    for (name, provider, secret) in presets {
        let layer = WebhookLayer::builder(pool.clone(), provider).scope("quickstart").secret(secret).build()?;
        router = router.route(&format!("/webhooks/{name}"), post(apply).layer(layer));
        mounted.push(name);
    }
    if args.demo {
        // The same endpoint with a short wait for in-flight deliveries, for the
        // demo's "copy while the first is running" case.
        let layer = WebhookLayer::builder(pool.clone(), Provider::stripe())
            .scope("quickstart")
            .secret(args.stripe_secret.clone())
            .lock_timeout(DEMO_LOCK_TIMEOUT)
            .build()?;
        router = router.route("/webhooks/stripe-short-wait", post(apply).layer(layer));
    }
    println!("presets: POST /webhooks/{{{}}}", mounted.join(","));
    // Prometheus text format on GET /metrics: the exporter is the example's
    // choice; the crate only speaks the `metrics` facade.
    let metrics = get(move || std::future::ready(prometheus.render()));
    Ok(router.route("/effects", get(effects)).route("/metrics", metrics).layer(Extension(hooks)).with_state(pool))
}

/// The secret for preset `name`: `$NAME_WEBHOOK_SECRET`, else a test default.
fn secret_for(name: &str, default: &str) -> String {
    let var = format!("{}_WEBHOOK_SECRET", name.to_uppercase().replace('-', "_"));
    std::env::var(&var).unwrap_or_else(|_| default.to_owned())
}

/// The public key that verifies deliveries signed with `preset`'s test
/// private key (Discord, SendGrid), as text.
fn test_public_key(preset: &providers::PresetInfo) -> Option<String> {
    let signing = providers::Signing::new("http://localhost/", "", std::time::SystemTime::now(), b"{}");
    let signed = preset.sign(preset.test_key()?, &signing).ok()?;
    signed.secrets.first().map(|s| String::from_utf8_lossy(s.expose()).into_owned())
}

/// The optional presets compiled in (`cargo run --all-features --example
/// quickstart` serves all of them), from the registry, each on
/// `/webhooks/<name>` with `$NAME_WEBHOOK_SECRET` or the preset's test key
/// (`webhook-dev send <name>` signs with it when given no key). Presets that
/// verify with public keys (Discord, SendGrid) take `$NAME_PUBLIC_KEY`, else
/// the public key of their test private key.
fn other_presets(addr: SocketAddr) -> Vec<(&'static str, Provider, String)> {
    let base = format!("http://{addr}");
    let mut v: Vec<(&'static str, Provider, String)> = Vec::new();
    for preset in providers::all() {
        if [stripe::FACTS.name, github::FACTS.name].contains(&preset.name) {
            continue; // served with their own flags
        }
        let url = match preset.url {
            UrlArg::NotificationUrl => Some(format!("{base}/webhooks/{}", preset.name)),
            UrlArg::None => None,
            _ => Some(base.clone()),
        };
        let Ok(provider) = preset.provider(url.as_deref()) else { continue };
        let key = match (preset.key, preset.test_key()) {
            (KeyKind::PublicKey, _) => {
                let var = format!("{}_PUBLIC_KEY", preset.name.to_uppercase().replace('-', "_"));
                match std::env::var(&var).ok().or_else(|| test_public_key(preset)) {
                    Some(key) => key,
                    None => continue,
                }
            }
            (KeyKind::ShippedRoot, _) => {
                // The registry's App Store provider accepts no app: a receiver names its own.
                println!(
                    "{} not served: name your app, Provider::apple_app_store(AppleAppStore::production(bundle_id, app_apple_id))",
                    preset.name
                );
                continue;
            }
            (_, None) => {
                // The registry's SNS provider accepts any topic (for offline checks): a receiver names its own.
                println!("{} not served: name your topics, Provider::aws_sns(AwsSns::new([topic_arn]))", preset.name);
                continue;
            }
            (_, Some(test)) => secret_for(preset.name, test),
        };
        v.push((preset.name, provider, key));
    }
    if !v.is_empty() {
        println!("other presets: $<PRESET>_WEBHOOK_SECRET, else the preset's test key (PresetInfo::test_key: {} for most; Discord and SendGrid: $<PRESET>_PUBLIC_KEY, else the public key of the test private key), which `webhook-dev send <preset>` signs with when given none", providers::TEST_SECRET);
    }
    v
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // The demo prints its own tables: without RUST_LOG, the server's log lines
    // (warn and above) are held and printed after them, not in between.
    let held = HeldLog::default();
    let env_filter = tracing_subscriber::EnvFilter::try_from_default_env();
    let hold = args.demo && env_filter.is_err();
    let filter = env_filter.unwrap_or_else(|_| (if args.demo { "warn" } else { "info" }).into());
    if hold {
        tracing_subscriber::fmt().with_writer(held.clone()).with_ansi(false).with_env_filter(filter).init();
    } else {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_env_filter(filter)
            .init();
    }

    // The throwaway server lives until the end of main, then is stopped and removed.
    let (pool, _url, _throwaway) =
        common::database(args.database_url.as_deref(), 32).await.map_err(|e| -> Box<dyn std::error::Error> { e })?;
    pool.get()
        .await?
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS demo_effects (
                 id bigserial, provider text NOT NULL, scope text NOT NULL, event_key text NOT NULL,
                 event_type text, effect text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
                 PRIMARY KEY (scope, id))",
        )
        .await?;
    // On Citus, the effects sit on their claim's shard and commit with it;
    // on one PostgreSQL this does nothing.
    webhook_idempotency::store::colocate(&pool.clone().into(), "demo_effects", "scope").await?;

    if args.stripe_secret == DEFAULT_STRIPE_SECRET {
        println!("STRIPE_WEBHOOK_SECRET unset: using the test secret {DEFAULT_STRIPE_SECRET}");
    }
    if args.github_secret == DEFAULT_GITHUB_SECRET {
        println!("GITHUB_WEBHOOK_SECRET unset: using the test secret {DEFAULT_GITHUB_SECRET}");
    }

    let bind = args.bind.unwrap_or_else(|| if args.demo { "127.0.0.1:0" } else { "127.0.0.1:3000" }.parse().unwrap());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let hooks = Arc::new(DemoHooks { enabled: args.demo, ..DemoHooks::default() });
    // Buckets, so the durations are Prometheus histograms (aggregatable
    // across instances) rather than per-process summaries.
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
            &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0],
        )?
        .install_recorder()?;
    // The recorder drains its histograms only at a scrape or an upkeep: without
    // scrapes its memory would grow with every request.
    let upkeep = {
        let prometheus = prometheus.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                every.tick().await;
                prometheus.run_upkeep();
            }
        })
    };
    let router = app(pool.clone(), &args, addr, Arc::clone(&hooks), prometheus)?;
    println!("listening on http://{addr}: POST /webhooks/<preset>, GET /effects, GET /metrics");
    if !args.demo && args.stripe_secret == DEFAULT_STRIPE_SECRET {
        try_it(addr)?;
    }
    // The state gauges (rows by state, oldest pending age), every 10 s.
    let sampler = webhook_idempotency::store::admin::Admin::new(pool.clone())?
        .spawn_gauge_sampler(std::time::Duration::from_secs(10), std::future::pending());
    // Stops the server: Ctrl-C or SIGTERM, or the end of the demo.
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::clone(&stop);
    // Header-read and idle timeouts, a connection limit and graceful shutdown,
    // which `axum::serve` does not set (examples/common/mod.rs; README,
    // "Serving in production").
    let server = tokio::spawn(common::server::serve(listener, router, async move {
        tokio::select! {
            _ = stopped.notified() => {}
            () = common::terminated() => {}
        }
    }));

    let outcome = if args.demo { demo(addr, &args, &pool, &hooks).await } else { Ok(()) };
    if args.demo {
        stop.notify_one();
    }
    server.await??;
    sampler.abort();
    upkeep.abort();
    if hold {
        let lines = held.take();
        if !lines.is_empty() {
            eprintln!("\nserver log during the demo (warn and above; RUST_LOG=info shows all, live):");
            eprint!("{lines}");
        }
    }
    if _throwaway.is_some() {
        println!("stopped; the throwaway PostgreSQL is being removed");
    }
    outcome
}

// ---- --demo: sign the fixtures as the providers do and send them ----

struct Delivery {
    provider: &'static str,
    what: String,
    status: u16,
    replayed: bool,
    /// The answer the demo expects; a row where it differs fails the demo.
    expected: bool,
}

fn headers_of(fixture: &str) -> Vec<(String, String)> {
    fixture
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .filter(|(k, _)| !k.eq_ignore_ascii_case("content-length"))
        .collect()
}

async fn deliver(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: Bytes,
) -> Result<(u16, bool), reqwest::Error> {
    let mut req = client.post(url).body(body);
    for (k, v) in headers {
        req = req.header(k, v);
    }
    let res = req.send().await?;
    Ok((res.status().as_u16(), res.headers().get("idempotent-replayed").is_some()))
}

/// Prints a Stripe delivery signed now with the test secret, ready to send
/// with curl (the signature's timestamp passes for 5 minutes; sent twice, the
/// second is a duplicate; with the body changed, a 401). Only for the test
/// secret: a signature made with a real one does not belong in a log.
fn try_it(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let body = format!(r#"{{"id":"evt_try_{now}","type":"payment_intent.succeeded"}}"#);
    let signature = stripe::FACTS.sign(&SigningSecret::from(DEFAULT_STRIPE_SECRET), now, body.as_bytes());
    println!("try it (send it twice for the duplicate; change the body for a 401; valid for 5 minutes):");
    println!(
        "  curl -i http://{addr}/webhooks/stripe -H 'content-type: application/json' \\\n    -H 'stripe-signature: {signature}' -d '{body}'"
    );
    Ok(())
}

/// One event as its provider would send it: body and signed headers.
struct Signed {
    provider: &'static str,
    headers: Vec<(String, String)>,
    body: Bytes,
}

fn stripe_delivery(secret: &str, body: Bytes, now: u64) -> Signed {
    let mut headers = headers_of(STRIPE_HEADERS);
    headers.push(("Stripe-Signature".into(), stripe::FACTS.sign(&SigningSecret::from(secret), now, &body)));
    Signed { provider: "stripe", headers, body }
}

fn github_delivery(secret: &str, body: Bytes, delivery_id: &str) -> Signed {
    let mut headers: Vec<_> =
        headers_of(GITHUB_HEADERS).into_iter().filter(|(k, _)| !k.eq_ignore_ascii_case("x-github-delivery")).collect();
    headers.push(("X-GitHub-Delivery".into(), delivery_id.into()));
    headers.push(("X-Hub-Signature-256".into(), github::FACTS.sign(&SigningSecret::from(secret), 0, &body)));
    Signed { provider: "github", headers, body }
}

/// The Stripe fixture under another event id, signed anew.
fn stripe_with_id(secret: &str, id: &str, now: u64) -> Result<Signed, Box<dyn std::error::Error>> {
    let body = String::from_utf8(STRIPE_FIXTURE.to_vec())?.replacen(
        "\"id\": \"evt_3MtweELkdIwHu7ix0mYVGtRj\"",
        &format!("\"id\": \"{id}\""),
        1,
    );
    Ok(stripe_delivery(secret, Bytes::from(body), now))
}

async fn demo(addr: SocketAddr, args: &Args, pool: &Pool, hooks: &DemoHooks) -> Result<(), Box<dyn std::error::Error>> {
    let client = reqwest::Client::new();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let stripe_fixture = Bytes::from_static(STRIPE_FIXTURE);
    let github_fixture = Bytes::from_static(GITHUB_FIXTURE);
    let fixture_delivery_id = headers_of(GITHUB_HEADERS)
        .into_iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-github-delivery"))
        .map(|(_, v)| v)
        .ok_or("push.headers has no X-GitHub-Delivery")?;
    // A second event per provider for the concurrent burst: the fixture under
    // another event id (Stripe) or delivery GUID (GitHub), signed anew.
    let plans = [
        (
            stripe_delivery(&args.stripe_secret, stripe_fixture.clone(), now),
            stripe_with_id(&args.stripe_secret, "evt_3MtweELkdIwHu7ix0BurstDemo", now)?,
            Bytes::from(String::from_utf8(STRIPE_FIXTURE.to_vec())?.replacen("2000", "9000", 1)),
        ),
        (
            github_delivery(&args.github_secret, github_fixture.clone(), &fixture_delivery_id),
            github_delivery(&args.github_secret, github_fixture, "9a8f5a40-6b6e-11f1-8e6b-0b3c4d5e6f70"),
            Bytes::from(String::from_utf8(GITHUB_FIXTURE.to_vec())?.replacen("master", "mister", 1)),
        ),
    ];

    let mut log = Vec::new();
    let mut attempts_note = String::new();
    for (first, second, tampered_body) in plans {
        let provider = first.provider;
        let url = format!("http://{addr}/webhooks/{provider}");
        // 1. first delivery, 2. duplicate.
        for (what, want_replayed) in [("first delivery", false), ("duplicate", true)] {
            let (status, replayed) = deliver(&client, &url, &first.headers, first.body.clone()).await?;
            let expected = status == 200 && replayed == want_replayed;
            log.push(Delivery { provider, what: what.into(), status, replayed, expected });
        }
        // 3. 20 concurrent copies of a new event: one processed; the others
        // replayed (or 409 if the first ran past the lock wait).
        let burst: Vec<_> = (0..20)
            .map(|_| {
                let (client, url, headers, body) =
                    (client.clone(), url.clone(), second.headers.clone(), second.body.clone());
                tokio::spawn(async move { deliver(&client, &url, &headers, body).await })
            })
            .collect();
        let mut counts: BTreeMap<(u16, bool), usize> = BTreeMap::new();
        for t in burst {
            *counts.entry(t.await??).or_default() += 1;
        }
        let processed = counts.get(&(200, false)).copied().unwrap_or(0);
        for ((status, replayed), n) in counts {
            let expected = processed == 1 && matches!((status, replayed), (200, _) | (409, _));
            let what = format!("new event, 20 at once: x{n}");
            log.push(Delivery { provider, what, status, replayed, expected });
        }
        // 4. The first event's signature over a body with one byte changed.
        let (status, replayed) = deliver(&client, &url, &first.headers, tampered_body).await?;
        log.push(Delivery { provider, what: "tampered copy".into(), status, replayed, expected: status == 401 });
        if provider != "stripe" {
            continue;
        }

        // 5. The handler fails on the first attempt: rolled back, attempt
        // recorded; the sender's retry is processed.
        let failing = stripe_with_id(&args.stripe_secret, &format!("evt_3MtweELkdIwHu7ix0{FAILS_ONCE}"), now)?;
        for (what, want) in [("handler fails (attempt 1)", 500), ("retry (attempt 2)", 200)] {
            let (status, replayed) = deliver(&client, &url, &failing.headers, failing.body.clone()).await?;
            let expected = status == want && !replayed;
            log.push(Delivery { provider, what: what.into(), status, replayed, expected });
        }
        let row = pool
            .get()
            .await?
            .query_one(
                "SELECT state, attempts FROM webhook_idempotency.webhook_events
                 WHERE provider = 'stripe' AND scope = 'quickstart' AND event_key = $1",
                &[&format!("evt_3MtweELkdIwHu7ix0{FAILS_ONCE}")],
            )
            .await?;
        let (state, attempts): (String, i32) = (row.get(0), row.get(1));
        let recorded = state == "done" && attempts == 2;
        attempts_note = format!("failed-then-retried event: state {state}, attempts {attempts} (expected done, 2)");
        log.push(Delivery {
            provider,
            what: format!("  table: {state}, attempts {attempts}"),
            status: 0,
            replayed: false,
            expected: recorded,
        });

        // 6. A copy while the first delivery is still running: the route
        // waits DEMO_LOCK_TIMEOUT for it, then answers 409 + Retry-After.
        let slow = stripe_with_id(&args.stripe_secret, &format!("evt_3MtweELkdIwHu7ix0{SLOW}"), now)?;
        let short_wait = format!("http://{addr}/webhooks/stripe-short-wait");
        let original = {
            let (client, url, headers, body) =
                (client.clone(), short_wait.clone(), slow.headers.clone(), slow.body.clone());
            tokio::spawn(async move { deliver(&client, &url, &headers, body).await })
        };
        // The handler holds the claim from here until released.
        tokio::time::timeout(Duration::from_secs(30), hooks.slow_started.notified())
            .await
            .map_err(|_| "the slow delivery's handler never started")?;
        let copy = client.post(&short_wait).body(slow.body.clone());
        let copy = slow.headers.iter().fold(copy, |req, (k, v)| req.header(k, v)).send().await?;
        let retry_after = copy.headers().get("retry-after").is_some();
        let (status, replayed) = (copy.status().as_u16(), copy.headers().get("idempotent-replayed").is_some());
        hooks.slow_release.notify_one();
        log.push(Delivery {
            provider,
            what: "copy while the first runs".into(),
            status,
            replayed,
            expected: status == 409 && retry_after,
        });
        let (status, replayed) = original.await??;
        log.push(Delivery {
            provider,
            what: "  ... the first, released".into(),
            status,
            replayed,
            expected: status == 200 && !replayed,
        });
    }

    println!();
    println!("{:<8} {:<30} {:>6}  answer", "provider", "delivery", "status");
    for d in &log {
        let answer = match (d.status, d.replayed) {
            (0, _) => "attempts recorded in webhook_idempotency.webhook_events",
            (200, false) => "processed",
            (200, true) => "duplicate, replayed",
            (409, _) => "in flight, retry later",
            (401, _) => "rejected: bad signature",
            (500, _) => "handler failed: rolled back, attempt recorded",
            _ => "unexpected",
        };
        let status = if d.status == 0 { String::new() } else { d.status.to_string() };
        let mark = if d.expected { "" } else { "   <-- NOT AS EXPECTED" };
        println!("{:<8} {:<30} {:>6}  {answer}{mark}", d.provider, d.what, status);
    }

    let effects: Vec<serde_json::Value> = client.get(format!("http://{addr}/effects")).send().await?.json().await?;
    let mut per_event: BTreeMap<(String, String), (usize, String)> = BTreeMap::new();
    for e in &effects {
        let key = (e["provider"].as_str().unwrap_or("").to_owned(), e["event_key"].as_str().unwrap_or("").to_owned());
        let entry = per_event.entry(key).or_insert((0, e["effect"].as_str().unwrap_or("").to_owned()));
        entry.0 += 1;
    }
    println!();
    println!("{:<8} {:<38} {:>7}  effect", "provider", "event", "effects");
    for ((provider, key), (n, text)) in &per_event {
        println!("{provider:<8} {key:<38} {n:>7}  {text}");
    }
    println!();
    // Per provider: first, duplicate, 20 at once, tampered; Stripe: 2 + 2 more.
    let deliveries = 2 * (1 + 1 + 20 + 1) + 4;
    let one_each = per_event.len() == 6 && per_event.values().all(|(n, _)| *n == 1);
    let unexpected: Vec<_> = log.iter().filter(|d| !d.expected).map(|d| format!("{} {}", d.provider, d.what)).collect();
    if one_each && unexpected.is_empty() {
        println!(
            "OK: {deliveries} deliveries of 6 events (2 tampered copies), every answer as expected, \
             exactly one effect per event; {attempts_note}"
        );
        Ok(())
    } else if !unexpected.is_empty() {
        Err(format!("answers not as expected: {}", unexpected.join("; ")).into())
    } else {
        Err(format!("expected exactly one effect for each of 6 events, got {per_event:?}").into())
    }
}
