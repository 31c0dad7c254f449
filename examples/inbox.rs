//! Inbox mode: a Slack Events API endpoint that answers in milliseconds and
//! applies each event exactly once, shortly after, in a worker.
//!
//! ```text
//! cargo run --features slack --example inbox             # serve on $BIND (default 127.0.0.1:3000)
//! cargo run --features slack --example inbox -- --demo   # serve, send signed deliveries, print what happened
//! ```
//!
//! `POST /webhooks/slack` sits behind `WebhookLayer` in `Mode::Inbox`: a
//! verified delivery is stored as a `pending` row and answered `200` as soon
//! as that insert committed. An `InboxWorker` in the same process (woken by
//! `LISTEN`, polling as a fallback) runs the handler, which writes one row
//! per event into `demo_effects` through `WebhookTx` and then "works" for
//! `--work-ms` (300 ms): the effect and the row's `done` commit together.
//! `GET /effects` lists the rows as JSON.
//!
//! Several processes can share one database (`DATABASE_URL`; a throwaway
//! server prints its URL): each runs `--workers` handlers at once, and any of
//! them can be killed mid-handler. Its uncommitted effect rolls back with its
//! connection, and another process runs the event again once the lease
//! (`--lease`, seconds) has expired. Ctrl-C stops leasing, lets work in hand
//! finish (up to 10 s) and hands the rest back.
//!
//! `--demo` checks each outcome and exits non-zero when one differs: the
//! `url_verification` handshake answered inline; deliveries acknowledged
//! faster than the handler runs; a duplicate and a Slack retry of an event
//! still pending or running answered `200` + `Idempotent-Replayed`; a
//! tampered copy refused; an event whose handler fails once done on its
//! second attempt; then, once the worker has processed everything, exactly
//! one effect per event. Without `RUST_LOG`, the server's log lines (warn
//! and above) are held and printed after the tables.
//!
//! Database: `DATABASE_URL`, or a throwaway PostgreSQL started here and
//! removed on exit by the tests' harness (`test-support/`; needs the
//! PostgreSQL server binaries; as root it runs the server as the `postgres`
//! user). Secret: `SLACK_WEBHOOK_SECRET`, with a test default.

mod common;
use common::HeldLog;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use clap::Parser;
use deadpool_postgres::Pool;
use serde::Serialize;
use serde_json::json;
use tokio::sync::watch;
use tokio_postgres::NoTls;
use webhook_idempotency::inbox::InboxWorker;
use webhook_idempotency::providers::slack;
use webhook_idempotency::store::admin::{Admin, Filter};
use webhook_idempotency::{Mode, Provider, SigningSecret, StoreConfig, WebhookEvent, WebhookLayer, WebhookTx};

/// Any error, sendable between tasks.
type Error = Box<dyn std::error::Error + Send + Sync>;

const DEFAULT_SLACK_SECRET: &str = "inbox-example-slack-test-secret";
/// The claim's scope: one Slack app (a multi-workspace app would resolve the
/// body's `team_id` instead).
const SCOPE: &str = "slack-app";
/// An event whose id ends with this fails on its first attempt (any process).
const FAILS_ONCE: &str = "FailsOnce";

/// Serve Slack's Events API in inbox mode.
#[derive(Parser, Debug)]
struct Args {
    /// Address to listen on (with --demo and no BIND: a free port).
    #[arg(long, env = "BIND")]
    bind: Option<SocketAddr>,
    /// PostgreSQL URL; unset: a throwaway local server.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// Slack app signing secret.
    #[arg(long, env = "SLACK_WEBHOOK_SECRET", default_value = DEFAULT_SLACK_SECRET, hide_default_value = true)]
    slack_secret: String,
    /// Events this process's worker handles at once.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Seconds a worker's lease lasts without renewal: how long a killed
    /// process's event waits before another process runs it.
    #[arg(long, default_value_t = 30)]
    lease: u64,
    /// Milliseconds the handler works after writing its effect (simulated
    /// slow work: a window to kill a process mid-handler).
    #[arg(long, default_value_t = 300)]
    work_ms: u64,
    /// Send signed deliveries, wait for the worker, print the results and exit.
    #[arg(long)]
    demo: bool,
}

#[derive(Serialize)]
struct Effect {
    provider: String,
    scope: String,
    event_key: String,
    event_type: Option<String>,
    effect: String,
}

/// How long the handler works after its write.
#[derive(Clone, Copy)]
struct Work(Duration);

/// The handler, run by the worker (never by the request): one business
/// effect per event, in the transaction that also marks the inbox row done.
///
/// It may run later than the delivery and more than once: a run whose
/// process dies, or whose lease was taken over, rolls back and runs again.
/// Writes through `WebhookTx` are applied exactly once; anything else it did
/// (an API call, an email) may happen again, so such calls should carry the
/// event key as their own idempotency key.
///
/// An event whose id ends in `FailsOnce` answers 500 on its first attempt:
/// its write rolls back and the worker retries it after a backoff.
async fn apply(Extension(Work(work)): Extension<Work>, tx: WebhookTx, event: WebhookEvent) -> StatusCode {
    let effect = describe(&event);
    let client = match tx.client().await {
        Ok(client) => client,
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR,
    };
    let written = client
        .execute(
            "INSERT INTO demo_effects (provider, scope, event_key, event_type, effect) VALUES ($1, $2, $3, $4, $5)",
            &[&event.provider(), &event.scope(), &event.key(), &event.event_type(), &effect],
        )
        .await;
    if let Err(e) = written {
        tracing::error!(error = %e, "business write failed");
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    // The slow part, with the write still uncommitted.
    tokio::time::sleep(work).await;
    if event.key().ends_with(FAILS_ONCE) && event.attempt() == 1 {
        return StatusCode::INTERNAL_SERVER_ERROR; // the write above rolls back
    }
    StatusCode::OK
}

/// `app_mention by U123 in C456: text`, from the Events API callback.
fn describe(event: &WebhookEvent) -> String {
    let v: serde_json::Value = event.json().unwrap_or_default();
    let inner = &v["event"];
    format!(
        "{} by {} in {}: {}",
        inner["type"].as_str().unwrap_or("event"),
        inner["user"].as_str().unwrap_or("?"),
        inner["channel"].as_str().unwrap_or("?"),
        inner["text"].as_str().unwrap_or("")
    )
}

async fn effects(State(pool): State<Pool>) -> Result<Json<Vec<Effect>>, StatusCode> {
    let client = pool.get().await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    let rows = client
        .query("SELECT provider, scope, event_key, event_type, effect FROM demo_effects ORDER BY id", &[])
        .await
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
    Ok(Json(
        rows.iter()
            .map(|r| Effect {
                provider: r.get(0),
                scope: r.get(1),
                event_key: r.get(2),
                event_type: r.get(3),
                effect: r.get(4),
            })
            .collect(),
    ))
}

/// Completes once `stop` is set (Ctrl-C, or the end of the demo).
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

#[tokio::main]
async fn main() -> Result<(), Error> {
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
    // The worker holds one connection per event in hand; the endpoint one per
    // accept, briefly.
    let (pool, url, _throwaway) = common::database(args.database_url.as_deref(), args.workers + 16).await?;
    let config: tokio_postgres::Config = url.parse()?;
    pool.get()
        .await?
        .batch_execute(
            "SET client_min_messages = warning; -- no \"already exists\" notice on restarts
             CREATE TABLE IF NOT EXISTS demo_effects (
                 id bigserial, provider text NOT NULL, scope text NOT NULL, event_key text NOT NULL,
                 event_type text, effect text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
                 PRIMARY KEY (scope, id))",
        )
        .await?;
    // On Citus, the effects sit on their claim's shard and commit with it;
    // on one PostgreSQL this does nothing.
    webhook_idempotency::store::colocate(&pool.clone().into(), "demo_effects", "scope").await?;
    if args.slack_secret == DEFAULT_SLACK_SECRET {
        println!("SLACK_WEBHOOK_SECRET unset: using the test secret {DEFAULT_SLACK_SECRET}");
    }

    // One router of handlers: the endpoint wraps it with the layer (which
    // only stores and acknowledges), the worker calls it as it is.
    let handlers =
        Router::new().route("/webhooks/slack", post(apply)).layer(Extension(Work(Duration::from_millis(args.work_ms))));
    let layer = WebhookLayer::builder(pool.clone(), Provider::slack())
        .scope(SCOPE)
        .secret(args.slack_secret.clone())
        .mode(Mode::Inbox)
        .build()?;
    let app = handlers.clone().route_layer(layer).route("/effects", get(effects).with_state(pool.clone()));
    // The worker LISTENs for the layer's notifications on a connection of its own.
    let store = StoreConfig::new(pool.clone()).listen_connection(config, NoTls);
    let worker = InboxWorker::builder(store, handlers)
        .provider(slack::FACTS.name)
        .scope(SCOPE)
        .concurrency(args.workers)
        .lease(Duration::from_secs(args.lease))
        .build()?;

    let bind = args.bind.unwrap_or_else(|| if args.demo { "127.0.0.1:0" } else { "127.0.0.1:3000" }.parse().unwrap());
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    println!(
        "listening on http://{addr}: POST /webhooks/slack (inbox mode), GET /effects; worker: {} at once, lease {} s",
        args.workers, args.lease
    );

    // Ctrl-C or SIGTERM (a deploy), or the end of the demo, stops the server and
    // the worker: work in hand finishes or is handed back, no lease is left to expire.
    let (stop, stop_rx) = watch::channel(false);
    let on_ctrl_c = {
        let stop = stop.clone();
        tokio::spawn(async move {
            common::terminated().await;
            stop.send_replace(true);
        })
    };
    let worker = tokio::spawn(worker.run(stopped(stop_rx.clone())));
    // Header-read and idle timeouts, a connection limit, graceful shutdown (examples/common/mod.rs).
    let server = tokio::spawn(common::server::serve(listener, app, stopped(stop_rx)));

    let outcome = if args.demo { demo(addr, &args, &pool).await } else { Ok(()) };
    if args.demo {
        stop.send_replace(true);
    }
    // Both end once stopped: the server first, the worker after its work in hand.
    server.await??;
    worker.await?;
    on_ctrl_c.abort();
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

// ---- --demo: sign deliveries as Slack does and send them ----

/// An Events API callback for `event_id`, after Slack's documented
/// `app_mention` example (<https://api.slack.com/events/app_mention>).
fn event_callback(event_id: &str, text: &str) -> Bytes {
    Bytes::from(
        json!({
            "token": "ZZZZZZWSxiZZZ2yIvs3peJ",
            "team_id": "T123ABC456",
            "api_app_id": "A123ABC456",
            "event": {
                "type": "app_mention",
                "user": "U123ABC456",
                "text": text,
                "ts": "1515449522.000016",
                "channel": "C123ABC456",
                "event_ts": "1515449522.000016"
            },
            "type": "event_callback",
            "event_id": event_id,
            "event_time": 1515449522,
            "authed_users": ["U0LAN0Z89"]
        })
        .to_string(),
    )
}

/// Slack's `url_verification` example (<https://api.slack.com/events/url_verification>).
const CHALLENGE: &str = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P";

/// The answer to one delivery.
struct Answer {
    status: u16,
    replayed: bool,
    body: Bytes,
    latency: Duration,
}

/// Sends `body` to `url` as Slack would: signed now with `secret`, with the
/// retry headers when `retry` is a retry number.
async fn send(
    client: &reqwest::Client,
    url: &str,
    secret: &str,
    body: Bytes,
    signed_body: Option<&Bytes>,
    retry: Option<u32>,
) -> Result<Answer, Error> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let signature = slack::FACTS.sign(&SigningSecret::from(secret), now, signed_body.unwrap_or(&body));
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("user-agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
        .header("x-slack-request-timestamp", now.to_string())
        .header("x-slack-signature", signature)
        .body(body);
    if let Some(n) = retry {
        req = req.header("x-slack-retry-num", n.to_string()).header("x-slack-retry-reason", "http_timeout");
    }
    let started = Instant::now();
    let res = req.send().await?;
    let (status, replayed) = (res.status().as_u16(), res.headers().contains_key("idempotent-replayed"));
    let body = res.bytes().await?;
    Ok(Answer { status, replayed, body, latency: started.elapsed() })
}

/// One line of the deliveries table.
struct Row {
    delivery: String,
    answer: Answer,
    /// What the answer means, and the inbox row's state read right after it.
    meaning: String,
    /// The answer the demo expects; a row where it differs fails the demo.
    expected: bool,
}

/// The inbox row's state of `key`, or `-` when there is none.
async fn state_of(pool: &Pool, key: &str) -> Result<String, Error> {
    let row = pool
        .get()
        .await?
        .query_opt(
            "SELECT state FROM webhook_idempotency.webhook_events
             WHERE provider = $1 AND scope = $2 AND event_key = $3",
            &[&slack::FACTS.name, &SCOPE, &key],
        )
        .await?;
    Ok(row.map(|r| r.get(0)).unwrap_or_else(|| "-".into()))
}

async fn demo(addr: SocketAddr, args: &Args, pool: &Pool) -> Result<(), Error> {
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/webhooks/slack");
    let secret = args.slack_secret.as_str();
    let work = Duration::from_millis(args.work_ms);
    // Event ids unique to this run, so the demo also runs on a shared database.
    let run = format!("{:X}", SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis());
    let first_key = format!("Ev{run}A");
    let burst_keys: Vec<String> = (1..=6).map(|i| format!("Ev{run}B{i}")).collect();
    let failing_key = format!("Ev{run}{FAILS_ONCE}");
    let mut keys = vec![first_key.clone()];
    keys.extend(burst_keys.iter().cloned());
    keys.push(failing_key.clone());
    let fast = |a: &Answer| a.latency < work;
    let mut rows = Vec::new();

    // 1. The handshake Slack sends when the Request URL is configured.
    let handshake = json!({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "challenge": CHALLENGE, "type": "url_verification"});
    let answer = send(&client, &url, secret, Bytes::from(handshake.to_string()), None, None).await?;
    let expected = answer.status == 200 && answer.body == CHALLENGE.as_bytes();
    let meaning = "handshake answered inline (challenge echoed), nothing stored".into();
    rows.push(Row { delivery: "url_verification".into(), answer, meaning, expected });

    // 2. A first delivery, 3. its duplicate at once, 4. Slack's retry while
    // the worker runs it.
    let body = event_callback(&first_key, "<@U0LAN0Z89> is it everything a river should be?");
    let started = Instant::now();
    let answer = send(&client, &url, secret, body.clone(), None, None).await?;
    let expected = answer.status == 200 && !answer.replayed && fast(&answer);
    let meaning = format!("accepted: stored, row {}", state_of(pool, &first_key).await?);
    rows.push(Row { delivery: format!("{first_key} first"), answer, meaning, expected });
    let answer = send(&client, &url, secret, body.clone(), None, None).await?;
    let expected = answer.status == 200 && answer.replayed;
    let meaning = format!("duplicate, replayed; row {}", state_of(pool, &first_key).await?);
    rows.push(Row { delivery: format!("{first_key} duplicate"), answer, meaning, expected });
    let deadline = Instant::now() + Duration::from_secs(10);
    while state_of(pool, &first_key).await? == "pending" && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let answer = send(&client, &url, secret, body.clone(), None, Some(1)).await?;
    let expected = answer.status == 200 && answer.replayed;
    let meaning = format!("Slack retry 1, replayed; row {}", state_of(pool, &first_key).await?);
    rows.push(Row { delivery: format!("{first_key} retry"), answer, meaning, expected });

    // 5. New events at once: each acknowledged before its handler could finish.
    let burst: Vec<_> = burst_keys
        .iter()
        .map(|key| {
            let (client, url, secret) = (client.clone(), url.clone(), secret.to_owned());
            let body = event_callback(key, "burst");
            tokio::spawn(async move { send(&client, &url, &secret, body, None, None).await })
        })
        .collect();
    for (key, task) in burst_keys.iter().zip(burst) {
        let answer = task.await??;
        let expected = answer.status == 200 && !answer.replayed && fast(&answer);
        let meaning = format!("accepted ({} at once)", burst_keys.len());
        rows.push(Row { delivery: key.clone(), answer, meaning, expected });
    }

    // 6. An event whose handler fails on its first attempt.
    let answer = send(&client, &url, secret, event_callback(&failing_key, "fails once"), None, None).await?;
    let expected = answer.status == 200 && !answer.replayed && fast(&answer);
    let meaning = "accepted; its handler fails once (see attempts below)".into();
    rows.push(Row { delivery: failing_key.clone(), answer, meaning, expected });

    // 7. The first event's signature over a body with one byte changed.
    let tampered = Bytes::from(String::from_utf8(body.to_vec())?.replacen("river", "rivet", 1));
    let answer = send(&client, &url, secret, tampered, Some(&body), None).await?;
    let expected = answer.status == 401;
    rows.push(Row { delivery: format!("{first_key} tampered"), answer, meaning: "rejected".into(), expected });

    println!();
    println!("{:<26} {:>6} {:>8}  answer", "delivery", "status", "ack ms");
    for r in &rows {
        let status = format!("{}{}", r.answer.status, if r.answer.replayed { "+R" } else { "" });
        let mark = if r.expected { "" } else { "   <-- NOT AS EXPECTED" };
        let ms = r.answer.latency.as_secs_f64() * 1000.0;
        println!("{:<26} {status:>6} {ms:>8.1}  {}{mark}", r.delivery, r.meaning);
    }
    println!("(+R: Idempotent-Replayed: true; the handler works {} ms per event)", args.work_ms);

    // Wait until the worker has processed every event of this run.
    let db = pool.get().await?;
    let query = "SELECT event_key, state, attempts,
                        (extract(epoch FROM completed_at - received_at) * 1000)::float8
                 FROM webhook_idempotency.webhook_events
                 WHERE provider = $1 AND scope = $2 AND event_key = ANY($3) ORDER BY received_at, event_key";
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let events = db.query(query, &[&slack::FACTS.name, &SCOPE, &keys]).await?;
        let settled = events.len() == keys.len()
            && events.iter().all(|r| matches!(r.get::<_, String>(1).as_str(), "done" | "dead"));
        if settled || Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let all_done_after = started.elapsed();

    let effects: Vec<serde_json::Value> = client.get(format!("http://{addr}/effects")).send().await?.json().await?;
    let mut per_event: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for e in &effects {
        let key = e["event_key"].as_str().unwrap_or("");
        if e["provider"] == slack::FACTS.name && e["scope"] == SCOPE && keys.iter().any(|k| k == key) {
            let entry = per_event.entry(key.to_owned()).or_insert((0, e["effect"].as_str().unwrap_or("").to_owned()));
            entry.0 += 1;
        }
    }
    println!();
    println!("{:<26} {:<6} {:>8} {:>7} {:>11}  effect", "event", "state", "attempts", "effects", "run ms");
    let mut wrong = Vec::new();
    for r in &done {
        let (key, state, attempts): (String, String, i32) = (r.get(0), r.get(1), r.get(2));
        // `completed_at` is `now()` in the worker's transaction: when the
        // successful run began, after the receipt (and any failed attempt).
        let began = r.get::<_, Option<f64>>(3).map(|ms| format!("+{ms:.0}")).unwrap_or_default();
        let (n, text) = per_event.get(&key).cloned().unwrap_or_default();
        let want_attempts = if key == failing_key { Some(2) } else { None };
        let ok = state == "done" && n == 1 && want_attempts.is_none_or(|a| a == attempts);
        if !ok {
            wrong.push(format!("{key}: {state}, attempts {attempts}, {n} effects"));
        }
        let mark = if ok { "" } else { "   <-- NOT AS EXPECTED" };
        println!("{key:<26} {state:<6} {attempts:>8} {n:>7} {began:>11}  {text}{mark}");
    }
    println!("(run ms: from the receipt to the start of the successful run)");
    if done.len() != keys.len() {
        wrong.push(format!("{} of {} events in the inbox", done.len(), keys.len()));
    }

    let admin = Admin::new(pool.clone())?;
    let stats = admin.stats().await?;
    println!();
    println!("{:<8} {:<8} {:>6}", "provider", "state", "rows");
    for (provider, _scope, state, rows) in &stats.by_state {
        println!("{provider:<8} {state:<8} {rows:>6}");
    }
    match stats.oldest_pending {
        Some(age) => println!("oldest pending: {:.1} s", age.as_secs_f64()),
        None => println!("oldest pending: none"),
    }
    let slack_only = Filter { provider: Some(slack::FACTS.name.to_owned()), ..Filter::default() };
    let dead = admin.list("dead", &slack_only, 10).await?;
    for d in &dead {
        println!("dead: {} {} ({})", d.scope, d.key, d.last_error.as_deref().unwrap_or("-"));
    }

    let mut acks: Vec<Duration> = rows
        .iter()
        .filter(|r| r.answer.status == 200 && !r.answer.replayed && r.delivery.starts_with("Ev"))
        .map(|r| r.answer.latency)
        .collect();
    acks.sort();
    let median = acks.get(acks.len() / 2).copied().unwrap_or_default();
    let max = acks.last().copied().unwrap_or_default();
    println!();
    let unexpected: Vec<_> = rows.iter().filter(|r| !r.expected).map(|r| r.delivery.clone()).collect();
    if unexpected.is_empty() && wrong.is_empty() {
        println!(
            "OK: {} deliveries of {} events (+ a handshake and a tampered copy), every answer as expected; \
             acks in {:.1} ms median, {:.1} ms max, while each handler took {} ms; all {} events done \
             {:.2} s after the first ack ({} at once in this process), exactly one effect each; the failing one done on attempt 2",
            rows.len() - 2,
            keys.len(),
            median.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0,
            args.work_ms,
            keys.len(),
            all_done_after.as_secs_f64(),
            args.workers
        );
        Ok(())
    } else if !unexpected.is_empty() {
        Err(format!("answers not as expected: {}", unexpected.join("; ")).into())
    } else {
        Err(format!("not processed as expected: {}", wrong.join("; ")).into())
    }
}
